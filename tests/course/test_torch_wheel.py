"""autograder/torch_wheel.py: which torch build `make venv` installs, and that
the Makefile installs it before the course."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import torch_wheel
from autograder.torch_wheel import CPU_INDEX_URL, choose

ROOT = Path(__file__).resolve().parents[2]
CUDA_INDEX = "https://download.pytorch.org/whl/cu128"


# -- the decision, every branch -------------------------------------------------------

def test_linux_without_driver_gets_the_cpu_index():
    plan = choose("Linux", nvidia_driver=False, installed_torch=None)
    assert plan.pip_args == ["install", "--index-url", CPU_INDEX_URL, "torch>=2.5"]
    assert "CPU build" in plan.reason and "TORCH_INDEX_URL" in plan.reason


def test_linux_with_driver_keeps_the_default_index():
    plan = choose("Linux", nvidia_driver=True, installed_torch=None)
    assert plan.pip_args == ["install", "torch>=2.5"]
    assert "CUDA build" in plan.reason


@pytest.mark.parametrize("system, build", [("Darwin", "CPU/MPS build"), ("Windows", "CPU build")])
def test_macos_and_windows_use_the_default_index_whatever_the_driver(system, build):
    for driver in (False, True):
        plan = choose(system, nvidia_driver=driver, installed_torch=None)
        assert plan.pip_args == ["install", "torch>=2.5"]
        assert build in plan.reason and "--index-url" not in plan.pip_args


def test_an_unknown_system_uses_the_default_index():
    plan = choose("FreeBSD", nvidia_driver=False, installed_torch=None)
    assert plan.pip_args == ["install", "torch>=2.5"] and "FreeBSD" in plan.reason


@pytest.mark.parametrize("system, driver", [("Linux", False), ("Linux", True), ("Darwin", False), ("Windows", True)])
def test_index_override_wins_over_the_platform(system, driver):
    plan = choose(system, nvidia_driver=driver, installed_torch=None, index_url=CUDA_INDEX)
    assert plan.pip_args == ["install", "--index-url", CUDA_INDEX, "torch>=2.5"]
    assert f"TORCH_INDEX_URL={CUDA_INDEX}" in plan.reason


def test_spec_override_keeps_the_platforms_index():
    on_cpu_linux = choose("Linux", nvidia_driver=False, installed_torch=None, spec="torch==2.6.0")
    assert on_cpu_linux.pip_args == ["install", "--index-url", CPU_INDEX_URL, "torch==2.6.0"]
    on_mac = choose("Darwin", nvidia_driver=False, installed_torch=None, spec="torch==2.6.0")
    assert on_mac.pip_args == ["install", "torch==2.6.0"]


def test_both_overrides_together():
    plan = choose("Linux", nvidia_driver=False, installed_torch=None, index_url=CUDA_INDEX, spec="torch==2.7.1")
    assert plan.pip_args == ["install", "--index-url", CUDA_INDEX, "torch==2.7.1"]


def test_blank_overrides_count_as_unset():
    """`TORCH_INDEX_URL= make venv` (set but empty) must not install from an empty index."""
    plan = choose("Linux", nvidia_driver=False, installed_torch=None, index_url="  ", spec="")
    assert plan == choose("Linux", nvidia_driver=False, installed_torch=None)


@pytest.mark.parametrize("system, driver", [("Linux", False), ("Linux", True), ("Darwin", False), ("Windows", False)])
def test_a_torch_already_installed_is_kept(system, driver):
    plan = choose(system, nvidia_driver=driver, installed_torch="2.13.0+cpu")
    assert plan.pip_args is None
    assert "2.13.0+cpu is already installed" in plan.reason and "ignored" not in plan.reason


def test_overrides_with_torch_installed_say_they_are_ignored_and_how_to_replace():
    plan = choose("Linux", nvidia_driver=False, installed_torch="2.13.0", index_url=CUDA_INDEX, spec="torch==2.7.1")
    assert plan.pip_args is None
    assert "TORCH_INDEX_URL and TORCH_SPEC ignored" in plan.reason
    assert "`make clean`, then `make venv` with TORCH_INDEX_URL and TORCH_SPEC set" in plan.reason


def test_course_spec_is_pyprojects_torch_requirement():
    tomllib = pytest.importorskip("tomllib")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert torch_wheel.COURSE_TORCH_SPEC in [d.replace(" ", "") for d in deps]


# -- detection ------------------------------------------------------------------------

def test_driver_detection_any_sign_counts(tmp_path):
    present = tmp_path / "version"
    present.write_text("NVRM version: ...")
    missing = str(tmp_path / "missing")
    no_smi = lambda name: None  # noqa: E731
    assert not torch_wheel.nvidia_driver_present(files=(missing,), which=no_smi)
    assert torch_wheel.nvidia_driver_present(files=(missing, str(present)), which=no_smi)
    assert torch_wheel.nvidia_driver_present(files=(missing,), which=lambda name: f"/usr/bin/{name}")


def test_driver_files_cover_host_container_and_wsl():
    assert set(torch_wheel.DRIVER_FILES) == {"/proc/driver/nvidia/version", "/dev/nvidia0",
                                             "/usr/lib/wsl/lib/nvidia-smi"}


# -- the script, as make runs it ----------------------------------------------------------

def run_script(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("TORCH_INDEX_URL", "TORCH_SPEC")}
    return subprocess.run([sys.executable, str(ROOT / "autograder" / "torch_wheel.py"), *args],
                          env={**environ, **env}, capture_output=True, text=True, timeout=60)


def test_script_keeps_the_installed_torch_of_this_environment():
    import torch

    proc = run_script(TORCH_INDEX_URL=CUDA_INDEX)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"torch: torch {torch.__version__} is already installed: keeping it")
    assert "TORCH_INDEX_URL ignored" in proc.stdout and proc.stderr == ""


def test_script_without_torch_prints_the_pip_command(tmp_path):
    """Run by an interpreter that has no torch (-S: no site-packages), as in a fresh venv."""
    proc = subprocess.run([sys.executable, "-S", str(ROOT / "autograder" / "torch_wheel.py"), "--dry-run"],
                          env={**os.environ, "TORCH_INDEX_URL": CUDA_INDEX, "TORCH_SPEC": "torch==2.7.1"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"torch: torch==2.7.1 from TORCH_INDEX_URL={CUDA_INDEX}" in proc.stdout
    assert f"would run: {sys.executable} -m pip install -q --index-url {CUDA_INDEX} torch==2.7.1" in proc.stdout


# -- an unreachable CPU index: one line, then the default index -----------------------

def test_an_unreachable_cpu_index_falls_back_to_the_default_index_and_says_so():
    plan = choose("Linux", nvidia_driver=False, installed_torch=None, spec="torch==2.7.1")
    fallback = torch_wheel.without_unreachable_cpu_index(plan, "Name or service not known")
    assert fallback.pip_args == ["install", "torch==2.7.1"]
    assert fallback.reason.startswith(f"PyTorch's CPU index {CPU_INDEX_URL} is unreachable (Name or service not known)")
    assert "default index instead" in fallback.reason and "TORCH_INDEX_URL" in fallback.reason
    assert torch_wheel.without_unreachable_cpu_index(plan, None) == plan


def test_an_index_the_user_named_is_never_replaced():
    """TORCH_INDEX_URL is the user's choice, even when it is the CPU index: pip's errors are the answer."""
    for index in (CUDA_INDEX, CPU_INDEX_URL):
        plan = choose("Linux", nvidia_driver=False, installed_torch=None, index_url=index)
        assert torch_wheel.without_unreachable_cpu_index(plan, "timed out") == plan
    kept = choose("Linux", nvidia_driver=False, installed_torch="2.13.0")
    assert torch_wheel.without_unreachable_cpu_index(kept, "timed out") == kept


def test_the_probe_answers_quickly_for_a_closed_port_and_accepts_any_http_answer():
    import http.server
    import socket
    import threading
    import time

    with socket.socket() as sock:           # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    start = time.monotonic()
    assert torch_wheel.index_reachable(f"http://127.0.0.1:{closed}/torch/", timeout=2) is not None
    assert time.monotonic() - start < 3
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)  # answers 501
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert torch_wheel.index_reachable(f"http://127.0.0.1:{server.server_port}/torch/", timeout=5) is None
    finally:
        server.shutdown()


# -- the Makefile calls it, before installing the course ----------------------------------

HAVE_MAKE = any(os.access(os.path.join(p, "make"), os.X_OK) for p in os.environ.get("PATH", "").split(os.pathsep))
needs_make = pytest.mark.skipif(not HAVE_MAKE, reason="make is not installed")


def make_recipe(target: str, *flags: str, **variables: str) -> list[str]:
    """The commands `make` would run for target (-n: print them, run nothing)."""
    proc = subprocess.run(["make", "-n", *flags, target, *(f"{k}={v}" for k, v in variables.items())], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line and not line.startswith("#")]


def steps(lines: list[str], pattern: str) -> list[int]:
    return [i for i, line in enumerate(lines) if re.search(pattern, line)]


TORCH_STEP = r"/python autograder/torch_wheel\.py$"
LEARNER_STEP = r'pip install -q -e "\.\[learner\]"$'
DEV_STEP = r'pip install -q -e "\.\[dev\]"$'


@needs_make
def test_makefile_installs_torch_first_then_the_learner_extra():
    lines = make_recipe("venv", "-B")  # -B: as if nothing were installed yet
    torch_step, learner_step = steps(lines, TORCH_STEP), steps(lines, LEARNER_STEP)
    assert len(torch_step) == 1 and len(learner_step) == 1, lines
    assert torch_step[0] < learner_step[0], lines
    assert not steps(lines, DEV_STEP), "make venv must not install the dev extra"


@needs_make
@pytest.mark.parametrize("target", ["lab", "doctor", "self-check"])
def test_learner_targets_install_no_dev_extra(target):
    lines = make_recipe(target, "-B")
    assert steps(lines, LEARNER_STEP) and not steps(lines, DEV_STEP), lines


def fake_venv(tmp_path: Path, *stamps: str) -> Path:
    """A .venv whose install stamps are newer than pyproject.toml and torch_wheel.py."""
    venv = tmp_path / ".venv"
    venv.mkdir()
    newer = max((ROOT / "pyproject.toml").stat().st_mtime, (ROOT / "autograder" / "torch_wheel.py").stat().st_mtime) + 60
    for stamp in stamps:
        (venv / stamp).touch()
        os.utime(venv / stamp, (newer, newer))
    return venv


@needs_make
def test_a_learners_first_make_test_adds_only_the_dev_extra(tmp_path):
    venv = fake_venv(tmp_path, ".installed-learner")
    assert not steps(make_recipe("lab", VENV=str(venv)), r"pip install"), "an installed learner venv is reused"
    lines = make_recipe("test", VENV=str(venv))
    assert steps(lines, DEV_STEP) and not steps(lines, LEARNER_STEP) and not steps(lines, TORCH_STEP), lines
    assert steps(lines, DEV_STEP)[0] < steps(lines, r"-m pytest")[0]


@needs_make
def test_an_installed_dev_venv_installs_nothing_more(tmp_path):
    venv = fake_venv(tmp_path, ".installed-learner", ".installed-dev")
    assert not steps(make_recipe("test", VENV=str(venv)), r"pip install|torch_wheel")


def test_dev_extra_is_a_superset_of_the_learner_extra():
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "tinylm-course[learner]" in extras["dev"]
    assert not any(re.match(r"(pytest|nbval|playwright|psycopg)\b", dep) for dep in extras["learner"]), extras["learner"]
