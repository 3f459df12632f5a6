"""`python -m autograder report`: the class view for the instructor.

From the gradebook (scores, hand regrades and the recheck's overrides
included) and the result files `grade` wrote (the trusted recheck's verdict
and message per exercise), tables of:

  notebooks           per notebook: submitted, missing, not graded, flagged, score statistics
  score_distribution  per notebook: students per 10-point band of the score in percent
  exercises           per exercise: pass rate, and the rank by how many students it stopped
  mistakes            per exercise and diagnosis: how many students, and which
  at_risk             the students the at-risk rule (RiskRule) picks, with its reasons
  students            per student and notebook: status, score, the exercises failed and why

written as CSV and JSON, and as one self-contained HTML page
(grading/publish/report_html.py). An exercise is passed when the gradebook gives it
its full points; it "stopped" a student who submitted its notebook and did
not pass it. The diagnosis of a failed exercise is read from the fields the
recheck stored for each failing check call (CheckFailed.diagnosis, in the
result file's "diagnoses"): its most useful likely bug, or "not attempted"
for a stub; a failure the check names no bug for is listed, marked unnamed,
by what the fields say of it (the regime it failed in, the error its code
raised, or the rows that failed). Rewording a check's message changes no
report. Result files written before the fields existed are read from their
message text (the last "Likely bug:" line of each failing call).

Lateness: pass `late(student, assignment) -> {"submitted_at": ..., "late_by":
...} or None` to build_report and every table that has a student's
submission gains those columns (a truthy late_by counts as late).
"""
from __future__ import annotations

import csv
import datetime as dt
import json
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from ... import course
from ...notebook_format import is_check, nbg, read
from .. import gradebook
from ..records import GradeResult, read_result, result_path
from .report_html import render

LIKELY_BUG = "Likely bug: "
STUB_RAISED = "is not implemented yet (it raised NotImplementedError)"
NOT_ATTEMPTED = "not attempted: the answer still raises NotImplementedError"
NO_RESULT = "no grading result on file (graded outside `python -m autograder grade`?)"
BANDS = [f"{lo}-{lo + 9}%" for lo in range(0, 100, 10)] + ["100%"]
LateLookup = Callable[[str, str], "Mapping | None"]


@dataclass(frozen=True)
class RiskRule:
    """At risk: missing at least `missing` of the notebooks anyone has
    submitted so far, or an average below `below_percent` over them
    (a missing notebook counts as 0)."""
    missing: int = 2
    below_percent: float = 50.0

    def describe(self, notebooks: int) -> str:
        return (f"A student is at risk when they are missing at least {self.missing} of the {notebooks} "
                f"notebooks anyone has submitted so far, or when their average score over those notebooks "
                f"(a missing notebook counts as 0) is below {self.below_percent:g}%.")


@dataclass(frozen=True)
class Mistake:
    label: str    # as the check said it
    named: bool   # a known bug the check named, not only a description of the failure

    @property
    def key(self) -> str:
        """Two students made the same mistake when these agree: the numbers
        (shapes, sizes, the learner's line numbers) and quoted code left out."""
        text = re.sub(r" \(line \d+(: `[^`]*`)?\)", "", self.label)
        return re.sub(r"\d+(\.\d+)?", "#", text)


@dataclass
class Attempt:
    """One student and one notebook."""
    student: str
    assignment: str
    status: str                                    # graded, malformed, error, missing, no result
    score: float = 0.0
    max_score: float = 0.0
    failed: dict[str, list[Mistake]] = field(default_factory=dict)   # exercise -> its mistakes
    flagged: bool = False                          # the recheck flagged the submission
    late: Mapping | None = None

    @property
    def percent(self) -> float:
        return 100.0 * self.score / self.max_score if self.max_score else 0.0


def _first_sentence(block: str) -> str:
    line = block.strip().splitlines()[0].strip() if block.strip() else ""
    cut = line.find(". ")
    return (line[:cut + 1] if cut > 0 else line)[:300]


def mistakes_in(message: str) -> list[Mistake]:
    """The mistakes a recheck message names, one per failing check call
    (calls are separated by blank lines), the same mistake once."""
    found: dict[str, Mistake] = {}
    for block in filter(str.strip, message.split("\n\n")):
        named = [line.strip()[len(LIKELY_BUG):] for line in block.splitlines()
                 if line.strip().startswith(LIKELY_BUG)]
        if named:
            mistake = Mistake(named[-1][:300], True)  # the check prints its most useful line last
        elif STUB_RAISED in block:
            mistake = Mistake(NOT_ATTEMPTED, True)
        else:
            mistake = Mistake(_first_sentence(block), False)
        found.setdefault(mistake.key, mistake)
    return list(found.values())


def mistake_of(diagnosis: Mapping) -> Mistake:
    """The mistake one failing check call's fields name (see the module docstring)."""
    exercise = str(diagnosis.get("exercise") or "the check")
    bugs = [b for b in diagnosis.get("likely_bugs") or [] if isinstance(b, str) and b]
    regime = diagnosis.get("regime") or {}
    kind = diagnosis.get("kind")
    if kind == "not implemented":
        return Mistake(NOT_ATTEMPTED, True)
    if bugs:
        return Mistake(bugs[-1][:300], True)  # the check puts its most useful cause last
    if isinstance(regime, Mapping) and regime.get("text"):
        return Mistake(f"{exercise}: {regime['text']}"[:300], False)
    if kind == "raised":
        return Mistake(f"{exercise} raised {diagnosis.get('error') or 'an error'}"[:300], False)
    rows = [r for r in diagnosis.get("rows") or [] if isinstance(r, str)]
    failed = [r for r in diagnosis.get("failed_rows") or [] if isinstance(r, str)]
    if failed:
        return Mistake(f"{exercise} failed {len(failed)} of {len(rows)} checks: {'; '.join(failed)}."[:300], False)
    return Mistake(_first_sentence(str(diagnosis.get("stop") or f"{exercise} failed")), False)


def mistakes_from(diagnoses: list) -> list[Mistake]:
    """The mistakes of a cell's diagnoses, the same mistake once."""
    found: dict[str, Mistake] = {}
    for diagnosis in diagnoses:
        if isinstance(diagnosis, Mapping):
            mistake = mistake_of(diagnosis)
            found.setdefault(mistake.key, mistake)
    return list(found.values())


def _why_failed(result: GradeResult | None, exercise: str) -> list[Mistake]:
    if result is None:
        return [Mistake(NO_RESULT, False)]
    cell = (result.get("cells") or {}).get(exercise) or {}
    diagnoses = cell.get("diagnoses")
    mistakes = mistakes_from(diagnoses) if isinstance(diagnoses, list) and diagnoses else \
        mistakes_in(str(cell.get("message") or ""))
    if mistakes:
        return mistakes
    if result.get("status") != "graded":
        return [Mistake(f"the notebook could not be graded ({result.get('status')})", False)]
    return [Mistake(f"failed without a diagnosis (recheck: {cell.get('recheck', 'absent')})", False)]


def result_files() -> Callable[[str, str], GradeResult | None]:
    """(student, assignment) -> the result `grade` wrote, or None. The
    folder is resolved once (records.Submission.result_file resolves it per
    call, a second for a class of 500)."""
    folder = gradebook.folder("results")

    def read(student: str, assignment: str) -> GradeResult | None:
        return read_result(result_path(student, assignment, folder))
    return read


def _course_order(assignments: list[str]) -> list[str]:
    known = [a for a in course.ASSIGNMENTS if a in assignments]
    return known + sorted(a for a in assignments if a not in known)


def _exercise_order(assignment: str, exercises: list[str]) -> list[str]:
    """The test cells in notebook order where the course has the notebook."""
    path = course.source_notebook(assignment)
    order = [nbg(c)["grade_id"] for c in read(path).cells if is_check(c)] if path.is_file() else []
    return [e for e in order if e in exercises] + sorted(e for e in exercises if e not in order)


@dataclass
class ClassData:
    """What the report is computed from."""
    students: list[str]
    exercises: dict[str, dict[str, float]]        # assignment -> {exercise: points}, in order
    attempts: dict[tuple[str, str], Attempt]      # (student, assignment) -> attempt; every pair present


def load(url: str, assignments: list[str] | None = None, late: LateLookup | None = None,
         results: Callable[[str, str], GradeResult | None] | None = None) -> ClassData:
    """The class from the gradebook at `url` and the result files
    (`results`: a lookup like result_files(), the default)."""
    results = results or result_files()
    students, cells, grades = gradebook.class_grades(url)
    by_assignment: dict[str, dict[str, float]] = defaultdict(dict)
    for a, exercise, points in cells:
        if assignments is None or a in assignments:
            by_assignment[a][exercise] = points
    exercises = {a: {e: by_assignment[a][e] for e in _exercise_order(a, list(by_assignment[a]))}
                 for a in _course_order(list(by_assignment))}
    scores: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for row in grades:
        if row["assignment"] in exercises:
            scores[row["student"], row["assignment"]][row["cell"]] = row["score"]
    attempts = {}
    for s in students:
        for a, points in exercises.items():
            got = scores.get((s, a))
            attempt = Attempt(s, a, "missing", max_score=sum(points.values()))
            if got is not None:
                result = results(s, a)
                attempt.status = str(result.get("status", "graded")) if result else "no result"
                attempt.flagged = bool(result and result.get("flags"))
                attempt.score = sum(got.values())
                attempt.failed = {e: _why_failed(result, e) for e, p in points.items() if got.get(e, 0.0) < p}
                attempt.late = late(s, a) if late else None
            attempts[s, a] = attempt
    return ClassData(students, exercises, attempts)


def _stats(values: list[float]) -> dict:
    if not values:
        return {"mean_percent": None, "median_percent": None, "min_percent": None, "max_percent": None}
    return {"mean_percent": round(statistics.fmean(values), 1), "median_percent": round(statistics.median(values), 1),
            "min_percent": round(min(values), 1), "max_percent": round(max(values), 1)}


def _band(percent: float) -> str:
    return BANDS[min(int(percent // 10), 10)] if percent < 100 else BANDS[-1]


def _is_late(attempt: Attempt) -> bool:
    return bool(attempt.late and attempt.late.get("late_by"))


def _late_columns(attempt: Attempt, with_late: bool) -> dict:
    if not with_late:
        return {}
    late = attempt.late or {}
    return {"submitted_at": str(late.get("submitted_at") or ""), "late_by": str(late.get("late_by") or "")}


def build_report(data: ClassData, rule: RiskRule = RiskRule()) -> dict:
    """The report's tables (plain lists of dicts), from which CSV, JSON and HTML are written."""
    with_late = any(a.late is not None for a in data.attempts.values())
    submitted = {a: [data.attempts[s, a] for s in data.students if data.attempts[s, a].status != "missing"]
                 for a in data.exercises}
    notebooks, bands = [], []
    for a, subs in submitted.items():
        percents = [x.percent for x in subs]
        counts = Counter(_band(p) for p in percents)
        notebooks.append({"assignment": a, "max_score": sum(data.exercises[a].values()),
                          "students": len(data.students), "submitted": len(subs),
                          "missing": len(data.students) - len(subs),
                          "not_graded": sum(x.status not in ("graded", "no result") for x in subs),
                          "flagged": sum(x.flagged for x in subs),
                          "full_marks": sum(x.score >= x.max_score > 0 for x in subs),
                          "zero": sum(x.score == 0 for x in subs), **_stats(percents),
                          **({"late": sum(_is_late(x) for x in subs)} if with_late else {})})
        bands += [{"assignment": a, "band": b, "students": counts.get(b, 0)} for b in BANDS]
    exercises, mistakes = [], []
    for a, points in data.exercises.items():
        for e, p in points.items():
            failed = [x for x in submitted[a] if e in x.failed]
            groups: dict[str, list[str]] = defaultdict(list)
            wordings: dict[str, Counter] = defaultdict(Counter)
            named: dict[str, bool] = {}
            for x in failed:
                for m in x.failed[e]:
                    groups[m.key].append(x.student)
                    wordings[m.key][m.label] += 1
                    named[m.key] = m.named
            ranked = sorted(groups, key=lambda k: (-len(groups[k]), k))
            for k in ranked:
                label = min(wordings[k].items(), key=lambda kv: (-kv[1], kv[0]))[0]
                mistakes.append({"assignment": a, "exercise": e, "mistake": label, "named": named[k],
                                 "wordings": len(wordings[k]), "students_count": len(groups[k]),
                                 "students": sorted(groups[k])})
            n = len(submitted[a])
            exercises.append({"assignment": a, "exercise": e, "points": p, "submitted": n,
                              "passed": n - len(failed), "failed": len(failed),
                              "pass_rate": round(100.0 * (n - len(failed)) / n, 1) if n else None})
    order = {(r["assignment"], r["exercise"]): i for i, r in enumerate(exercises)}
    ranking = sorted(exercises, key=lambda r: (-r["failed"], order[r["assignment"], r["exercise"]]))
    for rank, r in enumerate(ranking, 1):
        r["rank"] = rank
        top = next((m for m in mistakes if (m["assignment"], m["exercise"]) == (r["assignment"], r["exercise"])), None)
        r["top_mistake"] = top["mistake"] if top else ""
        r["top_mistake_students"] = top["students_count"] if top else 0
    due = [a for a, subs in submitted.items() if subs]
    students, at_risk = [], []
    for s in data.students:
        mine = [data.attempts[s, a] for a in data.exercises]
        for x in mine:
            students.append({"student": s, "assignment": x.assignment, "status": x.status, "score": x.score,
                             "max_score": x.max_score,
                             "percent": round(x.percent, 1) if x.status != "missing" else None,
                             "failed": {e: [m.label for m in ms] for e, ms in x.failed.items()},
                             **_late_columns(x, with_late)})
        counted = [x for x in mine if x.assignment in due]
        missing = [x.assignment for x in counted if x.status == "missing"]
        average = statistics.fmean(x.percent for x in counted) if counted else None
        reasons = []
        if counted and len(missing) >= rule.missing:
            reasons.append(f"missing {len(missing)} of {len(counted)} ({', '.join(a.split('_', 1)[0] for a in missing)})")
        if average is not None and average < rule.below_percent:
            reasons.append(f"average {average:.0f}%")
        if reasons:
            at_risk.append({"student": s, "submitted": len(counted) - len(missing), "missing": len(missing),
                            "average_percent": round(average, 1), "reasons": "; ".join(reasons),
                            "missing_notebooks": missing,
                            **({"late": sum(_is_late(x) for x in counted)} if with_late else {})})
    at_risk.sort(key=lambda r: (r["average_percent"], r["student"]))
    return {"generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "assignments": list(data.exercises), "students_total": len(data.students),
            "rule": rule.describe(len(due)), "rule_parameters": asdict(rule), "with_late": with_late,
            "notebooks": notebooks, "score_distribution": bands, "exercises": ranking, "mistakes": mistakes,
            "at_risk": at_risk, "students": students}


# Cells a spreadsheet would run as a formula are written with a leading
# apostrophe; a student id or a learner's error text can start with one.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_value(value) -> str | float | int:
    if isinstance(value, (list, tuple)):
        value = " ".join(map(str, value))
    elif isinstance(value, dict):
        value = " | ".join(f"{k}: {'; '.join(v)}" for k, v in value.items())
    elif value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def write_csv(path: Path, rows: list[dict], header: list[str]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows([_csv_value(r.get(k)) for k in header] for r in rows)
    return path


# The columns of each table, in the order the CSV files have them; with a
# lateness lookup, LATE_COLUMNS are added.
COLUMNS = {
    "notebooks": ["assignment", "max_score", "students", "submitted", "missing", "not_graded", "flagged",
                  "full_marks", "zero", "mean_percent", "median_percent", "min_percent", "max_percent"],
    "score_distribution": ["assignment", "band", "students"],
    "exercises": ["rank", "assignment", "exercise", "points", "submitted", "passed", "failed", "pass_rate",
                  "top_mistake", "top_mistake_students"],
    "mistakes": ["assignment", "exercise", "mistake", "named", "wordings", "students_count", "students"],
    "at_risk": ["student", "submitted", "missing", "average_percent", "reasons", "missing_notebooks"],
    "students": ["student", "assignment", "status", "score", "max_score", "percent", "failed"],
}
LATE_COLUMNS = {"notebooks": ["late"], "at_risk": ["late"], "students": ["submitted_at", "late_by"]}


def columns(table: str, with_late: bool) -> list[str]:
    return COLUMNS[table] + (LATE_COLUMNS.get(table, []) if with_late else [])


def write_report(report: dict, out_dir: Path, gradebook_url: str = "") -> list[Path]:
    """class_report.html, class_report.json and one CSV per table."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [write_csv(out_dir / f"{name}.csv", report[name], columns(name, report["with_late"])) for name in COLUMNS]
    json_path = out_dir / "class_report.json"
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    html_path = out_dir / "class_report.html"
    html_path.write_text(render(report, gradebook.redacted(gradebook_url)), encoding="utf-8")
    return [html_path, json_path, *paths]
