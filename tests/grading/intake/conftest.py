"""Fixtures of the intake's tests."""
from __future__ import annotations

import pytest

from autograder.grading import gradebook


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A scratch course data folder, where collect puts what it takes."""
    monkeypatch.setenv(gradebook.DATA_ENV_VAR, str(tmp_path / "course"))
    return tmp_path / "course"
