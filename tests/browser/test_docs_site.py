"""The documentation site as a reader's browser shows it: the site built by
`make docs` into a temporary folder, served on loopback, read in Chromium
with every request to another host refused (a published page must work
from its own files: MathJax included).

On every notebook page the math is typeset (MathJax's output in place of
the TeX) and no `$$` or `$...$` is left in the prose; on every page, each
in-page link (the table of contents, the permalinks, the prose) lands on an
element with that id, and no backslash of a TeX escape (`\\_`, as in
`\\text{min\\_lr}`) is left visible."""
from __future__ import annotations

import nbformat
import pytest

from autograder import course

from ..course.test_docs import DOCUMENTS, MKDOCS, build_site
from .lab import BROWSER
from .math_pages import MATH_ERRORS, RAW_MATH, RAW_TEX, TYPESET, VISIBLE_ESCAPES, served, wait_for_math

pytestmark = [*BROWSER, pytest.mark.skipif(MKDOCS is None, reason="mkdocs is not installed (the docs extra)")]

NOTEBOOK_PAGES = [f"notebooks/{a}/{a}/" for a in course.assignments()]
PAGES = ["", *(f"{p.stem}/" for p in DOCUMENTS[1:]), *NOTEBOOK_PAGES]


@pytest.fixture(scope="module")
def site_url(tmp_path_factory):
    site = tmp_path_factory.mktemp("docs") / "site"
    build_site(site)
    with served(site) as url:
        yield url


DANGLING_LINKS = """() => [...document.querySelectorAll('a[href^="#"]')]
    .map(a => decodeURIComponent(a.getAttribute('href').slice(1)))
    .filter(id => id && !document.getElementById(id) && document.getElementsByName(id).length === 0)"""


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
def test_every_in_page_link_lands_on_an_element_and_no_escape_shows(offline_page, site_url, path):
    page = offline_page
    page.goto(site_url + path)
    wait_for_math(page)
    assert page.evaluate(DANGLING_LINKS) == [], f"/{path}: in-page links without a target"
    assert page.evaluate(VISIBLE_ESCAPES) == [], f"/{path}: a TeX escape shows its backslash"
    assert page.left_loopback == [], f"/{path}: the page asked another host for {page.left_loopback}"


# code in a table cell drawn on more than one line (a name broken mid-word)
WRAPPED_TABLE_CODE = "() => [...document.querySelectorAll('td code')].filter(c => c.getClientRects().length > 1).map(c => c.textContent)"


@pytest.mark.parametrize("width", [1400, 900])
def test_the_home_page_table_keeps_each_notebook_name_on_one_line(offline_page, site_url, width):
    page = offline_page
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(site_url)
    page.wait_for_load_state("load")
    page.shots(f"home-{width}")
    names = page.evaluate("() => [...document.querySelectorAll('td a code')].map(c => c.textContent)")
    assert set(course.assignments()) <= set(names)
    assert page.evaluate(WRAPPED_TABLE_CODE) == [], f"{width} px: code broken across lines"


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
        document.querySelector('.jp-RenderedMarkdown').insertAdjacentHTML('beforeend',
            '<p id="escapes">$\\\\text{min\\\\_lr}$ typeset, q\\\\_len as text</p>');
        MathJax.Hub.Queue(['Typeset', MathJax.Hub], () => done(true));
    })""")
    assert page.evaluate(VISIBLE_ESCAPES) == ["\\_"]  # the text's, not the typeset one's
    assert "min_lr" in page.inner_text("#escapes")
    page.evaluate("""() => new Promise(done => {
        document.querySelector('.jp-RenderedMarkdown').insertAdjacentHTML('beforeend', '<p>$\\\\frac{1}{$ and $\\\\nosuchmacro{x}$</p>');
        MathJax.Hub.Queue(['Typeset', MathJax.Hub], () => done(true));
    })""")
    assert len(page.evaluate(MATH_ERRORS)) == 2
