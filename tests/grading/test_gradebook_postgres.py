"""The full collect -> grade -> export cycle against a real PostgreSQL
server (the pg_database fixture, tests/grading/conftest.py)."""
from __future__ import annotations

import csv

import pytest

from autograder import course, specimens
from autograder.grading import gradebook

A = "01_embeddings"
pytestmark = [pytest.mark.grader, pytest.mark.slow, pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")]


def test_grade_and_export_on_postgres(pg_database, tmp_path, monkeypatch):
    from autograder.grading.publish.export import export
    from autograder.grading.batch import Options, grade_all

    monkeypatch.setenv(gradebook.DATA_ENV_VAR, str(tmp_path / "course"))
    specimens.submit(tmp_path / "course", "ann", A, specimens.honest(A))
    specimens.submit(tmp_path / "course", "bob", A, specimens.notebook(A))
    results = grade_all(Options(assignments=[A], workers=2, progress=False, db_url=pg_database))
    assert {r["student"]: r["score"] for r in results} == {"ann": 7, "bob": 0}
    assert not (tmp_path / "course" / "gradebook.db").exists(), "grading fell back to SQLite"
    files = export(pg_database, tmp_path / "out")
    rows = list(csv.DictReader(open(files[1])))
    assert {(r["student"], r["score"], r["max_score"]) for r in rows} == {("ann", "7", "7"), ("bob", "0", "7")}
    totals = {r["student"]: r["total"] for r in csv.DictReader(open(files[2]))}
    assert totals == {"ann": "7", "bob": "0"}
