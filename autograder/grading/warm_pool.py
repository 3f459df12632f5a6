"""Warm grading workers: the fixed costs of grading paid once per worker.

A cold grade of one submission starts an `nbgrader autograde` process and a
trusted recheck process, each importing nbgrader or torch afresh (seconds per
submission, see benchmarks/bench_autograde.py). Here a worker process is
started once, cleanly (`python -m autograder.grading.warm_pool --worker`, an exec, not
a fork of the threaded caller), imports all of that once, and then, per
submission:

  worker (trusted, warm, single-threaded)
    └─ grading child: fork, own session; runs grade.grade_one with
         ├─ nbgrader child: fork; NbGraderApp with the CLI's arguments
         │    (grade.nbgrader_args, same config, environment and jail);
         │    its kernel is started jailed, as before
         └─ recheck child: fork; limit_memory (RLIMIT_AS as the cold
              recheck process), recheck_notebook, verdicts back as JSON
              over a pipe; its learner child is started jailed, as before

A fork is a fresh address space, so nothing one submission does in the
worker's children reaches the next; learner code never runs in these forks,
only in the jailed processes they start. The worker and its forks are the
grader's own code, trusted like the cold grader's processes. Limits.wall_s
bounds the nbgrader child and the recheck child each (as it bounds the cold
processes); the grading child and the worker have wider backstops.

Jails: every Jail.reserve in a worker's children is noted in the worker's
jail log; a jail whose process was killed before it could release it (a
timeout, a worker killed) is released from that log (its uid's processes
killed, its folder removed) by the worker or, when the worker died, by the
pool.

API (thread-safe; the only one other engines need):

    with WarmPool(workers=2) as pool:           # starts 2 worker processes
        result = pool.grade(submission, options)  # grade.grade_one's result dict

`submission` is a grade.Submission, `options` a grade.Options whose db_url
is already resolved (grade_all does it; gradebook.db_url(None) otherwise)
and whose assignments are registered (gradebook.ensure_assignments).

A worker that dies mid-submission is replaced and the submission retried
once; a second loss, or a worker that does not answer within its backstop,
gives an error row (status "error", nothing recorded), never a hang. A bug in
the grader inside a worker gives the same error row as grade._safe_grade_one.
"""
from __future__ import annotations

import fcntl
import json
import os
import pickle
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .recheck import receive, send

WORKER_ARGS = ["-m", "autograder.grading.warm_pool", "--worker"]
JAIL_LOG_ENV = "TINYLM_WARM_JAIL_LOG"
# Seconds beyond its per-stage limits that a grading child, then a worker,
# may take before it is killed (intake, database, forks, jail clean-up).
GRADING_MARGIN_S = 60.0
WORKER_MARGIN_S = 60.0


# The worker's own request and reply pipes: closed in its children, so a
# worker's death is seen by the pool at once, whatever its children do.
_WORKER_FDS: list[int] = []


# Called, in the pool's process, with the folder of every jail a worker's
# children reserved for a graded submission (tests/grader_batch.py's
# recording_jails tells its batch's jailed processes from other graders' by them).
JAIL_LISTENERS: list = []


class WorkerLost(RuntimeError):
    """A worker process died or stopped answering."""


# --------------------------------------------------------------------------
# pool side (any process, any thread)

class _Worker:
    """One warm worker process and its pipes."""

    def __init__(self, scratch: Path, number: int, warm_jail: bool):
        self.jail_log = scratch / f"worker-{number}-jails.log"
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        env[JAIL_LOG_ENV] = str(self.jail_log)
        args = [sys.executable, *WORKER_ARGS, *([] if warm_jail else ["--cold-jail"])]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                     start_new_session=True)

    def ask(self, message, timeout: float):
        """Send one request, wait for its reply; WorkerLost if the worker dies or overruns."""
        try:
            send(self.proc.stdin.fileno(), pickle.dumps(message))
            return pickle.loads(receive(self.proc.stdout.fileno(), time.monotonic() + timeout))
        except (OSError, EOFError) as err:
            raise WorkerLost(f"the grading worker (pid {self.proc.pid}) ended: {err or type(err).__name__}") from None
        except TimeoutError:
            raise WorkerLost(f"the grading worker (pid {self.proc.pid}) gave no answer within {timeout:.0f} s") \
                from None

    def stop(self, kill: bool = False) -> None:
        """End the worker (EOF on its requests, or SIGKILL) and release any
        jail its children left."""
        if not kill:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                kill = True
        if kill:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        release_left_jails(self.jail_log)


class WarmPool:
    """`workers` warm worker processes; grade() is thread-safe and blocks
    until a worker is free. Workers inherit this process's environment as it
    is when the pool is made (course data folder, gradebook URL). With
    warm_jail, each worker runs a fork server for its jailed processes
    (autograder.grading.warm_jail, where present); without, they start cold."""

    def __init__(self, workers: int = 1, warm_jail: bool = True):
        if int(workers) < 1:
            raise ValueError(f"WarmPool(workers={workers!r}): workers must be at least 1")
        self._scratch = Path(tempfile.mkdtemp(prefix="tinylm-warm-"))
        self._numbers = iter(range(1 << 30))
        self._lock = threading.Lock()
        self._idle: queue.Queue = queue.Queue()
        self._workers: set = set()
        self._closed = False
        self._warm_jail = warm_jail
        for _ in range(int(workers)):
            self._idle.put(self._start())

    def _start(self) -> _Worker:
        with self._lock:
            worker = _Worker(self._scratch, next(self._numbers), self._warm_jail)
            self._workers.add(worker)
            return worker

    def _replace(self, worker: _Worker) -> _Worker:
        worker.stop(kill=True)
        with self._lock:
            self._workers.discard(worker)
        return self._start()

    def pids(self) -> list[int]:
        """The worker processes' ids (for tests and monitoring)."""
        with self._lock:
            return [w.proc.pid for w in self._workers]

    def grade(self, submission, options) -> dict:
        """grade.grade_one(submission, options) in a warm worker."""
        from .grade import error_row
        if self._closed:
            raise RuntimeError("WarmPool.grade after close()")
        worker = self._idle.get()
        backstop = 2 * options.limits.wall_s + GRADING_MARGIN_S + WORKER_MARGIN_S
        try:
            for attempt in (1, 2):
                try:
                    kind, value, jails = worker.ask(("grade", submission, options), backstop)
                except WorkerLost as err:
                    worker = self._replace(worker)
                    if attempt == 2 or "no answer" in str(err):
                        return error_row(submission, f"{err}; a fresh worker took its place")
                    continue
                for listener in list(JAIL_LISTENERS):
                    for base in jails:
                        listener(base)
                return value if kind == "result" else error_row(submission, value)
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        """Stop every worker (waiting for none of them to finish a submission
        is needed: close after the grade() calls returned)."""
        self._closed = True
        with self._lock:
            workers, self._workers = list(self._workers), set()
        for worker in workers:
            worker.stop()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --------------------------------------------------------------------------
# jail bookkeeping (worker and pool)

def _note_jails(log: Path) -> None:
    """In a worker's child: note every jail reserved from now on in `log`."""
    from .jail import Jail
    reserve = Jail.reserve.__func__

    def noted(cls, *args, **kwargs):
        jail = reserve(cls, *args, **kwargs)
        with open(log, "a") as fh:
            fh.write(json.dumps({"uid": jail.uid, "base": jail.base}) + "\n")
        return jail
    Jail.reserve = classmethod(noted)


# A killed fork's own forks (nbgrader, recheck) hold its jail's uid lock
# until their death signal lands: wait that long for the lock.
LOCK_WAIT_S = 5.0


def _lock_within(lock, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def release_left_jails(log: Path) -> list[str]:
    """Release the jails noted in `log` whose folder still exists: their
    process ended without releasing them. The uid's lock is taken first, so a
    uid another grader reserved meanwhile is left to that grader. Empties the
    log; returns the folders of all the jails it noted."""
    from .jail import JAIL_BASE, kill_uid
    try:
        lines = log.read_text().splitlines()
    except OSError:
        return []
    noted = []
    for line in lines:
        jail = json.loads(line)
        noted.append(jail["base"])
        if not Path(jail["base"]).exists():
            continue
        with open(JAIL_BASE / f"uid-{jail['uid']}.lock", "w") as lock:
            if not _lock_within(lock, LOCK_WAIT_S):
                continue  # reserved again by a live job, whose release kills what the uid still runs
            if os.geteuid() == 0:
                kill_uid(jail["uid"])
            shutil.rmtree(jail["base"], ignore_errors=True)
    log.write_text("")
    return noted


# --------------------------------------------------------------------------
# worker side

# Imported once per worker: nbgrader's apps (all of them, with the
# preprocessors and the gradebook's sqlalchemy), torch, the course library,
# the checks and the grading modules the forks run.
PRELOAD = ("nbgrader.apps.nbgraderapp", "nbgrader.apps.autogradeapp", "torch", "tinylm", "autograder.checks",
           "autograder.notebook_format", "autograder.grading.grade", "autograder.grading.preprocessors",
           "autograder.grading.recheck", "autograder.grading.sandbox")


def _preload() -> None:
    import importlib
    for name in PRELOAD:
        importlib.import_module(name)


def _fork_child(session: bool) -> int:
    """fork; in the child, die with the parent (which is single-threaded
    here, so the death signal follows the process) and optionally lead a
    new session (so the parent can kill the child's whole group)."""
    pid = os.fork()
    if pid == 0:
        import ctypes
        for fd in _WORKER_FDS:
            os.close(fd)
        _WORKER_FDS.clear()
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:
            os._exit(1)
        if session:
            os.setsid()
    return pid


def _wait_child(pid: int, read_fd: int, deadline: float, abandon_fd: int | None = None
                ) -> tuple[bytes | None, int | None]:
    """The child's whole reply on read_fd (None if it did not come by the
    deadline, or abandon_fd became readable first) and its exit status (None
    if it was killed here)."""
    import select
    chunks = []
    watched = [read_fd] if abandon_fd is None else [read_fd, abandon_fd]
    while True:
        left = deadline - time.monotonic()
        ready = select.select(watched, [], [], left)[0] if left > 0 else []
        if read_fd not in ready:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            os.close(read_fd)
            return None, None
        chunk = os.read(read_fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    return b"".join(chunks), os.waitstatus_to_exitcode(status)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def run_nbgrader_in_fork(sub, opts, jail) -> tuple[int, str]:
    """grade._run_nbgrader's contract ((exit code, log)), with nbgrader's
    app run in a fork of this warm process instead of a new interpreter."""
    from .. import course
    from .grade import nbgrader_args, nbgrader_env_for
    log = Path(tempfile.mkstemp(prefix="nbgrader-", suffix=".log", dir=jail.base)[1])
    read_fd, write_fd = os.pipe()
    pid = _fork_child(session=False)
    if pid == 0:
        os.close(read_fd)
        code = 1
        try:
            out = os.open(log, os.O_WRONLY | os.O_APPEND)
            os.dup2(out, 1)
            os.dup2(out, 2)
            args, env = nbgrader_args(sub, opts, jail), nbgrader_env_for(jail)
            os.chdir(course.AUTOGRADER_DIR)
            os.environ.clear()  # what the CLI process would have had, and nothing else
            os.environ.update(env)
            from nbgrader.apps.nbgraderapp import NbGraderApp
            try:
                NbGraderApp.launch_instance(argv=args)
                code = 0
            except SystemExit as err:
                code = err.code if isinstance(err.code, int) else 1
        except BaseException:  # noqa: BLE001: reported through the log, like the CLI's traceback
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            _write_all(write_fd, str(code).encode())
            os._exit(code)
    os.close(write_fd)
    reply, status = _wait_child(pid, read_fd, time.monotonic() + opts.limits.wall_s)
    text = log.read_text(errors="replace")
    log.unlink()
    if reply is None:
        return -1, text + f"\nstopped after the {opts.limits.wall_s:.0f} s per-submission limit"
    return (status if status is not None else -1), text


def run_recheck_in_fork(assignment: str, notebook, limits) -> dict:
    """recheck.recheck_submission's contract, the trusted recheck run in a
    fork of this warm process: `python -m autograder.grading.recheck` with
    the same arguments (its main sets the same address-space limit), run as
    __main__ by runpy, so that what it pickles for the jailed child names
    the same classes as the cold process's would; its JSON comes back over
    a pipe."""
    from .. import course
    from .recheck import parse_output, recheck_args
    read_fd, write_fd = os.pipe()
    pid = _fork_child(session=False)
    if pid == 0:
        os.close(read_fd)
        code = 1
        try:
            import runpy
            import warnings
            os.dup2(write_fd, 1)
            os.chdir(course.ROOT)
            os.environ.update(OMP_NUM_THREADS="1", NBGRADER_EXECUTION="autograde")
            sys.argv = ["autograder.grading.recheck", *recheck_args(assignment, notebook, limits)]
            warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy")  # "already imported": we know
            try:
                runpy.run_module("autograder.grading.recheck", run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as err:
                code = err.code if isinstance(err.code, int) else 1
        except BaseException as err:  # noqa: BLE001: the recheck did not complete; the grade says so
            print(f"\n{type(err).__name__}: {err}")
        finally:
            sys.stdout.flush()
            os._exit(code)
    os.close(write_fd)
    reply, status = _wait_child(pid, read_fd, time.monotonic() + limits.wall_s)
    lines = (reply or b"").decode(errors="replace").strip().splitlines()
    if reply is None:
        reason = f"the recheck took longer than {limits.wall_s:.0f} s"
    elif status == 0 and lines:
        try:
            return parse_output("\n".join(lines))
        except ValueError:
            reason = "its trusted process ended without verdicts"
    else:
        reason = lines[-1] if lines else f"its trusted process ended with status {status}"
    return {"__error__": {"status": "error", "message": f"the recheck did not complete: {reason}"[:500]}}


def _grade_in_fork(sub, opts, jail_log: Path) -> tuple[str, object, list[str]]:
    """One submission in a fresh grading child: ("result", dict, jails) or
    ("error", text, jails), jails being the folders of the jails it used."""
    read_fd, write_fd = os.pipe()
    pid = _fork_child(session=True)
    if pid == 0:
        os.close(read_fd)
        try:
            from . import grade
            _note_jails(jail_log)
            result = grade.grade_one(sub, opts, run_nbgrader=run_nbgrader_in_fork, run_recheck=run_recheck_in_fork)
            payload = pickle.dumps(("result", result))
        except BaseException as err:  # noqa: BLE001: a bug in the grader becomes one error row
            payload = pickle.dumps(("error", f"{type(err).__name__}: {err}"))
        send(write_fd, payload)
        os._exit(0)
    os.close(write_fd)
    # The pool sends nothing while it waits for this reply: its pipe turns
    # readable only when the pool's process is gone (EOF); then stop at once.
    reply, _ = _wait_child(pid, read_fd, time.monotonic() + 2 * opts.limits.wall_s + GRADING_MARGIN_S,
                           abandon_fd=_WORKER_FDS[0] if _WORKER_FDS else None)
    try:
        os.killpg(pid, signal.SIGKILL)  # anything of its group still running (nothing, normally)
    except (ProcessLookupError, PermissionError):
        pass
    jails = release_left_jails(jail_log)
    if not reply:
        return "error", (f"grading stopped: it took longer than {2 * opts.limits.wall_s + GRADING_MARGIN_S:.0f} s"
                         if reply is None else "grading stopped: the grading process ended without a result"), jails
    return (*pickle.loads(reply[8:]), jails)


def _warm_jail_server():
    """This worker's fork server for jailed processes (autograder.grading.
    warm_jail), its address put in the environment the kernels' and the
    recheck children's jails inherit; None (jailed processes start cold)
    where the module is absent or the server does not come up."""
    try:
        from .warm_jail import WarmJailServer
    except ImportError:
        return None
    server = WarmJailServer()
    try:
        server.wait_ready()
    except RuntimeError as err:
        print(f"warm grading worker: {err}; jailed processes start cold", file=sys.stderr)
        return None
    os.environ.update(server.env())
    _WORKER_FDS.extend(pipe.fileno() for pipe in (server.proc.stdin, server.proc.stdout))
    return server


def worker_main(warm_jail: bool) -> int:
    """Serve grade requests on stdin until EOF; replies on stdout."""
    requests, replies = os.dup(0), os.dup(1)
    _WORKER_FDS.extend((requests, replies))
    os.dup2(2, 1)  # stray prints go to stderr, never into the reply stream
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    server = _warm_jail_server() if warm_jail else None
    _preload()
    jail_log = Path(os.environ[JAIL_LOG_ENV])
    try:
        while True:
            try:
                kind, sub, opts = pickle.loads(receive(requests))
            except EOFError:
                return 0
            try:
                send(replies, pickle.dumps(_grade_in_fork(sub, opts, jail_log)))
            except BrokenPipeError:  # the pool's process is gone
                return 0
    finally:
        if server is not None:
            server.close()


if __name__ == "__main__":
    if sys.argv[1:2] != ["--worker"] or sys.argv[2:] not in ([], ["--cold-jail"]):
        print(f"usage: {JAIL_LOG_ENV}=FILE python -m autograder.grading.warm_pool --worker [--cold-jail]"
              "  (started by WarmPool)", file=sys.stderr)
        sys.exit(2)
    sys.exit(worker_main(warm_jail=sys.argv[2:] != ["--cold-jail"]))
