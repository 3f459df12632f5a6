"""The grader's records: a submission, where its files are, and the result
its grading leaves (.course/results/<assignment>/<student>.json).

GradeResult and CellResult declare the result's fields: grade.grade_one
writes them, feedback, the class report, export, deadlines and the cluster
client read them. They are TypedDicts, so a result is the plain dict that
json reads and writes; a field added or renamed here is the one place every
reader looks.
"""
from __future__ import annotations

import hashlib
import json
import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from .. import course
from ..notebook_format import is_check, nbg, read
from . import gradebook


class CellResult(TypedDict):
    """One graded cell (test cell) of a result."""
    score: float           # the final score: the kernel's, kept only where the recheck passed it
    max_score: float
    kernel_score: float    # what nbgrader's kernel gave (the code being graded may have bent it)
    recheck: str           # pass, fail, not rechecked, error, absent, or off (recheck turned off)
    message: str           # the recheck's message (its failures, or why it could not confirm)
    diagnoses: list[dict]  # one per failing check call: diagnosis_record.capped_diagnosis's fields


class LateFields(TypedDict, total=False):
    """deadlines.late_fields: when it was handed in and what lateness cost."""
    submitted_at: str      # ISO 8601, "" when unknown
    time_source: str
    due: str
    late_by: str           # "", "time unknown", or a duration such as "1 d 2 h"
    seconds_late: float
    penalty: float
    final_score: float
    text: str              # Lateness.describe(), added for the feedback page


class _GradeResultRequired(TypedDict):
    student: str
    assignment: str
    status: str            # graded, rejected, malformed, or error
    score: float
    max_score: float
    flags: list[str]       # points the recheck took, or could not confirm
    problems: list[str]    # what the intake found, or why it could not be graded
    cells: dict[str, CellResult]


class GradeResult(_GradeResultRequired, total=False):
    """What grading one submission leaves. An error row (error_row: the
    grader failed on it) has only the required fields."""
    digest: str            # sha256 of the notebook as sent ("rejected": look again next run)
    timing: dict[str, float]   # seconds per stage of grade.STAGES
    seconds: float         # grade_one from start to end
    late: LateFields       # added by deadlines.annotate after a batch


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
        return result_path(self.student, self.assignment)


def result_path(student: str, assignment: str, results: Path | None = None) -> Path:
    """Where the result of (student, assignment) is written; `results`: the
    results folder, when the caller resolved it already."""
    return (results or gradebook.folder("results")) / assignment / f"{student}.json"


def find_submissions(assignments: list[str], students: list[str] | None = None) -> list[Submission]:
    subs = []
    submitted = gradebook.folder("submitted")
    if not submitted.is_dir():
        return subs
    wanted = {unicodedata.normalize("NFC", s) for s in students or ()}  # collect stores ids composed
    for sdir in sorted(p for p in submitted.iterdir() if p.is_dir() and not p.is_symlink()):
        if students and sdir.name not in wanted:
            continue
        subs += [Submission(sdir.name, a) for a in assignments if (sdir / a).is_dir()]
    return subs


def read_result(path: Path) -> GradeResult | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def load_result(sub: Submission) -> GradeResult | None:
    return read_result(sub.result_file)


def write_result(sub: Submission, result: GradeResult) -> None:
    sub.result_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = sub.result_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, sub.result_file)  # atomic: a result is either complete or absent


def released_data(assignment: str) -> list[Path]:
    folder = course.RELEASE_DIR / assignment
    return [p for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink() and p.suffix != ".ipynb"]


def timing_file(sub: Submission) -> Path:
    """Where nbgrader's CappedExecute writes its timing marks: the grader's
    data folder, which no jailed process sees (sandbox.kernel.hidden_paths)."""
    return gradebook.folder("timing") / sub.assignment / f"{sub.student}.json"


def nbgrader_log_file(sub: Submission) -> Path:
    """Where the log of a failed nbgrader run is kept: beside the result, which
    only the instructor reads (feedback shows neither)."""
    return sub.result_file.with_suffix(".nbgrader.log")


def original_path(sub: Submission) -> Path:
    """Where the notebook as sent is kept when grading had to repair it
    (outside the assignment folder, so nbgrader does not copy it)."""
    return sub.folder.parent / f".{sub.assignment}.original.ipynb"


def digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if Path(path).is_file() else "missing"


def original_digest(sub: Submission) -> str:
    """The digest of the notebook as the student sent it (a result whose
    digest equals it is up to date)."""
    original = original_path(sub)
    return digest(original) if original.is_file() else digest(sub.notebook)


def max_scores(assignment: str) -> dict[str, float]:
    """{test cell grade id: its points}, from the course's source notebook."""
    return {nbg(c)["grade_id"]: float(nbg(c)["points"]) for c in read(course.source_notebook(assignment)).cells
            if is_check(c)}


ERROR_ROW_NOTE = "not graded; the gradebook holds 0 for it (or its last completed grade), re-run to retry"


def error_row(sub: Submission, why: str) -> GradeResult:
    """The result of a submission the grader itself failed on (no result
    file; grade_one held its gradebook entry at zero before nbgrader ran)."""
    return GradeResult(student=sub.student, assignment=sub.assignment, status="error", score=0.0,
                       max_score=sum(max_scores(sub.assignment).values()), flags=[], cells={},
                       problems=[f"grader error ({why}); {ERROR_ROW_NOTE}"])
