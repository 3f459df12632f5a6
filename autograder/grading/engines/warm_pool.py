"""Warm grading workers: the fixed costs of grading paid once per worker.

A cold grade of one submission starts an `nbgrader autograde` process and a
trusted recheck process, each importing nbgrader or torch afresh (seconds per
submission, see benchmarks/bench_autograde.py). Here a worker process is
started once, cleanly (`python -m autograder.grading.engines.warm_worker --worker`, an exec, not
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

The jailed processes (kernels, recheck children) of all the pool's workers
start from one warm fork server the pool runs (sandbox/warm_jail.py): its
imports are paid once per pool, while the workers import theirs, and it
ends with the pool (or, should the pool's process die, with it: EOF on its
stdin).

Jails: every Jail.reserve in a worker's children is noted in the worker's
jail log; a jail whose process was killed before it could release it (a
timeout, a worker killed) is released from that log (its uid's processes
killed, its folder removed) by the worker or, when the worker died, by the
pool.

API (thread-safe; the only one other engines need):

    with WarmPool(workers=2) as pool:           # starts 2 worker processes
        result = pool.grade(submission, options)  # grade.grade_one's GradeResult

`submission` is a records.Submission, `options` a grade.Options whose db_url
is already resolved (grade_all does it; gradebook.db_url(None) otherwise)
and whose assignments are registered (gradebook.ensure_assignments).

A worker that dies mid-submission is replaced and the submission retried
once; a second loss, or a worker that does not answer within its backstop,
gives an error row (status "error", its gradebook entry at zero), never a
hang. A bug in the grader inside a worker gives the same error row as
grade.safe_grade_one.

This module is the pool's side (it imports nothing of grade: the worker
process does);
the worker's side, which runs grade.grade_one, is autograder.grading.engines.warm_worker.
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

from ..records import ERROR_ROW_NOTE, GradeResult
from ..sandbox.jail import JAIL_BASE, kill_uid
from ..wire import receive, send

WORKER_ARGS = ["-m", "autograder.grading.engines.warm_worker", "--worker"]
JAIL_LOG_ENV = "TINYLM_WARM_JAIL_LOG"
# Seconds beyond its per-stage limits that a grading child, then a worker,
# may take before it is killed (intake, database, forks, jail clean-up).
GRADING_MARGIN_S = 60.0
WORKER_MARGIN_S = 60.0


# Called, in the pool's process, with the folder of every jail a worker's
# children reserved for a graded submission (tests/grading/batches.py's
# recording_jails tells its batch's jailed processes from other graders' by them).
JAIL_LISTENERS: list = []


class WorkerLost(RuntimeError):
    """A worker process died or stopped answering."""


# --------------------------------------------------------------------------
# pool side (any process, any thread)

class _Worker:
    """One warm worker process and its pipes."""

    def __init__(self, scratch: Path, number: int, jail_server_env: dict):
        self.jail_log = scratch / f"worker-{number}-jails.log"
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), **jail_server_env)
        env[JAIL_LOG_ENV] = str(self.jail_log)
        self.proc = subprocess.Popen([sys.executable, *WORKER_ARGS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, start_new_session=True)

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

    def hang_up(self) -> None:
        """EOF on the worker's requests: it ends once its current reply is sent."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def stop(self, kill: bool = False) -> None:
        """End the worker (EOF on its requests, or SIGKILL) and release any
        jail its children left."""
        if not kill:
            try:
                self.hang_up()
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
    warm_jail, the pool runs one fork server that the jailed processes of all
    its workers start from (autograder.grading.sandbox.warm_jail, where
    present); without, they start cold."""

    def __init__(self, workers: int = 1, warm_jail: bool = True):
        if int(workers) < 1:
            raise ValueError(f"WarmPool(workers={workers!r}): workers must be at least 1")
        self._scratch = Path(tempfile.mkdtemp(prefix="tinylm-warm-"))
        self._numbers = iter(range(1 << 30))
        self._lock = threading.Lock()
        self._idle: queue.Queue = queue.Queue()
        self._workers: set = set()
        self._closed = False
        self._jail_server = _start_jail_server() if warm_jail else None
        for _ in range(int(workers)):
            self._idle.put(self._start())
        if self._jail_server is not None:  # it imports while the workers do
            self._jail_server = _when_ready(self._jail_server)

    def _start(self) -> _Worker:
        with self._lock:
            # no server (none wanted, or it did not come up): the worker's jailed processes start cold
            worker = _Worker(self._scratch, next(self._numbers), self._jail_server.env() if self._jail_server else {})
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

    @property
    def jail_server(self):
        """The warm jail server its workers' jailed processes start from
        (None: they start cold); for tests and monitoring."""
        return self._jail_server

    def grade(self, submission, options) -> GradeResult:
        """grade.grade_one(submission, options) in a warm worker."""
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
                        return self._error_row(worker, submission, f"{err}; a fresh worker took its place")
                    continue
                for listener in list(JAIL_LISTENERS):
                    for base in jails:
                        listener(base)
                return value  # the worker made any error row itself
        finally:
            self._idle.put(worker)

    def _error_row(self, worker: _Worker, submission, why: str) -> GradeResult:
        """records.error_row, made by a worker (which has read the course's
        notebooks for its max_score); a bare one if that worker fails too."""
        try:
            return worker.ask(("error_row", submission, why), WORKER_MARGIN_S)[1]
        except WorkerLost:
            return GradeResult(student=submission.student, assignment=submission.assignment, status="error",
                               score=0.0, max_score=0.0, flags=[], cells={},
                               problems=[f"grader error ({why}); {ERROR_ROW_NOTE}"])

    def close(self) -> None:
        """Stop every worker (waiting for none of them to finish a submission
        is needed: close after the grade() calls returned)."""
        self._closed = True
        with self._lock:
            workers, self._workers = list(self._workers), set()
        for worker in workers:
            worker.hang_up()  # all at once: each then ends while the others do
        for worker in workers:
            worker.stop()
        if self._jail_server is not None:  # after the workers: their jailed processes started from it
            self._jail_server.close()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _start_jail_server():
    """The pool's fork server for jailed processes, started, not yet waited
    for; None where autograder.grading.sandbox.warm_jail is absent."""
    try:
        from ..sandbox.warm_jail import WarmJailServer
    except ImportError:
        return None
    return WarmJailServer()


def _when_ready(server):
    """The server once it listens; None where it does not come up (it is
    closed, its socket gone: the workers' jailed processes start cold)."""
    try:
        server.wait_ready()
    except RuntimeError as err:
        print(f"warm grading pool: {err}; jailed processes start cold", file=sys.stderr)
        return None
    return server


# --------------------------------------------------------------------------
# jail bookkeeping (worker and pool)

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
