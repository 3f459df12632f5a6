"""Isolation between submissions and from the host.

Two layers. Jail-level tests run `python -m autograder.grading.sandbox.jail` around a small
probe, so they control the order of jobs and take seconds: what one job sees
of other processes, what a daemon it forks becomes when the job ends, what it
leaves in IPC objects, /run/lock and /dev/shm for the next job, whether it
reaches a socket under /run, and whether a float CPU limit still works.
Then one grader batch (workers=1, so submissions are graded one after the
other in name order) repeats the attacks as submissions, with an honest
control: a leaver that the finder graded after it must not find, a probe of
/proc and /run, and a daemon that keeps forking.

All names the attacks use carry a token unique to the test run, so nothing
here looks at or kills another grader's processes on a shared machine.
"""
from __future__ import annotations

import ctypes
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

from autograder import course, specimens
from autograder.grading.gradebook import DATA_ENV_VAR
from autograder.grading.sandbox.jail import Jail, Limits, in_fork, live_process_uid, process_status, processes_of_uid
from ..batches import jailed_survivors, recording_jails, shared_batch, still_running

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the root jail's namespaces and uid switch need root "
                                                         "(tests/grading/sandbox/test_jail_without_root.py covers the other path)")
TOKEN = secrets.token_hex(4)
SYSV_KEY = int(TOKEN, 16) & 0x3FFFFFFF | 0x40000000  # a key no other program uses
IPC_CREAT, IPC_RMID = 0o1000, 0

# Leaves one of each in its job, checks each is there, prints JSON.
LEAVER = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
left = {{}}
left["sysv_shm"] = libc.shmget({key}, 4096, 0o1666) >= 0
left["sysv_msg"] = libc.msgget({key}, 0o1666) >= 0
mq = libc.mq_open(b"/tl-{token}", os.O_CREAT | os.O_RDWR, 0o666, None)
left["posix_mq"] = mq >= 0
for name, folder in (("run_lock", "/run/lock"), ("dev_shm", "/dev/shm")):
    try:
        with open(f"{{folder}}/tl-{token}", "w") as fh:
            fh.write("left by an earlier job")
        left[name] = os.path.exists(f"{{folder}}/tl-{token}")
    except OSError as err:
        left[name] = type(err).__name__
print("LEFT", json.dumps(left))
"""

# Looks for what the leaver left, for the decoy's command line, for other
# students' ids in any command line, and connects to a socket under /run.
FINDER = """
import ctypes, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
found = {{"sysv_shm": libc.shmget({key}, 0, 0) >= 0, "sysv_msg": libc.msgget({key}, 0) >= 0,
         "posix_mq": libc.mq_open(b"/tl-{token}", os.O_RDONLY, 0, None) >= 0,
         "run_lock": os.path.exists("/run/lock/tl-{token}"), "dev_shm": os.path.exists("/dev/shm/tl-{token}")}}
names = []  # every visible command line but the probe's own (a jail-level probe's holds this source)
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) == os.getpid():
        continue
    try:
        names.append(open(f"/proc/{{pid}}/cmdline", "rb").read().replace(b"\\0", b" ").decode(errors="replace"))
    except OSError:
        pass
found["processes"] = len(names) + 1
found["decoy"] = any("decoy-{token}" in n for n in names)
found["students"] = sorted({{s for s in {students!r} if any(s in n for n in names)}})
try:
    with open("/proc/1/environ", "rb") as fh:
        found["init_environ"] = len(fh.read())
except OSError as err:
    found["init_environ"] = type(err).__name__
try:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect({sock!r})
    found["run_socket"] = "connected"
except OSError as err:
    found["run_socket"] = type(err).__name__
print("FOUND", json.dumps(found))
"""

# Forks a daemon that forks again and again (the parent exits each time, so
# no pid lasts), each generation named hop<token>; returns once it hops.
HOPPER = """
import ctypes, os, time
def hop():
    libc = ctypes.CDLL(None)
    os.setsid()
    n = 0
    while True:
        try:
            if os.fork():
                os._exit(0)
        except OSError:  # out of processes for the moment: wait and try again, as a real daemon would
            time.sleep(0.01)
            continue
        n += 1
        libc.prctl(15, b"hop{token}", 0, 0, 0)
        if n % 50 == 0:
            with open("{count}", "w") as fh:
                fh.write(str(n))
        time.sleep(0.001)
if os.fork() == 0:
    hop()
for _ in range(1500):
    if os.path.exists("{count}") and int(open("{count}").read() or 0) >= 100:
        print("HOPPING", flush=True)
        break
    time.sleep(0.01)
"""


def _hoppers() -> list[int]:
    """This run's live hopping daemons (by their name, unique to this run)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == f"hop{TOKEN}" and live_process_uid(pid) is not None:
                found.append(int(pid))
        except OSError:
            pass
    return found


def _process_facts(pid: int) -> dict:
    """What /proc says of a survivor: its state, parent and PIDs in each
    namespace (one PID means it never was in the job's namespace)."""
    fields = process_status(pid)
    return {k: fields[k] for k in ("State", "PPid", "NSpid", "Uid") if k in fields} if fields else {"gone": True}


def _kill_hoppers() -> None:
    """Clean up after a jail that let the daemon live (today's code did)."""
    for _ in range(200):
        pids = _hoppers()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _host_leftovers() -> dict:
    """What a leaver left on the host itself (the test runs outside any jail)."""
    libc = _libc()
    return {"sysv_shm": libc.shmget(SYSV_KEY, 0, 0) >= 0, "sysv_msg": libc.msgget(SYSV_KEY, 0) >= 0,
            "posix_mq": libc.mq_open(f"/tl-{TOKEN}".encode(), os.O_RDONLY, 0, None) >= 0,
            "run_lock": Path(f"/run/lock/tl-{TOKEN}").exists()}


def _remove_host_leftovers() -> None:
    libc = _libc()
    shm, msg = libc.shmget(SYSV_KEY, 0, 0), libc.msgget(SYSV_KEY, 0)
    if shm >= 0:
        libc.shmctl(shm, IPC_RMID, None)
    if msg >= 0:
        libc.msgctl(msg, IPC_RMID, None)
    libc.mq_unlink(f"/tl-{TOKEN}".encode())
    Path(f"/run/lock/tl-{TOKEN}").unlink(missing_ok=True)


@contextmanager
def _decoy():
    """A process outside every jail whose command line names a student."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", f"decoy-{TOKEN}"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@contextmanager
def _run_socket():
    """A listening socket under /run that anyone may connect to (as the
    PostgreSQL socket in /run/postgresql is)."""
    path = Path(f"/run/tl-{TOKEN}.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    os.chmod(path, 0o777)
    server.listen()
    try:
        yield str(path)
    finally:
        server.close()
        path.unlink(missing_ok=True)


@contextmanager
def _probe_jail(code: str, limits: Limits | None = None):
    """A reserved jail, and the command and environment that run `code` in
    it as probe.py (a file, so no command line in the job holds its text)."""
    with tempfile.TemporaryDirectory() as folder:
        probe = Path(folder) / "probe.py"
        probe.write_text(code)
        with Jail.reserve(limits or Limits(memory_mb=1024, cpu_s=60), copy=[probe], hide=[]) as jail:
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(course.ROOT), **jail.env()}
            yield jail, [sys.executable, "-m", "autograder.grading.sandbox.jail", "--", sys.executable, "probe.py"], env


def _run_jailed(code: str, limits: Limits | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    with _probe_jail(code, limits) as (_, cmd, env):
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd="/")


def _assert_left_everything(left: dict) -> None:
    """The leaver made each object in its own job (else finding none proves
    nothing). /run/lock is the exception: a jailed /run is empty and not
    writable, so there it may fail to write at all."""
    assert all(left[k] is True for k in ("sysv_shm", "sysv_msg", "posix_mq", "dev_shm")), \
        f"the first job could not leave everything, so the second proves nothing: {left}"
    assert left["run_lock"] in (True, "FileNotFoundError", "PermissionError"), left


def _line(out: str, tag: str) -> dict:
    line = next((l for l in out.splitlines() if l.startswith(tag + " ")), None)
    assert line is not None, f"the probe printed no {tag} line:\n{out}"
    return json.loads(line[len(tag) + 1:])


# ---------------------------------------------------------------------------
# jail level

@root_only
def test_a_job_sees_only_its_own_processes():
    with _decoy(), _run_socket() as sock:
        done = _run_jailed(FINDER.format(key=SYSV_KEY, token=TOKEN, students=["decoy"], sock=sock))
    assert done.returncode == 0, done.stderr
    found = _line(done.stdout, "FOUND")
    assert not found["decoy"], "a jailed process read another job's command line in /proc"
    # init, the probe, nothing else: the grader's own processes are out of sight too
    assert found["processes"] <= 2, found
    assert found["init_environ"] == "PermissionError", f"the job read its init's environment: {found}"


@root_only
def test_a_daemon_that_keeps_forking_ends_with_its_job():
    try:
        with _probe_jail(HOPPER.format(token=TOKEN, count="hops")) as (jail, cmd, env):
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
            try:  # the daemon holds the job's stdout too: EOF comes only when it is gone
                out, err = proc.communicate(timeout=20)
                pipe = "closed"
            except subprocess.TimeoutExpired:
                out, err, pipe = "HOPPING", "", "held open by the daemon"
            survivors = still_running(_hoppers())
            uid_left = still_running(processes_of_uid(jail.uid))
    finally:
        _kill_hoppers()
    assert "HOPPING" in out, f"the daemon did not start: {err}"
    assert not survivors and pipe == "closed", \
        f"{len(survivors)} forks of the daemon outlived the job's command; its stdout: {pipe}"
    assert not uid_left, f"processes of uid {jail.uid} are left before the uid is released for reuse"


@root_only
def test_killing_the_jail_process_ends_the_job_and_release_leaves_the_uid_clean():
    """What a kernel manager does to a kernel that will not stop, and the
    per-submission timeout: SIGKILL the process it started."""
    try:
        with _probe_jail(HOPPER.format(token=TOKEN, count="hops") + "time.sleep(600)\n") as (jail, cmd, env):
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
            assert proc.stdout.readline().strip() == "HOPPING", proc.stderr.read()
            proc.kill()
            proc.wait()
            # The kernel kills the namespace at once; ended is gone, exiting or
            # with SIGKILL pending (still_running).
            end = time.monotonic() + 10
            while still_running(_hoppers()) and time.monotonic() < end:
                time.sleep(0.05)
            after_kill = {pid: _process_facts(pid) for pid in still_running(_hoppers())}
            jail_notes = proc.stderr.read()
            jail.release()
            uid_left = still_running(processes_of_uid(jail.uid))
    finally:
        _kill_hoppers()
    assert not after_kill, (f"the daemon outlived the jail process that was killed: {after_kill}; "
                            f"the jail said: {jail_notes.strip() or 'nothing'}")
    assert not uid_left, f"processes of uid {jail.uid} survived the release"


@root_only
def test_what_one_job_leaves_in_ipc_run_lock_and_dev_shm_the_next_does_not_find():
    try:
        left = _line(_run_jailed(LEAVER.format(key=SYSV_KEY, token=TOKEN)).stdout, "LEFT")
        with _run_socket() as sock:
            done = _run_jailed(FINDER.format(key=SYSV_KEY, token=TOKEN, students=[], sock=sock))
        host = _host_leftovers()
    finally:
        _remove_host_leftovers()
    _assert_left_everything(left)
    found = _line(done.stdout, "FOUND")
    assert not any(found[k] for k in left), f"the next job found what the first left: {found}"
    assert found["run_socket"] != "connected", "the jail reached a socket under /run"
    assert not any(host.values()), f"the job left objects on the host itself: {host}"
    assert not Path(f"/dev/shm/tl-{TOKEN}").exists()


@root_only
def test_kill_uid_skips_processes_that_exit_during_its_scan(monkeypatch):
    """A process that exits while kill_uid reads its /proc files makes those
    reads fail with ESRCH (ProcessLookupError): the scan must skip it and
    still kill the uid's processes, not abort the release."""
    import builtins
    import io
    from autograder.grading.sandbox import jail as jail_module
    uid = 4_000_000  # a uid nothing else runs under
    target = subprocess.Popen(["sleep", "60"], user=uid, group=uid)
    vanishing = subprocess.Popen(["sleep", "60"])
    prefix = f"/proc/{vanishing.pid}/"

    def exiting(real):
        def call(path, *args, **kwargs):
            if str(path).startswith(prefix):
                raise ProcessLookupError(3, "No such process", str(path))
            return real(path, *args, **kwargs)
        return call
    try:
        with monkeypatch.context() as patch:
            for module, name in ((os, "stat"), (builtins, "open"), (io, "open")):
                patch.setattr(module, name, exiting(getattr(module, name)))
            killed = jail_module.kill_uid(uid)
        assert killed >= 1 and target.wait(timeout=10) == -signal.SIGKILL
    finally:
        for proc in (target, vanishing):
            proc.kill()
            proc.wait()


@root_only
def test_a_float_cpu_limit_is_set_not_refused():
    """`grade --timeout 600` used to hand the jail cpu_s=600.0, and setrlimit
    refused it: every kernel died."""
    done = _run_jailed("import resource; print('CPU', resource.getrlimit(resource.RLIMIT_CPU)[0])",
                       Limits(memory_mb=1024, cpu_s=600.0, wall_s=600.0))
    assert done.returncode == 0, done.stderr
    assert "CPU 600" in done.stdout.split("\n")


def test_grade_timeout_gives_integer_limits(monkeypatch):
    from autograder import __main__ as cli
    from autograder.grading import batch
    seen = []
    monkeypatch.setattr(batch, "grade_all", lambda opts: seen.append(opts) or [])
    assert cli.main(["grade", "--timeout", "600", "--no-progress"]) == 0
    assert seen[0].limits.cpu_s == 600 and isinstance(seen[0].limits.cpu_s, int), seen[0].limits
    assert seen[0].limits.wall_s == 600


@pytest.mark.parametrize("value", ["0", "-5", "nan"])
def test_grade_timeout_must_be_a_positive_number(value, capsys):
    from autograder import __main__ as cli
    with pytest.raises(SystemExit):
        cli.main(["grade", "--timeout", value])
    assert "--timeout" in capsys.readouterr().err


@root_only
def test_a_group_signal_reaches_the_command_once():
    """jupyter_client interrupts a kernel with killpg(SIGINT) on the process
    group it started: the command must get it exactly once."""
    code = ("import signal, sys, time\n"
            "got = []\n"
            "signal.signal(signal.SIGINT, lambda *a: got.append(1))\n"
            "print('READY', flush=True)\n"
            "end = time.time() + 20\n"
            "while not got and time.time() < end: time.sleep(0.01)\n"
            "time.sleep(0.5)\n"
            "print('GOT', len(got), flush=True)\n"
            "sys.exit(3)\n")
    with _probe_jail(code) as (_, cmd, env):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True, cwd="/", start_new_session=True)
        assert proc.stdout.readline().strip() == "READY"
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert out.split() == ["GOT", "1"]
    assert proc.returncode == 3, "the command's exit code did not pass through"


@root_only
def test_the_survivor_check_sees_a_running_jobs_processes_and_only_its_own(tmp_path):
    """The batches' "no jailed process survives" check must be able to fail,
    and must not count another grader's jobs on the same machine."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    code = "import os, time\nos.chdir('/')\nprint('READY', flush=True)\ntime.sleep(60)\n"  # leaves its folder
    with _probe_jail(code) as (_, cmd, env):
        proc = subprocess.Popen(cmd, env={**env, DATA_ENV_VAR: str(ours)}, stdout=subprocess.PIPE, text=True, cwd="/")
        try:
            assert proc.stdout.readline().strip() == "READY"
            found, other = jailed_survivors(ours), jailed_survivors(theirs)
        finally:
            proc.kill()
            proc.wait()
    assert len(found) == 2, f"expected the job's init and its command, found {found}"  # the outside process is root
    assert other == []


@root_only
def test_a_command_ended_by_a_signal_ends_the_jail_with_128_plus_it():
    """The jail's init cannot die of a signal the job sends, so it reports
    one as a shell does; a kernel manager sees the kernel gone either way."""
    done = _run_jailed("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    assert done.returncode == 128 + signal.SIGTERM, (done.returncode, done.stderr)


# ---------------------------------------------------------------------------
# kernel keyrings, and totals for the whole job

KEYCTL_READ, KEY_SPEC_USER_KEYRING = 11, -4
ADD_KEY, REQUEST_KEY, KEYCTL = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}.get(os.uname().machine,
                                                                                             (None,) * 3)
known_machine = pytest.mark.skipif(ADD_KEY is None, reason="the keyring system call numbers of this machine "
                                                           "are not in the test")

# Tries each keyring call, as a job passing data to a later one would.
KEYRING_USER = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
def outcome(result):
    return "allowed" if result >= 0 else os.strerror(ctypes.get_errno())
tried = {{"add_key": outcome(libc.syscall({add_key}, b"user", b"tl-{token}", b"captured test cell", 17, -4)),
         "request_key": outcome(libc.syscall({request_key}, b"user", b"tl-{token}", None, 0)),
         "keyctl": outcome(libc.syscall({keyctl}, 0, -4, 0))}}
print("KEYS", json.dumps(tried))
"""


def _as_uid(uid: int, action) -> int:
    """What action() returns (an int) when run as `uid`; -1 if it raised."""
    return int(in_fork(action, uid) or -1)


def _plant_key() -> int:
    """What a job did where keyrings were open: a key in its uid's user
    keyring that anyone may read (possessor all, user and other view+read).
    Its serial, or a negative step number."""
    libc = _libc()
    # as a login session has it: a session keyring of its own with the user keyring linked in (so the key is
    # possessed and its permissions may be set)
    if libc.syscall(KEYCTL, 1, None) < 0 or libc.syscall(KEYCTL, 8, KEY_SPEC_USER_KEYRING, -3) < 0:
        return -3
    serial = libc.syscall(ADD_KEY, b"user", f"tl-{TOKEN}".encode(), b"captured test cell", 18, KEY_SPEC_USER_KEYRING)
    if serial < 0:
        return -4
    if libc.syscall(KEYCTL, 5, serial, 0x3F030303) < 0:  # KEYCTL_SETPERM
        return -5
    return serial


def _read_key(serial: int) -> int:
    """0 when the key `serial` can be read (by this process's uid)."""
    buf = ctypes.create_string_buffer(64)
    return 0 if _libc().syscall(KEYCTL, KEYCTL_READ, serial, buf, 64) >= 0 else 1


@root_only
@known_machine
def test_a_job_cannot_use_kernel_keyrings():
    """Keys belong to a uid, not to a namespace, and jail uids are reused:
    a key was a channel to a later job (and to a kernel's own recheck child)."""
    done = _run_jailed(KEYRING_USER.format(add_key=ADD_KEY, request_key=REQUEST_KEY, keyctl=KEYCTL, token=TOKEN))
    assert done.returncode == 0, done.stderr
    tried = _line(done.stdout, "KEYS")
    assert tried == {k: "Operation not permitted" for k in ("add_key", "request_key", "keyctl")}, tried
    assert "[jail]" not in done.stderr, done.stderr
    # the control: outside the jail the same calls are not refused
    assert _libc().syscall(KEYCTL, 0, KEY_SPEC_USER_KEYRING, 0) >= 0


@root_only
@known_machine
def test_a_key_left_under_a_jail_uid_is_gone_after_release():
    """Where a key got in anyway (a host without the filter), releasing the
    jail clears its uid's keyrings: another uid cannot read it after."""
    reader = 4_000_000 + int(TOKEN[:4], 16)  # a uid nothing else runs under
    with Jail.reserve(Limits(memory_mb=1024, cpu_s=60)) as jail:
        serial = _as_uid(jail.uid, _plant_key)
        assert serial > 0, f"could not plant a key (step {serial})"
        readable_before = _as_uid(reader, lambda: _read_key(serial)) == 0
    readable_after = _as_uid(reader, lambda: _read_key(serial)) == 0
    assert readable_before, "the planted key was not readable by another uid: the test proves nothing"
    assert not readable_after, f"key {serial} of uid {jail.uid} outlived the job and is readable by another uid"


BOMB = """
import os, time
children, error = [], ""
try:
    while len(children) < 5000:
        pid = os.fork()
        if pid == 0:
            end = time.monotonic() + {spin_s}
            while time.monotonic() < end:
                pass
            os._exit(0)
        children.append(pid)
except OSError as err:
    error = f"{{type(err).__name__}}: {{err}}"
print("BOMB", len(children), error, flush=True)
"""


@root_only
def test_a_fork_bomb_is_capped_and_leaves_nothing():
    """Spinning children until fork fails, left spinning when the job's
    command exits: their number stays under the job's task cap, the job
    ends with the error fork raised, and no process or cgroup is left.
    (Their CPU share, the job cgroup's cpu limit, is not measured: on a
    shared two-core machine the load of others decides it.)"""
    limits = Limits(memory_mb=1024, cpu_s=60, nproc=48, cpus=1.0)
    with _probe_jail(BOMB.format(spin_s=60), limits) as (jail, cmd, env):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd="/")
        cgroups = list(jail.cgroup.folders)
    left, uid = still_running(processes_of_uid(jail.uid)), jail.uid
    assert done.returncode == 0, done.stderr
    line = next(l for l in done.stdout.splitlines() if l.startswith("BOMB "))
    _, count, error = line.split(" ", 2)
    assert 0 < int(count) < limits.nproc, line
    assert "Resource temporarily unavailable" in error, line
    assert not left and not any(Path(f).exists() for f in cgroups), f"uid {uid} left {left}, cgroups {cgroups}"


# Several processes, each under the address-space limit, that together hold
# more than it: each touches its block, then waits until all have.
HOARD = """
import os, select, signal, sys
n, block_mb = 3, {block_mb}
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
children = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        block = bytearray(block_mb << 20)
        block[::4096] = b"x" * len(range(0, len(block), 4096))  # touch every page
        os.write(ready_w, b"!")
        os.read(go_r, 1)
        os._exit(0)
    children.append(pid)
held = 0
while held < n and select.select([ready_r], [], [], 20)[0]:  # a killed child never reports
    held += len(os.read(ready_r, n))
""" + """
os.write(go_w, b"x" * n)
statuses = [os.waitpid(pid, 0)[1] for pid in children]
print("HOARD", sum(os.WIFSIGNALED(s) and os.WTERMSIG(s) == signal.SIGKILL for s in statuses), flush=True)
"""


@root_only
def test_processes_of_one_job_together_hold_no_more_than_its_memory():
    """3 children of 400 MB each under a 1024 MB job: today each fits its
    own RLIMIT_AS and all three hold their blocks (1.2 GB); with the job's
    cgroup at least one is killed."""
    limits = Limits(memory_mb=1024, cpu_s=60)
    with _probe_jail(HOARD.format(block_mb=400), limits) as (jail, cmd, env):
        if "memory" not in jail.cgroup.controllers:
            pytest.skip(f"this host gives no job cgroup with a memory limit: {jail.cgroup.describe()}")
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd="/")
        out, err = done.stdout, done.stderr
    killed = next((int(l.split()[1]) for l in out.splitlines() if l.startswith("HOARD ")), None)
    assert killed is not None and killed >= 1, f"all three blocks were held together: {out} {err}"


FILLER = """
import json, os
def fill(folder, prefix, mb):
    written = 0
    try:
        for i in range(mb // 32):
            with open(os.path.join(folder, f"{{prefix}}{{i}}"), "wb") as fh:
                for _ in range(32):
                    fh.write(b"x" * (1 << 20))
                    written += 1
        return [written, "no error"]
    except OSError as err:
        return [written, err.strerror]
out = {{"folder": fill(".", "big", {folder_mb}), "tmp": fill("/tmp", "a", {scratch_mb} // 2 + 32),
        "shm": fill("/dev/shm", "b", {scratch_mb} // 2 + 32)}}
print("FILLED", json.dumps(out))
"""


@root_only
def test_a_job_cannot_fill_its_folder_or_its_tmpfs_past_the_caps():
    """More than the cap into the job's folder (host disk, today) and into
    /tmp plus /dev/shm (256 MB of RAM each, today): each write past the cap
    fails with ENOSPC, and nothing reaches the host's disk."""
    limits = Limits(memory_mb=1024, cpu_s=60)
    with _probe_jail(FILLER.format(folder_mb=limits.folder_mb + 64, scratch_mb=limits.scratch_mb), limits) \
            as (jail, cmd, env):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd="/")
        on_disk = os.statvfs(jail.base).f_blocks * os.statvfs(jail.base).f_frsize
    assert done.returncode == 0, done.stderr
    filled = _line(done.stdout, "FILLED")
    assert filled["folder"][1] == "No space left on device" and filled["folder"][0] <= limits.folder_mb, filled
    together = filled["tmp"][0] + filled["shm"][0]
    assert "No space left on device" in (filled["tmp"][1], filled["shm"][1]) and together <= limits.scratch_mb, filled
    assert on_disk == limits.folder_mb * 1024 * 1024, "the job's folder is not its own capped tmpfs"
    assert not jail_folder_left(jail), "the job's folder outlived its release"


def jail_folder_left(jail: Jail) -> bool:
    return Path(jail.base).exists() or any(jail.base in line for line in open("/proc/self/mountinfo"))


# ---------------------------------------------------------------------------
# one grader batch

A = "01_embeddings"
# Graded in this order; the daemon last, so that on a jail where it survives
# it cannot spoil the uid for the submissions that test something else.
STUDENTS = ("control", "ipc_1_leave", "ipc_2_find", "z_hop_daemon")


def _with_code(code: str) -> nbformat.NotebookNode:
    """Honest answers, with `code` run first in the first answer cell."""
    answers = specimens.solution_answers(A)
    first = next(iter(answers))
    answers[first] = code + "\n" + answers[first]
    return specimens.notebook(A, answers)


def _grade_isolation_batch(data: Path) -> dict:
    from autograder.grading.batch import Options, grade_all
    specimens.submit(data, "control", A, specimens.honest(A))
    count = f"/tmp/hops-{TOKEN}"  # in the job's private /tmp
    specimens.submit(data, "z_hop_daemon", A, _with_code(HOPPER.format(token=TOKEN, count=count)))
    specimens.submit(data, "ipc_1_leave", A, _with_code(LEAVER.format(key=SYSV_KEY, token=TOKEN)))
    others = [s for s in STUDENTS if s != "ipc_2_find"] + [f"decoy-{TOKEN}"]
    try:
        with _decoy(), _run_socket() as sock, recording_jails() as bases:
            specimens.submit(data, "ipc_2_find", A, _with_code(
                FINDER.format(key=SYSV_KEY, token=TOKEN, students=others, sock=sock)))
            opts = Options(assignments=[A], workers=1, cell_timeout=60, progress=False,
                           limits=Limits(memory_mb=3072, wall_s=300, cpu_s=300))
            results = {r["student"]: r for r in grade_all(opts)}
            hoppers, survivors = still_running(_hoppers()), jailed_survivors(data, bases)
        host = _host_leftovers()
    finally:
        _remove_host_leftovers()
        _kill_hoppers()
    outputs = {s: _outputs(data, s) for s in STUDENTS}
    return {"results": results, "outputs": outputs, "hoppers": hoppers, "survivors": survivors, "host": host,
            "jails": len(bases)}


def _outputs(data: Path, student: str) -> str:
    path = data / "autograded" / student / A / f"{A}.ipynb"
    if not path.is_file():
        return ""
    nb = nbformat.read(str(path), as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    return shared_batch(tmp_path_factory, "grader_isolation", _grade_isolation_batch)


def batch_test(fn):
    """Marks of a test that reads the one grader batch."""
    for mark in (pytest.mark.grader, pytest.mark.slow, root_only,
                 pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")):
        fn = mark(fn)
    return fn


@batch_test
@pytest.mark.parametrize("student", STUDENTS)
def test_batch_honest_answers_keep_their_points(batch, student):
    """Every submission here answers honestly; the attacks ride along."""
    r = batch["results"][student]
    assert (r["score"], r["max_score"], r["status"]) == (7, 7, "graded"), r


@batch_test
def test_batch_what_one_submission_left_the_next_does_not_find(batch):
    left = _line(batch["outputs"]["ipc_1_leave"], "LEFT")
    _assert_left_everything(left)
    found = _line(batch["outputs"]["ipc_2_find"], "FOUND")
    assert not any(found[k] for k in left), f"a later submission found what an earlier one left: {found}"
    assert not any(batch["host"].values()), f"a submission left objects on the host: {batch['host']}"


@batch_test
def test_batch_no_submission_sees_other_students_or_host_sockets(batch):
    found = _line(batch["outputs"]["ipc_2_find"], "FOUND")
    assert not found["decoy"] and found["students"] == [], f"student ids visible in /proc: {found}"
    assert found["run_socket"] != "connected", "a submission reached a socket under /run"


@batch_test
def test_batch_no_daemon_outlives_its_submission(batch):
    assert "HOPPING" in batch["outputs"]["z_hop_daemon"], "the daemon never started: the test proves nothing"
    assert batch["jails"] >= len(STUDENTS), "the batch's jails were not recorded"
    assert not batch["hoppers"], "forks of the daemon outlived grading"
    assert not batch["survivors"], "a jailed process of this batch outlived grading"

