"""Read one submitted notebook the way a careful instructor would, before
nbgrader sees it: is it a notebook at all, and how does it differ from the
released structure (deleted, duplicated, retyped or edited graded cells,
changed points or metadata)?

`inspect_submission` never raises on bad input: it returns an Intake with a
list of plain-English problems, `fatal` set when the file cannot be graded at
all, and, when it can, a repaired notebook in which nothing the student
changed in graded cells can earn points: graded and locked cells whose
metadata was copied or invented lose that metadata, so nbgrader restores the
originals (with hidden tests) by grade id and never aborts on them; graded
cells whose flags or points were changed get the released metadata back.

The grader's messages quote what they name of the submission with
escape.quoted (on feedback pages too).
"""
from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ...notebook_format import nbg, read
from ..escape import quoted
from ..records import digest

MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024
# A notebook's cells and the depth of its JSON, checked before the notebook
# format is validated: a notebook of 250,000 empty cells (2.5 MB) held the
# grader 202 s, and JSON nested past Python's recursion limit cannot be read.
# The course's notebooks have at most 54 cells and nest 7 deep; a student's
# scratch cells and cell metadata stay far below both.
MAX_CELLS = 2000
MAX_NESTING = 64
# Files (and folders) a submission may hold: nbgrader copies each one, so ten
# thousand tiny files (10 KB in all, under every byte cap) held a worker for
# 592 of its 600 s. A notebook, the mylm/ answers and a few data
# files are far fewer.
MAX_SUBMISSION_FILES = 200


def too_many_files(count: int) -> str:
    """The reason a submission of `count` files is rejected."""
    return (f"the submission holds {count} files and folders, over the limit of {MAX_SUBMISSION_FILES} per "
            "submission: it was rejected, not graded (send the notebook and its few data files only)")


def rejection_note(folder: Path) -> Path:
    """Where collect records why it rejected the submission in `folder`
    (beside it, so nbgrader never copies it)."""
    return folder.parent / f".{folder.name}.rejected.txt"


def rejection(folder: Path) -> str | None:
    """Why the submission in `folder` is not graded at all, or None: collect
    rejected it, or it holds more than MAX_SUBMISSION_FILES entries (counted
    without following links)."""
    note = rejection_note(folder)
    if note.is_file() and not note.is_symlink():
        return note.read_text(errors="replace")[:500]
    count = sum(len(dirs) + len(files) for _, dirs, files in os.walk(folder))
    return too_many_files(count) if count > MAX_SUBMISSION_FILES else None


@dataclass
class Intake:
    path: Path
    problems: list[str] = field(default_factory=list)
    fatal: bool = False
    notebook: nbformat.NotebookNode | None = None
    digest: str = ""
    rewrite: bool = False  # readable, but nbgrader needs it written again (a byte order mark)

    def fail(self, message: str) -> "Intake":
        self.problems.append(message)
        self.fatal = True
        return self


def inspect_submission(path: Path, release_path: Path) -> Intake:
    """release_path: the released notebook the student started from."""
    path = Path(path)
    intake = Intake(path, digest=digest(path))
    if path.is_symlink():
        return intake.fail(f"{path.name} is a symbolic link; submit the notebook file itself")
    if not path.is_file():
        return intake.fail(f"{path.name} is missing from the submission")
    size = path.stat().st_size
    if size == 0:
        return intake.fail(f"{path.name} is empty (0 bytes): save the notebook in Jupyter and submit again")
    if size > MAX_NOTEBOOK_BYTES:
        return intake.fail(f"{path.name} is {size / 2**20:.0f} MB, over the {MAX_NOTEBOOK_BYTES // 2**20} MB limit: "
                           "clear the outputs (Edit > Clear Outputs of All Cells) and submit again")
    data = path.read_bytes()
    intake.rewrite = data.startswith(b"\xef\xbb\xbf")  # nbformat (and so nbgrader) refuses the mark: written without it
    try:
        raw = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return intake.fail(f"{path.name} is not valid notebook JSON ({err}); it may have been saved by another "
                           "editor or truncated: download it again from Jupyter")
    except RecursionError:
        return intake.fail(f"{path.name} nests its JSON deeper than Python can read (over {MAX_NESTING} levels are "
                           "refused): it is not a notebook Jupyter saved; download it again from Jupyter")
    too_big = _over_limits(raw)
    if too_big:
        return intake.fail(f"{path.name} {too_big}; it was not graded: submit the released notebook with your "
                           "answers (delete scratch cells)")
    if not isinstance(raw, dict) or raw.get("nbformat") != 4 or not isinstance(raw.get("cells"), list):
        version = raw.get("nbformat") if isinstance(raw, dict) else None
        return intake.fail(f"{path.name} is not an nbformat 4 notebook (nbformat={quoted(repr(version), 20)}); "
                           "submit the .ipynb file of the released notebook")
    try:
        nb = nbformat.reads(json.dumps(raw), as_version=4)
        nbformat.validate(nb)
    except Exception as err:  # nbformat raises several types on schema errors
        # where, not what: the schema error's text quotes the notebook's own content
        where = "/".join(map(str, getattr(err, "absolute_path", None) or [])) or "the notebook"
        return intake.fail(f"{path.name} does not follow the notebook format (at {quoted(where)})")
    if not nb.cells:
        return intake.fail(f"{path.name} has no cells")
    intake.notebook = nb
    _compare_structure(nb, read(release_path), intake)
    return intake


def _over_limits(raw) -> str | None:
    """What in a parsed notebook is past MAX_CELLS or MAX_NESTING (said
    before anything slower reads it), or None."""
    cells = raw.get("cells") if isinstance(raw, dict) else None
    if isinstance(cells, list) and len(cells) > MAX_CELLS:
        return f"has {len(cells)} cells, over the limit of {MAX_CELLS}"
    todo = [(raw, 1)]
    while todo:
        value, depth = todo.pop()
        if depth > MAX_NESTING:
            return f"nests its JSON over {MAX_NESTING} levels deep, where a notebook nests about 7"
        if isinstance(value, dict):
            todo += [(v, depth + 1) for v in value.values() if isinstance(v, (dict, list))]
        elif isinstance(value, list):
            todo += [(v, depth + 1) for v in value if isinstance(v, (dict, list))]
    return None


def _compare_structure(nb, release, intake: Intake) -> None:
    """Report differences in graded/locked cells and strip metadata that does
    not belong to exactly one original cell."""
    originals = {nbg(c)["grade_id"]: c for c in release.cells if nbg(c).get("grade_id")}
    seen: dict[str, int] = {}
    for cell in nb.cells:
        meta = nbg(cell)
        gid = meta.get("grade_id") if isinstance(meta, dict) else None
        if not gid or not isinstance(gid, str):
            if "nbgrader" in cell.metadata:
                # Always said, even for metadata that grades nothing: the
                # problem makes the grader write the repaired notebook, and
                # nbgrader stops on any nbgrader metadata without a grade id.
                cell.metadata.pop("nbgrader")
                what = "without a grade id" if not gid else f"whose grade id is not text ({type(gid).__name__})"
                intake.problems.append(f"a cell has nbgrader metadata {what}; it was ignored")
            continue
        seen[gid] = seen.get(gid, 0) + 1
        orig = originals.get(gid)
        if orig is None:
            intake.problems.append(f"cell {quoted(gid)} is not in the released notebook; its grading metadata was "
                                   "ignored")
            cell.metadata.pop("nbgrader")
            continue
        if seen[gid] > 1:
            intake.problems.append(f"cell {quoted(gid)} appears more than once; only the first copy is graded")
            cell.metadata.pop("nbgrader")
            continue
        if cell.cell_type != orig.cell_type:
            intake.problems.append(f"cell {quoted(gid)} was changed from {orig.cell_type} to "
                                   f"{quoted(cell.cell_type, 20)}; "
                                   "the original is restored for grading")
        om = nbg(orig)
        if meta.get("points") != om.get("points") or any(bool(meta.get(k)) != bool(om.get(k))
                                                         for k in ("grade", "solution", "locked")):
            intake.problems.append(f"cell {quoted(gid)} has changed grading metadata (points/flags); "
                                   "the original is restored for grading")
            # Restored here, not left to nbgrader: with a test cell's flags
            # switched off nbgrader stops on "Inconsistent checksums" and the
            # whole notebook scores zero.
            cell.metadata["nbgrader"] = copy.deepcopy(om)
        if om.get("locked") and cell.source != orig.source:
            intake.problems.append(f"read-only cell {quoted(gid)} was edited; the original is restored for grading")
    for gid, orig in originals.items():
        if gid not in seen:
            what = "answer" if nbg(orig).get("solution") else "test" if nbg(orig).get("grade") else "read-only"
            intake.problems.append(f"{what} cell {quoted(gid)} was deleted; "
                                   + ("the original is put back and graded" if what != "answer"
                                      else "its exercise cannot earn points"))


def drop_symlinks(folder: Path) -> list[str]:
    """nbgrader copies a submission folder following symlinks: remove them.
    The problems to report, one per link."""
    problems = []
    for p in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if p.is_symlink():
            p.unlink()
            problems.append(f"symbolic link {quoted(p.name)} removed from the submission (links are never followed)")
    return problems


def write_repaired(intake: Intake, dest: Path) -> None:
    nbformat.write(intake.notebook, str(dest))
