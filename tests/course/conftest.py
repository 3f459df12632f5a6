"""Fixtures of the course-wide tests."""
from __future__ import annotations

import pytest

from ..helpers import once_per_session
from .learner_run import run_notebooks


@pytest.fixture(scope="session")
def learner_run(tmp_path_factory) -> dict:
    """The ten notebooks as a learner runs them, once per session (learner_run.py):
    {"runs": {assignment: {"wall_s", "cpu_s", "error": None or why the run stopped there, "notebook": the
    executed copy}}, "folder": the course folder}; a notebook after one that failed has no run."""
    return once_per_session(tmp_path_factory, "learner_run", run_notebooks)
