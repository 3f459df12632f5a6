"""The jail's view (sandbox/view.py): what it shows is what graded code loads.

The view is computed, so a file it misses would cost an honest student
points without a word. These tests fail loudly instead: every shared library
shown that loads outside a jail loads in one (the control: the same jail
without libstdc++ cannot load torch's); the modules all ten solution
notebooks import, a plot and shell escapes run in a jail of the view, cold
(no warm server, which would have torch loaded before the jail); and the
view is computed again when the environment changes, and only then.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import course
from autograder.grading.sandbox import jail as jail_module
from autograder.grading.sandbox import view

from ..attacks.scripts import run_reporting

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the root jail's allow-list root needs root")

# argv: the folders and files to look in (JSON); loads every ELF library
# there (dlopen, lazily, nothing run but its constructors; extension modules
# as plain libraries) and reports which would not load, and why. Run with
# `python -I`: the standard library only.
LOADER = r"""
import ctypes, json, os, sys
failed, tried = {}, 0
for top in json.loads(sys.argv[1]):
    names = [top] if os.path.isfile(top) else [os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs]
    for path in sorted(names):
        if ".so" not in os.path.basename(path) or os.path.islink(path):
            continue
        with open(path, "rb") as fh:
            if fh.read(4) != b"\x7fELF":
                continue
        tried += 1
        try:
            ctypes.CDLL(path, mode=os.RTLD_LAZY | os.RTLD_LOCAL)
        except OSError as err:
            failed[path] = str(err)
print("LOADED", json.dumps({"tried": tried, "failed": failed}), flush=True)
os._exit(0)   # no finalization: some extension modules, loaded as plain libraries, crash in it
"""


def _libraries_shown() -> list[str]:
    """The shown files and folders that hold shared libraries: the system's
    files, the venv's packages and the standard library's extensions."""
    shown = jail_module.job_view()
    interpreter = jail_module.view_interpreter()
    return [p for p in shown.shown if os.path.isfile(p)] + [
        p for p in interpreter["path"] if os.path.isdir(p) and ("site-packages" in p or p.endswith("lib-dynload"))]


@root_only
@pytest.mark.slow
def test_every_library_that_loads_outside_a_jail_loads_in_one(tmp_path, monkeypatch):
    where = json.dumps(_libraries_shown())
    outside = run_reporting(tmp_path, "loader.py", LOADER, [where], False, "LOADED")
    inside = run_reporting(tmp_path, "loader.py", LOADER, [where], True, "LOADED")
    assert outside["tried"] > 50 and inside["tried"] == outside["tried"], (outside["tried"], inside["tried"])
    missing = {path: why for path, why in inside["failed"].items() if path not in outside["failed"]}
    assert not missing, f"libraries that load outside the jail but not in it (a file the view lacks): {missing}"
    # the control: the same jail without the C++ runtime, and torch's core library no longer loads
    shown = jail_module.job_view()
    cxx = [p for p in shown.shown if Path(p).name.startswith("libstdc++.so")]
    assert cxx, "torch needs the C++ runtime: the view must show it"
    lacking = view.View([p for p in shown.shown if p not in cxx], shown.links, shown.covered)
    monkeypatch.setattr(jail_module, "job_view", lambda: lacking)
    torch_lib = Path(sys.prefix).resolve() / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    core = next((torch_lib / "site-packages" / "torch" / "lib").glob("libtorch_cpu.so"), None)
    if core is None:
        pytest.skip("no libtorch_cpu.so in this venv for the control")
    control = run_reporting(tmp_path, "loader.py", LOADER, [json.dumps([str(core)])], True, "LOADED")
    assert "libstdc++" in control["failed"].get(str(core), ""), control


def _notebook_imports() -> list[str]:
    """Every module an import statement of a solution notebook's code names
    (IPython's magic and shell lines left out: no Python)."""
    found = set()
    for notebook in sorted(course.SOURCE_DIR.glob("*/*.ipynb")):
        for cell in json.loads(notebook.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
            try:
                tree = ast.parse(code)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found |= {alias.name for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module)
    return sorted(found)


# argv: the modules (JSON). Imports each, draws and saves a plot, runs a
# shell escape's command line, and reports what failed.
IMPORTER = r"""
import importlib, json, subprocess, sys, traceback
failed = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except BaseException as err:
        failed[name] = f"{type(err).__name__}: {err}"
facts = {"failed": failed}
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.plot([1, 2, 3], [3, 1, 2])
    plt.title("a title in the default font")
    plt.savefig("plot.png")
    facts["plot"] = open("plot.png", "rb").read(4) == b"\x89PNG"
except BaseException as err:
    facts["plot"] = f"{type(err).__name__}: {err}"
shell = subprocess.run("echo shell escape; ls -d /tmp; nproc > /dev/null && sleep 0", shell=True,
                       capture_output=True, text=True)
facts["shell"] = [shell.returncode, shell.stdout.split(), shell.stderr]
print("IMPORTED", json.dumps(facts), flush=True)
"""


@root_only
@pytest.mark.slow
def test_what_the_solution_notebooks_import_runs_in_the_view_cold(tmp_path):
    modules = _notebook_imports()
    assert len(course.assignments()) == 10 and {"torch", "tinylm", "matplotlib.pyplot"} <= set(modules), modules
    facts = run_reporting(tmp_path, "importer.py", IMPORTER, [json.dumps(modules)], True, "IMPORTED")
    assert facts["failed"] == {}, f"modules the solution notebooks import fail in the jail: {facts['failed']}"
    assert facts["plot"] is True, facts
    assert facts["shell"] == [0, ["shell", "escape", "/tmp"], ""], facts


def test_the_view_shows_the_system_files_used_not_the_system():
    """Files of /usr one by one (the C library, the C++ runtime, the shell),
    never /usr or /lib whole; the interpreter's own packages are covered
    where a venv runs; the links on the way are made again."""
    shown = jail_module.job_view()
    assert not {"/usr", "/lib", "/bin", "/usr/lib", "/usr/bin"} & set(shown.shown), shown.shown
    names = {Path(p).name for p in shown.shown}
    assert any(n.startswith("libc.so") for n in names) and os.path.realpath("/bin/sh") in shown.shown, names
    assert os.path.realpath(sys.prefix) in shown.shown
    if os.path.realpath(sys.prefix) != os.path.realpath(sys.base_prefix):
        base_site = [p for p in shown.covered if p.endswith("site-packages")]
        assert base_site and all(p.startswith(os.path.realpath(sys.base_prefix)) for p in base_site), shown.covered
    places = {where for where, _ in shown.links}
    assert "/bin" not in places or os.path.islink("/bin")


def test_real_path_records_each_link_on_the_way(tmp_path):
    (tmp_path / "real" / "inner").mkdir(parents=True)
    (tmp_path / "real" / "inner" / "file.so.1.2").write_text("x")
    (tmp_path / "real" / "inner" / "file.so.1").symlink_to("file.so.1.2")
    (tmp_path / "alias").symlink_to("real")
    (tmp_path / "absolute").symlink_to(tmp_path / "alias" / "inner")
    links: dict = {}
    got = view.real_path(str(tmp_path / "absolute" / "file.so.1"), links)
    assert got == os.path.realpath(tmp_path / "absolute" / "file.so.1") == str(tmp_path / "real/inner/file.so.1.2")
    assert links == {str(tmp_path / "absolute"): str(tmp_path / "alias" / "inner"), str(tmp_path / "alias"): "real",
                     str(tmp_path / "real/inner/file.so.1"): "file.so.1.2"}


def test_the_view_is_computed_again_when_the_environment_changes_only(tmp_path, monkeypatch):
    site = tmp_path / "venv" / "site-packages"
    site.mkdir(parents=True)
    facts = {"executable": sys.executable, "prefix": str(tmp_path / "venv"), "base_prefix": sys.base_prefix,
             "path": [str(site)], "base_site": [], "stdlib": "", "arch": ""}
    computed = []
    monkeypatch.setattr(view, "compute", lambda facts, also=(): computed.append(1) or view.View(shown=[str(site)]))
    keep = tmp_path / "kept"

    def shown():
        view._MEMO.clear()   # a new grading process: only the kept file remains
        return view.view_for(facts, (), keep).shown
    assert shown() == [str(site)] and len(computed) == 1
    assert shown() == [str(site)] and len(computed) == 1, "the kept view was not used"
    (site / "newpackage").mkdir()
    later = os.stat(site).st_mtime_ns + 10**9   # as a pip install a second later leaves it
    os.utime(site, ns=(later, later))
    shown()
    assert len(computed) == 2, "a package installed into the venv did not recompute the view"
    (keep / f"view-{view.key(facts, ())}.json").chmod(0o666)
    shown()
    assert len(computed) == 3, "a kept view that others may write was trusted"


@root_only
@pytest.mark.grader
@pytest.mark.slow
def test_solution_notebooks_grade_in_full_in_the_view_cold(tmp_path):
    """Honest answers graded cold (each kernel and recheck child a fresh
    Python in a jail of the view, no warm server whose torch was loaded
    before its jail): every point, no flag. Two notebooks: the smallest, and
    05, which loads the real model's weights. The other eight differ from
    them in what they import, which the test above imports cold, and in the
    files they read, which test_grade_proofs reads (all ten graded in full,
    in warm jails of the same view)."""
    from autograder import specimens
    from autograder.grading.batch import Options, grade_all
    from ..batches import course_data
    assignments = [a for a in course.assignments() if a.startswith(("01_", "05_"))]
    assert len(assignments) == 2, assignments
    data = tmp_path / "data"
    for assignment in assignments:
        specimens.submit(data, "ann", assignment, specimens.honest(assignment))
    with course_data(data):
        results = grade_all(Options(assignments=assignments, workers=1, warm=False, progress=False))
    lost = {r["assignment"]: (r["status"], r["score"], r["max_score"], r["flags"]) for r in results
            if (r["status"], r["score"], r["flags"]) != ("graded", r["max_score"], []) or not r["max_score"]}
    assert len(results) == 2 and not lost, lost


# The jail's entry with the allow-list root refused, as a kernel without
# pivot_root (or a mount it needs) refuses it: the deny-list fallback runs.
WITHOUT_ALLOWED_ROOT = ("import sys; import autograder.grading.sandbox.jail_init as jail_init\n"
                        "def refused(*args, **kwargs): raise OSError(1, 'refused for the test')\n"
                        "jail_init._enter_allowed_root = refused\n"
                        "sys.exit(jail_init.main(sys.argv[1:]))")


@root_only
@pytest.mark.slow
def test_the_fallback_puts_back_the_views_files_under_a_closed_folder(tmp_path):
    """Where the interpreter lives in a folder other users cannot enter
    (pyenv under /root), the fallback covers that folder and binds back the
    view's files and folders there, and makes again the links on the way:
    the job's uid still runs Python, torch and a shell."""
    probe = ("import subprocess, torch; shell = subprocess.run('echo sh', shell=True, capture_output=True, text=True);"
             " print('RAN', int(torch.ones(3).sum().item()), shell.stdout.strip())")
    with jail_module.Jail.reserve(jail_module.Limits(memory_mb=4096, cpu_s=120)) as jail:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(course.ROOT), **jail.env()}
        done = subprocess.run([sys.executable, "-c", WITHOUT_ALLOWED_ROOT, "--", sys.executable, "-I", "-c", probe],
                              env=env, capture_output=True, text=True, timeout=120, cwd="/")
    assert "no allow-list root" in done.stderr, done.stderr   # the fallback ran, and said so
    assert "no file isolation" not in done.stderr, done.stderr   # and covered what it covers
    assert done.returncode == 0 and "RAN 3 sh" in done.stdout, done.stdout + done.stderr
