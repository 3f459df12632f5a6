"""`python -m autograder doctor` (or `make doctor`): is this environment ready for the course?

Each check prints one line, `[OK]`, `[WARN]` or `[FAIL]`, and every line that
is not OK says how to fix it. The exit status is 1 when any check FAILs, so
scripts and CI can gate on it. WARN lines are advice that does not stop the
course (for instance the formgrader being disabled on a learner's install).

The checks ask the same sources Jupyter itself reads at start-up, in this
interpreter: the Lab page config (what `jupyter labextension list` shows as
enabled or disabled) and the server-extension config (`jupyter server
extension list`), so a doctor that says OK means the browser gets the
nbgrader Validate button. Asking in-process rather than running those two
commands keeps the doctor to a few seconds.

With --instructor it also reports the grader's sandbox as measured by a
probe in a real jail (autograder.grading.sandbox.protections): namespaces and uid,
the job cgroup or its fallback, the folder and tmpfs caps, the keyring
filter; a protection this host does not give is a WARN saying what is missing.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from . import mylm_manifest

# The versions the course is tested with. tests/course/test_doctor.py proves these
# agree with pyproject.toml, so a change in one place cannot drift.
PYTHON_MIN = (3, 10)
TORCH_MIN = "2.5"          # scaled_dot_product_attention(enable_gqa=True)
NBGRADER_PIN = "0.9.6"
# nbgrader 0.9.6's Lab extension is built against @jupyterlab/* ^4.4 and
# @jupyter-notebook/* ^7.4 (its package.json), stricter than its Python
# metadata (jupyterlab>=4.2, notebook>=7.2).
JUPYTERLAB_RANGE = ("4.4", "5")
NOTEBOOK_RANGE = ("7.4", "8")

NBGRADER_LABEXTENSION = "@jupyter/nbgrader"
# What a learner needs (the Validate button) and what an instructor needs.
LEARNER_PLUGINS = ("validate-assignment",)
INSTRUCTOR_PLUGINS = ("formgrader", "create-assignment")
LEARNER_SERVER_EXTENSIONS = ("nbgrader.server_extensions.validate_assignment",)
INSTRUCTOR_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader",)

GIB = 1024 ** 3
MEMORY_FAIL_GIB = 1.0      # below this, notebook 09 (training) cannot run
MEMORY_WARN_GIB = 2.0

INSTALL_HINT = "make venv  (or: pip install -e '.[learner]' in the course's virtual environment)"


@dataclass
class Result:
    status: str            # "OK", "WARN" or "FAIL"
    name: str
    detail: str
    fix: str = ""

    def lines(self) -> list[str]:
        out = [f"{'[' + self.status + ']':<7}{self.name}: {self.detail}"]
        if self.fix and self.status != "OK":
            out.append(f"{'':7}fix: {self.fix}")
        return out


def ok(name: str, detail: str) -> Result:
    return Result("OK", name, detail)


def warn(name: str, detail: str, fix: str) -> Result:
    return Result("WARN", name, detail, fix)


def fail(name: str, detail: str, fix: str) -> Result:
    return Result("FAIL", name, detail, fix)


# -- versions -------------------------------------------------------------------

def version_tuple(text: str) -> tuple[int, ...]:
    """'2.13.0+cpu' -> (2, 13, 0); '4.6.0rc1' -> (4, 6, 0). Enough for range checks."""
    parts = []
    for piece in text.split("+")[0].split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_python(version_info=sys.version_info) -> Result:
    have = ".".join(map(str, version_info[:3]))
    if tuple(version_info[:2]) < PYTHON_MIN:
        need = ".".join(map(str, PYTHON_MIN))
        return fail("Python", f"{have} is too old (the course needs {need} or newer)",
                    f"install Python {need}+, then recreate the environment: make clean && make venv")
    return ok("Python", f"{have} ({sys.executable})")


def check_range(name: str, dist: str, have: str | None, low: str, high: str | None = None) -> Result:
    """[low, high) range of an installed distribution; high=None means no upper bound."""
    spec = f"{dist}>={low}" + (f",<{high}" if high else "")
    fix = f"pip install '{spec}'   (inside the course environment; `make venv` does it)"
    if have is None:
        return fail(name, "not installed", fix)
    v = version_tuple(have)
    if v < version_tuple(low) or (high is not None and v >= version_tuple(high)):
        return fail(name, f"{have} is outside the tested range {spec}", fix)
    return ok(name, have)


def check_pinned(name: str, dist: str, have: str | None, pin: str) -> Result:
    fix = f"pip install '{dist}=={pin}'   (the version pinned in pyproject.toml)"
    if have is None:
        return fail(name, "not installed", fix)
    if have != pin:
        return fail(name, f"{have} installed, the course is tested with {pin} only", fix)
    return ok(name, have)


def check_course_packages() -> Result:
    """The notebooks import tinylm and autograder.checks from the install."""
    missing = []
    for module in ("tinylm", "autograder.checks"):
        try:
            importlib.import_module(module)
        except Exception as err:  # an ImportError, or a broken install raising something else
            missing.append(f"{module} ({type(err).__name__}: {err})")
    if missing:
        return fail("course packages", "cannot import " + "; ".join(missing), INSTALL_HINT)
    return ok("course packages", "tinylm and autograder.checks import")


def check_pretrained() -> Result:
    """The real weights of the notebooks' pretrained cells (optional: without
    them those cells say how to install them and the notebook runs on)."""
    from tinylm import pretrained

    reason = pretrained.why_unavailable()
    if reason:
        return warn("pretrained weights", f"{pretrained.PRETRAINED_NAME} not available; its cells are skipped",
                    reason.split(": ", 1)[-1])
    return ok("pretrained weights", f"{pretrained.PRETRAINED_NAME} ({pretrained.gguf_path().name})")


# -- device and memory ------------------------------------------------------------

def check_device() -> Result:
    """tinylm.device() as the notebooks call it, plus one small matmul on it,
    which catches a CUDA/MPS build that imports but cannot run."""
    try:
        import torch

        import tinylm
        dev = tinylm.device(verbose=False)
    except Exception as err:
        return fail("device", f"tinylm.device() failed: {err}",
                    "unset TINYLM_DEVICE, or set it to a device this machine has (cpu, cuda, cuda:0, mps)")
    try:
        x = torch.ones(64, 64, device=dev)
        float((x @ x).sum().item())
    except Exception as err:
        return fail("device", f"tinylm.device() chose {dev}, but a matmul there failed: "
                              f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                    "set TINYLM_DEVICE=cpu to work on the CPU, or reinstall the torch build for your GPU driver")
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev)
        free, total = torch.cuda.mem_get_info(dev)
        where = f"{name}, {free / GIB:.1f} of {total / GIB:.1f} GiB free"
    elif dev.type == "mps":
        where = "Apple GPU (Metal)"
    else:
        where = f"{torch.get_num_threads()} threads; no CUDA or MPS device found"
    forced = f", set by TINYLM_DEVICE={os.environ['TINYLM_DEVICE']}" if os.environ.get("TINYLM_DEVICE", "").strip() else ""
    return ok("device", f"tinylm.device() -> {dev} ({where}{forced})")


def installed_bytes(names_or_prefixes: tuple[str, ...]) -> int:
    """Disk space of the installed distributions whose name is one of, or
    starts with one of, `names_or_prefixes` (e.g. "torch", "nvidia-")."""
    total = 0
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if any(name == n or (n.endswith("-") and name.startswith(n)) for n in names_or_prefixes):
            for f in dist.files or ():
                path = Path(dist.locate_file(f))
                total += path.stat().st_size if path.is_file() else 0
    return total


CUDA_BUILD_PACKAGES = ("torch", "triton", "nvidia-")


def check_torch_build(cuda_version: str | None, gpu_count: int, size_bytes: Callable[[], int]) -> Result:
    """A CUDA build of torch on a machine without an NVIDIA GPU works on the
    CPU, at several GB of disk: say how much, and how to get the CPU build."""
    if not cuda_version:
        return ok("torch build", "CPU build" if not gpu_count else f"{gpu_count} GPU(s)")
    if gpu_count:
        return ok("torch build", f"CUDA {cuda_version}, {gpu_count} GPU(s)")
    from .torch_wheel import CPU_INDEX_URL

    return warn("torch build", f"the CUDA {cuda_version} build of torch with no NVIDIA GPU here: "
                               f"{size_bytes() / GIB:.1f} GiB of torch, triton and NVIDIA libraries, unused on a CPU",
                f"pip uninstall -y torch triton $(pip list --format=freeze | grep -o '^nvidia-[^=]*') && "
                f"pip install torch --index-url {CPU_INDEX_URL}   (or delete .venv and run `make venv`)")


def available_memory_bytes() -> int | None:
    """Memory a new process can use without swapping (MemAvailable on Linux)."""
    try:
        import psutil  # installed with ipykernel
        return int(psutil.virtual_memory().available)
    except Exception:
        pass
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(available: int | None) -> Result:
    fix = "close other programs (browsers with many tabs, other notebooks' kernels: Kernel > Shut Down All Kernels)"
    if available is None:
        return warn("free memory", "could not be measured on this system", fix)
    gib = available / GIB
    if gib < MEMORY_FAIL_GIB:
        return fail("free memory", f"{gib:.1f} GiB available; notebook 09 trains a model and needs about "
                                   f"{MEMORY_FAIL_GIB:.0f} GiB", fix)
    if gib < MEMORY_WARN_GIB:
        return warn("free memory", f"{gib:.1f} GiB available; {MEMORY_WARN_GIB:.0f} GiB or more is comfortable", fix)
    return ok("free memory", f"{gib:.1f} GiB available")


# -- Jupyter: nbgrader's extensions ---------------------------------------------

def lab_extension_state() -> tuple[set[str], set[str]]:
    """(installed federated Lab extensions, disabled extension/plugin ids),
    read from the same page config JupyterLab serves to the browser."""
    from jupyter_core.paths import jupyter_path
    from jupyterlab_server.config import get_page_config

    app_dir = os.environ.get("JUPYTERLAB_DIR") or os.path.join(sys.prefix, "share", "jupyter", "lab")
    page = get_page_config(jupyter_path("labextensions"), os.path.join(app_dir, "settings"))
    installed = {ext["name"] for ext in page.get("federated_extensions", [])}
    disabled = page.get("disabledExtensions", {})
    if isinstance(disabled, dict):
        disabled = {name for name, off in disabled.items() if off}
    return installed, set(disabled)


def server_extension_state() -> dict[str, bool]:
    """jpserver_extensions merged over every Jupyter config dir, the user's
    dir winning, as `jupyter server extension list` and the server read them."""
    from jupyter_core.paths import jupyter_config_path
    from jupyter_server.extension.config import ExtensionConfigManager

    return dict(ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions())


def check_lab_extension(installed: set[str], disabled: set[str], instructor: bool) -> list[Result]:
    name = "nbgrader Lab extension"
    if NBGRADER_LABEXTENSION not in installed:
        return [fail(name, f"{NBGRADER_LABEXTENSION} is not installed in this environment, so JupyterLab shows "
                           "no Validate button and no Nbgrader menu",
                     f"pip install --force-reinstall 'nbgrader=={NBGRADER_PIN}' (it ships the Lab extension), "
                     "then restart JupyterLab")]
    if NBGRADER_LABEXTENSION in disabled:
        return [fail(name, f"{NBGRADER_LABEXTENSION} is installed but disabled",
                     f"jupyter labextension enable {NBGRADER_LABEXTENSION}, then reload the browser tab")]
    results = []
    for plugin in LEARNER_PLUGINS + INSTRUCTOR_PLUGINS:
        plugin_id = f"{NBGRADER_LABEXTENSION}:{plugin}"
        if plugin_id not in disabled:
            continue
        fix = f"jupyter labextension enable {plugin_id}, then reload the browser tab"
        if plugin in LEARNER_PLUGINS:
            results.append(fail(name, f"plugin {plugin_id} is disabled: no Validate button in notebooks", fix))
        elif instructor:
            results.append(fail(name, f"plugin {plugin_id} is disabled (instructors need it)", fix))
        else:
            results.append(ok(name, f"plugin {plugin_id} disabled (fine for learners; instructors need it)"))
    if not any(r.status == "FAIL" for r in results):
        results.insert(0, ok(name, f"{NBGRADER_LABEXTENSION} enabled (Validate button"
                                   + (", formgrader" if instructor else "") + ")"))
    return results


def check_server_extensions(enabled: dict[str, bool], instructor: bool) -> list[Result]:
    name = "nbgrader server extensions"
    results = []
    for ext in LEARNER_SERVER_EXTENSIONS + INSTRUCTOR_SERVER_EXTENSIONS:
        if enabled.get(ext):
            continue
        fix = f"jupyter server extension enable --sys-prefix {ext}, then restart JupyterLab"
        if ext in LEARNER_SERVER_EXTENSIONS:
            results.append(fail(name, f"{ext} is not enabled: the Validate button cannot run", fix))
        elif instructor:
            results.append(fail(name, f"{ext} is not enabled: the formgrader page does not exist", fix))
        else:
            results.append(ok(name, f"{ext} disabled (fine for learners; instructors need it)"))
    if not any(r.status == "FAIL" for r in results):
        wanted = LEARNER_SERVER_EXTENSIONS + (INSTRUCTOR_SERVER_EXTENSIONS if instructor else ())
        results.insert(0, ok(name, ", ".join(e.rsplit(".", 1)[1] for e in wanted) + " enabled"))
    return results


def check_jupyter_extensions(instructor: bool) -> list[Result]:
    try:
        installed, disabled = lab_extension_state()
        lab = check_lab_extension(installed, disabled, instructor)
    except Exception as err:
        lab = [fail("nbgrader Lab extension", f"could not read JupyterLab's extension config: {err}", INSTALL_HINT)]
    try:
        server = check_server_extensions(server_extension_state(), instructor)
    except Exception as err:
        server = [fail("nbgrader server extensions", f"could not read jupyter_server's config: {err}", INSTALL_HINT)]
    return lab + server


def check_alembic(instructor: bool) -> Result:
    """nbgrader runs the `alembic` command to create the gradebook; without it
    on PATH the gradebook is left broken (see DESIGN.md)."""
    beside = Path(sys.executable).parent / "alembic"
    found = shutil.which("alembic")
    if found:
        return ok("alembic (gradebook)", f"on PATH at {found}")
    fix = f"put this environment's bin/ first on PATH: export PATH={beside.parent}:$PATH (the make targets do it)"
    if instructor:
        return fail("alembic (gradebook)", "not on PATH: nbgrader cannot create the gradebook", fix)
    return warn("alembic (gradebook)", "not on PATH (only instructors' grading needs it)", fix)


def check_root(euid: int | None) -> Result | None:
    """Jupyter refuses to start as root without --allow-root; the make targets
    that start it (lab, formgrader) add that flag for root themselves, so a
    root user has nothing to fix and gets an OK line that says so."""
    if euid != 0:
        return None
    return ok("user", "root: `make lab` and `make formgrader` start Jupyter with --allow-root "
                      "(started by hand, `jupyter lab` needs it too)")


# -- the grader's sandbox ------------------------------------------------------------

def check_sandbox() -> list[Result]:
    """Which of the jail's protections run here (instructors: `grade` runs
    every submission in it), measured by a probe in a real jail
    (autograder.grading.sandbox.protections), in its own process: the doctor
    itself imports nothing of the grader."""
    if sys.platform != "linux":
        return [fail("sandbox", f"grading needs Linux (this is {sys.platform}): the jail uses its namespaces",
                     "grade on a Linux machine or container, as root for the full protection")]
    try:
        done = subprocess.run([sys.executable, "-m", "autograder.grading.sandbox.protections"], capture_output=True,
                              text=True, timeout=120)
        entries = json.loads(done.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as err:
        return [fail("sandbox", f"the protections probe did not run: {err}", "see docs/security.md")]
    return [Result(e["status"], e["name"], e["detail"], e["fix"]) for e in entries]


# -- the learner's saved answers --------------------------------------------------

def check_saved_answers(folder: Path, passed: dict[str, list[str]]) -> Result:
    """Which notebooks' answers are saved in mylm/ (information: never a problem)."""
    try:
        where = folder.relative_to(Path.cwd())
    except ValueError:
        where = folder
    if not passed:
        return ok("saved answers", f"none yet in {where}/ (each answer whose check passes is saved there)")
    listed = "; ".join(f"{nb}: {', '.join(names)}" for nb, names in passed.items())
    return ok("saved answers", f"{len(passed)} notebook(s) in {where}/: {listed}")


# -- report -----------------------------------------------------------------------

def run_checks(instructor: bool = False) -> list[Result]:
    results = [check_python()]
    results.append(check_range("torch", "torch", installed_version("torch"), TORCH_MIN))
    results.append(check_pinned("nbgrader", "nbgrader", installed_version("nbgrader"), NBGRADER_PIN))
    results.append(check_range("jupyterlab", "jupyterlab", installed_version("jupyterlab"), *JUPYTERLAB_RANGE))
    results.append(check_range("notebook", "notebook", installed_version("notebook"), *NOTEBOOK_RANGE))
    results.append(check_course_packages())
    if results[-1].status == "OK":
        results.append(check_pretrained())
    if results[1].status == "OK":
        results.append(check_device())
        import torch

        results.append(check_torch_build(torch.version.cuda, torch.cuda.device_count(),
                                         lambda: installed_bytes(CUDA_BUILD_PACKAGES)))
    results.append(check_memory(available_memory_bytes()))
    results.extend(check_jupyter_extensions(instructor))
    results.append(check_alembic(instructor))
    if instructor:
        results.extend(check_sandbox())
    folder = mylm_manifest.default_dir()
    results.append(check_saved_answers(folder, mylm_manifest.passed_by_notebook(folder)))
    root = check_root(os.geteuid() if hasattr(os, "geteuid") else None)
    if root:
        results.append(root)
    return results


def report(results: Iterable[Result], write: Callable[[str], None] = print) -> int:
    results = list(results)
    for r in results:
        for line in r.lines():
            write(line)
    failed = [r for r in results if r.status == "FAIL"]
    warned = [r for r in results if r.status == "WARN"]
    if failed:
        write(f"\n{len(failed)} problem(s) found: apply the fix under each [FAIL] line, then run `make doctor` again.")
        return 1
    extra = f" ({len(warned)} warning(s) above)" if warned else ""
    write(f"\nAll checks passed{extra}. Start the course with `make lab`.")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--instructor", action="store_true",
                        help="also require what instructors need: the formgrader and the gradebook tools; "
                             "and report which of the grader's sandbox protections run on this machine")


def main(args: argparse.Namespace | None = None) -> int:
    if args is None:
        parser = argparse.ArgumentParser(prog="python -m autograder doctor", description=__doc__.splitlines()[0])
        add_arguments(parser)
        args = parser.parse_args()
    role = "instructor" if args.instructor else "learner"
    print(f"course doctor: checking this environment for the course ({role} setup)")
    return report(run_checks(instructor=args.instructor))
