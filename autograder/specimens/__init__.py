"""Synthetic submissions for the grader's tests and benchmark: the released
notebook with its answer cells filled in the way a learner would (solution
code without the nbgrader markers), optionally with seed bugs injected."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat

from .. import course
from ..notebook_format import is_answer, nbg, read

MARKER_LINES = ("### BEGIN SOLUTION", "### END SOLUTION")


def solution_answers(assignment: str) -> dict[str, str]:
    """{answer grade id: the solution's code, markers removed}."""
    out = {}
    for cell in read(course.source_notebook(assignment)).cells:
        if is_answer(cell):
            lines = [l for l in cell.source.splitlines() if l.strip() not in MARKER_LINES]
            out[nbg(cell)["grade_id"]] = "\n".join(lines)
    return out


def notebook(assignment: str, answers: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The release notebook, with the given answer cells replaced."""
    nb = read(course.release_notebook(assignment))
    for cell in nb.cells:
        if is_answer(cell) and nbg(cell)["grade_id"] in (answers or {}):
            cell.source = answers[nbg(cell)["grade_id"]]
    return nb


def honest(assignment: str) -> nbformat.NotebookNode:
    return notebook(assignment, solution_answers(assignment))


def with_bugs(assignment: str, bugs: list[tuple[str, str, str]]) -> nbformat.NotebookNode:
    """Honest answers with (grade id, old text, new text) edits; an edit that
    misses its target raises, so a test can never inject nothing."""
    answers = solution_answers(assignment)
    for gid, old, new in bugs:
        if old not in answers[gid]:
            raise ValueError(f"{assignment}/{gid}: {old!r} not in the solution")
        answers[gid] = answers[gid].replace(old, new)
    return notebook(assignment, answers)


def submit(data_dir: Path, student: str, assignment: str, nb=None, *, raw: bytes | None = None,
           extra: dict[str, str] | None = None) -> Path:
    """Write a submission the way `collect` leaves it."""
    folder = Path(data_dir) / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{assignment}.ipynb"
    if raw is not None:
        path.write_bytes(raw)
    elif nb is not None:
        path.write_text(json.dumps(nb, indent=1))
    for name, text in (extra or {}).items():
        (folder / name).write_text(text)
    return path
