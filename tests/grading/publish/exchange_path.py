"""A feedback page's way to the student through nbgrader's default exchange:
the course writes the page (write_feedback), nbgrader's release_feedback
copies it into the exchange, the student's fetch_feedback copies it into
their assignment folder. Both run in this process, on folders of the test's own."""
from __future__ import annotations

import secrets
from pathlib import Path

import nbformat

from autograder import course
from autograder.grading.publish.feedback import write_feedback

from ..batches import course_data

COURSE_ID = "tinylm"
TIMESTAMP = "2026-12-01 10:00:00.000000 UTC"


def feedback_through_the_exchange(base: Path, student: str, assignment: str, extra_markdown: str = "") -> Path:
    """The page `student` fetched for `assignment` (its release notebook, plus
    one markdown cell if given); course data, exchange and the student's
    folders all under `base`."""
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import ExchangeFetchFeedback, ExchangeReleaseFeedback
    from traitlets.config import Config

    data, exchange, cache, home = base / "course", base / "exchange", base / "cache", base / "home"
    exchange.mkdir(parents=True)
    secret = secrets.token_hex(16)
    nb = nbformat.read(course.release_notebook(assignment), as_version=4)
    if extra_markdown:
        nb.cells.append(nbformat.v4.new_markdown_cell(extra_markdown))
    # What `nbgrader submit` left in the student's cache and `nbgrader collect` in submitted/,
    # and the notebook grading leaves in autograded/.
    submission = cache / COURSE_ID / f"{student}+{assignment}+{TIMESTAMP}"
    for folder in (submission, data / "submitted" / student / assignment, data / "autograded" / student / assignment):
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / f"{assignment}.ipynb"))
        (folder / "submission_secret.txt").write_text(secret)
        (folder / "timestamp.txt").write_text(TIMESTAMP)
    with course_data(data):
        write_feedback([{"assignment": assignment, "student": student, "score": 0, "max_score": 1, "cells": {},
                         "problems": [], "flags": []}])

    config = Config()
    config.CourseDirectory.root = str(data)
    config.CourseDirectory.course_id = COURSE_ID
    config.CourseDirectory.assignment_id = assignment
    config.CourseDirectory.student_id = student
    config.Exchange.root = str(exchange)
    config.Exchange.cache = str(cache)
    config.Exchange.assignment_dir = str(home)
    for step in (ExchangeReleaseFeedback, ExchangeFetchFeedback):
        step(coursedir=CourseDirectory(config=config), authenticator=None, config=config).start()
    pages = list((home / assignment / "feedback").glob(f"*/{assignment}.html"))
    assert len(pages) == 1, f"fetch_feedback should bring one page: {pages}"
    return pages[0]
