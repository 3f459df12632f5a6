"""An instructor opens a notebook source (autograder/authoring/notebook_src/NN_name.py,
jupytext's percent format) in JupyterLab as a notebook, runs it, edits a
cell and saves: the .py file changes by that edit only and still builds."""
from __future__ import annotations

import re
import shutil

import pytest

from autograder.authoring.build import source_cells
from autograder.course import NOTEBOOK_SOURCES
from autograder.notebook_format import nbg, read

from .lab import BROWSER, CELLS, PANEL, ROOT, JupyterServer, NotebookPage

pytestmark = BROWSER

ASSIGNMENT = "01_embeddings"
ADDED_LINE = 'print("edited in JupyterLab")'


@pytest.fixture(scope="module")
def author_server(tmp_path_factory):
    """As `make formgrader`: started in autograder/, file browser on the
    course root, over a copy of the sources and the nbgrader config."""
    base = tmp_path_factory.mktemp("author")
    course = base / "course"
    shutil.copytree(NOTEBOOK_SOURCES, course / "autograder" / "authoring" / "notebook_src",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "autograder" / "nbgrader_config.py", course / "autograder")
    (course / ".course").mkdir()
    server = JupyterServer(cwd=course / "autograder", root_dir=course, state_dir=base / "jupyter").start()
    server.course = course
    yield server
    server.stop()


def test_an_instructor_opens_edits_and_saves_a_source_as_a_notebook(page, author_server):
    rel = f"autograder/authoring/notebook_src/{ASSIGNMENT}.py"
    path = author_server.course / rel
    original = path.read_text()
    committed = read(ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    code = [i for i, c in enumerate(committed.cells) if c.cell_type == "code"]
    setup = code[0]
    assert nbg(committed.cells[setup]).get("grade_id") == "setup", "the first code cell is not the setup cell"
    edit = next(i for i in code if not nbg(committed.cells[i]))  # the first demo cell

    page.goto(author_server.page_url("lab/tree/autograder/authoring/notebook_src"))
    item = page.locator(".jp-DirListing-item", has_text=f"{ASSIGNMENT}.py")
    item.wait_for()
    page.shots("file-browser")
    item.click(button="right")
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Open With$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Notebook$")).click()

    # Every cell of the source on screen, a kernel attached without a kernel dialog.
    nb = NotebookPage(page, len(committed.cells))
    page.wait_for_function(f"() => document.querySelectorAll('{CELLS}').length === {len(committed.cells)}",
                           timeout=120_000)
    nb.wait_idle()
    assert page.locator(".jp-Dialog").count() == 0, page.locator(".jp-Dialog").inner_text()
    kernel = page.locator(f"{PANEL} .jp-Toolbar-kernelName").inner_text()
    assert "Python 3" in kernel, f"the source opened with kernel {kernel!r}"
    page.shots("opened-as-notebook")

    # nbgrader's Create Assignment panel reads each cell's metadata from the header line.
    page.locator(".lm-TabBar-tab", has_text="Create Assignment").click()
    panel = page.locator("#nbgrader-create_assignemnt")  # nbgrader's id, spelling included
    graded = [nbg(c) for c in committed.cells if nbg(c)]
    page.wait_for_function("(n) => document.querySelectorAll("
                           "'#nbgrader-create_assignemnt .nbgrader-CellId input').length >= n", arg=len(graded))
    shown = {}  # grade_id -> points, as the panel's widgets show them
    widgets = panel.locator(".nbgrader-CellWidget")
    for i in range(widgets.count()):
        grade_id = widgets.nth(i).locator(".nbgrader-CellId input").input_value()
        if grade_id:
            shown[grade_id] = widgets.nth(i).locator(".nbgrader-CellPoints input").input_value()
    expected = {m["grade_id"]: str(m.get("points", 0)) for m in graded}
    assert shown == expected, f"Create Assignment shows {shown}, the source says {expected}"
    assert any(p != "0" for p in expected.values()), "no graded cell with points to compare"
    page.shots("create-assignment-panel")

    # It runs as a notebook: the setup cell, then the demo.
    nb.run_cell(setup)
    nb.run_cell(edit)
    assert "characters ->" in nb.output(edit), nb.output(edit)

    nb.type_into(edit, committed.cells[edit].source + "\n" + ADDED_LINE)
    nb.save(path)
    page.shots("edited-and-saved")

    saved = path.read_text()
    added = [l for l in saved.splitlines() if l not in original.splitlines()]
    removed = [l for l in original.splitlines() if l not in saved.splitlines()]
    assert (added, removed) == ([ADDED_LINE], []), f"the save changed more than the edit: +{added} -{removed}"
    cells = source_cells(path)
    assert [nbg(c) for c in cells] == [nbg(c) for c in committed.cells], "the save lost nbgrader metadata"
    assert cells[edit].source == committed.cells[edit].source + "\n" + ADDED_LINE
    assert not list(path.parent.glob("*.ipynb")), "the save paired the source with an .ipynb"
