"""Grade one submission (grade_one), stage by stage, each in its own
processes:

  intake      count the files (over MAX_SUBMISSION_FILES: rejected), read the
              notebook; a malformed one gets a message and zero
  hold        the gradebook holds zero for the submission while it is graded
              (nbgrader stores the kernel's scores, which the code being
              graded may have bent: a grading that stops before reconcile
              leaves zero, never them)
  nbgrader    `nbgrader autograde` for this one student, its kernel started
              through autograder.grading.sandbox.jail (own uid, folder, limits, no
              network), with its stdout and stderr on /dev/null: nothing the
              learner's code writes reaches the log the grader reads
  recheck     autograder.grading.recheck runs the hidden and visible checks again in
              a trusted process against the answer cells run in a jail
  reconcile   a cell keeps its kernel score only if the recheck passes it;
              otherwise (failed, not rechecked, recheck error or absent)
              it scores zero and the submission is flagged
  record      the final scores go to the gradebook, the result (a
              records.GradeResult) to .course/results/<assignment>/<student>.json

The result is written when a submission is done: re-running skips
submissions whose notebook is unchanged since (batch.py), so an interrupted
run resumes and loses nothing.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .. import course
from ..diagnosis_record import capped_diagnosis
from . import deadlines, gradebook
from .escape import printable
from .intake.notebook import drop_symlinks, inspect_submission, rejection, write_repaired
from .preprocessors import autograde_preprocessors
from .recheck.ipython_cells import NOTES
from .recheck.run import SKIPPED_KEY, recheck_submission
from .records import (CellResult, GradeResult, Submission, error_row, max_scores, nbgrader_log_file, original_path,
                      released_data, timing_file, write_result)
from .sandbox.jail import Jail, Limits
from .sandbox.kernel import KERNEL_NAME, dying_with_this_thread, hidden_paths, kernelspec_dir


@dataclass
class Options:
    assignments: list[str]
    students: list[str] | None = None
    workers: int = os.cpu_count() or 1
    cell_timeout: int = 60
    limits: Limits = field(default_factory=Limits)
    db_url: str = ""
    force: bool = False
    recheck: bool = True
    progress: bool = True
    max_output_bytes: int = 64 * 1024
    warm: bool = True            # grade in warm worker processes (grading/engines/warm_pool.py); False: cold processes
    scheduler: str = ""          # a Dask scheduler's address: grade on that cluster (grading/engines/cluster.py)
    skip_tail: bool = True       # leave out the cells after the last graded cell (preprocessors.tail_start)


def nbgrader_args(sub: Submission, opts: Options, jail: Jail) -> list[str]:
    """The `nbgrader autograde` arguments for one submission (the CLI's, and
    the warm worker's AutogradeApp.initialize)."""
    args = ["autograde", sub.assignment, "--student", sub.student, "--force",
            f"--CappedExecute.timing_file={timing_file(sub)}",
            f"--CourseDirectory.db_url={opts.db_url}",
            *(f"--CourseDirectory.{kind}_directory={gradebook.folder(kind)}" for kind in ("submitted", "autograded")),
            f"--Execute.kernel_name={KERNEL_NAME}", f"--Execute.timeout={opts.cell_timeout}",
            "--KernelManager.transport=ipc", f"--KernelManager.ip={jail.rundir / 'kernel'}",
            "--OverwriteCells.add_missing_cells=True", f"--CapOutputBytes.max_bytes={opts.max_output_bytes}",
            f"--CappedExecute.max_output_bytes={opts.max_output_bytes}",
            f"--CappedExecute.skip_tail={opts.skip_tail}"]
    return args + [f"--Autograde.autograde_preprocessors={p}" for p in autograde_preprocessors()]


def nbgrader_env_for(jail: Jail) -> dict:
    """The environment nbgrader runs in (its kernel inherits it: the jail's
    settings, the sandbox kernelspec; no database URL)."""
    env = course.nbgrader_env()
    env.update(jail.env(), JUPYTER_PATH=str(kernelspec_dir()), JUPYTER_RUNTIME_DIR=str(jail.rundir),
               OMP_NUM_THREADS="1")
    env.pop(gradebook.ENV_VAR, None)
    return env


# The most of nbgrader's log the grader keeps (its end, where the errors are):
# the log is nbgrader's own, but nothing that reads it may grow without bound.
LOG_TAIL_BYTES = 256 * 1024
LOG_CUT = "[the grader kept the last {kept} of {total} bytes of nbgrader's log]\n"


class LogTail:
    """The last LOG_TAIL_BYTES of what is fed, however much that is."""

    def __init__(self):
        self.chunks: deque[bytes] = deque()
        self.kept = self.total = 0
        self.lock = threading.Lock()  # a reader thread may still feed while the text is taken

    def feed(self, chunk: bytes) -> None:
        with self.lock:
            self.chunks.append(chunk)
            self.kept += len(chunk)
            self.total += len(chunk)
            while self.kept - len(self.chunks[0]) >= LOG_TAIL_BYTES:
                self.kept -= len(self.chunks.popleft())

    def text(self) -> str:
        with self.lock:
            data = b"".join(self.chunks)[-LOG_TAIL_BYTES:]
        cut = LOG_CUT.format(kept=len(data), total=self.total) if self.total > len(data) else ""
        return cut + data.decode(errors="replace")


def read_log_tail(path: Path) -> str:
    """A log file's LogTail, read in chunks."""
    tail = LogTail()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            tail.feed(chunk)
    return tail.text()


def autograde_in_jail(sub: Submission, opts: Options, jail: Jail) -> tuple[int, str]:
    """`nbgrader autograde` of one submission in a new process, its kernel in
    `jail`: (exit code, the tail of its log)."""
    args = dying_with_this_thread([sys.executable, "-m", "nbgrader", *nbgrader_args(sub, opts, jail)])
    env = nbgrader_env_for(jail)
    proc = subprocess.Popen(args, cwd=course.AUTOGRADER_DIR, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    tail = LogTail()
    reader = threading.Thread(target=lambda: [tail.feed(c) for c in iter(lambda: proc.stdout.read1(1 << 20), b"")],
                              daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=opts.limits.wall_s)
        stopped = ""
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        code, stopped = -1, f"\nstopped after the {opts.limits.wall_s:.0f} s per-submission limit"
        proc.wait()
    reader.join(timeout=5)  # a survivor holding the pipe must not hold grading too
    return code, tail.text() + stopped


# Why nbgrader could not grade a notebook, in the grader's own words: nbgrader's
# log can quote what the kernel sent (an output that broke the notebook format,
# a cell's source), and the learner's code writes what the kernel sends. The
# log itself is kept for the instructor beside the result (nbgrader_log_file).
NBGRADER_FAILURES = (
    (("DeadKernelError", "Kernel died"), "the notebook's kernel died (a crash, os._exit, or its memory limit)"),
    (("CellTimeoutError",), "a cell ran past the per-cell time limit"),
)
WALL_LIMIT = re.compile(r"stopped after the (\d{1,7}) s per-submission limit")


def _nbgrader_error(log: str) -> str:
    """The grader's own words for a failed nbgrader run (never a line of its log)."""
    limit = WALL_LIMIT.findall(log[-4096:])
    if limit:
        return f"stopped after the {limit[-1]} s per-submission limit"
    for keys, words in NBGRADER_FAILURES:
        if any(key in log for key in keys):
            return words
    return "nbgrader could not run it (its log is kept for the instructor)"


# Stages of grade_one, in order, as result["timing"] reports them (seconds;
# the grader's own figures, never shown to learners).
STAGES = ("intake", "nbgrader_start", "kernel_start", "cells", "database", "recheck_start", "recheck_checks",
          "reconcile")


def grade_one(sub: Submission, opts: Options, autograde=None, run_recheck=None) -> GradeResult:
    """Grade one submission, through the stages of the module docstring.
    autograde(sub, opts, jail) -> (exit code, log) and run_recheck(assignment,
    notebook, limits) -> verdicts replace the processes started by default
    (autograde_in_jail and recheck_submission); the warm worker
    (autograder.grading.engines.warm_worker) passes in-process ones."""
    start = time.perf_counter()
    result = GradeResult(student=sub.student, assignment=sub.assignment, flags=[], cells={}, status="graded",
                         problems=[], timing=dict.fromkeys(STAGES, 0.0))
    timing = result["timing"]
    kernel: dict[str, tuple[float, float]] = {}
    with _timed(timing, "intake"):
        gradable = _intake(sub, result)
    if gradable:
        with _timed(timing, "database"):
            _hold(sub, opts)
        if _autograde(sub, opts, result, autograde or autograde_in_jail):
            with _timed(timing, "database"):
                kernel = gradebook.cell_scores(opts.db_url, sub.assignment, sub.student)
    verdicts = _recheck(sub, opts, kernel, result, run_recheck or recheck_submission)
    with _timed(timing, "reconcile"):
        final = reconcile(kernel, verdicts, max_scores(sub.assignment), result)
    with _timed(timing, "database"):
        gradebook.override(opts.db_url, sub.assignment, sub.student, final)
    _record(sub, result, final, start)
    return result


@contextmanager
def _timed(timing: dict[str, float], stage: str):
    """Add the time the block takes to timing[stage]."""
    began = time.perf_counter()
    try:
        yield
    finally:
        timing[stage] += time.perf_counter() - began


def _intake(sub: Submission, result: GradeResult) -> bool:
    """Count the files, read the notebook, repair what the student changed
    in graded cells (the notebook as sent is kept at records.original_path).
    False when it cannot be graded: rejected or malformed (said in result)."""
    rejected = rejection(sub.folder)
    if rejected:
        result.update(status="rejected", digest="rejected")  # no notebook digest: a re-run looks again
        result["problems"].append(rejected)
        return False
    result["problems"] += drop_symlinks(sub.folder)
    # nbgrader reads it (its parser took 103 s on a megabyte of digits, then an OverflowError); never a time here
    removed = deadlines.sane_timestamp_file(sub.folder)
    if removed:
        result["problems"].append(removed)
    original = original_path(sub)
    intake = inspect_submission(original if original.is_file() else sub.notebook,
                                course.release_notebook(sub.assignment))
    result["digest"] = intake.digest
    result["problems"] += intake.problems
    if intake.fatal:
        result["status"] = "malformed"
        return False
    if intake.problems or intake.rewrite:
        if not original.is_file():
            original.write_bytes(sub.notebook.read_bytes())  # keep what the student sent
        write_repaired(intake, sub.notebook)
    return True


def _hold(sub: Submission, opts: Options) -> None:
    """Zero in the gradebook for every cell until reconcile has the final scores."""
    gradebook.override(opts.db_url, sub.assignment, sub.student, dict.fromkeys(max_scores(sub.assignment), 0.0),
                       hold=True)


def _autograde(sub: Submission, opts: Options, result: GradeResult, autograde) -> bool:
    """nbgrader autograde in a jail, timed by its stages; False when it
    failed (said in result, its log kept for the instructor)."""
    timing_file(sub).parent.mkdir(parents=True, exist_ok=True)
    timing_file(sub).unlink(missing_ok=True)
    spawned = time.time()
    with Jail.reserve(opts.limits, copy=[sub.notebook, *released_data(sub.assignment)],
                      hide=hidden_paths(opts.db_url)) as jail:
        code, log = autograde(sub, opts, jail)
    _nbgrader_timing(sub, spawned, time.time(), result["timing"])
    if code != 0:
        result["status"] = "error"
        result["problems"].append(f"the notebook could not be graded: {_nbgrader_error(log)}")
        nbgrader_log_file(sub).parent.mkdir(parents=True, exist_ok=True)
        nbgrader_log_file(sub).write_text(log)
        return False
    return True


def _recheck(sub: Submission, opts: Options, kernel: dict, result: GradeResult, run_recheck) -> dict | None:
    """The recheck's verdicts ({} when the kernel gave no scores to confirm;
    None when the instructor turned the recheck off); what the learner's
    cells ran without there goes to the result's problems."""
    if not opts.recheck:
        return None
    if not kernel:
        return {}
    timing = result["timing"]
    began = time.time()
    verdicts = run_recheck(sub.assignment, sub.notebook, opts.limits)
    _recheck_timing(verdicts.pop("__timing__", None), began, time.time(), timing)
    skipped = verdicts.pop(SKIPPED_KEY, None)
    result["problems"] += [f"{NOTES[key]}: your cells ran without them there; an answer that needs them fails the "
                           "recheck (write it in Python instead)"
                           for key in (skipped if isinstance(skipped, list) else []) if type(key) is str and key in NOTES]
    return verdicts


def _record(sub: Submission, result: GradeResult, final: dict[str, float], start: float) -> None:
    """The totals and timing into the result, and the result to its file."""
    result["score"] = sum(final.values())
    result["max_score"] = sum(c["max_score"] for c in result["cells"].values())
    began = time.perf_counter()
    result["timing"] = {k: round(v, 3) for k, v in result["timing"].items()}
    result["seconds"] = round(time.perf_counter() - start, 1)
    write_result(sub, result)
    result["timing"]["reconcile"] = round(result["timing"]["reconcile"] + time.perf_counter() - began, 3)


def _nbgrader_timing(sub: Submission, spawned: float, ended: float, timing: dict) -> None:
    """Split nbgrader's time by the marks CappedExecute wrote to
    timing_file(sub): start (process, imports, copying, gradebook setup),
    kernel start (until the kernel answered), the cells, and what follows
    (saving grades to the database). Marks that are missing or not in
    order leave it all under start: the timing is never worth a grade."""
    path = timing_file(sub)
    try:
        marks = json.loads(path.read_text())
        points = [float(marks[k]) for k in ("execute_start", "first_cell", "execute_end")]
    except (OSError, ValueError, TypeError, KeyError):
        points = []
    path.unlink(missing_ok=True)
    if not points or points != sorted(points) or not spawned <= points[0] <= points[-1] <= ended:
        timing["nbgrader_start"] += ended - spawned
        return
    began, first_cell, last = points
    timing["nbgrader_start"] += began - spawned
    timing["kernel_start"] += first_cell - began
    timing["cells"] += last - first_cell
    timing["database"] += ended - last


def _recheck_timing(marks: dict | None, began: float, ended: float, timing: dict) -> None:
    """The recheck's start (process or fork, imports, jail) and its checks,
    by the epoch marks recheck_notebook returns under "__timing__"."""
    if not isinstance(marks, dict) or not {"start", "end"} <= marks.keys():
        timing["recheck_checks"] += ended - began
        return
    timing["recheck_start"] += marks["start"] - began
    timing["recheck_checks"] += ended - marks["start"]


def reconcile(kernel: dict, recheck: dict | None, max_scores: dict[str, float], result: GradeResult
               ) -> dict[str, float]:
    """A cell keeps its kernel score only if the recheck passes it. A cell
    the recheck failed, or could not confirm (not rechecked, the recheck
    did not complete, no verdict at all), scores zero: an unconfirmed
    kernel verdict is one the learner's code may have bent. Points taken
    that way are flagged, the unconfirmed ones for a hand regrade.
    recheck None: the instructor turned the recheck off (kernel scores)."""
    final = {}
    for cell, max_score in max_scores.items():
        k_score = kernel.get(cell, (0.0, max_score))[0]
        if recheck is None:
            r = {"status": "off", "message": ""}
        else:
            r = recheck.get(cell) or recheck.get("__error__") or {"status": "absent", "message": ""}
        if not isinstance(r, dict) or r.get("status") not in ("pass", "fail", "not rechecked", "error", "off"):
            r = {"status": "absent", "message": "the recheck gave no verdict for this cell"}
        score = k_score if r["status"] in ("pass", "off") else 0.0
        if r["status"] == "fail" and k_score > 0:
            result["flags"].append(f"{cell}: the notebook kernel passed it but the out-of-process recheck failed: "
                                   f"{r['message']}")
        elif r["status"] not in ("pass", "fail", "off") and k_score > 0:
            why = r.get("message") or "the recheck gave no verdict for this cell"
            result["flags"].append(f"{cell}: the recheck could not confirm the kernel's {k_score:g} points "
                                   f"({r['status']}: {why}); scored 0, for a hand regrade")
        elif r["status"] == "pass" and k_score == 0 and kernel:
            result["flags"].append(f"{cell}: failed in the notebook kernel but passed the recheck "
                                   "(kept at zero; look at the notebook's output)")
        final[cell] = score
        result["cells"][cell] = CellResult(score=score, max_score=max_score, kernel_score=k_score,
                                           recheck=r["status"], message=r.get("message", ""),
                                           diagnoses=_diagnoses(r))
    return final


def _diagnoses(verdict: dict) -> list[dict]:
    """The recheck's diagnoses of a cell (the fields feedback and the class
    report read), each reduced to its known fields and capped again."""
    found = verdict.get("diagnoses")
    return [capped_diagnosis(d) for d in found[:8] if isinstance(d, dict)] if isinstance(found, list) else []


def safe_grade_one(sub: Submission, opts: Options) -> GradeResult:
    """grade_one, but a bug in the grader itself becomes one error row instead
    of stopping the class run."""
    try:
        return grade_one(sub, opts)
    except Exception as err:  # noqa: BLE001: isolate one submission's failure
        return error_row(sub, f"{type(err).__name__}: {err}")


def summary(results: list[GradeResult]) -> str:
    """The class table; every learner-controlled string (ids, problems that
    quote grade ids or outputs) goes through printable, so a carriage return
    or an ANSI escape in one cannot overwrite another row on the terminal."""
    rows = [("student", "assignment", "score", "status", "notes")]
    for r in results:
        late = r.get("late") or {}
        when = "submission time unknown" if late.get("late_by") == "time unknown" else f"late by {late.get('late_by')}"
        late_note = [f"{when}, penalty {late['penalty']:g}"] if late.get("late_by") else []
        notes = printable("; ".join(late_note + r.get("problems", []) + r.get("flags", [])))
        rows.append((printable(r["student"]), printable(r["assignment"]), f"{r['score']:g}/{r['max_score']:g}",
                     printable(r["status"]), notes[:110] + ("..." if len(notes) > 110 else "")))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(f"{v:<{w}}" for v, w in zip(row[:4], widths)) + "  " + row[4] for row in rows]
    flagged = sum(bool(r.get("flags")) for r in results)
    bad = sum(r["status"] != "graded" for r in results)
    lines.append(f"{len(results)} submissions: {len(results) - bad} graded, {bad} malformed or failed, "
                 f"{flagged} flagged by the recheck")
    return "\n".join(lines)
