"""Grading on a Dask distributed cluster: `python -m autograder grade --scheduler ADDRESS`.

One Dask task per submission. The task carries what another machine needs:
the student, the assignment, the submitted folder's files as bytes, the
grading options, and a fingerprint of the assignment (its source notebook
with the hidden tests, its release notebook and data files). On the worker:

  1. the worker refuses (WorkerSetupError, which stops the run) when its
     checkout's assignment differs from the client's, or when its course
     data folder is the client's own (it would overwrite the submissions);
  2. it writes the files into its OWN course data folder
     ($TINYLM_COURSE_DATA of the worker, else .course/ of its checkout), as
     `collect` would have left them;
  3. the worker thread's grading child (a process started once per worker
     thread and kept between tasks) grades it there: the same intake,
     jailed `nbgrader autograde --force`, trusted recheck and reconcile as
     a single-machine run, writing the shared PostgreSQL gradebook. With
     Options.warm (the default, as on one machine) the child grades through
     a warm worker of its own (grading/engines/warm_pool.py, started at its first
     warm task and kept), so nbgrader and torch are imported once per
     worker thread, not once per submission; with warm False it runs
     grade.grade_one's cold processes;
  4. it returns the result dict and the autograded folder's files, and
     removes its copies. The client writes results/ and autograded/ in its
     own data folder, so `feedback` and `export` work as after a local run.

Why a child process: a Dask worker is multi-threaded (never fork there), and
when a worker dies its tasks run again elsewhere, so whatever the dead
worker started must stop writing to the gradebook. The child is a
subprocess (no fork of the worker), a child subreaper, and reads its
requests from a pipe of the worker: when the pipe closes (the worker ended
or died, also in the middle of a grading), the child kills everything it
started (its warm worker and that worker's forks, nbgrader, jails,
recheck) and exits. When the worker is killed, the kernel itself does it
at once, whatever the load: the child dies with the worker thread that
started it (PR_SET_PDEATHSIG), and each process below it with its own
parent (warm worker and fork, nbgrader, the jail's first process, its init). A task is idempotent: nbgrader autograde --force for that one
student replaces the submission's grades, and gradebook.override then sets
exactly the final scores; the gradebook keeps one submission row per
student and assignment (nbgrader's unique constraint).

Rescheduling is Dask's own: a task whose worker is lost runs again on
another worker, up to the scheduler's `distributed.scheduler.allowed-failures`
times (Dask's default 3); beyond that the client records an error row
for the submission, which the next run retries.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path, PurePosixPath

from ... import course
from .. import gradebook
from ..errors import GradingError
from ..grade import safe_grade_one
from ..intake.notebook import drop_symlinks
from ..records import (GradeResult, Submission, error_row, nbgrader_log_file, original_path, released_data,
                       write_result)
from ..wire import receive, send
from ..sandbox.jail_init import die_with_starter
from .warm_pool import WarmPool

CHILD_FLAG = "--grading-child"
MODULE = "autograder.grading.engines.cluster"  # `python -m MODULE CHILD_FLAG`: the grading child
# Submissions in flight at once per worker thread: enough to keep every
# worker busy while the client reads the next folders, without holding a
# whole class's notebooks in the client's memory.
IN_FLIGHT_PER_THREAD = 2
CLIENT_MARK = ".grading-client-{token}"
PR_SET_CHILD_SUBREAPER = 36
INSTALL_HINT = "pip install 'tinylm-course[cluster]' (dask.distributed and psycopg), on the client and every worker"


class WorkerSetupError(RuntimeError):
    """A worker that cannot grade for this client (another course version,
    the client's own data folder): the run stops with this message."""


def require_shared_gradebook(url: str) -> None:
    if url.startswith("sqlite"):
        raise GradingError(f"--scheduler needs a gradebook every worker can write, not the SQLite file "
                         f"{url[len('sqlite:///'):]} on this machine: give --db-url "
                         "postgresql+psycopg://USER@HOST/DATABASE (or set "
                         f"{gradebook.ENV_VAR}) on a PostgreSQL server the workers can reach")


def fingerprint(assignment: str) -> str:
    """What grading an assignment depends on in a checkout: the source
    notebook (hidden tests, points), the release notebook and its data."""
    h = hashlib.sha256()
    for path in [course.source_notebook(assignment), course.release_notebook(assignment),
                 *released_data(assignment)]:
        h.update(path.name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"missing") + b"\0")
    return h.hexdigest()


def folder_files(folder: Path) -> dict[str, bytes]:
    """{path relative to folder: bytes} of every regular file under folder."""
    if not folder.is_dir():
        return {}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def write_files(folder: Path, files: dict[str, bytes]) -> None:
    """Replace folder with exactly `files` (relative paths, never leaving it)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for rel, data in files.items():
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"refusing the file name {rel!r}: not a plain relative path")
        dest = folder.joinpath(*parts)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)


def _one_component(name: str, what: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"refusing the {what} name {name!r}: not one folder name")
    return name


# ---- worker side ------------------------------------------------------------------------------

def grade_task(task: dict) -> dict:
    """Runs on a Dask worker: grade one submission in this worker's own
    course data folder. Returns {"result": ..., "autograded": {path: bytes}}."""
    student = _one_component(task["student"], "student")
    assignment = _one_component(task["assignment"], "assignment")
    where = f"worker {os.uname().nodename}:{os.getpid()} (checkout {course.ROOT}, data {gradebook.data_dir()})"
    if assignment not in course.assignments() or fingerprint(assignment) != task["fingerprint"]:
        raise WorkerSetupError(f"{where} has another version of {assignment} than the client (its solutions/, "
                               "notebooks/ or data files differ): check out the same commit on every machine")
    if (gradebook.data_dir() / CLIENT_MARK.format(token=task["client_token"])).exists():
        raise WorkerSetupError(f"{where} uses the client's own course data folder and would overwrite its "
                               f"submissions: start the worker with {gradebook.DATA_ENV_VAR}=<a folder of its own>")
    sub = Submission(student, assignment)
    autograded = gradebook.folder("autograded") / student / assignment
    try:
        write_files(sub.folder, task["files"])
        original_path(sub).unlink(missing_ok=True)
        if task["original"] is not None:
            original_path(sub).write_bytes(task["original"])
        result = grade_in_child(sub, task["options"])
        log = nbgrader_log_file(sub)
        return {"result": result, "autograded": folder_files(autograded),
                "nbgrader_log": log.read_text(errors="replace") if log.is_file() else None}
    finally:  # the worker keeps no student's files between tasks
        shutil.rmtree(sub.folder, ignore_errors=True)
        original_path(sub).unlink(missing_ok=True)
        sub.result_file.unlink(missing_ok=True)
        nbgrader_log_file(sub).unlink(missing_ok=True)
        shutil.rmtree(autograded, ignore_errors=True)
        for student_folder in (sub.folder.parent, autograded.parent):
            try:
                student_folder.rmdir()  # only when empty: another task may grade this student's other notebook
            except OSError:
                pass


# One grading child per worker thread, kept between tasks: it imports the
# grader (nbgrader included) once, not once per submission.
_thread_child = threading.local()


def grade_in_child(sub, opts) -> GradeResult:
    """Grade sub in this thread's grading child (warm or cold, per opts.warm), which
    stops, with everything it started, if this process dies (see the module's
    docstring). Its stderr is the worker's (its log)."""
    proc = getattr(_thread_child, "proc", None)
    if proc is None or proc.poll() is not None:
        proc = _thread_child.proc = subprocess.Popen(
            [sys.executable, "-m", MODULE, CHILD_FLAG], cwd=course.ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        send(proc.stdin.fileno(), pickle.dumps((sub.student, sub.assignment, opts)))
        reply = receive(proc.stdout.fileno())
    except (OSError, EOFError, ValueError):  # the child ended, or sent what is no message
        reply = None
    if reply is None:
        _thread_child.proc = None
        proc.kill()
        raise RuntimeError(f"the grading child ended (exit status {proc.wait()}); its error is in the worker's log")
    return pickle.loads(reply)


class _ChildGrader:
    """How the grading child grades: through one warm worker, started at
    the first warm request and kept (a Dask worker thread sends one task at
    a time), or cold (Options.warm False)."""

    def __init__(self):
        self.pool = None

    def grade(self, sub, opts) -> GradeResult:
        if not getattr(opts, "warm", True):
            return safe_grade_one(sub, opts)
        if self.pool is None:
            self.pool = WarmPool(workers=1)
        return self.pool.grade(sub, opts)


def _child_main() -> None:
    """Grade the submissions the worker thread sends, one at a time, until
    its pipe closes. The pipe is read by a watching thread: at its end (the
    worker ended or died, also in the middle of a grading) everything this
    child started is killed at once and the child exits, without waiting
    on anything. A warm worker killed under a grading makes WarmPool retry
    that grading in a fresh worker: one started after the last sweep finds
    its requests' pipe closed when this child exits, and ends without
    grading (warm_worker abandons a grading fork as soon as that pipe
    closes)."""
    import ctypes
    import queue
    libc = ctypes.CDLL(None, use_errno=True)
    # This child belongs to the worker thread that started it (one per thread, _thread_child), which
    # waits on it for each task: die with that thread, a SIGKILLed worker runs no clean-up of its own.
    if not die_with_starter():
        os._exit(1)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of nbgrader and the jails stay our descendants
    requests, replies = 0, os.dup(1)  # the worker's pipes; sys.stdin is never read
    os.dup2(2, 1)  # stray prints go to stderr, never into the replies
    inbox: queue.Queue = queue.Queue()
    grader = _ChildGrader()

    def watch_parent():
        while True:
            try:
                inbox.put(receive(requests))
            except (EOFError, ValueError, OSError):
                break
        # The worker closes the pipe only when it needs no more replies (it
        # ends, or died): whatever runs under this child is not wanted.
        _kill_descendants()
        sys.stderr.flush()
        os._exit(0)
    threading.Thread(target=watch_parent, daemon=True).start()
    while True:
        student, assignment, opts = pickle.loads(inbox.get())
        send(replies, pickle.dumps(grader.grade(Submission(student, assignment), opts)))


def _kill_descendants(within_s: float = 10.0) -> None:
    """SIGKILL every process under this one (we are their subreaper, so
    orphans count), until none is left."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        parents = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            parents[int(pid)] = int(stat.rsplit(")", 1)[1].split()[1])
        ours, frontier = set(), {os.getpid()}
        while frontier:
            frontier = {p for p, parent in parents.items() if parent in frontier} - ours
            ours |= frontier
        if not ours:
            return
        for pid in ours:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.05)


# ---- client side ------------------------------------------------------------------------------

def _client(address: str):
    try:
        from distributed import Client
    except ImportError:
        raise GradingError(f"--scheduler needs dask.distributed: {INSTALL_HINT}") from None
    try:
        return Client(address, timeout="30s")
    except (OSError, TimeoutError) as err:
        raise GradingError(f"cannot reach the Dask scheduler at {address!r} ({err}): start one with "
                         "`dask scheduler` and give its address, e.g. --scheduler tcp://HOST:8786") from None


def make_task(sub, opts, token: str, fingerprints: dict[str, str]) -> dict:
    original = original_path(sub)
    return {"student": sub.student, "assignment": sub.assignment, "files": folder_files(sub.folder),
            "original": original.read_bytes() if original.is_file() else None,
            "options": opts, "fingerprint": fingerprints[sub.assignment], "client_token": token}


def grade_on_cluster(subs: list, opts, on_result) -> list[GradeResult]:
    """Grade `subs` on the cluster at opts.scheduler; write each result and
    autograded folder locally as it arrives, then call on_result(result)."""
    from distributed import as_completed  # dask: imported where a cluster is used, as it is an extra

    require_shared_gradebook(opts.db_url)
    if not subs:
        return []
    token = uuid.uuid4().hex
    mark = gradebook.data_dir() / CLIENT_MARK.format(token=token)
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text("a grading client reads submissions from this folder: a Dask worker must not grade in it\n")
    fingerprints = {a: fingerprint(a) for a in {s.assignment for s in subs}}
    results = []
    with _client(opts.scheduler) as client:
        threads = sum(client.nthreads().values())
        print(f"Dask scheduler {opts.scheduler}: {len(client.nthreads())} workers, {threads} threads"
              + ("" if threads else " (the tasks wait until a worker joins)"), flush=True)
        window = max(8, IN_FLIGHT_PER_THREAD * threads)
        pending, links, submission_of = iter(subs), {}, {}

        def submit_next(queue) -> None:
            sub = next(pending, None)
            if sub is None:
                return
            # what grade_one would do to the local folder first, and say in its result
            links[sub] = drop_symlinks(sub.folder)
            future = client.submit(grade_task, make_task(sub, opts, token, fingerprints), pure=False,
                                   key=f"grade-{sub.assignment}-{sub.student}-{uuid.uuid4().hex[:8]}")
            submission_of[future.key] = sub
            queue.add(future)

        queue = as_completed()
        try:
            for _ in range(window):
                submit_next(queue)
            for future in queue:
                sub = submission_of.pop(future.key)
                if future.status == "error" and isinstance(future.exception(), WorkerSetupError):
                    raise GradingError(f"stopped: {future.exception()}")
                if future.status != "finished":
                    result = _failed(sub, future)
                else:
                    out = future.result()
                    result = out["result"]
                    result["problems"] = links[sub] + result["problems"]
                    if out["autograded"]:
                        write_files(gradebook.folder("autograded") / sub.student / sub.assignment,
                                    out["autograded"])
                    if "digest" in result:  # graded (not a grader error row): record it as grade_one does
                        write_result(sub, result)
                    if out.get("nbgrader_log") is not None:  # kept for the instructor, as on one machine
                        nbgrader_log_file(sub).write_text(out["nbgrader_log"])
                future.release()
                results.append(result)
                on_result(result)
                submit_next(queue)
        finally:
            mark.unlink(missing_ok=True)
    return results


def _failed(sub, future) -> GradeResult:
    """The error row of a submission whose task did not finish on the
    cluster (e.g. its worker died allowed-failures + 1 times): the row a
    grader error gives in a local run; nothing is recorded, the next run retries."""
    try:
        error = future.exception()
    except BaseException as err:  # noqa: BLE001: a cancelled future raises instead of returning its error
        error = err
    return error_row(sub, f"on the Dask cluster, {type(error).__name__}: {error}")


# ---- a cluster on this machine (tests, benchmarks, trying it out) -------------------------------

class LocalGradingCluster:
    """A `dask scheduler` and `dask worker` processes on this machine, each
    worker with its own course data folder under root, one thread, no
    nanny (so `worker_pids` are the processes that run the tasks)."""

    def __init__(self, root: Path, workers: int, allowed_failures: int = 3):
        self.root = Path(root)
        self.procs: list[subprocess.Popen] = []
        self.worker_data: list[Path] = []
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(course.ROOT),
               "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": str(allowed_failures)}
        env.pop(gradebook.ENV_VAR, None)
        dask = [str(Path(sys.executable).parent / "dask")]
        scheduler_file = self.root / "scheduler.json"
        self.root.mkdir(parents=True, exist_ok=True)
        self._start(dask + ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                            "--scheduler-file", str(scheduler_file)], env, "scheduler")
        self.address = self._wait_for_address(scheduler_file)
        for i in range(workers):
            data = self.root / f"worker{i}" / "course"
            data.mkdir(parents=True, exist_ok=True)
            self.worker_data.append(data)
            self._start(dask + ["worker", self.address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                                "--host", "127.0.0.1", "--name", f"worker{i}",
                                "--local-directory", str(data.parent / "dask")],
                        {**env, gradebook.DATA_ENV_VAR: str(data)}, f"worker{i}")
        self.worker_pids = [p.pid for p in self.procs[1:]]
        self._wait_for_workers(workers)

    def _start(self, cmd: list[str], env: dict, name: str) -> None:
        log = open(self.root / f"{name}.log", "wb")
        self.procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.root))

    def _wait_for_address(self, scheduler_file: Path, within_s: float = 60) -> str:
        import json
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            try:
                return json.loads(scheduler_file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                if self.procs[0].poll() is not None:
                    break
                time.sleep(0.2)
        self.close()
        raise RuntimeError(f"the Dask scheduler did not start: see {self.root / 'scheduler.log'}")

    def _wait_for_workers(self, n: int, within_s: float = 120) -> None:
        from distributed import Client
        with Client(self.address, timeout="30s") as client:
            try:
                client.wait_for_workers(n, timeout=within_s)
            except TimeoutError:
                self.close()
                raise RuntimeError(f"{n} Dask workers did not join within {within_s} s: see {self.root}/worker*.log")

    def close(self) -> None:
        """Workers first, then the scheduler (a worker whose scheduler went first logs errors)."""
        for group in (self.procs[1:], self.procs[:1]):
            for proc in group:
                if proc.poll() is None:
                    proc.terminate()
            for proc in group:
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


if __name__ == "__main__" and sys.argv[1:] == [CHILD_FLAG]:
    _child_main()
