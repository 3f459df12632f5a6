"""The full collect -> grade -> export cycle against a real PostgreSQL
server (issue 6). `.ci/run` installs and starts one on loopback and exports
TINYLM_TEST_PG_URL (a role allowed to create databases); without a
reachable server the test is skipped with the reason."""
from __future__ import annotations

import csv
import os
import uuid

import pytest

from autograder import course
from autograder.grading import gradebook
from autograder.authoring import specimens

A = "01_embeddings"
PG_URL = os.environ.get("TINYLM_TEST_PG_URL", "postgresql+psycopg://tinylm:tinylm@127.0.0.1:5432/postgres")
pytestmark = [pytest.mark.grader, pytest.mark.slow, pytest.mark.skipif(A not in course.assignments(), reason="notebook 01 is not built")]


@pytest.fixture
def pg_database():
    psycopg = pytest.importorskip("psycopg", reason="psycopg 3 is not installed (pip install 'psycopg[binary]')")
    conninfo = PG_URL.replace("postgresql+psycopg://", "postgresql://")
    try:
        admin = psycopg.connect(conninfo, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as err:
        pytest.skip(f"no PostgreSQL server at {gradebook.redacted(PG_URL)} ({str(err).strip().splitlines()[0]}); "
                    "`.ci/run` starts one, or set TINYLM_TEST_PG_URL")
    name = f"tinylm_test_{uuid.uuid4().hex[:8]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    base = PG_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.close()


def test_grade_and_export_on_postgres(pg_database, tmp_path, monkeypatch):
    from autograder.grading.export import export
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
