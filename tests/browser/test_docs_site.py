"""The documentation site as a reader's browser shows it: the site built by
`make docs` into a temporary folder, served on loopback, read in Chromium
with every request to another host refused (a published page must work
from its own files: MathJax included).

On every notebook page the math is typeset (MathJax's SVG output in place of
the TeX) and no `$$` or `$...$` is left in the prose; on every page, each
in-page link (the table of contents, the permalinks, the prose) lands on an
element with that id."""
from __future__ import annotations

import re
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

import nbformat
import pytest

from autograder import course

from ..course.test_docs import DOCUMENTS, MKDOCS, build_site
from .lab import BROWSER

pytestmark = [*BROWSER, pytest.mark.skipif(MKDOCS is None, reason="mkdocs is not installed (the docs extra)")]

NOTEBOOK_PAGES = [f"notebooks/{a}/{a}/" for a in course.assignments()]
PAGES = ["", *(f"{p.stem}/" for p in DOCUMENTS[1:]), *NOTEBOOK_PAGES]
LOOPBACK = {"127.0.0.1", "localhost"}


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def site_url(tmp_path_factory):
    site = tmp_path_factory.mktemp("docs") / "site"
    build_site(site)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    thread.join()


@pytest.fixture
def offline_page(page):
    """The browser page with every request to another host refused; page.left_loopback lists them."""
    page.left_loopback = []

    def route(r):
        url = urlparse(r.request.url)
        if url.scheme in ("http", "https", "ws", "wss") and url.hostname not in LOOPBACK:
            page.left_loopback.append(r.request.url)
            r.abort()
        else:
            r.continue_()
    page.route("**/*", route)
    return page


def wait_for_math(page) -> None:
    """Until MathJax has loaded and finished the typesetting it queued at start-up."""
    page.wait_for_function("() => window.MathJax && window.MathJax.isReady === true")
    page.evaluate("() => new Promise(done => MathJax.Hub.Queue(() => done(true)))")


# In a notebook's markdown cells, outside code: text MathJax should have replaced.
RAW_MATH = """() => [...document.querySelectorAll('.jp-RenderedMarkdown')].map(cell => {
    const copy = cell.cloneNode(true);
    copy.querySelectorAll('code, pre, script, .MathJax, .MathJax_Display, .MathJax_Preview').forEach(e => e.remove());
    return copy.textContent;
}).join('\\n')"""
TYPESET = "() => document.querySelectorAll('.jp-RenderedMarkdown .MathJax').length"
# MathJax's own errors: a box for a script that failed, and in typeset math a TeX
# error (noErrors: <merror>) or an undefined macro (noUndefined: drawn in red)
MATH_ERRORS = """() => [...document.querySelectorAll('.MathJax_Error, .MathJax')]
    .filter(e => e.classList.contains('MathJax_Error') || /merror|mathcolor="red"/.test(e.getAttribute('data-mathml') || ''))
    .map(e => e.textContent)"""
DANGLING_LINKS = """() => [...document.querySelectorAll('a[href^="#"]')]
    .map(a => decodeURIComponent(a.getAttribute('href').slice(1)))
    .filter(id => id && !document.getElementById(id) && document.getElementsByName(id).length === 0)"""
# what a reader would call raw TeX: a $$, or $...$ around something (not a lone dollar in a sentence)
RAW_TEX = re.compile(r"\$\$|\$[^$\s][^$]*\$")


def notebook_has_math(assignment: str) -> bool:
    nb = nbformat.read(course.release_notebook(assignment), as_version=4)
    return any(c.cell_type == "markdown" and "$" in c.source for c in nb.cells)


@pytest.mark.parametrize("assignment", course.assignments())
def test_a_notebook_page_has_typeset_math_and_no_raw_tex(offline_page, site_url, assignment):
    page = offline_page
    page.goto(site_url + f"notebooks/{assignment}/{assignment}/")
    wait_for_math(page)
    page.shots(assignment)
    raw = RAW_TEX.findall(page.evaluate(RAW_MATH))
    assert raw == [], f"{assignment}: TeX left untypeset on the page: {raw[:5]}"
    assert page.evaluate(MATH_ERRORS) == []
    if notebook_has_math(assignment):
        assert page.evaluate(TYPESET) > 0, f"{assignment}: the notebook has math, the page shows none typeset"
    assert page.left_loopback == [], f"{assignment}: the page asked another host for {page.left_loopback}"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.strip("/").split("/")[-1] or "home")
def test_every_in_page_link_lands_on_an_element(offline_page, site_url, path):
    page = offline_page
    page.goto(site_url + path)
    page.wait_for_load_state("load")
    assert page.evaluate(DANGLING_LINKS) == [], f"/{path}: in-page links without a target"
    assert page.left_loopback == [], f"/{path}: the page asked another host for {page.left_loopback}"


def test_the_checks_see_raw_tex_an_error_and_a_dangling_link(offline_page, site_url):
    """The detectors above, on a page with a planted defect of each kind."""
    page = offline_page
    page.goto(site_url + NOTEBOOK_PAGES[1])
    wait_for_math(page)
    page.evaluate("""() => {
        const cell = document.querySelector('.jp-RenderedMarkdown');
        cell.insertAdjacentHTML('beforeend', '<p>left as text: $$x^2$$ and $y$</p><a href="#no-such-heading">x</a>');
    }""")
    assert RAW_TEX.findall(page.evaluate(RAW_MATH)) == ["$$", "$$", "$y$"]
    assert page.evaluate(DANGLING_LINKS) == ["no-such-heading"]
    page.evaluate("""() => new Promise(done => {
        document.querySelector('.jp-RenderedMarkdown').insertAdjacentHTML('beforeend', '<p>$\\\\frac{1}{$ and $\\\\nosuchmacro{x}$</p>');
        MathJax.Hub.Queue(['Typeset', MathJax.Hub], () => done(true));
    })""")
    assert len(page.evaluate(MATH_ERRORS)) == 2
