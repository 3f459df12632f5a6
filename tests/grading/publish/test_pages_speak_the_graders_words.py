"""No value the learner's code chose reaches a page: answers of notebook 03
return (or raise) an int, a float, a str, bytes, a list, a dict, a tuple of
tensors of a chosen shape, None, an object and a module of their own
classes, a complex number, a forged library error, each carrying a marker
built at run time; graded, then published (result files, feedback, export,
class report), no page shows any marker, and the verdicts say what was
returned in the grader's words."""
from __future__ import annotations

import pytest

from ..odd_submissions import VALUES, pages, shown

pytestmark = [pytest.mark.grader, pytest.mark.slow]


def test_the_markers_are_in_no_cell_so_a_page_showing_one_took_it_from_a_verdict(odd_submissions):
    assert all(not shown(source) for source in odd_submissions["sources"].values())


@pytest.mark.parametrize("student", sorted(VALUES))
def test_a_learners_values_earn_nothing_and_the_verdicts_name_their_kind(odd_submissions, student):
    r = odd_submissions["results"][student]
    assert r["status"] == "graded" and r["score"] == 0, r
    said = " ".join(c["message"] for c in r["cells"].values())
    assert "returned" in said, said


def test_no_page_shows_a_value_the_learners_code_chose(odd_submissions):
    found = pages(odd_submissions["data"])
    assert any(p.startswith("feedback/") for p in found) and any(p.startswith("report/") for p in found) \
        and any(p.startswith("exports/") for p in found) and any(p.startswith("results/") for p in found), sorted(found)
    leaks = {path: shown(text) for path, text in found.items() if shown(text)}
    assert not leaks, leaks
    assert not shown(odd_submissions["summary"]), odd_submissions["summary"]


def test_the_verdicts_say_what_was_returned_in_the_graders_words(odd_submissions):
    said = " ".join(c["message"] for s in VALUES for c in odd_submissions["results"][s]["cells"].values())
    for words in ("returned an int", "returned a str", "returned a dict", "returned None", "returned a complex number",
                  "returned a module of the learner's own class", "its message is not carried"):
        assert words in said, (words, said)
