"""`python -m autograder export`: the gradebook as three CSV files.

  grades_per_exercise.csv  student, assignment, exercise, score, max_score
  grades_per_notebook.csv  student, assignment, score, max_score, status, submitted_at,
                           time_source, late_by, penalty, final_score
  grades_total.csv         student, one column per assignment (final scores), total, max_total

Scores are the gradebook's (manual overrides from the recheck included). A
student with no submission for an assignment gets 0 and status "missing".
The late columns follow deadlines.toml as it is now (deadlines.py); the
penalties are written into the gradebook too, so nbgrader's totals agree.
"""
from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from .. import deadlines, gradebook


def _write(path: Path, header: list[str], rows: list[list]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def _fmt(x: float) -> str:
    return f"{x:g}"


def export(url: str, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = gradebook.table(url)
    per_nb: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    max_of: dict[str, float] = defaultdict(float)
    exercises = []
    for r in sorted(rows, key=lambda r: (r["student"], r["assignment"], r["cell"])):
        exercises.append([r["student"], r["assignment"], r["cell"], _fmt(r["score"]), _fmt(r["max_score"])])
        acc = per_nb[(r["student"], r["assignment"])]
        acc[0] += r["score"]
        acc[1] += r["max_score"]
    for (_, a), (_, mx) in per_nb.items():
        max_of[a] = max(max_of[a], mx)
    with gradebook.open_gradebook(url) as gb:
        students = sorted({s.id for s in gb.students})
        assignments = sorted(a.name for a in gb.assignments)
        for a in gb.assignments:
            max_of[a.name] = max(max_of[a.name], float(a.max_score))
    late = deadlines.apply(url, {key: score for key, (score, _) in per_nb.items()})
    notebooks, totals = [], []
    for s in students:
        line, total = [s], 0.0
        for a in assignments:
            score, mx = per_nb.get((s, a), (0.0, max_of[a]))
            status = "graded" if (s, a) in per_nb else "missing"
            fields = deadlines.late_fields(*late[(s, a)], score) if (s, a) in late else {}
            final = fields.get("final_score", score)
            notebooks.append([s, a, _fmt(score), _fmt(mx), status, fields.get("submitted_at", ""),
                              fields.get("time_source", ""), fields.get("late_by", ""),
                              _fmt(fields.get("penalty", 0.0)), _fmt(final)])
            line.append(_fmt(final))
            total += final
        totals.append(line + [_fmt(total), _fmt(sum(max_of[a] for a in assignments))])
    return [
        _write(out_dir / "grades_per_exercise.csv", ["student", "assignment", "exercise", "score", "max_score"],
               exercises),
        _write(out_dir / "grades_per_notebook.csv", ["student", "assignment", "score", "max_score", "status",
                                                     "submitted_at", "time_source", "late_by", "penalty",
                                                     "final_score"], notebooks),
        _write(out_dir / "grades_total.csv", ["student", *assignments, "total", "max_total"], totals),
    ]
