"""A warm fork server for jailed processes: the jail without a fresh Python.

Every jailed kernel and recheck child is a `python -I -m MODULE` that imports
torch (and ipykernel) again: seconds per submission. A warm grading pool
starts one server for all its workers (engines/warm_pool.py),

    with WarmJailServer() as server:      # python -I ... autograder.grading.sandbox.warm_jail FOLDER
        server.wait_ready()
        env = server.env()                # TINYLM_WARM_JAIL=FOLDER/socket: the workers' environment;
                                          # nbgrader and the recheck pass it on to their jails

which imports public code only (torch, tinylm, autograder.checks, the
ipykernel kernel app, matplotlib.pyplot) and then waits on a Unix socket.
`python -m autograder.grading.sandbox.jail -- COMMAND` (the client, in
warm_client.py; started by the kernel manager or the recheck as before)
sees TINYLM_WARM_JAIL and, when COMMAND is
`python -I -m MODULE ...` with MODULE in ALLOWED_MODULES, hands the server
its stdin, stdout and stderr (SCM_RIGHTS) with the jail settings, COMMAND and
the jail's environment. The process tree is

    client (python -m autograder.grading.sandbox.jail, as before)
      ...socket...  server -> supervisor -> job = jail_init.run's outside process -> init -> MODULE

The server only accepts and forks a supervisor per connection (it never
reads a request, so no job's data is in the memory later jobs fork from).
The supervisor reads the request and forks the job, which runs the same
jail_init.run as a cold start (namespaces, init, uid switch, limits), whose last
step, instead of os.execve, does what execve and Python's start would have
done (environ, sys.path, signals, fds, dumpable, std streams) and runs
MODULE with runpy. The client stays the process its starter knows: the
supervisor passes its signals on to the job and sends back the job's exit
status; when the client dies (a SIGKILL from the kernel manager), its
socket closes and the supervisor SIGKILLs the job's outside process, whose
init and namespace follow at once. Each process of the chain dies with its
parent (PR_SET_PDEATHSIG), and the server with the thread that started it
(the same signal; EOF on its stdin when that process closes it), so closing
the server, or killing its owner, leaves nothing behind.

Why isolation is unchanged: a fork is a fresh address space, and it holds
only what the server holds, which is public code and the server's minimal
environment (PASSED_ENV; no database URL, no secret): the server never reads
solutions, notebooks, submissions or the gradebook, and runs no torch
computation (thread pools and fork do not mix). Only the server's own uid
may ask for a job (SO_PEERCRED), the socket lies in a 0700 folder under
/tmp, which every jail covers with an empty tmpfs, and the jailed side runs
under another uid in its own network namespace. Anything the server does not
accept runs cold, exactly as without it; an unreachable server means cold,
silently (a kernel's stderr output fails a graded cell).
"""
from __future__ import annotations

import io
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from . import jail_init
from ..wire import JsonFrames, send_json
from .warm_client import ALLOWED_MODULES, ENV_VAR, warm_module

# Public modules the jailed side imports anyway (every notebook imports
# matplotlib.pyplot: its import builds the font list, ~0.7 s in a fresh
# jail HOME; every notebook's checks run the learner's function on the meta
# device, whose first Python decomposition imports torch._dynamo and sympy,
# ~1.4 s of CPU in each kernel; importing it starts no thread). Not the
# modules run as __main__ (runpy would warn that they were imported already).
PRELOAD = ("torch", "tinylm", "autograder.checks", "ipykernel.kernelapp", "ipykernel.ipkernel", "matplotlib.pyplot",
           "torch._dynamo")
# Read when Python starts or a preloaded library loads (locale, OpenMP and
# MKL thread counts, matplotlib's backend): a job whose value differs from
# the server's runs cold.
STARTUP_ENV = ("LANG", "LC_ALL", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TZ", "MPLBACKEND")


# ---------------------------------------------------------------------------
# server

def _peer_uid(conn: socket.socket) -> int:
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                           struct.calcsize("3i")))
    return uid


def _refusal(request: dict, fds: list[int]) -> str | None:
    """Why the server will not run this request warm (None: it will)."""
    command, env = request.get("command"), request.get("env")
    if len(fds) != 3:
        return "the request must pass stdin, stdout and stderr"
    if not isinstance(command, list) or not all(isinstance(a, str) for a in command) or not warm_module(command):
        return "not an allowed `python -I -m MODULE` command"
    if os.path.realpath(command[0]) != os.path.realpath(sys.executable):
        return "another interpreter"
    if not isinstance(env, dict) or any(env.get(k) != os.environ.get(k) for k in STARTUP_ENV):
        return "a startup variable differs from the server's"
    settings = request.get("settings")
    if not isinstance(settings, dict) or not {"base", "uid", "limits", "copy", "hide", "expose"} <= settings.keys():
        return "incomplete jail settings"
    return None


class _Server:
    """Accepts connections of its own uid and forks a supervisor for each.
    It never reads a request: what one job asked (its student's notebook
    path, its jail) stays out of the memory later jobs are forked from."""

    def __init__(self, socket_path: str, cold_path: list[str]):
        self.cold_path = cold_path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(socket_path)
        self.listener.listen(64)
        self.log = Path(socket_path).parent / "jobs.log"  # one line per warm job: its module
        self.supervisors: set[int] = set()
        self.wake_r, self.wake_w = _wakeup_pipe()
        self.stopping = False

    def serve(self) -> None:
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("ready", flush=True)
        while not self.stopping:
            ready, _, _ = select.select([0, self.listener, self.wake_r], [], [])
            if 0 in ready:  # stdin, a pipe from the process that started it (a warm pool): EOF when it is gone
                self.stopping = not os.read(0, 4096)
            if self.wake_r in ready:
                os.read(self.wake_r, 4096)
                self.supervisors -= _reaped()
            if self.listener in ready:
                self._accept()
        for pid in self.supervisors:
            _kill(pid)  # their jobs follow (PR_SET_PDEATHSIG)

    def _stop(self, *_):
        self.stopping = True

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        try:
            if _peer_uid(conn) == os.getuid():  # a jailed uid never gets a job
                server = os.getpid()
                pid = os.fork()
                if pid == 0:
                    _Supervisor(self, conn).run(server)
                self.supervisors.add(pid)
        except OSError:
            pass
        finally:
            conn.close()


def _wakeup_pipe() -> tuple[int, int]:
    """A pipe that SIGCHLD wakes select() on."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    return r, w


def _reaped() -> set[int]:
    """The children that ended since the last call (reaped now)."""
    done = set()
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done.add(pid)


class _Supervisor:
    """One connection, forked from the server: reads the request, forks the
    job (the jail's outside process), passes the client's signals on,
    SIGKILLs the job when the client goes, and reports the job's status."""

    def __init__(self, server: _Server, conn: socket.socket):
        self.conn, self.cold_path, self.log = conn, server.cold_path, server.log
        self.parent_fds = (server.listener, server.wake_r, server.wake_w)

    def run(self, server: int) -> None:
        code = 1
        try:
            _die_with(server)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            self.wake_r, self.wake_w = _wakeup_pipe()  # first: the server's is closed next
            os.close(self.parent_fds[0].detach())  # detached: no socket object closes a reused fd number later
            os.close(self.parent_fds[1])
            os.close(self.parent_fds[2])
            code = self._supervise()
        except BaseException:  # never back into the server's loop
            pass
        finally:
            os._exit(code)

    def _supervise(self) -> int:
        conn, reader = self.conn, JsonFrames(self.conn)
        conn.settimeout(5.0)  # a stuck client must not hold a supervisor for long
        request = reader.next_frame() or {}
        why = _refusal(request, reader.fds)
        if why:
            send_json(conn, {"accepted": False, "why": why})
            return 0
        supervisor = os.getpid()
        job = os.fork()
        if job == 0:
            self._job(request, reader.fds, supervisor)
        for fd in reader.fds:
            os.close(fd)
        with open(self.log, "a") as log:
            log.write(warm_module(request["command"]) + "\n")
        send_json(conn, {"accepted": True})
        conn.settimeout(None)
        while True:
            ready, _, _ = select.select([conn, self.wake_r], [], [])
            if self.wake_r in ready:
                os.read(self.wake_r, 4096)
                pid, status = os.waitpid(job, os.WNOHANG)
                if pid == job:
                    send_json(conn, {"exit": jail_init.exit_status(status)})
                    return 0
            if conn in ready:
                try:
                    alive = reader.feed()
                except (OSError, ValueError):
                    alive = False
                for frame in reader.take():
                    if frame.get("signal") in {int(s) for s in jail_init.FORWARDED_SIGNALS}:
                        os.kill(job, frame["signal"])  # not reaped yet, so the pid is still the job's
                if not alive:  # the client died (the kernel manager's kill): end the job now
                    _kill(job)
                    return 0

    def _job(self, request: dict, fds: list[int], supervisor: int) -> None:
        """The forked job: the jail's outside process. Never returns."""
        status = 1
        try:
            signal.set_wakeup_fd(-1)
            for signum in (signal.SIGCHLD, *jail_init.FORWARDED_SIGNALS):
                signal.signal(signum, signal.SIG_DFL)
            _die_with(supervisor)
            os.close(self.conn.detach())
            for fd in (0, self.wake_r, self.wake_w):
                os.close(fd)
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            for fd in fds:
                if fd > 2:
                    os.close(fd)
            settings = request["settings"]
            # Where a cold job's processes start: tests find a job's processes by its folder.
            os.chdir(settings["base"])
            status = jail_init.run(settings, list(request["command"]), dict(request["env"]),
                              start=lambda _path, argv, env: _start_in_process(argv, env, self.cold_path))
        except BaseException:  # never back into the supervisor's loop
            pass
        finally:
            os._exit(status)


def _die_with(parent: int) -> None:
    """SIGKILL this (just forked) process when `parent` dies; exit now if it already has."""
    if not jail_init.die_with_starter(parent):
        os._exit(1)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------------------
# the job's command, in place of execve

def _as_fresh_process(env: dict, cold_path: list[str]) -> None:
    """What execve and a cold `python -I` start would have given: only the
    jail's environment, the isolated sys.path (no working folder, no user
    site), default signal handlers, no inherited fds but 0-2, fresh std
    streams, a dumpable process (so its /proc files are its own), fresh
    random seeds."""
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = cold_path
    for signum in (signal.SIGCHLD, signal.SIGTERM, *jail_init.FORWARDED_SIGNALS):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGPIPE, signal.SIGXFSZ):  # as Python's start does
        signal.signal(signum, signal.SIG_IGN)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # Python opens every fd close-on-exec
    sys.stdin = sys.__stdin__ = _std_stream(0, "rb", os.isatty(0))
    sys.stdout = sys.__stdout__ = _std_stream(1, "wb", os.isatty(1))
    sys.stderr = sys.__stderr__ = _std_stream(2, "wb", True, errors="backslashreplace")
    jail_init.load_libc().prctl(jail_init.PR_SET_DUMPABLE, 1, 0, 0, 0)  # execve did this after the uid switch
    if "numpy" in sys.modules:  # its global generator was seeded once, in the server
        sys.modules["numpy"].random.seed()


def _std_stream(fd: int, mode: str, line_buffering: bool, errors: str | None = None) -> io.TextIOWrapper:
    """A standard stream as Python's start makes it, on the job's fd."""
    return io.TextIOWrapper(open(fd, mode, closefd=False), encoding=sys.__stdout__.encoding, errors=errors,
                            line_buffering=line_buffering)


def _start_in_process(argv: list[str], env: dict, cold_path: list[str]) -> None:
    """Run `python -I -m MODULE ARGS` in this (jailed, forked) process, then
    end as the interpreter would: non-daemon threads joined, atexit
    handlers run, streams flushed. Never returns."""
    import runpy
    import threading
    import atexit
    module = warm_module(argv)
    code = 1
    try:
        _as_fresh_process(env, cold_path)
        sys.modules.pop(module, None)  # run as __main__, as `-m` does, not the preloaded copy
        sys.argv = [argv[0], *argv[4:]]  # runpy puts the module's file in sys.argv[0]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = 128 + signal.SIGINT
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    try:
        threading._shutdown()
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    finally:
        os._exit(code)


def _exit_code(code) -> int:
    """SystemExit's code as the interpreter turns it into an exit status."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def serve(folder: str, cold_path: list[str]) -> None:
    """The server's main: preload, then serve on FOLDER/socket. Dies with
    the thread that started it (a warm pool's owner), by the kernel's
    signal, and ends without the interpreter's teardown of torch (seconds on
    a busy machine, while a dead pool's jobs should stop at once)."""
    import importlib
    if not jail_init.die_with_starter():
        os._exit(1)
    for name in PRELOAD:
        importlib.import_module(name)
    _Server(str(Path(folder) / "socket"), cold_path).serve()
    sys.stdout.flush()
    os._exit(0)


# ---------------------------------------------------------------------------
# the side of the process that starts it (a warm pool)

def server_env() -> dict:
    """The server's whole environment: what a jail passes on, nothing else
    (no database URL, no secret); HOME is its own folder."""
    env = {k: os.environ[k] for k in jail_init.PASSED_ENV if k in os.environ}
    env.setdefault("OMP_NUM_THREADS", "1")  # what the grader gives every jail (sandbox.course_env_for_jail)
    env["MPLBACKEND"] = "Agg"  # what jail_init.main gives every job
    return env


class WarmJailServer:
    """One warm server for a warm pool's workers. Cheap to start: jobs run
    cold until it has imported torch and listens (wait_ready to block)."""

    def __init__(self):
        jail_init.JAIL_BASE.mkdir(mode=0o711, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix="warm-", dir=jail_init.JAIL_BASE))  # 0700, the grader's
        self.socket_path = self.folder / "socket"
        # `python -I` as the jobs run, plus the grader's own checkout (its
        # code is what the jobs would import from the install, or a newer copy).
        root = str(Path(__file__).resolve().parents[2])
        boot = ("import sys; cold = list(sys.path); sys.path.insert(0, sys.argv[1]); "
                "from autograder.grading.sandbox.warm_jail import serve; serve(sys.argv[2], cold)")
        self.proc = subprocess.Popen([sys.executable, "-I", "-c", boot, root, str(self.folder)],
                                     env={**server_env(), "HOME": str(self.folder)}, cwd=self.folder,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)

    def wait_ready(self, timeout: float = 120.0) -> None:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else b""
        if line.strip() != b"ready":
            exited = self.proc.poll()
            self.close()
            raise RuntimeError("the warm jail server " + (f"exited with status {exited} while starting"
                                                           if exited is not None else
                                                           f"did not start within {timeout:.0f} s"))

    def env(self) -> dict:
        return {ENV_VAR: str(self.socket_path)}

    def jobs(self) -> list[str]:
        """The module of every job run warm so far, in order."""
        log = self.folder / "jobs.log"
        return log.read_text().split() if log.is_file() else []

    @property
    def pid(self) -> int:
        return self.proc.pid

    def close(self) -> None:
        """Stop the server; its jobs die with it (PR_SET_PDEATHSIG)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            pipe.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()



def main(argv: list[str]) -> int:
    """python -m autograder.grading.sandbox.warm_jail -- COMMAND: run COMMAND (a grading run,
    a test battery) with a warm jail server and TINYLM_WARM_JAIL set."""
    if argv[:1] != ["--"] or len(argv) < 2:
        print("usage: python -m autograder.grading.sandbox.warm_jail -- COMMAND ...", file=sys.stderr)
        return 2
    with WarmJailServer() as server:
        server.wait_ready()
        code = subprocess.call(argv[1:], env={**os.environ, **server.env()})
        jobs = server.jobs()
        print(f"warm jail server: {len(jobs)} warm jobs ("
              + ", ".join(f"{jobs.count(m)} {m}" for m in sorted(ALLOWED_MODULES)) + ")", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
