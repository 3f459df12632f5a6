"""`python -m autograder check NOTEBOOK`: the learner's self-check.

Runs the notebook top to bottom in a fresh kernel (from its own folder, as
Jupyter would), then prints one row per graded exercise: points, PASS or
FAIL, and the check's message. Only the visible checks exist in a learner's
notebook, so a PASS here is necessary, not sufficient, for full marks.
Exit status 0 when every exercise passes, 1 otherwise, 2 when the notebook
cannot be run at all.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .notebook_gates import is_check, nbg

MESSAGE_WIDTH = 100


@dataclass
class Row:
    exercise: str
    points: float
    passed: bool
    message: str


def _message(cell) -> str:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return f"{out.get('ename')}: {out.get('evalue', '')}".strip()
    return ""


def run(path: Path, timeout: int = 300) -> list[Row]:
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    env_before = os.environ.pop("NBGRADER_EXECUTION", None)  # the learner's view: full-size cells
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(Path(path).resolve().parent)}}).execute()
    finally:
        if env_before is not None:
            os.environ["NBGRADER_EXECUTION"] = env_before
    rows = []
    for cell in nb.cells:
        if is_check(cell):
            msg = _message(cell)
            rows.append(Row(nbg(cell).get("grade_id", "?"), float(nbg(cell).get("points", 0)), not msg, msg))
    return rows


def format_rows(rows: list[Row]) -> str:
    width = max([len("exercise"), *(len(r.exercise) for r in rows)])
    lines = [f"{'exercise':<{width}}  points  result  message"]
    for r in rows:
        first, *rest = r.message.splitlines() or [""]
        msg = first if len(first) <= MESSAGE_WIDTH else first[:MESSAGE_WIDTH - 3] + "..."
        lines.append(f"{r.exercise:<{width}}  {r.points:>6g}  {'PASS' if r.passed else 'FAIL':<6}  {msg}")
        # the diagnosis is what a learner needs most: never cut it off
        lines += [f"{'':<{width}}  {'':>6}  {'':<6}  {l.strip()}" for l in rest if "Likely bug" in l]
    got = sum(r.points for r in rows if r.passed)
    lines.append(f"visible checks: {got:g} / {sum(r.points for r in rows):g} points "
                 "(hidden tests run only when the instructor grades)")
    return "\n".join(lines)


def main(path: str, timeout: int = 300) -> int:
    p = Path(path)
    if not p.is_file():
        print(f"{p}: no such notebook")
        return 2
    try:
        rows = run(p, timeout)
    except Exception as err:  # noqa: BLE001: corrupt file, missing kernel...
        print(f"{p}: could not run the notebook: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
        return 2
    if not rows:
        print(f"{p}: no graded exercises found (is this a course notebook?)")
        return 2
    print(format_rows(rows))
    return 0 if all(r.passed for r in rows) else 1
