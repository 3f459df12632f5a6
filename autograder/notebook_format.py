"""How a course notebook marks its cells: nbgrader metadata (answers,
checks, locked setup), the solution and hidden-test blocks, and the names
an answer cell defines. Shared by authoring, grading and the checks; it
imports nothing of the course."""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import nbformat

SOLUTION_BLOCK = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
HIDDEN_BLOCK = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")


def read(path: Path) -> nbformat.NotebookNode:
    """A notebook file, read as Jupyter reads it: UTF-8 with or without a
    byte order mark (Notepad and some Windows editors write one)."""
    # Imported here: nbformat brings jsonschema, whose import builds a grammar (about 1.7 s of CPU),
    # and the checks import this module in every notebook kernel and recheck child, which never read a notebook.
    import nbformat
    return nbformat.reads(Path(path).read_bytes().decode("utf-8-sig"), as_version=4)


def nbg(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def is_answer(cell) -> bool:
    return cell.cell_type == "code" and bool(nbg(cell).get("solution"))


def is_check(cell) -> bool:
    return cell.cell_type == "code" and bool(nbg(cell).get("grade"))


def setup_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and nbg(c).get("locked") and not nbg(c).get("grade")]


def visible_part(check_source: str) -> str:
    """The test cell as a learner sees it: hidden tests cut out."""
    return HIDDEN_BLOCK.sub("", check_source).replace("### BEGIN HIDDEN TESTS", "").replace("### END HIDDEN TESTS", "")


def defined_names(source: str) -> list[str]:
    """Top-level functions, classes and assigned names of a cell."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names
