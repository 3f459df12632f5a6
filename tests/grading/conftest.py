"""Fixtures shared by the grader's tests."""
from __future__ import annotations

import os
import time
import uuid

import pytest

from autograder import course
from autograder.grading import gradebook

# `.ci/run` installs and starts a PostgreSQL server on loopback and exports
# TINYLM_TEST_PG_URL (a role allowed to create databases).
PG_URL = os.environ.get("TINYLM_TEST_PG_URL", "postgresql+psycopg://tinylm:tinylm@127.0.0.1:5432/postgres")


@pytest.fixture
def pg_database():
    """A scratch PostgreSQL database, dropped after the test; the test is skipped,
    with the reason, where no server answers at PG_URL."""
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
        # FORCE ends the sessions left on it; a backend of the server's own (autovacuum) connected at that moment
        # is not this role's to end, so the drop is tried again once it has gone
        for attempt in range(20):
            try:
                admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
                break
            except psycopg.errors.InsufficientPrivilege:
                if attempt == 19:
                    raise
                time.sleep(0.5)
        admin.close()


@pytest.fixture(scope="session")
def odd_submissions(tmp_path_factory):
    """The graded batch of odd_submissions.py, graded once per session."""
    from .batches import shared_batch
    from .odd_submissions import B, produce
    if B not in course.assignments():
        pytest.skip(f"notebook {B} is not built")
    return shared_batch(tmp_path_factory, "odd_submissions", produce)
