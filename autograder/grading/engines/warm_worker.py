"""The warm grading worker: `python -m autograder.grading.engines.warm_worker --worker`,
started by autograder.grading.engines.warm_pool.WarmPool (read its docstring for the
design). It imports nbgrader, torch and the grading modules once, then for
each request forks a fresh grading child that runs grade.grade_one with
nbgrader and the trusted recheck in forks of their own; replies go back as
pickles (the pool is the grader's own process, trusted like this one).
"""
from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import tempfile
import time
from pathlib import Path

# nbgrader (imported below, through grade) brings nbformat, which brings jsonschema, whose guarded import of
# the optional rfc3987_syntax (installed for jupyter-events) builds a Lark grammar for the "iri" format: about
# 1.3 s of CPU, a quarter of this worker's start, paid again by every grading run. Nothing graded here checks
# a format (nbformat validates without a FormatChecker), so the grammar would never be used; the None entry
# makes that import fail as if the package were absent. Only in this trusted process and its forks: a kernel
# or recheck child is a process of its own, and the worker is only ever run (`-m`), never imported.
sys.modules.setdefault("rfc3987_syntax", None)

from ... import course  # noqa: E402 (after the entry above)
from .. import grade
from ..recheck.protocol import MODULE as RECHECK_MODULE
from ..recheck.run import how_it_ended, parse_output, recheck_args
from ..records import error_row
from ..sandbox.jail import Jail, job_view
from ..sandbox.kernel import as_jail_starter
from ..sandbox.jail_init import die_with_starter
from ..wire import receive, send, unframe
from .warm_pool import GRADING_MARGIN_S, JAIL_LOG_ENV, release_left_jails

# The worker's own request and reply pipes: closed in its children, so a
# worker's death is seen by the pool at once, whatever its children do.
_WORKER_FDS: list[int] = []


def _note_jails(log: Path) -> None:
    """In a worker's child: note every jail reserved from now on in `log`."""
    reserve = Jail.reserve.__func__

    def noted(cls, *args, **kwargs):
        jail = reserve(cls, *args, **kwargs)
        with open(log, "a") as fh:
            fh.write(json.dumps({"uid": jail.uid, "base": jail.base}) + "\n")
        return jail
    Jail.reserve = classmethod(noted)


# Imported once per worker: nbgrader's apps (all of them, with the
# preprocessors and the gradebook's sqlalchemy), torch, the course library,
# the checks and the grading modules the forks run; and what the trusted
# recheck's fork would import for every submission: matplotlib.pyplot (the
# setup cells import it) and torch._dynamo (the first Python decomposition
# on the meta device imports it, with sympy: the accounting checks' references).
PRELOAD = ("nbgrader.apps.nbgraderapp", "nbgrader.apps.autogradeapp", "torch", "tinylm", "autograder.checks",
           "autograder.notebook_format", "autograder.grading.grade", "autograder.grading.preprocessors",
           "autograder.grading.recheck.run", "autograder.grading.sandbox.kernel", "matplotlib.pyplot", "torch._dynamo")


def _preload() -> None:
    import importlib
    for name in PRELOAD:
        importlib.import_module(name)
    job_view()  # asks `python -I` for its path, and reads the kept view, once here, not once per grading fork


def _fork_child(session: bool) -> int:
    """fork; in the child, die with the parent (which is single-threaded
    here, so the death signal follows the process) and optionally lead a
    new session (so the parent can kill the child's whole group)."""
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        for fd in _WORKER_FDS:
            os.close(fd)
        _WORKER_FDS.clear()
        if not die_with_starter(parent):  # adopted (by init or a subreaper) before it could tie its life to ours
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


def _exit_status(main) -> int:
    """Call a command's main in this process: the status the command would
    have exited with (0 when it returns, SystemExit's code otherwise)."""
    try:
        main()
        return 0
    except SystemExit as err:
        return err.code if isinstance(err.code, int) else 0 if err.code is None else 1


def autograde_in_fork(sub, opts, jail) -> tuple[int, str]:
    """grade.autograde_in_jail's contract ((exit code, log)), with nbgrader's
    app run in a fork of this warm process instead of a new interpreter."""
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
            args, env = grade.nbgrader_args(sub, opts, jail), grade.nbgrader_env_for(jail)
            os.chdir(course.AUTOGRADER_DIR)
            os.environ.clear()  # what the CLI process would have had, and nothing else
            os.environ.update(as_jail_starter(env))  # nbgrader's kernel jails are started by this fork
            from nbgrader.apps.nbgraderapp import NbGraderApp
            code = _exit_status(lambda: NbGraderApp.launch_instance(argv=args))
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
    text = grade.read_log_tail(log)
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
            sys.argv = [RECHECK_MODULE, *recheck_args(assignment, notebook, limits)]
            warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy")  # "already imported": we know
            code = _exit_status(lambda: runpy.run_module(RECHECK_MODULE, run_name="__main__", alter_sys=True))
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
        reason = how_it_ended("\n".join(lines), status)
    return {"__error__": {"status": "error", "message": f"the recheck did not complete: {reason}"[:500]}}


def _grade_in_fork(sub, opts, jail_log: Path) -> tuple[str, object, list[str]]:
    """One submission in a fresh grading child: ("result", dict, jails) or
    ("error", text, jails), jails being the folders of the jails it used."""
    read_fd, write_fd = os.pipe()
    pid = _fork_child(session=True)
    if pid == 0:
        os.close(read_fd)
        try:
            _note_jails(jail_log)
            result = grade.grade_one(sub, opts, autograde=autograde_in_fork, run_recheck=run_recheck_in_fork)
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
    return (*pickle.loads(unframe(reply)), jails)


def worker_main() -> int:
    """Serve grade requests on stdin until EOF; replies on stdout. Dies with
    the pool's thread that started it (the pool's owner, or a grading thread
    that replaced a lost worker: both outlive their gradings), by the
    kernel's signal: a pool that is killed runs no clean-up of its own."""
    if not die_with_starter():
        return 1
    requests, replies = os.dup(0), os.dup(1)
    _WORKER_FDS.extend((requests, replies))
    os.dup2(2, 1)  # stray prints go to stderr, never into the reply stream
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    _preload()
    jail_log = Path(os.environ[JAIL_LOG_ENV])
    while True:
        try:
            kind, sub, arg = pickle.loads(receive(requests))
        except EOFError:
            return 0
        if kind == "error_row":  # for a submission whose worker was lost
            reply = ("result", error_row(sub, arg), [])
        else:
            kind, value, jails = _grade_in_fork(sub, arg, jail_log)
            reply = ("result", value if kind == "result" else error_row(sub, value), jails)
        try:
            send(replies, pickle.dumps(reply))
        except BrokenPipeError:  # the pool's process is gone
            return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["--worker"]:
        print(f"usage: {JAIL_LOG_ENV}=FILE python -m autograder.grading.engines.warm_worker --worker"
              "  (started by WarmPool)", file=sys.stderr)
        sys.exit(2)
    code = worker_main()
    # Everything the worker started has ended (its forks and their jails);
    # the interpreter's own teardown of torch and nbgrader (over a second)
    # would only make the pool wait.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
