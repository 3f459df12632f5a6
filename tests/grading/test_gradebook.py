"""The gradebook helpers of autograder/grading/gradebook.py on SQLite: a new
gradebook and its registered assignments are what nbgrader itself makes."""
from __future__ import annotations

import os
import sqlite3

import pytest
from nbgrader.api import Gradebook, MissingEntry

from autograder import course
from autograder.grading import gradebook
from autograder.grading.errors import GradingError
from autograder.grading.gradebook import _ensure_student


@pytest.fixture
def alembic_on_path(monkeypatch):
    """nbgrader's own Gradebook runs `alembic` to create a gradebook."""
    monkeypatch.setenv("PATH", course.path_with_interpreter_bin(os.environ["PATH"]))


def test_a_student_another_worker_added_meanwhile_is_found_not_an_error(tmp_path, monkeypatch, alembic_on_path):
    """Two workers grading two notebooks of one student: both look the
    student up, both find nothing, the second insert meets the first's row."""
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    mine, other = Gradebook(url), Gradebook(url)
    try:
        other.add_student("pair")
        look_up = mine.find_student
        looked = []

        def missing_the_first_time(student):
            looked.append(student)
            if len(looked) == 1:
                raise MissingEntry()
            return look_up(student)
        monkeypatch.setattr(mine, "find_student", missing_the_first_time)
        _ensure_student(mine, "pair")
        assert [s.id for s in mine.students] == ["pair"] and len(looked) == 2
    finally:
        mine.close()
        other.close()


def _rows(path) -> dict:
    """Every table's schema and rows, without the columns that hold
    generated ids (nbgrader draws a fresh uuid for each row)."""
    db = sqlite3.connect(path)
    try:
        out = {}
        for table, sql in db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"):
            columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
            kept = [i for i, name in enumerate(columns) if name != "id" and not name.endswith("_id")]
            out[table] = (sql, sorted(tuple(row[i] for i in kept) for row in db.execute(f"SELECT * FROM {table}")))
        return out
    finally:
        db.close()


def test_a_new_gradebook_is_the_one_nbgrader_makes(tmp_path, alembic_on_path):
    Gradebook(f"sqlite:///{tmp_path / 'theirs.db'}", course_id=gradebook.COURSE_ID).close()
    with gradebook.open_gradebook(f"sqlite:///{tmp_path / 'ours.db'}"):
        pass
    theirs, ours = _rows(tmp_path / "theirs.db"), _rows(tmp_path / "ours.db")
    assert theirs["alembic_version"][1] and ours == theirs


@pytest.mark.skipif(not course.assignments(), reason="the notebooks are not built")
def test_registering_assignments_fills_the_gradebook_as_nbgraders_command_does(tmp_path):
    ours, theirs = f"sqlite:///{tmp_path / 'ours.db'}", f"sqlite:///{tmp_path / 'theirs.db'}"
    gradebook.ensure_assignments(ours, course.assignments())
    with gradebook.open_gradebook(theirs):
        pass
    course.generate(tmp_path / "release", db_url=theirs)  # every notebook, in one nbgrader process
    registered = _rows(tmp_path / "ours.db")
    assert len(registered["assignment"][1]) == len(course.assignments()) and registered["grade_cells"][1]
    assert registered == _rows(tmp_path / "theirs.db")


def test_an_assignment_without_a_source_is_refused_with_nbgraders_reason(tmp_path):
    refusal = r"cannot register 99_missing in the gradebook .*\n.*No notebooks were matched"
    with pytest.raises(GradingError, match=refusal):
        gradebook.ensure_assignments(f"sqlite:///{tmp_path / 'gb.db'}", ["99_missing"])
