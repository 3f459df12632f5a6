"""TeX to MathML when a page is written, for the feedback pages: Chromium
(109 and later), Firefox and Safari draw MathML themselves, so a page
carries its math with no script and no folder beside it. It reads the same
handed back alone (nbgrader's exchange copies the page only) and in
JupyterLab's HTML viewer, which runs no script of an untrusted page.

latex2mathml converts. A fragment it cannot convert whole (it fails, leaves
an unknown command as text, or draws alignment MathML Core lacks) stays TeX
between its delimiters, for MathJax where its copy sits beside the page.
Converted math is cleaned to MATHML_TAGS and MATHML_ATTRIBUTES, since a
student writes the TeX of their own markdown: \\href, \\class and \\style
become no link, class or style.
"""
from __future__ import annotations

import re
import secrets
from fractions import Fraction

import nh3

# Longer fragments stay TeX: the converter recurses on nesting, and no
# formula of the course comes near this.
MAX_TEX = 2000
MATHML_TAGS = {"math", "mi", "mn", "mo", "ms", "mtext", "mspace", "mrow", "mfrac", "msqrt", "mroot", "mstyle",
               "mpadded", "mphantom", "msub", "msup", "msubsup", "munder", "mover", "munderover", "mtable", "mtr",
               "mtd", "menclose"}
# MathML Core's presentation attributes the converter writes; no href, class,
# style, id or colour.
_ATTRIBUTES = {"display", "displaystyle", "scriptlevel", "mathvariant", "stretchy", "fence", "form", "separator",
               "largeop", "movablelimits", "symmetric", "accent", "accentunder", "lspace", "rspace", "minsize",
               "maxsize", "width", "height", "depth", "voffset", "linethickness", "notation"}
MATHML_ATTRIBUTES = {tag: _ATTRIBUTES for tag in MATHML_TAGS}
# In LaTeX's text mode \_ prints "_" (and \% "%", ...): the converter keeps
# the backslash inside \text{...} and \texttt{...}.
_TEXT_RUN = re.compile(r"(<mtext\b[^>]*>)(.*?)(</mtext>)", re.S)
_TEXT_ESCAPE = re.compile(r"\\([_%&#$])")
# MathML 3's named spaces (n/18 em), which MathML Core dropped; \! writes one.
_SPACES = ("veryverythin", "verythin", "thin", "medium", "thick", "verythick", "veryverythick")
_NAMED_SPACE = {f"{sign}{name}mathspace": f"{'-' if sign else ''}{float(Fraction(i + 1, 18)):.4f}em"
                for i, name in enumerate(_SPACES) for sign in ("", "negative")}
_NAMED_SPACE_ATTR = re.compile(r'="(' + "|".join(_NAMED_SPACE) + r')"')
# What an unconverted or half-converted fragment leaves: a command as text,
# a MathML 3 line break and an alignment & (aligned, cases) that browsers draw on one line.
_UNCONVERTED = re.compile(r"\\|linebreak=|<mi>&(amp;)?</mi>|<merror")


def to_mathml(tex: str, display: bool) -> str | None:
    """`tex` (the text between $...$, or $$...$$ when `display`) as one
    cleaned <math> element, or None where it does not convert whole."""
    from latex2mathml.converter import convert

    if len(tex) > MAX_TEX:
        return None
    try:
        mathml = convert(tex, display="block" if display else "inline")
    except Exception:  # the converter's own errors, and IndexError or RecursionError on broken TeX
        return None
    mathml = _TEXT_RUN.sub(lambda m: m.group(1) + _TEXT_ESCAPE.sub(r"\1", m.group(2)) + m.group(3), mathml)
    mathml = _NAMED_SPACE_ATTR.sub(lambda m: f'="{_NAMED_SPACE[m.group(1)]}"', mathml)
    if _UNCONVERTED.search(mathml):
        return None
    return nh3.clean(mathml, tags=MATHML_TAGS, attributes=MATHML_ATTRIBUTES)


class MathPage:
    """The math of one page's markdown. `markdown` renders a cell with each
    converted fragment held back as a placeholder, so that cleaning the
    learner's HTML still drops any MathML they wrote themselves; `fill`
    puts the converted math in place once the HTML is clean. `tex` lists
    every fragment met, `unconverted` those left as TeX."""

    def __init__(self) -> None:
        self._key = f"mathml{secrets.token_hex(8)}n"  # letters and digits: markdown and nh3 leave it alone
        self._placeholder = re.compile(self._key + r"(\d+)x")
        self.mathml: list[str] = []
        self.tex: list[str] = []
        self.unconverted: list[str] = []

    def markdown(self, source: str) -> str:
        from nbconvert.filters.markdown_mistune import MarkdownWithMath
        return MarkdownWithMath(renderer=_renderer(self)).render(source)

    def fragment(self, tex: str, display: bool) -> str | None:
        """The placeholder for `tex` converted, or None (it stays TeX)."""
        self.tex.append(tex)
        mathml = to_mathml(tex, display)
        if mathml is None:
            self.unconverted.append(tex)
            return None
        self.mathml.append(mathml)
        return f"{self._key}{len(self.mathml) - 1}x"

    def fill(self, html: str) -> str:
        return self._placeholder.sub(lambda m: self.mathml[int(m.group(1))], html)


def _renderer(page: MathPage):
    from nbconvert.filters.markdown_mistune import IPythonRenderer

    class MathRenderer(IPythonRenderer):
        """nbconvert's markdown renderer (as Jupyter reads $...$ and $$...$$), math converted."""

        def block_math(self, body: str) -> str:
            return page.fragment(body, True) or super().block_math(body)

        def inline_math(self, body: str) -> str:
            return page.fragment(body, False) or super().inline_math(body)

        def latex_environment(self, name: str, body: str) -> str:
            return page.fragment(f"\\begin{{{name}}}{body}\\end{{{name}}}", True) or super().latex_environment(name, body)

    return MathRenderer(escape=False)
