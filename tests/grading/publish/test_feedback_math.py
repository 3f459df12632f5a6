"""The feedback folder carries its own MathJax: copied once by write_feedback,
found by every page at the address its script tags name (the browser test,
tests/browser/test_feedback_page.py, reads such a page in Chromium)."""
import re

from autograder.grading.publish.feedback import write_feedback

from ..batches import course_data

A = "02_rmsnorm"


def _result(student: str) -> dict:
    return {"assignment": A, "student": student, "score": 0, "max_score": 1, "cells": {}, "problems": [], "flags": []}


def test_pages_load_the_mathjax_copied_once_into_the_feedback_folder(tmp_path):
    with course_data(tmp_path):
        pages = write_feedback([_result("ann"), _result("bob")])
        mathjax = tmp_path / "feedback" / "mathjax" / "MathJax.js"
        first_copy = mathjax.stat().st_mtime_ns
        write_feedback([_result("cat")])
    assert mathjax.stat().st_mtime_ns == first_copy, "copied again"
    for page in pages:
        sources = re.findall(r'<script src="([^"]+)">', page.read_text())
        assert len(sources) == 2 and all((page.parent / s).resolve().is_file() for s in sources), sources
