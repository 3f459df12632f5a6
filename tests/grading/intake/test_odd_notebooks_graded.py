"""Through `grade`: a notebook saved with a byte order mark and one collected
for a student whose id is not ASCII keep their points; notebooks the intake
refuses (JSON nested past any notebook, 250,000 cells, bad JSON) get a result
row that says why, and every id is printed as it is."""
from __future__ import annotations

import html

import pytest

from ..odd_submissions import B, ZOE

pytestmark = [pytest.mark.grader, pytest.mark.slow]


@pytest.mark.parametrize("student", ["bom", ZOE])
def test_an_honest_notebook_in_an_odd_shape_keeps_its_points(odd_submissions, student):
    r = odd_submissions["results"][student]
    assert (r["score"], r["status"], r["flags"], r["problems"]) == (r["max_score"], "graded", [], []), r


def test_a_decomposed_folder_name_is_collected_as_the_composed_id(odd_submissions):
    assert odd_submissions["collected"] == [[ZOE, B]]
    page = (odd_submissions["data"] / "feedback" / ZOE / B / f"{B}.html").read_text(encoding="utf-8")
    assert html.escape(ZOE) in page and ZOE in odd_submissions["summary"]


@pytest.mark.parametrize("student, said", [("nested", "nests its JSON"), ("crowded", "cells, over the limit"),
                                           ("bad_json", "not valid notebook JSON")])
def test_an_unreadable_notebook_gets_a_row_with_the_reason(odd_submissions, student, said):
    r = odd_submissions["results"][student]
    assert r["status"] == "malformed" and r["score"] == 0 and any(said in p for p in r["problems"]), r
