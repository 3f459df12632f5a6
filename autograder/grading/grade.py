"""`python -m autograder grade`: autograde every collected submission.

One submission at a time per worker, each in its own processes:

  intake      count the files (over MAX_SUBMISSION_FILES: rejected), read the
              notebook; a malformed one gets a message and zero
  hold        the gradebook holds zero for the submission while it is graded
              (nbgrader stores the kernel's scores, which the code being
              graded may have bent: a grading that stops before reconcile
              leaves zero, never them)
  nbgrader    `nbgrader autograde` for this one student, its kernel started
              through autograder.grading.jail (own uid, folder, limits, no
              network), with its stdout and stderr on /dev/null: nothing the
              learner's code writes reaches the log the grader reads
  recheck     autograder.grading.recheck runs the hidden and visible checks again in
              a trusted process against the answer cells run in a jail
  reconcile   a cell keeps its kernel score only if the recheck passes it;
              otherwise (failed, not rechecked, recheck error or absent)
              it scores zero and the submission is flagged

Results go to .course/results/<assignment>/<student>.json, written when a
submission is done: re-running skips submissions whose notebook is unchanged
since, so an interrupted run resumes and loses nothing.
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
from dataclasses import dataclass, field
from pathlib import Path

from .. import course
from . import deadlines, gradebook
from .jail import Jail, Limits
from .preprocessors import autograde_preprocessors
from .recheck import recheck_submission
from .sandbox import KERNEL_NAME, hidden_paths, kernelspec_dir
from .submission import inspect_submission, printable, quoted, rejection, write_repaired

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
    warm: bool = True            # grade in warm worker processes (grading/warm_pool.py); False: cold processes
    scheduler: str = ""          # a Dask scheduler's address: grade on that cluster (grading/cluster.py)


@dataclass(frozen=True)
class Submission:
    student: str
    assignment: str

    @property
    def folder(self) -> Path:
        return gradebook.folder("submitted") / self.student / self.assignment

    @property
    def notebook(self) -> Path:
        return self.folder / f"{self.assignment}.ipynb"

    @property
    def result_file(self) -> Path:
        return gradebook.folder("results") / self.assignment / f"{self.student}.json"


def find_submissions(assignments: list[str], students: list[str] | None = None) -> list[Submission]:
    subs = []
    submitted = gradebook.folder("submitted")
    if not submitted.is_dir():
        return subs
    for sdir in sorted(p for p in submitted.iterdir() if p.is_dir() and not p.is_symlink()):
        if students and sdir.name not in students:
            continue
        subs += [Submission(sdir.name, a) for a in assignments if (sdir / a).is_dir()]
    return subs


def load_result(sub: Submission) -> dict | None:
    try:
        return json.loads(sub.result_file.read_text())
    except (OSError, ValueError):
        return None


def _write_result(sub: Submission, result: dict) -> None:
    sub.result_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = sub.result_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, sub.result_file)  # atomic: a result is either complete or absent


def released_data(assignment: str) -> list[Path]:
    folder = course.RELEASE_DIR / assignment
    return [p for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink() and p.suffix != ".ipynb"]


def timing_file(sub: Submission) -> Path:
    """Where nbgrader's CappedExecute writes its timing marks: the grader's
    data folder, which no jailed process sees (sandbox.hidden_paths)."""
    return gradebook.folder("timing") / sub.assignment / f"{sub.student}.json"


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
            f"--CappedExecute.max_output_bytes={opts.max_output_bytes}"]
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


def _run_nbgrader(sub: Submission, opts: Options, jail: Jail) -> tuple[int, str]:
    args = [sys.executable, "-m", "nbgrader", *nbgrader_args(sub, opts, jail)]
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


def nbgrader_log_file(sub: Submission) -> Path:
    """Where the log of a failed nbgrader run is kept: beside the result, which
    only the instructor reads (feedback shows neither)."""
    return sub.result_file.with_suffix(".nbgrader.log")


# Stages of grade_one, in order, as result["timing"] reports them (seconds;
# the grader's own figures, never shown to learners).
STAGES = ("intake", "nbgrader_start", "kernel_start", "cells", "database", "recheck_start", "recheck_checks",
          "reconcile")


def grade_one(sub: Submission, opts: Options, run_nbgrader=None, run_recheck=None) -> dict:
    """Grade one submission. run_nbgrader(sub, opts, jail) -> (exit code, log)
    and run_recheck(assignment, notebook, limits) -> verdicts replace the
    processes started by default (the CLI and recheck_submission); the warm
    worker (autograder.grading.warm_pool) passes in-process ones."""
    start = time.perf_counter()
    result = {"student": sub.student, "assignment": sub.assignment, "flags": [], "cells": {}, "status": "graded",
              "problems": [], "timing": dict.fromkeys(STAGES, 0.0)}
    kernel = _kernel_scores(sub, opts, result, run_nbgrader or _run_nbgrader)
    recheck = {} if opts.recheck else None
    if opts.recheck and kernel:
        began = time.time()
        recheck = (run_recheck or recheck_submission)(sub.assignment, sub.notebook, opts.limits)
        _recheck_timing(recheck.pop("__timing__", None), began, time.time(), result["timing"])
    began = time.perf_counter()
    final = _reconcile(kernel, recheck, _max_scores(sub.assignment), result)
    result["timing"]["reconcile"] += time.perf_counter() - began
    began = time.perf_counter()
    gradebook.override(opts.db_url, sub.assignment, sub.student, final)
    result["timing"]["database"] += time.perf_counter() - began
    result["score"] = sum(final.values())
    result["max_score"] = sum(c["max_score"] for c in result["cells"].values())
    began = time.perf_counter()
    result["timing"] = {k: round(v, 3) for k, v in result["timing"].items()}
    result["seconds"] = round(time.perf_counter() - start, 1)
    _write_result(sub, result)
    result["timing"]["reconcile"] = round(result["timing"]["reconcile"] + time.perf_counter() - began, 3)
    return result


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


def _kernel_scores(sub: Submission, opts: Options, result: dict, run_nbgrader) -> dict[str, tuple[float, float]]:
    """Intake, then nbgrader in the jail: {cell: (score, max)}; {} when the
    notebook is malformed or nbgrader could not grade it (said in result)."""
    began = time.perf_counter()
    rejected = rejection(sub.folder)
    if rejected:
        result.update(status="rejected", digest="rejected")  # no notebook digest: a re-run looks again
        result["problems"].append(rejected)
        result["timing"]["intake"] += time.perf_counter() - began
        return {}
    result["problems"] += _drop_symlinks(sub.folder)
    # nbgrader reads it (its parser took 103 s on a megabyte of digits, then an OverflowError); never a time here
    removed = deadlines.sane_timestamp_file(sub.folder)
    if removed:
        result["problems"].append(removed)
    original = _original_path(sub)
    intake = inspect_submission(original if original.is_file() else sub.notebook,
                                course.release_notebook(sub.assignment))
    result["digest"] = intake.digest
    result["problems"] += intake.problems
    if intake.fatal:
        result["status"] = "malformed"
        result["timing"]["intake"] += time.perf_counter() - began
        return {}
    if intake.problems:
        if not original.is_file():
            original.write_bytes(sub.notebook.read_bytes())  # keep what the student sent
        write_repaired(intake, sub.notebook)
    result["timing"]["intake"] += time.perf_counter() - began
    began = time.perf_counter()
    gradebook.override(opts.db_url, sub.assignment, sub.student, dict.fromkeys(_max_scores(sub.assignment), 0.0),
                       hold=True)
    result["timing"]["database"] += time.perf_counter() - began
    timing_file(sub).parent.mkdir(parents=True, exist_ok=True)
    timing_file(sub).unlink(missing_ok=True)
    spawned = time.time()
    with Jail.reserve(opts.limits, copy=[sub.notebook, *released_data(sub.assignment)],
                      hide=hidden_paths(opts.db_url)) as jail:
        code, log = run_nbgrader(sub, opts, jail)
    _nbgrader_timing(sub, spawned, time.time(), result["timing"])
    if code != 0:
        result["status"] = "error"
        result["problems"].append(f"the notebook could not be graded: {_nbgrader_error(log)}")
        nbgrader_log_file(sub).parent.mkdir(parents=True, exist_ok=True)
        nbgrader_log_file(sub).write_text(log)
        return {}
    began = time.perf_counter()
    scores = gradebook.cell_scores(opts.db_url, sub.assignment, sub.student)
    result["timing"]["database"] += time.perf_counter() - began
    return scores


def _reconcile(kernel: dict, recheck: dict | None, max_scores: dict[str, float], result: dict) -> dict[str, float]:
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
        result["cells"][cell] = {"score": score, "max_score": max_score, "kernel_score": k_score,
                                 "recheck": r["status"], "message": r.get("message", ""),
                                 "diagnoses": _diagnoses(r)}
    return final


def _diagnoses(verdict: dict) -> list[dict]:
    """The recheck's diagnoses of a cell (the fields feedback and the class
    report read), each reduced to its known fields and capped again."""
    from ..checks.core import capped_diagnosis
    found = verdict.get("diagnoses")
    return [capped_diagnosis(d) for d in found[:8] if isinstance(d, dict)] if isinstance(found, list) else []


def _drop_symlinks(folder: Path) -> list[str]:
    """nbgrader copies a submission folder following symlinks: remove them."""
    problems = []
    for p in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if p.is_symlink():
            p.unlink()
            problems.append(f"symbolic link {quoted(p.name)} removed from the submission (links are never followed)")
    return problems


def _max_scores(assignment: str) -> dict[str, float]:
    from ..notebook_format import is_check, nbg, read
    return {nbg(c)["grade_id"]: float(nbg(c)["points"]) for c in read(course.source_notebook(assignment)).cells
            if is_check(c)}


def _original_path(sub: Submission) -> Path:
    """Where the notebook as sent is kept when grading had to repair it
    (outside the assignment folder, so nbgrader does not copy it)."""
    return sub.folder.parent / f".{sub.assignment}.original.ipynb"


def _original_digest(sub: Submission) -> str:
    from .submission import digest
    original = _original_path(sub)
    return digest(original) if original.is_file() else digest(sub.notebook)


def _safe_grade_one(sub: Submission, opts: Options) -> dict:
    """grade_one, but a bug in the grader itself becomes one error row instead
    of stopping the class run."""
    try:
        return grade_one(sub, opts)
    except Exception as err:  # noqa: BLE001: isolate one submission's failure
        return error_row(sub, f"{type(err).__name__}: {err}")


ERROR_ROW_NOTE = "not graded; the gradebook holds 0 for it (or its last completed grade), re-run to retry"


def error_row(sub: Submission, why: str) -> dict:
    """The result of a submission the grader itself failed on (no result
    file; grade_one held its gradebook entry at zero before nbgrader ran)."""
    return {"student": sub.student, "assignment": sub.assignment, "status": "error", "score": 0.0,
            "max_score": sum(_max_scores(sub.assignment).values()), "flags": [], "cells": {},
            "problems": [f"grader error ({why}); {ERROR_ROW_NOTE}"]}


def summary(results: list[dict]) -> str:
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
