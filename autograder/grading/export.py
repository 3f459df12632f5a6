"""`python -m autograder export`: the gradebook as three CSV files.

  grades_per_exercise.csv  student, assignment, exercise, score, max_score
  grades_per_notebook.csv  student, assignment, score, max_score, status
  grades_total.csv         student, one column per assignment, total, max_total

Scores are the gradebook's (manual overrides from the recheck included). A
student with no submission for an assignment gets 0 and status "missing".
"""
from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from . import gradebook


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
    notebooks, totals = [], []
    for s in students:
        line, total = [s], 0.0
        for a in assignments:
            score, mx = per_nb.get((s, a), (0.0, max_of[a]))
            status = "graded" if (s, a) in per_nb else "missing"
            notebooks.append([s, a, _fmt(score), _fmt(mx), status])
            line.append(_fmt(score))
            total += score
        totals.append(line + [_fmt(total), _fmt(sum(max_of[a] for a in assignments))])
    return [
        _write(out_dir / "grades_per_exercise.csv", ["student", "assignment", "exercise", "score", "max_score"],
               exercises),
        _write(out_dir / "grades_per_notebook.csv", ["student", "assignment", "score", "max_score", "status"],
               notebooks),
        _write(out_dir / "grades_total.csv", ["student", *assignments, "total", "max_total"], totals),
    ]
