"""`python -m autograder check`: a learner's self-check in a fresh
kernel prints a score table with the checks' messages."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from autograder import course, specimens

A = "01_embeddings"
pytestmark = [pytest.mark.grader, pytest.mark.slow, pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")]


def _check(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "check", str(path)], cwd=course.ROOT,
                          capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))


def test_untouched_notebook_fails_every_exercise_with_the_reason():
    proc = _check(course.release_notebook(A))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = [l for l in proc.stdout.splitlines() if l.startswith("check_")]
    assert len(rows) == 4 and all(" FAIL " in r and "not implemented yet" in r for r in rows), proc.stdout
    assert "visible checks: 0 / 7 points" in proc.stdout


def test_one_bug_fails_one_exercise(tmp_path):
    nb = specimens.with_bugs(A, [("tied_logits", "x @ weight.T", "x @ weight")])
    path = tmp_path / A / f"{A}.ipynb"
    path.parent.mkdir()
    path.write_text(json.dumps(nb))
    proc = _check(path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    table = {l.split()[0]: l for l in proc.stdout.splitlines() if l.startswith("check_")}
    assert "FAIL" in table["check_tied_logits"]
    after = proc.stdout.split(table["check_tied_logits"], 1)[1].split("\ncheck_", 1)[0]
    assert "Likely bug: transposed weight" in after, proc.stdout
    assert all(" PASS " in table[c] for c in ("check_embed", "check_one_hot_embed", "check_tie_weights"))
    assert "visible checks: 5 / 7 points" in proc.stdout


def test_missing_notebook_is_a_clear_error(tmp_path):
    proc = _check(tmp_path / "nope.ipynb")
    assert proc.returncode == 2 and "no such notebook" in proc.stdout
