"""The feedback page a student opens after grading, in Chromium: the
notebook's math typeset by the MathJax copied once into the feedback folder
(every request to another host refused), the grader's own text left as it
is, and TeX from the student's own markdown kept from becoming a script, a
javascript: link or the grader's styling (MathJax's Safe extension, after nh3)."""
from __future__ import annotations

from pathlib import Path

import nbformat

from autograder import course

from ..grading.batches import course_data
from .lab import BROWSER
from .math_pages import MATH_ERRORS, RAW_MATH, RAW_TEX, TYPESET, VISIBLE_ESCAPES, served, wait_for_math

pytestmark = BROWSER

A = "03_causal_attention"  # math in its markdown, \texttt{kv\_len} among it
STUDENT_MARKDOWN = [
    r"My note: $\href{javascript:window.pwned=1}{\text{see}}$, $\class{grader-banner}{x}$ and $\style{position:fixed;top:0}{y}$",
    "<script>window.pwned = 1</script>$z$",
]
GRADER_NOTE = "a note that costs $5 and $6"


def _feedback_folder(data: Path) -> Path:
    from autograder.grading.publish.feedback import write_feedback

    with course_data(data):
        nb = nbformat.read(course.release_notebook(A), as_version=4)
        nb.cells += [nbformat.v4.new_markdown_cell(text) for text in STUDENT_MARKDOWN]
        folder = data / "autograded" / "ann" / A
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / f"{A}.ipynb"))
        write_feedback([{"assignment": A, "student": "ann", "score": 0, "max_score": 1, "cells": {},
                         "problems": [GRADER_NOTE], "flags": []}])
    return data / "feedback"


def test_the_feedback_page_typesets_the_notebooks_math_offline_and_safely(offline_page, tmp_path):
    page = offline_page
    with served(_feedback_folder(tmp_path)) as url:
        page.goto(url + f"ann/{A}/{A}.html")
        wait_for_math(page)
        page.shots("feedback")
        assert page.evaluate(TYPESET) > 0
        assert RAW_TEX.findall(page.evaluate(RAW_MATH)) == []
        assert page.evaluate(MATH_ERRORS) == []
        assert page.evaluate(VISIBLE_ESCAPES) == []
        assert GRADER_NOTE in page.inner_text(".grader-banner")  # the grader's text is not math
        assert page.evaluate("() => window.pwned") is None
        assert page.evaluate("() => document.querySelectorAll('a[href^=\"javascript:\"]').length") == 0
        assert page.evaluate("() => document.querySelectorAll('.grader-banner').length") == 1
        assert page.evaluate("() => [...document.querySelectorAll('.jp-RenderedMarkdown *')]"
                             ".filter(e => getComputedStyle(e).position === 'fixed').length") == 0
        assert page.left_loopback == []
