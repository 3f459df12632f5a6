"""The gradebook helpers of autograder/grading/gradebook.py on SQLite."""
from __future__ import annotations

import os
import sys

from nbgrader.api import Gradebook, MissingEntry

from autograder.grading.gradebook import _ensure_student


def test_a_student_another_worker_added_meanwhile_is_found_not_an_error(tmp_path, monkeypatch):
    """Two workers grading two notebooks of one student: both look the
    student up, both find nothing, the second insert meets the first's row."""
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])  # nbgrader's alembic
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
