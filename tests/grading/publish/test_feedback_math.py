"""The feedback pages carry the notebooks' math as MathML, converted when
the page is written (autograder/mathml.py): every formula of the ten
notebooks converts, TeX escapes lose their backslash, a student's TeX
adds no link, class or style, and a fragment that does not convert stays
TeX for the MathJax then copied into the feedback folder (the browser test,
tests/browser/test_feedback_page.py, reads such pages in Chromium)."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import nbformat
import pytest

from autograder import course
from autograder.mathml import MathPage, to_mathml
from autograder.grading.publish.feedback import MATHJAX_FOLDER, write_feedback

from ..batches import course_data


def _notebooks() -> list[tuple[str, str]]:
    """(name, markdown source) of every markdown cell of the released and the reference notebooks."""
    cells = []
    for a in course.assignments():
        for kind, path in (("release", course.release_notebook(a)), ("source", course.source_notebook(a))):
            nb = nbformat.read(path, as_version=4)
            cells += [(f"{kind} {a}", c.source) for c in nb.cells if c.cell_type == "markdown"]
    return cells


def _tree(mathml: str) -> ET.Element:
    return ET.fromstring(mathml)


def _text(mathml: str) -> str:
    return "".join(_tree(mathml).itertext())


def test_every_formula_of_the_ten_notebooks_converts_to_mathml():
    pages, met = {}, {}
    for name, source in _notebooks():
        page = pages.setdefault(name, MathPage())
        page.markdown(source)
    for name, page in pages.items():
        met[name] = len(page.tex)
        assert page.unconverted == [], f"{name}: TeX the converter cannot take (add support or rewrite it): {page.unconverted}"
    # the parser found the math: every notebook whose markdown has a $ pair has fragments
    for name, source in _notebooks():
        if re.search(r"\$[^$\s][^$]*\$", source):
            assert met[name] > 0, f"{name}: math in the markdown, none found"
    tex = {t for page in pages.values() for t in page.tex}
    for expected in (r"\texttt{kv\_len}", r"\text{min\_lr}", r"\sqrt", r"\frac", r"\mathrm", r"_"):
        assert any(expected in t for t in tex), f"no fragment of the notebooks has {expected}: the collector missed some"


@pytest.mark.parametrize("tex, shown", [
    (r"\texttt{kv\_len} - \texttt{q\_len}", "kv_len−q_len"),
    (r"\text{min\_lr} + 50\text{\%}", "min_lr+50%"),
    (r"\mathrm{rotate\_half}(x)", "rotate_half(x)"),
    (r"\operatorname{softmax}(x)", "softmax(x)"),
])
def test_escaped_characters_show_without_their_backslash(tex, shown):
    mathml = to_mathml(tex, display=False)
    assert mathml is not None and "\\" not in mathml
    assert _text(mathml) == shown


def test_the_structure_is_the_formulas():
    tree = _tree(to_mathml(r"\frac{1}{\sqrt{d_h}}", display=True))
    assert tree.tag == "math" and tree.get("display") == "block"
    frac = tree.find(".//mfrac")
    numerator, denominator = list(frac)
    assert "".join(numerator.itertext()) == "1"
    assert denominator.find(".//msqrt/*/msub") is not None, "d_h under the root, subscripted"
    matrix = _tree(to_mathml(r"\begin{pmatrix} a & b \\ c & d \end{pmatrix}", display=False))
    rows = matrix.findall(".//mtable/mtr")
    assert [["".join(cell.itertext()) for cell in row] for row in rows] == [["a", "b"], ["c", "d"]]


@pytest.mark.parametrize("tex", [r"\href{javascript:window.pwned=1}{x}", r"\class{grader-banner}{x}",
                                 r"\style{position:fixed;top:0}{x}", r"\color{white}{x}"])
def test_a_students_tex_adds_no_link_class_or_style(tex):
    mathml = to_mathml(tex, display=False)
    assert mathml is not None and _text(mathml) == "x"
    attributes = {k for e in _tree(mathml).iter() for k in e.attrib}
    assert attributes <= {"display"}, attributes


@pytest.mark.parametrize("tex", [r"\nosuchmacro{x}", r"\frac{1}{", r"\text{\textbf{b}}",
                                 r"\begin{aligned} a &= b \\ c &= d \end{aligned}", "{" * 3000 + "x" + "}" * 3000])
def test_tex_the_converter_cannot_take_whole_stays_tex(tex):
    assert to_mathml(tex, display=False) is None


def test_a_students_own_mathml_is_dropped_and_the_tex_kept_readable():
    page = MathPage()
    html = page.markdown(r"<math><mi href='javascript:1'>z</mi></math> and $\nosuchmacro{y}$ and $x_1$")
    assert page.unconverted == [r"\nosuchmacro{y}"] and len(page.mathml) == 1
    assert r"$\nosuchmacro{y}$" in html, "the fragment stays as TeX, with its delimiters, for MathJax"


def _result(student: str, assignment: str) -> dict:
    return {"assignment": assignment, "student": student, "score": 0, "max_score": 1, "cells": {},
            "problems": [], "flags": []}


def _autograded(data, student: str, assignment: str, extra_markdown: str = "") -> None:
    nb = nbformat.read(course.release_notebook(assignment), as_version=4)
    if extra_markdown:
        nb.cells.append(nbformat.v4.new_markdown_cell(extra_markdown))
    folder = data / "autograded" / student / assignment
    folder.mkdir(parents=True)
    nbformat.write(nb, str(folder / f"{assignment}.ipynb"))


A = "09_training"  # \frac, \sqrt, \text{min\_lr} among its math


def test_a_page_carries_its_math_inline_and_needs_no_script(tmp_path):
    with course_data(tmp_path):
        _autograded(tmp_path, "ann", A)
        page, = write_feedback([_result("ann", A)])
        expected = MathPage()
        for _, source in [c for c in _notebooks() if c[0] == f"release {A}"]:
            expected.markdown(source)
    text = page.read_text()
    assert len(expected.tex) > 0
    assert text.count("<math ") == len(expected.tex), "one <math> per fragment of the notebook"
    assert "<script" not in text.lower() and "mathjax" not in text.lower()
    assert not (tmp_path / "feedback" / MATHJAX_FOLDER).exists(), "MathJax copied though no page needs it"
    assert "min_lr" in text and r"min\_lr" not in text


def test_a_fragment_left_as_tex_brings_mathjax_beside_the_pages(tmp_path):
    with course_data(tmp_path):
        _autograded(tmp_path, "ann", A, r"My note: $\nosuchmacro{x}$")
        _autograded(tmp_path, "bob", A, r"Mine: $\alsonosuch{y}$")
        pages = write_feedback([_result("ann", A), _result("bob", A)])
        mathjax = tmp_path / "feedback" / MATHJAX_FOLDER / "MathJax.js"
        first_copy = mathjax.stat().st_mtime_ns
        _autograded(tmp_path, "cat", A, r"$\nosuchmacro{z}$")
        write_feedback([_result("cat", A)])
    assert mathjax.stat().st_mtime_ns == first_copy, "copied again"
    for page in pages:
        text = page.read_text()
        sources = re.findall(r'<script src="([^"]+)">', text)
        assert len(sources) == 2 and all((page.parent / s).resolve().is_file() for s in sources), sources
        assert "<math " in text, "the rest of the math is still MathML"
