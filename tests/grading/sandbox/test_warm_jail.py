"""The warm jail server (autograder.grading.sandbox.warm_jail): jailed kernels and
recheck children forked from a server with torch already imported must be
jailed exactly as cold ones are.

Every test goes through the real jail (root: namespaces, uid switch) and the
real clients (jupyter_client for the sandbox kernel, recheck.Child for the
recheck's child), and checks that the job ran warm (the job's sys.modules
holds autograder.grading.sandbox.warm_jail, which only a fork of the server has), so none
can pass on a silent cold fallback. They look only at their own jails' uids.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from autograder import course
from autograder.grading import gradebook
from autograder.grading.sandbox import warm_client, warm_jail
from autograder.grading.sandbox.jail import Jail, Limits, processes_of_uid
from autograder.grading.sandbox.kernel import started_kernel
from autograder.grading.sandbox.protections import FILTER_FACTS

from ..batches import still_running

pytestmark = [pytest.mark.grader, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the jail's namespaces and uid switch need root")]

TOKEN = secrets.token_hex(4)
SECRET_NAME = f"TINYLM_TEST_SECRET_{TOKEN}"
MEMORY_MB = 3072
HIDDEN = course.ROOT / f".warm-test-hidden-{TOKEN}"
# In the checkout but outside the course's packages: absent in a job (the
# jail shows an allow-list), as the hidden folder is; a file of the packages
# is the control that a job reads what it may.
OUTSIDE = course.ROOT / f".warm-test-outside-{TOKEN}.txt"
VISIBLE = course.ROOT / "tinylm" / "__init__.py"
WARM_ASSERT = "import sys; assert 'autograder.grading.sandbox.warm_jail' in sys.modules"  # a cold job fails it
SHADOW = f"shadow_{TOKEN}"  # a module in the job's work folder; `python -I` must not find it

# Runs in the job; writes what it finds to probe.json in its work folder.
PROBE = FILTER_FACTS + """
import ctypes, json, os, resource, socket, sys
add_key = {{"x86_64": 248, "aarch64": 217}}.get(os.uname().machine)
libc = ctypes.CDLL(None, use_errno=True)
facts = {{"add_key": None if add_key is None else
                    libc.syscall(add_key, b"user", b"tl", b"x", 1, -4) >= 0 or os.strerror(ctypes.get_errno()),
          "cgroup": open("/proc/self/cgroup").read(),
          "tmp_mb": os.statvfs("/tmp").f_blocks * os.statvfs("/tmp").f_frsize // (1024 * 1024),
"uid": os.getuid(), "pid": os.getpid(), "cwd": os.getcwd(),
          "ns": {{k: os.readlink(f"/proc/self/ns/{{k}}") for k in ("pid", "mnt", "net")}},
          "warm": "autograder.grading.sandbox.warm_jail" in sys.modules,
          "trusted_modules": [m for m in ("autograder.grading.grade", "autograder.grading.gradebook",
                                          "autograder.grading.intake.collect", "nbgrader", "sqlalchemy", "psycopg")
                              if m in sys.modules],
          "env_names": sorted(os.environ),
          "environ_file_names": sorted(v.split(b"=")[0].decode() for v in
                                       open("/proc/self/environ", "rb").read().split(b"\\0") if v),
          "cwd_on_path": [p for p in sys.path if p in ("", ".", os.getcwd())], "path": sys.path,
          "rlimit_as": resource.getrlimit(resource.RLIMIT_AS),
          "status_owner": os.stat("/proc/self/status").st_uid, "sockets": []}}
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{{fd}}")
    except OSError:  # the fd listdir itself used
        continue
    if target.startswith("socket:"):
        facts["sockets"].append(target)
for key, path in (("hidden", {hidden!r}), ("visible", {visible!r}), ("outside", {outside!r})):
    try:
        open(path).read()
        facts[key] = "read"
    except OSError as err:
        facts[key] = type(err).__name__
facts.update(filter_facts({visible!r}))
try:
    import {shadow}
    facts["shadow"] = "imported"
except ImportError:
    facts["shadow"] = "not found"
try:
    socket.socket(socket.AF_UNIX).connect({sock!r})
    facts["server_socket"] = "connected"
except OSError as err:
    facts["server_socket"] = type(err).__name__
json.dump(facts, open("probe.json", "w"))
"""


@pytest.fixture(scope="module")
def server():
    """A server started while the grader's environment holds a secret and a
    database URL (so a server that kept the grader's environment is seen)."""
    HIDDEN.mkdir()
    (HIDDEN / "answer.txt").write_text("hidden")
    OUTSIDE.write_text("outside the course's packages")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SECRET_NAME, "s3cret")
        mp.setenv(gradebook.ENV_VAR, f"postgresql+psycopg://grader:pw-{TOKEN}@127.0.0.1/db")
        srv = warm_jail.WarmJailServer()
        try:
            srv.wait_ready()
            yield srv
        finally:
            srv.close()
            (HIDDEN / "answer.txt").unlink()
            HIDDEN.rmdir()
            OUTSIDE.unlink()


@pytest.fixture
def warm(server, monkeypatch):
    """The grader's environment with the server's socket set, and the secret."""
    monkeypatch.setenv(SECRET_NAME, "s3cret")
    for key, value in server.env().items():
        monkeypatch.setenv(key, value)
    return server


def _probe_code(server) -> str:
    return PROBE.format(hidden=str(HIDDEN / "answer.txt"), visible=str(VISIBLE), outside=str(OUTSIDE),
                        shadow=SHADOW, sock=str(server.socket_path))


@contextmanager
def _jail(tmp_path):
    """A jail whose work folder holds a module the job must not import."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    shadow = tmp_path / f"{SHADOW}.py"
    shadow.write_text("raise SystemExit('the working folder is on sys.path')\n")
    with Jail.reserve(Limits(memory_mb=MEMORY_MB, cpu_s=120), copy=[shadow], hide=[HIDDEN]) as jail:
        yield jail


def _gone(uid: int, within_s: float = 5.0) -> list[int]:
    """The processes of `uid` still alive after waiting up to `within_s`."""
    end = time.monotonic() + within_s
    while (left := still_running(processes_of_uid(uid))) and time.monotonic() < end:
        time.sleep(0.05)
    return left


def _assert_jailed(facts: dict, jail: Jail) -> None:
    host = {k: os.readlink(f"/proc/self/ns/{k}") for k in ("pid", "mnt", "net")}
    assert facts["warm"], "the job ran cold: this test proves nothing about the warm server"
    assert facts["uid"] == jail.uid
    assert all(facts["ns"][k] != host[k] for k in host), facts["ns"]
    assert facts["pid"] == 2, "the command is not the first child of the namespace's init"
    assert facts["cwd"] == str(jail.workdir)
    assert facts["hidden"] in ("PermissionError", "FileNotFoundError"), facts["hidden"]
    assert facts["visible"] == "read", "the control file of the course's packages was not readable"
    assert facts["outside"] == "FileNotFoundError", f"a file of the checkout outside the allow-list: {facts['outside']}"
    # no lock query or watch on a file other jobs open too
    assert (facts["lock_query"], facts["inotify"]) == ("No locks available", "Operation not permitted"), facts
    assert facts["shadow"] == "not found" and facts["cwd_on_path"] == []
    assert facts["path"] == _cold_sys_path(), "sys.path is not what a cold `python -I` has"
    for names in (facts["env_names"], facts["environ_file_names"]):
        assert SECRET_NAME not in names and gradebook.ENV_VAR not in names and warm_jail.ENV_VAR not in names
    assert "HOME" in facts["env_names"], "the job does not have the jail's environment"
    assert facts["trusted_modules"] == []
    assert facts["rlimit_as"] == [MEMORY_MB * 1024 * 1024] * 2
    assert facts["status_owner"] == jail.uid, "the job is not dumpable: its /proc files are not its own"
    assert facts["server_socket"] != "connected"
    # no keyrings, the job's own cgroup, a capped scratch tmpfs
    assert facts["add_key"] in (None, "Operation not permitted"), facts["add_key"]
    assert jail.cgroup.kind == "none" or f"tinylm-jail-{jail.uid}" in facts["cgroup"], facts["cgroup"]
    assert facts["tmp_mb"] == jail.limits.scratch_mb


def _cold_sys_path() -> list[str]:
    out = subprocess.run([sys.executable, "-I", "-c", "import json, sys; print(json.dumps(sys.path))"],
                         capture_output=True, text=True, check=True, cwd="/", env={})
    return json.loads(out.stdout)


def _facts(jail: Jail) -> dict:
    return json.loads((jail.workdir / "probe.json").read_text())


# ---------------------------------------------------------------------------
# the recheck's child

def test_warm_recheck_child_is_jailed_as_a_cold_one(warm, tmp_path):
    from autograder.grading.recheck.parent import Child
    before = len(warm.jobs())
    with _jail(tmp_path) as jail:
        child = Child(jail, timeout=60, total=120)
        assert child.request(("exec", "probe", _probe_code(warm))) == ("ok", [])
        facts = _facts(jail)
        assert facts["sockets"] == [], "the child holds a socket (the server's?): it talks through pipes only"
        child.kill("done")
        assert _gone(jail.uid) == []
    _assert_jailed(facts, jail)
    assert warm.jobs()[before:] == ["autograder.grading.recheck"]


def test_killing_the_client_ends_the_warm_job_at_once(warm, tmp_path):
    """recheck.Child.kill SIGKILLs `python -m autograder.grading.sandbox.jail`, the client:
    the server must end the job (init, the command) it runs for it."""
    from autograder.grading.recheck.parent import Child
    with _jail(tmp_path) as jail:
        child = Child(jail, timeout=60, total=120)
        assert child.request(("exec", "w", WARM_ASSERT)) == ("ok", [])
        assert len(processes_of_uid(jail.uid)) == 2, "expected the job's init and its command"
        child.proc.kill()
        child.proc.wait()
        assert _gone(jail.uid, within_s=2.0) == [], "the job outlived its client"


def test_rlimit_as_stops_a_warm_job_allocating_past_it(warm, tmp_path):
    from autograder.grading.recheck.parent import Child
    code = f"""import sys
assert 'autograder.grading.sandbox.warm_jail' in sys.modules
try:
    block = bytearray({MEMORY_MB} * 1024 * 1024)
    outcome = 'allocated'
except MemoryError:
    outcome = 'MemoryError'
open('alloc.txt', 'w').write(outcome)
"""
    with _jail(tmp_path) as jail:
        child = Child(jail, timeout=60, total=120)
        assert child.request(("exec", "alloc", code)) == ("ok", [])
        child.kill("done")
        assert (jail.workdir / "alloc.txt").read_text() == "MemoryError"


# ---------------------------------------------------------------------------
# the sandbox kernel, started by jupyter_client as nbgrader starts it

def _kernel(jail: Jail):
    env = course.nbgrader_env()
    env.pop(gradebook.ENV_VAR, None)
    return started_kernel(jail, env)


def test_warm_kernel_is_jailed_interrupted_and_ended_with_its_client(warm, tmp_path):
    before = len(warm.jobs())
    with _jail(tmp_path) as jail, _kernel(jail) as (km, client):
        reply = client.execute_interactive(_probe_code(warm), timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]
        facts = _facts(jail)
        # An interrupt (SIGINT to the client's process group, as jupyter_client sends it) stops a running cell.
        msg_id = client.execute("import time; time.sleep(120)")
        time.sleep(1.0)
        start = time.monotonic()
        km.interrupt_kernel()
        reply = client.get_shell_msg(timeout=30)
        assert reply["parent_header"]["msg_id"] == msg_id
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
        assert time.monotonic() - start < 20
        # The kernel manager's kill (SIGKILL to the client) ends the whole job.
        km.shutdown_kernel(now=True)
        assert _gone(jail.uid, within_s=2.0) == [], "the warm kernel outlived its client"
    _assert_jailed(facts, jail)
    assert warm.jobs()[before:] == ["ipykernel_launcher"]


PLOT_CELL = """import matplotlib, matplotlib.pyplot as plt
plt.plot([1, 2, 3])
plt.savefig("figure.png")
fonts = matplotlib.font_manager.fontManager.ttflist
print(matplotlib.get_backend(), matplotlib.rcParams["figure.figsize"], len(fonts) > 0)
"""


def _streams(client, code: str) -> list[tuple[str, str]]:
    """(stream name, text) of each output a cell printed."""
    out = []

    def hook(msg):
        if msg["msg_type"] == "stream":
            out.append((msg["content"]["name"], msg["content"]["text"]))
    reply = client.execute_interactive(code, timeout=60, output_hook=hook)
    assert reply["content"]["status"] == "ok", reply["content"]
    return out


def test_a_plot_in_a_warm_kernel_prints_what_a_cold_one_does(server, tmp_path, monkeypatch):
    """matplotlib.pyplot is preloaded in the server: the first plot of a
    notebook prints the same as in a cold kernel, and nothing on stderr
    (which would fail a graded cell)."""
    printed = {}
    for mode in ("cold", "warm"):
        if mode == "warm":
            monkeypatch.setenv(warm_jail.ENV_VAR, str(server.socket_path))
        with _jail(tmp_path / mode) as jail, _kernel(jail) as (_, client):
            printed[mode] = _streams(client, PLOT_CELL)
            assert (jail.workdir / "figure.png").stat().st_size > 0
            assert _streams(client, WARM_MARK) == []
            assert (jail.workdir / "warm.txt").read_text() == str(mode == "warm")
    assert printed["warm"] == printed["cold"] and [name for name, _ in printed["warm"]] == ["stdout"]
    assert printed["warm"][0][1].startswith("Agg ")


# ---------------------------------------------------------------------------
# the server itself

def test_server_holds_no_secret_and_runs_one_thread(server):
    environ = Path(f"/proc/{server.pid}/environ").read_bytes()
    assert SECRET_NAME.encode() not in environ and gradebook.ENV_VAR.encode() not in environ
    assert b"s3cret" not in environ and TOKEN.encode() not in environ
    assert os.listdir(f"/proc/{server.pid}/task") == [str(server.pid)], "a thread in the server: fork is unsafe"
    folder = server.socket_path.parent
    assert folder.stat().st_mode & 0o777 == 0o700 and folder.stat().st_uid == os.getuid()


def _memory_holds(pid: int, needle: bytes) -> bool:
    """Whether the writable memory (heap, stacks, data) of `pid` holds `needle`."""
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("rw"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                if needle in mem.read(end - start):
                    return True
            except OSError:  # a guard page or a mapping that went away
                continue
    return False


def test_what_a_job_asked_never_enters_the_server(server, tmp_path):
    """Later jobs are forked from the server: the notebook path one job
    copied in (a student's id) must not be in the server's memory."""
    from autograder.grading.recheck.parent import Child
    name = f"student-{secrets.token_hex(6)}"
    notebook = tmp_path / f"{name}.ipynb"
    notebook.write_text("{}")
    with Jail.reserve(Limits(memory_mb=MEMORY_MB, cpu_s=120), copy=[notebook], hide=[]) as jail, \
            pytest.MonkeyPatch.context() as mp:
        mp.setenv(warm_jail.ENV_VAR, str(server.socket_path))
        child = Child(jail, timeout=60, total=120)
        assert child.request(("exec", "w", WARM_ASSERT + f"; open('{name}.ipynb').read()")) == ("ok", [])
        child.kill("done")
    assert not _memory_holds(server.pid, name.encode())
    assert _memory_holds(os.getpid(), name.encode()), "the memory scan cannot find what is there"


def test_another_uid_gets_no_job_even_where_it_can_reach_the_socket(server, tmp_path):
    """SO_PEERCRED: with the folder opened up, a process of another uid
    (a jail's, without the jail's namespaces) asks for a job and is refused."""
    folder = server.socket_path.parent
    with _jail(tmp_path) as jail:
        settings = json.loads(jail.env()["TINYLM_JAIL"])
        command = [sys.executable, "-I", "-m", "autograder.grading.recheck", "--child"]
        os.chmod(folder, 0o711)
        os.chmod(server.socket_path, 0o777)
        try:
            pid = os.fork()
            if pid == 0:  # the other uid: asks as the jail client would
                code = 1
                try:
                    os.setgid(jail.uid)
                    os.setuid(jail.uid)
                    os.environ[warm_jail.ENV_VAR] = str(server.socket_path)
                    devnull = os.open(os.devnull, os.O_RDWR)
                    os.dup2(devnull, 0)  # if it got a job, the job reads EOF and ends
                    connected = socket.socket(socket.AF_UNIX)
                    connected.connect(str(server.socket_path))  # it can reach the socket ...
                    connected.close()
                    answer = warm_client.run_warm(settings, command, warm_jail.server_env())  # else acceptable
                    code = 0 if answer is None else 3  # ... and gets no job (None: it would run cold)
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
        finally:
            os.chmod(server.socket_path, 0o755)
            os.chmod(folder, 0o700)
        assert os.waitstatus_to_exitcode(status) == 0, \
            "another uid got a job (exit 3), or could not reach the socket, which proves nothing (exit 1)"
        assert server.proc.poll() is None


WARM_MARK = "import sys; open('warm.txt', 'w').write(str('autograder.grading.sandbox.warm_jail' in sys.modules))"


def _client_run(env: dict, tmp_path, source: str = WARM_MARK) -> subprocess.CompletedProcess:
    """`python -m autograder.grading.sandbox.jail -- python -I -m autograder.grading.recheck --child`
    as the recheck starts it, given one exec message; .warm says whether the
    job ran warm."""
    import pickle
    from autograder.grading.sandbox.kernel import course_env_for_jail
    from autograder.grading.wire import send
    with _jail(tmp_path) as jail:
        cmd = [sys.executable, "-m", "autograder.grading.sandbox.jail", "--", sys.executable, "-I", "-m",
               "autograder.grading.recheck", "--child"]
        r, w = os.pipe()
        send(w, pickle.dumps(("exec", "probe", source)))
        os.close(w)
        try:
            done = subprocess.run(cmd, stdin=r, capture_output=True, timeout=120,  # stdout: the binary protocol
                                  env={**course_env_for_jail(jail), **env})
        finally:
            os.close(r)
        mark = jail.workdir / "warm.txt"
        done.warm = mark.read_text() if mark.is_file() else f"no mark (exit {done.returncode}): {done.stderr[-2000:]}"
    return done


def test_the_exit_status_passes_through_the_client(server, tmp_path):
    done = _client_run(server.env(), tmp_path, WARM_MARK + "\nimport os; os._exit(7)")
    assert done.warm == "True" and done.returncode == 7


@pytest.mark.parametrize("gone", ["no socket file", "a dead server's socket"])
def test_an_unreachable_server_means_a_silent_cold_start(gone, tmp_path):
    if gone == "no socket file":
        path = tmp_path / "no-server" / "socket"
    else:
        srv = warm_jail.WarmJailServer()
        srv.wait_ready()
        path = srv.socket_path
        os.kill(srv.pid, signal.SIGKILL)  # the socket file stays, nobody listens
        srv.proc.wait()
    try:
        assert path.exists() == (gone != "no socket file")
        done = _client_run({warm_jail.ENV_VAR: str(path)}, tmp_path)
    finally:
        if gone != "no socket file":
            srv.close()
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    assert done.warm == "False"


def test_the_client_hands_the_job_to_the_server(server, tmp_path):
    """The control of the fallback test: the same run with a live server is warm."""
    done = _client_run(server.env(), tmp_path)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    assert done.warm == "True"


def test_closing_the_server_ends_its_jobs_and_leaves_no_process(tmp_path, monkeypatch):
    from autograder.grading.recheck.parent import Child
    srv = warm_jail.WarmJailServer()
    srv.wait_ready()
    for key, value in srv.env().items():
        monkeypatch.setenv(key, value)
    with _jail(tmp_path) as jail:
        child = Child(jail, timeout=60, total=120)
        assert child.request(("exec", "w", WARM_ASSERT)) == ("ok", [])
        srv.close()
        assert child.proc.wait(timeout=10) == 128 + signal.SIGKILL
        assert _gone(jail.uid, within_s=2.0) == []
    assert srv.proc.poll() is not None and not srv.socket_path.parent.exists()
