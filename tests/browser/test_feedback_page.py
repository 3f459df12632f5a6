"""The feedback page a student opens after grading, in Chromium with
scripts disabled (as JupyterLab's HTML viewer shows an untrusted page):
the page copied alone into a folder of its own, and the page nbgrader's
exchange fetched for the student, each typeset from its own MathML (every
fragment of the notebook a <math> element, drawn as math: numerators
above denominators, superscripts raised, radicals around their content),
no TeX or escape backslash left in the prose, and the student's TeX kept
from becoming a link, a class or a style. A fragment the converter cannot
take is typeset by the MathJax copied beside the pages, where it is."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder import course
from autograder.mathml import MathPage

from ..grading.batches import course_data
from ..grading.publish.exchange_path import feedback_through_the_exchange
from .conftest import ARTIFACTS, Shots
from .lab import BROWSER
from .math_pages import (MATH_ERRORS, RAW_MATH, RAW_TEX, TYPESET, VISIBLE_ESCAPES, refuse_other_hosts, served,
                         wait_for_math)

pytestmark = BROWSER

STUDENT_MARKDOWN = [
    r"My note: $\href{javascript:window.pwned=1}{\text{see}}$, $\class{grader-banner}{x}$ and $\style{position:fixed;top:0}{y}$",
    "<script>window.pwned = 1</script>",
    "$z$ and MathML of their own: <math><mi>raw</mi></math>",
]
GRADER_NOTE = "a note that costs $5 and $6"

# the page's own MathML (MathJax, where it runs, adds a hidden copy of its own for screen readers)
MATH_ELEMENTS = """() => [...document.querySelectorAll('.jp-RenderedMarkdown math')]
    .filter(e => e instanceof MathMLElement && e.namespaceURI === 'http://www.w3.org/1998/Math/MathML')
    .filter(e => !e.closest('.MJX_Assistive_MathML')).length"""
ALL_MATH = "() => document.querySelectorAll('math').length"
# a TeX command left as text in the notebook's prose (code aside)
TEX_COMMANDS = r"""() => [...document.querySelectorAll('.jp-RenderedMarkdown')].map(cell => {
    const copy = cell.cloneNode(true);
    copy.querySelectorAll('code, pre').forEach(e => e.remove());
    return copy.textContent.match(/\\[A-Za-z]+/g) || [];
}).flat()"""
# math drawn as math: each returns the elements laid out otherwise, and how many it looked at
LAYOUT = """() => {
    const box = e => e.getBoundingClientRect();
    const check = (selector, ok) => {
        const all = [...document.querySelectorAll('.jp-RenderedMarkdown ' + selector)];
        return [all.length, all.filter(e => !ok(e)).map(e => e.textContent)];
    };
    return {
        fractions: check('mfrac', f => box(f.children[0]).bottom <= box(f.children[1]).top + 1),
        superscripts: check('msup', s => box(s.children[1]).bottom < box(s.children[0]).bottom - 1),
        roots: check('msqrt', r => box(r).width > box(r.children[0]).width + 2),
    };
}"""


@pytest.fixture
def scriptless_page(browser, request):
    """A page in a context with JavaScript off, every request to another host refused."""
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1200, "height": 900})
    context.set_default_timeout(60_000)
    page = refuse_other_hosts(context.new_page())
    page.shots = Shots(page, ARTIFACTS / re.sub(r"[^\w.-]+", "_", request.node.name))
    yield page
    context.close()


def _notebook(assignment: str) -> nbformat.NotebookNode:
    nb = nbformat.read(course.release_notebook(assignment), as_version=4)
    nb.cells += [nbformat.v4.new_markdown_cell(text) for text in STUDENT_MARKDOWN]
    return nb


def _fragments(nb: nbformat.NotebookNode) -> list[str]:
    """The TeX fragments of the notebook's markdown, as the page's renderer finds them."""
    math = MathPage()
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            math.markdown(cell.source)
    return math.tex


def _page_alone(base: Path, assignment: str) -> Path:
    """A feedback page written by the course, then copied alone into a folder of its own."""
    from autograder.grading.publish.feedback import write_feedback

    data = base / "course"
    with course_data(data):
        folder = data / "autograded" / "ann" / assignment
        folder.mkdir(parents=True)
        nbformat.write(_notebook(assignment), str(folder / f"{assignment}.ipynb"))
        page, = write_feedback([{"assignment": assignment, "student": "ann", "score": 0, "max_score": 1,
                                 "cells": {}, "problems": [GRADER_NOTE], "flags": []}])
    alone = base / "alone"
    alone.mkdir()
    return Path(shutil.copy(page, alone))


def _assert_reads_like_the_notebook(page, expected_math: int) -> None:
    assert page.evaluate(MATH_ELEMENTS) == expected_math, "one MathML element per fragment of the notebook"
    assert page.evaluate(ALL_MATH) == expected_math, "MathML the student wrote survived"
    assert RAW_TEX.findall(page.evaluate(RAW_MATH)) == []
    assert page.evaluate(TEX_COMMANDS) == []
    assert page.evaluate(VISIBLE_ESCAPES) == []
    for kind, (count, wrong) in page.evaluate(LAYOUT).items():
        assert wrong == [], f"{kind} not drawn as math: {wrong}"
    assert page.evaluate("() => window.pwned") is None
    assert page.evaluate("() => document.querySelectorAll('a[href^=\"javascript:\"], [href] math, math [href]').length") == 0
    assert page.evaluate("() => document.querySelectorAll('.grader-banner').length") == 1
    assert page.evaluate("() => [...document.querySelectorAll('.jp-RenderedMarkdown *')]"
                         ".filter(e => getComputedStyle(e).position === 'fixed').length") == 0
    assert page.left_loopback == []


@pytest.mark.parametrize("assignment", course.assignments())
def test_a_page_copied_alone_shows_its_math_with_scripts_off(scriptless_page, tmp_path, assignment):
    page = scriptless_page
    html = _page_alone(tmp_path, assignment)
    with served(html.parent) as url:
        page.goto(url + html.name)
        page.locator(".jp-RenderedMarkdown math").first.scroll_into_view_if_needed()
        page.shots(assignment)
        _assert_reads_like_the_notebook(page, len(_fragments(_notebook(assignment))))
        assert GRADER_NOTE in page.inner_text(".grader-banner")  # the grader's text is not math


def test_the_page_the_exchange_fetched_shows_its_math_with_scripts_off(scriptless_page, tmp_path):
    page = scriptless_page
    assignment = "02_rmsnorm"
    html = feedback_through_the_exchange(tmp_path, "ann", assignment, "\n\n".join(STUDENT_MARKDOWN))
    with served(html.parent) as url:
        page.goto(url + html.name)
        page.locator(".jp-RenderedMarkdown mfrac").first.scroll_into_view_if_needed()
        page.shots("fetched")
        layout = page.evaluate(LAYOUT)
        assert all(count > 0 for count, _ in layout.values()), f"02's math has fractions, powers and roots: {layout}"
        _assert_reads_like_the_notebook(page, len(_fragments(_notebook(assignment))))


def test_tex_the_converter_cannot_take_is_typeset_by_the_mathjax_beside_the_page(offline_page, tmp_path):
    from autograder.grading.publish.feedback import write_feedback

    page = offline_page
    assignment = "03_causal_attention"
    nb = nbformat.read(course.release_notebook(assignment), as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(r"Aligned: $\begin{aligned} a &= b \\ c &= d \end{aligned}$"))
    with course_data(tmp_path):
        folder = tmp_path / "autograded" / "ann" / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / f"{assignment}.ipynb"))
        write_feedback([{"assignment": assignment, "student": "ann", "score": 0, "max_score": 1, "cells": {},
                         "problems": [], "flags": []}])
    with served(tmp_path / "feedback") as url:
        page.goto(url + f"ann/{assignment}/{assignment}.html")
        wait_for_math(page)
        page.locator(".jp-RenderedMarkdown .MathJax").first.scroll_into_view_if_needed()
        page.shots("fallback")
        assert page.evaluate(TYPESET) == 1, "MathJax typesets the one fragment left as TeX"
        assert page.evaluate(MATH_ELEMENTS) == len(_fragments(nb)) - 1, "and leaves the MathML to the browser"
        assert RAW_TEX.findall(page.evaluate(RAW_MATH)) == []
        assert page.evaluate(MATH_ERRORS) == []
        assert page.left_loopback == []


def test_jupyterlabs_html_viewer_shows_the_math_without_running_the_page(page, learner_server, tmp_path):
    """Lab shows an HTML file in a sandboxed frame that runs no script until the user trusts it."""
    assignment = "02_rmsnorm"
    html = _page_alone(tmp_path, assignment)
    rel = f"feedback_{tmp_path.name}_{assignment}.html"  # tmp_path's name is unique to this test run
    shutil.copy(html, learner_server.root_dir / rel)
    page.goto(learner_server.page_url(f"lab/tree/{rel}"))
    frame = page.frame_locator(".jp-HTMLViewer iframe")
    frame.get_by_text(f"Feedback: {assignment}").wait_for()
    assert "allow-scripts" not in (page.locator(".jp-HTMLViewer iframe").get_attribute("sandbox") or "allow-scripts")
    frame.locator(".jp-RenderedMarkdown mfrac").first.scroll_into_view_if_needed()
    page.shots("lab-viewer")
    body = frame.locator("body")
    assert body.evaluate("b => b.querySelectorAll('.jp-RenderedMarkdown math').length") == len(_fragments(_notebook(assignment)))
    wrong = body.evaluate("""b => [...b.querySelectorAll('.jp-RenderedMarkdown mfrac')]
        .filter(f => !(f.children[0].getBoundingClientRect().bottom <= f.children[1].getBoundingClientRect().top + 1))
        .map(f => f.textContent)""")
    assert wrong == [], f"fractions not drawn as math in Lab's viewer: {wrong}"
