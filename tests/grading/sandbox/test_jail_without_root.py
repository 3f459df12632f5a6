"""The jail without root: a user namespace must hide what the root jail hides.

An instructor may grade on a laptop, without root. This runs the jail as an
unprivileged user (as `nobody` through setpriv when the tests run as root, as
yourself otherwise) around a probe that reports what it can see and reach.
The jail must cut the network, give a private /tmp, cover the hidden paths
and /run, show only its own processes (a PID namespace with its own /proc),
copy in only the allowed files, set the limits, and print no note saying it
could not. Where the kernel refuses unprivileged user namespaces, the jail
must say so instead (and the rest is not claimed).
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.course import ROOT
from autograder.grading.sandbox import view

NOBODY = 65534
PROBE = r'''
import ctypes, json, os, resource, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
add_key = {"x86_64": 248, "aarch64": 217}.get(os.uname().machine)
tmp = os.statvfs("/tmp")
report = {"uid": os.getuid(), "cwd": os.getcwd(), "files": sorted(os.listdir(".")),
          "tmp_mb": tmp.f_blocks * tmp.f_frsize // (1024 * 1024),
          "add_key": None if add_key is None else
                     libc.syscall(add_key, b"user", b"tl", b"x", 1, -4) >= 0 or os.strerror(ctypes.get_errno()),
          "outside_visible": os.path.exists(sys.argv[1]),
          "address_space": resource.getrlimit(resource.RLIMIT_AS)[0],
          "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), "run": os.listdir("/run")}
try:
    report["hidden"] = sorted(os.listdir(sys.argv[2]))
except OSError as err:  # covered by an empty tmpfs of mode 0: not even listable
    report["hidden"] = type(err).__name__
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[3])), timeout=2).close()
    report["connect"] = "connected"
except OSError as err:
    report["connect"] = type(err).__name__
print(json.dumps(report))
'''
# The jail module is the same file either way; only where it may put its
# stash differs: its own folder under /run, or (never made) a path a user
# namespace cannot create, which makes it cover /run instead.
RUN_JAIL = ("import sys; from pathlib import Path; import autograder.grading.sandbox.jail_init as jail; "
            "jail.STASH = Path(sys.argv[1]) if sys.argv[1] != '-' else jail.STASH; "
            "sys.exit(jail.main(sys.argv[2:]))")


def _runner() -> tuple[list[str], str]:
    """The command prefix that runs as an unprivileged user, and its Python."""
    if os.geteuid() != 0:
        return [], sys.executable
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot drop to an unprivileged user")
    as_nobody = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    # The test runner's interpreter may live where other users cannot enter
    # (/root/.pyenv): the jail module needs only the standard library.
    for python in ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"):
        if Path(python).exists() and subprocess.run([*as_nobody, python, "-c", "pass"]).returncode == 0:
            return as_nobody, python
    pytest.skip("no Python interpreter that the unprivileged user may run")


def _world_readable(path: Path) -> bool:
    return all(os.stat(p).st_mode & 0o005 == 0o005 for p in [path, *path.parents])


@pytest.fixture
def listening_port():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


@pytest.mark.parametrize("stash", ["-", "/run/tinylm-jail-stash-never-made"], ids=["own-stash", "cover-run"])
def test_unprivileged_jail_isolates_network_tmp_and_hidden_paths(stash, listening_port):
    runner, python = _runner()
    hidden = ROOT / "solutions"
    if os.geteuid() == 0 and not _world_readable(ROOT):
        pytest.skip(f"{ROOT} is not readable by other users, so `nobody` cannot import the jail from it")
    assert any(hidden.iterdir()), "the test needs a non-empty folder to hide"
    # what this interpreter's jail shows (view.py), as `grade` computes it for its own
    shown = view.compute(view.interpreter(python), [str(ROOT)])

    base = Path(tempfile.mkdtemp(prefix="tinylm-jail-test-", dir="/tmp"))
    outside = Path(tempfile.mkdtemp(prefix="tinylm-jail-outside-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        os.chmod(outside, 0o755)
        for folder in (base, *(base / sub for sub in ("work", "run", "home"))):
            folder.mkdir(exist_ok=True)
            if runner:  # without root the job's folder belongs to whoever grades
                os.chown(folder, NOBODY, NOBODY)
        (outside / "probe.py").write_text(PROBE)
        (outside / "secret.txt").write_text("not for the jailed process")
        for f in outside.iterdir():
            os.chmod(f, 0o644)
        settings = {"limits": {"memory_mb": 1024, "cpu_s": 60, "nproc": 64, "file_mb": 8, "wall_s": 60,
                               "scratch_mb": 32},
                    "copy": [str(outside / "probe.py")], "hide": [str(hidden), *shown.covered], "uid": NOBODY,
                    "base": str(base), "expose": shown.shown, "links": shown.links}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT),
               "TINYLM_JAIL": json.dumps(settings)}
        done = subprocess.run([*runner, python, "-c", RUN_JAIL, stash, "--",
                               python, "probe.py", str(outside / "secret.txt"), str(hidden), str(listening_port)],
                              capture_output=True, text=True, env=env, timeout=60, cwd="/")
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(outside, ignore_errors=True)

    assert done.returncode == 0, done.stderr
    if "no user namespace" in done.stderr:  # the kernel refuses them: the jail must say what that means
        assert "network open" in done.stderr and "nothing hidden" in done.stderr
        pytest.skip(f"unprivileged user namespaces are disabled here: {done.stderr.strip()}")
    assert "[jail]" not in done.stderr, f"the jail could not do everything: {done.stderr}"
    report = json.loads(done.stdout)
    assert report["uid"] == (NOBODY if runner else os.getuid())
    assert report["cwd"] == str(base / "work") and report["files"] == ["probe.py"]
    assert report["connect"] != "connected", "the jailed process reached a port on the host's loopback"
    assert not report["outside_visible"], "the jailed process sees another job's files in /tmp"
    assert report["hidden"] in ([], "PermissionError"), f"the hidden solutions are readable: {report['hidden']}"
    assert report["address_space"] == 1024 * 1024 * 1024
    # its own PID namespace and /proc: only the jail's init and the probe, no process of the host
    assert report["processes"] == [1, 2], report["processes"]
    assert report["run"] == [], f"/run is not covered: {report['run']}"
    # /tmp (with /var/tmp, /dev/shm) is one capped tmpfs, and the keyring calls are refused
    assert report["tmp_mb"] == 32, report["tmp_mb"]
    assert report["add_key"] in (None, "Operation not permitted"), report["add_key"]
    # And outside the jail all of it is there: the checks above can fail.
    assert any(hidden.iterdir()) and resource.getrlimit(resource.RLIMIT_AS)[0] != 1024 * 1024 * 1024
