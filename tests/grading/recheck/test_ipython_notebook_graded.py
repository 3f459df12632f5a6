"""An honest notebook written with IPython syntax (a %%time heading an
answer cell, %timeit and %time lines, %matplotlib inline and a shell escape
in a helper cell) keeps every point through the recheck, and the student
reads that its shell escape did not run there."""
from __future__ import annotations

import pytest


pytestmark = [pytest.mark.grader, pytest.mark.slow]


def test_an_honest_notebook_in_ipython_syntax_keeps_its_points(odd_submissions):
    r = odd_submissions["results"]["ipython"]
    assert (r["score"], r["status"], r["flags"]) == (r["max_score"], "graded", []), r
    assert all(c["recheck"] == "pass" for c in r["cells"].values()), r["cells"]


def test_the_student_reads_that_the_shell_escape_did_not_run_in_the_recheck(odd_submissions):
    problems = odd_submissions["results"]["ipython"]["problems"]
    assert any("shell commands" in p and "not run" in p for p in problems), problems
    assert not any("magic" in p for p in problems), "%%time, %timeit, %time and %matplotlib are handled, not skipped"
