"""A learner sees only what concerns them (issue 14): the install, the
self-check and the doctor print no warnings about the course's own plumbing."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import course
from autograder.grading import selfcheck

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
A = "01_embeddings"

TCP_WARNING = "Kernel is running over TCP without encryption"
# A line from any logger or warnings module: "[IPKernelApp] WARNING | ...",
# "WARNING: ...", "...: UserWarning: ...", setuptools' "BuildBackendWarning".
WARNING_LINE = re.compile(r"WARNING|Warning\b")


def warning_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if WARNING_LINE.search(line) or TCP_WARNING in line]


# -- the self-check's kernel ----------------------------------------------------------

def run_tiny_notebook(config) -> None:
    """One cell through nbclient with this kernel-manager config; the kernel's
    stderr is this process's, which capfd captures."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    NotebookClient(nb, timeout=120, kernel_name="python3", config=config).execute()
    assert nb.cells[0].outputs[0]["text"] == "42\n"


@pytest.mark.slow
def test_the_tcp_kernel_warns_which_is_what_the_checks_below_look_for(capfd):
    """The control: jupyter_client's default transport makes ipykernel print
    the warning, so its absence below means the cause is gone."""
    from traitlets.config import Config

    run_tiny_notebook(Config())
    out, err = capfd.readouterr()
    assert TCP_WARNING in out + err


@pytest.mark.slow
def test_the_ipc_kernel_prints_nothing(tmp_path, capfd):
    config = selfcheck.kernel_transport_config(tmp_path)
    assert config.KernelManager.transport == "ipc"
    run_tiny_notebook(config)
    out, err = capfd.readouterr()
    assert warning_lines(out + err) == [], out + err


@pytest.mark.slow
def test_without_ipc_the_kernel_gets_curve_keys_and_prints_nothing(tmp_path, capfd, monkeypatch):
    """The branch for a libzmq without ipc (older Windows builds)."""
    import zmq
    from jupyter_client import KernelManager

    if not (zmq.has("curve") and "transport_encryption" in KernelManager.class_trait_names()):
        pytest.skip("this pyzmq has no CurveZMQ or this jupyter_client cannot provision keys")
    has = zmq.has
    monkeypatch.setattr(zmq, "has", lambda capability: False if capability == "ipc" else has(capability))
    config = selfcheck.kernel_transport_config(tmp_path)
    assert config.KernelManager.transport_encryption == "auto"
    run_tiny_notebook(config)
    out, err = capfd.readouterr()
    assert warning_lines(out + err) == [], out + err


@pytest.mark.slow
@pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")
def test_self_check_prints_the_table_and_no_warning():
    """`make self-check` as a learner runs it on the released notebook."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "autograder", "check", str(course.release_notebook(A))],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "visible checks: 0 / 7 points" in proc.stdout, proc.stdout + proc.stderr
    assert warning_lines(proc.stdout + proc.stderr) == [], proc.stdout + proc.stderr


# -- the doctor -----------------------------------------------------------------------

@pytest.mark.slow
def test_doctor_has_nothing_to_say_about_root_or_kernels(tmp_path):
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path), TINYLM_DEVICE="cpu",
               PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "autograder", "doctor"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    assert not [line for line in proc.stdout.splitlines() if line.startswith("[WARN]") and "root" in line], proc.stdout
    assert warning_lines(proc.stdout) == [], proc.stdout
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        assert re.search(r"^\[OK\] +user: root: `make lab` .* --allow-root", proc.stdout, re.M), proc.stdout
    assert proc.stdout.rstrip().endswith("All checks passed. Start the course with `make lab`."), proc.stdout


# -- the install ----------------------------------------------------------------------

def makes_learner_install_command(venv: Path) -> str:
    """The line `make venv` runs to install the course, for a .venv at venv."""
    proc = subprocess.run(["make", "-n", "-B", "venv", f"VENV={venv}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    [line] = [line for line in proc.stdout.splitlines() if re.search(r'pip install -q -e "\.\[learner\]"$', line)]
    return line


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_installing_the_course_prints_no_build_warnings(tmp_path):
    """make's own install line (build isolation, so the setuptools that
    pyproject's build-system asks for), into a fresh venv; --no-deps because
    the build's output is what is checked, not the resolution of JupyterLab."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"],
                   check=True, timeout=300)
    command = makes_learner_install_command(venv) + " --no-deps"
    proc = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # this machine's own pip configuration may warn about its package locations; the course's build may not
    output = [line for line in (proc.stdout + proc.stderr).splitlines() if "is ignored: it is neither a file" not in line]
    assert output == [], f"{shlex.quote(command)} printed:\n" + "\n".join(output)
    metadata = subprocess.run([str(venv / "bin" / "python"), "-c",
                               "import importlib.metadata as m; print(m.metadata('tinylm-course')['License-Expression'])"],
                              capture_output=True, text=True, timeout=60)
    assert metadata.stdout.strip() == "MIT", metadata.stderr


# -- the Lab start ------------------------------------------------------------------

def makes_lab_command(venv: Path) -> str:
    """The recipe `make lab` runs, for the venv at venv (its install stamp taken as done)."""
    proc = subprocess.run(["make", "-n", "-o", str(venv / ".installed-learner"), "lab", f"VENV={venv}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    [line] = [line for line in proc.stdout.splitlines() if " lab" in line and "jupyter" in line]
    return line


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_starting_lab_prints_no_warning(tmp_path):
    """`make lab`'s own command, until the server says it is running: no
    "No nbgrader_config.py file found" (notebooks/ carries the config nbgrader
    looks for in the server's working folder), no other warning."""
    command = makes_lab_command(BIN.parent) + f" --no-browser --port {free_port()} --ServerApp.token=test"
    env = dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    proc = subprocess.Popen(command, shell=True, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if "Use Control-C to stop this server" in line:
                break
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)
    output = "\n".join(lines)
    assert "Serving notebooks from local directory" in output and f"{os.sep}notebooks" in output, output
    assert "Jupyter Server" in output and "is running at" in output, output
    assert warning_lines(output) == [], output
