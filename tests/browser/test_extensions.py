"""nbgrader's Lab extension is what puts Validate and the formgrader in
front of people. These tests fail when it is missing, and prove that they
can: the same check run against a Lab with the extension disabled must
report it missing."""
from __future__ import annotations

from .lab import BROWSER, NotebookPage, cell_count, missing_nbgrader_ui

pytestmark = BROWSER

NB = "01_embeddings"
FIX = "run `make doctor` (python -m autograder doctor) for the fix"


def test_nbgrader_extensions_are_in_jupyterlab(page, learner_server):
    NotebookPage(page, cell_count(NB)).open(learner_server.page_url(f"lab/tree/{NB}/{NB}.ipynb"))
    missing = missing_nbgrader_ui(page)
    page.shots("lab-with-nbgrader")
    assert missing == [], f"nbgrader's Lab extension is missing from JupyterLab: {', '.join(missing)}; {FIX}"


def test_nbgrader_extensions_are_in_notebook7(page, learner_server):
    NotebookPage(page, cell_count(NB)).open(learner_server.page_url(f"notebooks/{NB}/{NB}.ipynb"))
    missing = missing_nbgrader_ui(page, menu_items=("Create assignment",))
    page.shots("notebook7-with-nbgrader")
    page.goto(learner_server.page_url("tree"))
    page.locator(".lm-MenuBar-itemLabel").first.wait_for()
    missing += missing_nbgrader_ui(page, notebook_open=False)
    page.shots("notebook7-tree-with-nbgrader")
    assert missing == [], f"nbgrader's extension is missing from Notebook 7: {', '.join(missing)}; {FIX}"


def test_the_check_reports_a_lab_without_nbgrader(page, bare_lab_server):
    NotebookPage(page, cell_count(NB)).open(bare_lab_server.page_url(f"lab/tree/{NB}/{NB}.ipynb"))
    missing = missing_nbgrader_ui(page)
    page.shots("lab-without-nbgrader")
    assert missing == ["the Nbgrader menu", "the Validate button on the notebook toolbar"], missing
