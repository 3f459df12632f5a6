"""The code cells after a notebook's last graded cell are left out while
grading (Options.skip_tail, the default; `grade --every-cell` runs them):
which cells tail_start picks, that they do not run and say so in the
autograded notebook, and that every notebook's solution, untouched release
and seed-bug submissions (test_grade_proofs' batch) get the same scores,
cell by cell, with and without them."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from autograder import course, specimens
from autograder.grading import gradebook
from autograder.grading.preprocessors import NOT_RUN, tail_start
from autograder.notebook_format import is_answer, is_check, read

from .batches import shared_batch
from .test_grade_proofs import ASSIGNMENTS, bug_submissions, graded  # noqa: F401 (graded: the proofs' fixture)


def _code(source: str, **nbgrader) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    if nbgrader:
        cell.metadata["nbgrader"] = {"schema_version": 3, "locked": False, "grade": False, "solution": False,
                                     "grade_id": source, **nbgrader}
    return cell


def test_the_tail_starts_right_after_the_last_answer_or_test_cell():
    setup = _code("setup", locked=True)
    answer, check = _code("answer", solution=True), _code("check", grade=True, points=1, locked=True)
    demo, prose = _code("demo()"), nbformat.v4.new_markdown_cell("text")
    nb = nbformat.v4.new_notebook(cells=[setup, answer, check, demo, prose, demo])
    assert tail_start(nb) == 3
    nb.cells = [setup, demo, check, answer]                 # an answer cell last: nothing is left out
    assert tail_start(nb) == 4
    nb.cells = [setup, demo, prose]                         # nothing graded: nothing needs to run
    assert tail_start(nb) == 0
    nb.cells = [_code("task", grade=True, points=2, solution=True), demo]  # a manually graded answer counts too
    assert tail_start(nb) == 1


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_graded_cell_of_a_course_notebook_is_in_its_tail(assignment):
    nb = read(course.source_notebook(assignment))
    start = tail_start(nb)
    graded_at = [i for i, c in enumerate(nb.cells) if is_answer(c) or is_check(c)]
    assert graded_at and max(graded_at) == start - 1


def _autograded(student: str, assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(gradebook.folder("autograded") / student / assignment / f"{assignment}.ipynb", as_version=4)


def _tail_batch(data: Path) -> dict:
    """Notebook 01's solution with a cell of the learner's added at the end,
    graded in both modes."""
    from autograder.grading.batch import Options, grade_all
    a = ASSIGNMENTS[0]
    nb = specimens.honest(a)
    nb.cells.append(nbformat.v4.new_code_cell('print("the tail ran")'))
    out = {}
    for student, skip in (("tail_skipped", True), ("tail_run", False)):
        specimens.submit(data, student, a, nb)
        [result] = grade_all(Options(assignments=[a], students=[student], workers=1, progress=False, skip_tail=skip))
        done = _autograded(student, a)
        start = tail_start(done)
        out[student] = {"result": result, "tail": [c.get("outputs", []) for c in done.cells[start:]
                                                   if c.cell_type == "code"],
                        "graded_outputs": [c.get("outputs", []) for c in done.cells[:start]
                                           if is_check(c) or is_answer(c)]}
    return json.loads(json.dumps(out))


@pytest.fixture(scope="module")
def tail_batch(tmp_path_factory):
    return shared_batch(tmp_path_factory, "skip_tail", _tail_batch)


@pytest.mark.grader
def test_the_tail_is_left_out_with_a_note_and_the_grade_is_full(tail_batch):
    skipped = tail_batch["tail_skipped"]
    r = skipped["result"]
    assert r["score"] == r["max_score"] > 0 and r["status"] == "graded" and not r["flags"], r
    assert len(skipped["tail"]) >= 2  # the course's own cells after the last check, and the learner's
    for outputs in skipped["tail"]:
        assert [o.get("text") for o in outputs] == [NOT_RUN]
    assert not any(NOT_RUN in str(outputs) for outputs in skipped["graded_outputs"])


@pytest.mark.grader
def test_every_cell_mode_runs_the_tail(tail_batch):
    ran = tail_batch["tail_run"]
    assert ran["result"]["score"] == ran["result"]["max_score"], ran["result"]
    assert not any(NOT_RUN in str(outputs) for outputs in ran["tail"])
    assert "the tail ran" in str(ran["tail"][-1])


def _every_cell_proofs(data: Path) -> dict:
    """test_grade_proofs' submissions, graded with every cell run."""
    from autograder.grading.batch import Options, grade_all
    for a in ASSIGNMENTS:
        specimens.submit(data, f"solution_{a[:2]}", a, specimens.honest(a))
        specimens.submit(data, f"release_{a[:2]}", a, specimens.notebook(a))
    for student, (a, members) in bug_submissions().items():
        specimens.submit(data, student, a, specimens.with_bugs(a, [(g, old, new) for _, g, old, new, _ in members]))
    results = grade_all(Options(assignments=ASSIGNMENTS, workers=2, progress=False, skip_tail=False))
    return {"results": {f"{r['student']}/{r['assignment']}": r for r in results}}


# On the proofs' worker, after them: `graded` is imported from there, so conftest.py's grouping would name this
# module instead, and under xdist this test could wait on the proofs' batch while the other worker graded it.
@pytest.mark.grader
@pytest.mark.slow
@pytest.mark.long
@pytest.mark.xdist_group("tests/grading/test_grade_proofs.py")
def test_solutions_releases_and_seed_bugs_score_the_same_with_every_cell_run(graded, tmp_path_factory):  # noqa: F811
    every = shared_batch(tmp_path_factory, "grader_proofs_every_cell", _every_cell_proofs)["results"]
    skipped = graded["results"]
    assert every.keys() == skipped.keys()
    differ = {key: ({c: v["score"] for c, v in every[key]["cells"].items()},
                    {c: v["score"] for c, v in skipped[key]["cells"].items()})
              for key in every
              if {c: (v["score"], v["recheck"]) for c, v in every[key]["cells"].items()}
              != {c: (v["score"], v["recheck"]) for c, v in skipped[key]["cells"].items()}
              or every[key]["status"] != skipped[key]["status"]}
    assert not differ, differ
    assert any(r["score"] == 0 for r in every.values()) and any(r["score"] == r["max_score"] for r in every.values())
