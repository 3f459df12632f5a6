"""`python -m autograder release-solutions ASSIGNMENT`: hand the reference
notebook of one assignment to the students once everyone's due date passed.

What is published is solutions/NN_name/NN_name.ipynb with its answers and
outputs, less what stays secret: every `### BEGIN HIDDEN TESTS` ...
`### END HIDDEN TESTS` block is cut from the check cells, and those cells
lose their outputs (a check run on the hidden shapes prints them). The
solution markers are dropped so the answers read as plain code.

It goes out as a new assignment NN_name_solution:
* through nbgrader's exchange (`--exchange DIR`, default $TINYLM_HUB_EXCHANGE,
  which the course hub sets): released with nbgrader's own exchange code
  into <exchange>/tinylm/outbound/NN_name_solution/, so students see it in
  Assignment List and Fetch it into ~/NN_name_solution/;
* otherwise as a folder (`--out DIR`, default .course/released_solutions/)
  to upload to the LMS.

Until the last moment a late submission can still earn points (the last due
date with extensions, plus what the late policy leaves: nothing under
"zero", the cut-off, the days until the per-day penalty takes everything;
never under "none" without a cut-off) it refuses, unless --force.
"""
from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
from pathlib import Path

import nbformat

from ... import course
from ...notebook_format import HIDDEN_BLOCK, MARKERS, read
from .. import deadlines, gradebook
from ..errors import GradingError

SUFFIX = "_solution"
SOLUTION_MARKERS = tuple(f"### {m}" for m in MARKERS[:2])   # BEGIN / END SOLUTION lines


def published_name(assignment: str) -> str:
    return assignment + SUFFIX


def solution_notebook(assignment: str) -> nbformat.NotebookNode:
    """The reference notebook without hidden tests (nor their outputs) and without solution markers."""
    nb = read(course.source_notebook(assignment))
    for cell in nb.cells:
        if HIDDEN_BLOCK.search(cell.source) or "BEGIN HIDDEN TESTS" in cell.source:
            cell.source = HIDDEN_BLOCK.sub("", cell.source).rstrip() + "\n"
            if "HIDDEN TESTS" in cell.source:
                raise ValueError(f"{assignment}: a cell has an unmatched hidden-test marker; fix the notebook source")
            cell.outputs, cell.execution_count = [], None
        if cell.cell_type == "code":
            cell.source = "\n".join(line for line in cell.source.split("\n")
                                    if line.strip() not in SOLUTION_MARKERS)
    return nb


def refusal(assignment: str, now: dt.datetime, rules: deadlines.Deadlines) -> str | None:
    """Why the solutions of `assignment` may not go out at `now`, or None:
    not while a late submission can still earn points, under the late policy
    and every extension (Deadlines.last_scoring_moment)."""
    last = rules.last_due(assignment)
    if last is None:
        return (f"{assignment} has no due date in {deadlines.deadlines_path()}: set [due] {assignment}, "
                "or pass --force")
    moment = rules.last_scoring_moment(assignment)
    if moment is None:
        return (f"late work of {assignment} earns points at any time under the late policy "
                f"({rules.policy.describe()}): set [late] cutoff_days in {deadlines.deadlines_path()}, or pass --force")
    if now <= moment:
        base = rules.due.get(assignment)
        extended = sorted(s for s, a in rules.extensions if a == assignment and rules.due_for(s, a)[0] == last)
        who = f" ({', '.join(extended)}: extension)" if extended and last != base else ""
        late = "" if moment == last else \
            f"; late work earns points until {deadlines.when_text(moment)} ({rules.policy.describe()})"
        return (f"{assignment} is due until {deadlines.when_text(last)}{who}{late}, "
                f"{deadlines.duration_text((moment - now).total_seconds())} from now: wait, or pass --force")
    return None


def _stage(assignment: str, folder: Path) -> Path:
    """Write the published assignment folder (notebook and the assignment's data files) into `folder`."""
    dest = folder / published_name(assignment)
    dest.mkdir(parents=True)
    nbformat.write(solution_notebook(assignment), str(dest / f"{assignment}.ipynb"))
    for path in sorted(course.source_notebook(assignment).parent.iterdir()):
        if path.is_file() and not path.is_symlink() and path.suffix != ".ipynb":
            shutil.copy(path, dest / path.name)
    return dest


def release_to_exchange(assignment: str, exchange: Path) -> Path:
    """Through nbgrader's exchange code: outbound/<name>, with its permissions."""
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange import ExchangeError
    from nbgrader.exchange.default import ExchangeReleaseAssignment

    if not Path(exchange).is_dir():
        raise GradingError(f"the exchange folder {exchange} does not exist (the hub's administrator creates it)")
    with tempfile.TemporaryDirectory(prefix="tinylm-solutions-") as tmp:
        _stage(assignment, Path(tmp) / "release")
        coursedir = CourseDirectory(root=tmp, release_directory="release", course_id=gradebook.COURSE_ID,
                                    assignment_id=published_name(assignment))
        try:
            ExchangeReleaseAssignment(coursedir=coursedir, root=str(exchange), force=True).start()
        except ExchangeError as err:
            raise GradingError(f"nbgrader's exchange refused the release: {err}") from None
    return Path(exchange) / gradebook.COURSE_ID / "outbound" / published_name(assignment)


def release_to_folder(assignment: str, out: Path) -> Path:
    target = Path(out) / published_name(assignment)
    shutil.rmtree(target, ignore_errors=True)
    return _stage(assignment, Path(out))


def release_solutions(assignment: str, *, force: bool = False, exchange: Path | None = None,
                      out: Path | None = None, now: dt.datetime | None = None) -> Path:
    """Publish; returns the published folder. GradingError says why not."""
    if assignment not in course.assignments():
        raise GradingError(f"unknown assignment {assignment!r}; the course has {course.assignments()}")
    why = refusal(assignment, now or dt.datetime.now(dt.timezone.utc), deadlines.load())
    if why and not force:
        raise GradingError(f"not releasing the solutions: {why}")
    exchange = exchange or os.environ.get("TINYLM_HUB_EXCHANGE")
    if exchange and not out:
        return release_to_exchange(assignment, Path(exchange))
    return release_to_folder(assignment, Path(out) if out else gradebook.folder("released_solutions"))
