"""The page nbgrader's exchange hands a student (release_feedback, then the
student's fetch_feedback, which copy the page alone) carries its math
inline as MathML: no script, no reference to a folder the exchange leaves
behind."""
from __future__ import annotations

import re

from .exchange_path import feedback_through_the_exchange

A = "02_rmsnorm"  # \frac, \sqrt and \mathrm in its math


def test_the_page_the_exchange_copies_carries_its_math_inline(tmp_path):
    page = feedback_through_the_exchange(tmp_path, "ann", A)
    text = page.read_text()
    assert page.parent.parent.parent.parent == tmp_path / "home", "fetched into the student's assignment folder"
    assert list(page.parent.iterdir()) == [page], "the exchange brought the page alone"
    assert text.count("<math ") > 5 and "<mfrac>" in text and "<msqrt>" in text
    assert "<script" not in text.lower() and "mathjax" not in text.lower()
    assert not re.findall(r'(?:src|href)="\.\./', text), "the page points at a folder beside it"
    markdown = re.sub(r"<math\b.*?</math>", "", text, flags=re.S)
    assert not re.search(r"\$[^$\s][^$]*\$|\\frac|\\sqrt", markdown), "TeX left on the page"
