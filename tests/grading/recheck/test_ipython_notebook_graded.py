"""An honest notebook written with IPython syntax (a %%time heading an
answer cell, %timeit and %time lines, %matplotlib inline and a shell escape
in a helper cell) keeps every point through the recheck, and the student
reads that its shell escape did not run there."""
from __future__ import annotations

import pytest

from autograder import course
from ..batches import shared_batch
from ..odd_submissions import B, produce

pytestmark = [pytest.mark.grader, pytest.mark.slow]


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    if B not in course.assignments():
        pytest.skip(f"notebook {B} is not built")
    return shared_batch(tmp_path_factory, "odd_submissions", produce)


def test_an_honest_notebook_in_ipython_syntax_keeps_its_points(batch):
    r = batch["results"]["ipython"]
    assert (r["score"], r["status"], r["flags"]) == (r["max_score"], "graded", []), r
    assert all(c["recheck"] == "pass" for c in r["cells"].values()), r["cells"]


def test_the_student_reads_that_the_shell_escape_did_not_run_in_the_recheck(batch):
    problems = batch["results"]["ipython"]["problems"]
    assert any("shell commands" in p and "not run" in p for p in problems), problems
    assert not any("magic" in p for p in problems), "%%time, %timeit, %time and %matplotlib are handled, not skipped"
