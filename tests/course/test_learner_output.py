"""A learner sees only what concerns them: the install, the
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
from autograder import selfcheck

ROOT = Path(__file__).resolve().parents[2]
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


def run_lab_and_a_kernel(command: str, runtime: Path, extra_env: dict | None = None) -> str:
    """Start `command` (a Lab server on a free port, token "test"), wait until it
    runs, start a kernel through its REST API as opening a notebook does, wait
    until the kernel answers, stop everything: what the server and kernel printed."""
    import json
    import threading
    import time
    import urllib.error
    import urllib.request

    from jupyter_client import BlockingKernelClient

    command += f" --no-browser --port {free_port()} --IdentityProvider.token=test"
    env = dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
               JUPYTER_RUNTIME_DIR=str(runtime), **(extra_env or {}))
    env.pop("JUPYTER_CONFIG_PATH", None) if extra_env is None else None
    proc = subprocess.Popen(command, shell=True, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines, running = [], threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if "Use Control-C to stop this server" in line:
                running.set()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def api(path: str, method: str = "GET") -> dict:
        # the port the server says it took: another process may have taken ours first (it then tries the next)
        [served] = {m.group(1) for line in lines for m in [re.search(r"http://127\.0\.0\.1:(\d+)/", line)] if m}
        request = urllib.request.Request(f"http://127.0.0.1:{served}/api/{path}", method=method,
                                         headers={"Authorization": "token test"}, data=b"{}" if method == "POST" else None)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"{}")
    try:
        assert running.wait(180), "\n".join(lines)
        deadline = time.monotonic() + 60
        while True:  # the server prints that it runs a moment before it accepts connections
            try:
                api("status")
                break
            except urllib.error.URLError:
                assert time.monotonic() < deadline
                time.sleep(0.5)
        kernel = api("kernels", "POST")
        client = BlockingKernelClient(connection_file=str(runtime / f"kernel-{kernel['id']}.json"))
        client.load_connection_file()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=120)  # over the kernel's own transport, whichever it is
        finally:
            client.stop_channels()
        time.sleep(2)  # the kernel prints its start-up warnings before it answers; a margin for the pipe
    except Exception as err:
        raise AssertionError(f"{type(err).__name__}: {err}\n" + "\n".join(lines)) from err
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)
        reader.join(timeout=30)
    return "\n".join(lines)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_starting_lab_and_a_kernel_prints_no_warning(tmp_path):
    """`make lab`'s own command, until the server runs and a kernel started
    through it answers: no "No nbgrader_config.py file found" (notebooks/
    carries the config nbgrader looks for in the server's working folder), no
    "Kernel is running over TCP without encryption" (notebooks/'s
    jupyter_server_config.py puts kernels on Unix sockets), no other warning."""
    output = run_lab_and_a_kernel(makes_lab_command(BIN.parent), tmp_path / "runtime")
    assert "Serving notebooks from local directory" in output and f"{os.sep}notebooks" in output, output
    assert "Jupyter Server" in output and "is running at" in output, output
    assert "Kernel started" in output, output
    assert warning_lines(output) == [], output
    assert list((tmp_path / "runtime").glob("kernel-*")) == [], "the kernel's sockets outlived it"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_lab_without_the_course_config_warns_of_tcp(tmp_path):
    """The control: the same Lab without notebooks/ on JUPYTER_CONFIG_PATH
    starts its kernel on TCP, and the check above sees the warning."""
    command = makes_lab_command(BIN.parent).replace("JUPYTER_CONFIG_PATH=", "IGNORED_CONFIG_PATH=")
    output = run_lab_and_a_kernel(command, tmp_path / "runtime")
    assert "Kernel started" in output, output
    assert any(TCP_WARNING in line for line in warning_lines(output)), output


# -- a failing check in a notebook ---------------------------------------------------------

FAILING_CELLS = [
    "import torch\nimport torch.nn.functional as F\nfrom autograder.checks import check_gqa_attention, check_rms_norm",
    "def widen(k, n):\n    return k.expand(k.shape[0], k.shape[1] * n, *k.shape[2:])",
    "def gqa_attention(q, k, v):\n    n = q.shape[1] // k.shape[1]\n"
    "    return F.scaled_dot_product_attention(q, widen(k, n), widen(v, n), is_causal=True)",
    "check_gqa_attention(gqa_attention)",
    "def rms_norm(x, weight, eps=1e-6):\n    return weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True))",
    "check_rms_norm(rms_norm)",
]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def failing_notebook() -> nbformat.NotebookNode:
    """Two wrong answers, each followed by its check cell, marked as nbgrader test cells."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in FAILING_CELLS])
    for cell in nb.cells:
        if cell.source.startswith("check_"):
            cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 1,
                                         "grade_id": cell.source.split("(")[0], "schema_version": 3}
    return nb


def shown(cell) -> tuple[str, str]:
    """(what the cell printed, the error box as Jupyter draws it: its traceback entries joined)."""
    printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert len(errors) == 1, cell.outputs
    return printed, ANSI.sub("", "\n".join(errors[0].traceback))


def assert_shows_the_diagnosis_only(nb) -> None:
    gqa_printed, gqa_error = shown(nb.cells[3])
    norm_printed, norm_error = shown(nb.cells[5])
    for error in (gqa_error, norm_error):
        assert "autograder/checks" not in error and "autograder" + os.sep not in error, error
        assert "__tracebackhide__" not in error and "chk." not in error, error
    # the table, then the diagnosis; the learner's own frames for the error their code raised
    assert "gqa_attention:" in gqa_printed and "raised RuntimeError" in gqa_printed, gqa_printed
    assert "enable_gqa" not in gqa_error, gqa_error  # the check's reference line, never the learner's
    assert "in gqa_attention" in gqa_error and "in widen" in gqa_error and "k.expand(" in gqa_error, gqa_error
    assert "raised RuntimeError inside your widen" in gqa_error and "Likely bug:" in gqa_error, gqa_error
    assert "rms_norm:" in norm_printed and "FAIL" in norm_printed, norm_printed
    assert norm_error.startswith("CheckFailed: rms_norm failed") and "Likely bug: eps is ignored" in norm_error, norm_error


@pytest.mark.slow
def test_a_failing_check_in_a_notebook_shows_the_table_and_the_diagnosis(tmp_path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    nb = failing_notebook()
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   config=selfcheck.kernel_transport_config(tmp_path), resources={"metadata": {"path": str(tmp_path)}}
                   ).execute()
    assert_shows_the_diagnosis_only(nb)


@pytest.mark.slow
def test_under_nbgrader_a_failing_check_still_scores_zero_and_keeps_its_diagnosis(tmp_path, monkeypatch):
    """The grader's own executor (CappedExecute: nbgrader's Execute, errors
    shortened to their last entries) and nbgrader's scoring of a test cell."""
    from nbgrader.utils import determine_grade

    from autograder.grading.preprocessors import CappedExecute

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))))
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    nb = failing_notebook()
    executor = CappedExecute(timeout=300, kernel_name="python3", config=selfcheck.kernel_transport_config(tmp_path))
    nb, _ = executor.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert_shows_the_diagnosis_only(nb)
    for cell in (nb.cells[3], nb.cells[5]):
        assert determine_grade(cell) == (0, 1.0), cell.outputs
        assert [o.ename for o in cell.outputs if o.output_type == "error"] == ["CheckFailed"]
