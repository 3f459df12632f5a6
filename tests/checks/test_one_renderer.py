"""One renderer: the notebook's CheckFailed message, the self-check's table
and the feedback page say the same diagnosis lines in the same order, read
from the same failure records (autograder.diagnosis_text). The page leaves
the learner's own words out of its Where line (their line's text, framed as
theirs below it, and their function's name); everything else is word for
word."""
from __future__ import annotations

import contextlib
import html
import io
import re

import pytest
import torch

from autograder import diagnosis_text, selfcheck
from autograder.checks import CheckFailed, check_rms_norm
from autograder.checks.core import DIAGNOSIS_LOG_ENV, Check
from autograder.checks.trace import Located
from autograder.diagnosis_record import candidates, capped_diagnosis, measured
from autograder.grading.publish import feedback

LABELS = ("Measured: ", "Where: ", "Candidates: ", "Likely bug: ")
ORDER = [label.removesuffix(": ") for label in LABELS]  # what was measured, where, what it may be, what it is


def wrong_rms_norm(x, weight, eps=1e-6):
    x32 = x.float()
    return weight * (x32 * torch.rsqrt(x32.abs().mean(-1, keepdim=True) + eps)).to(x.dtype)


def _rms_norm_failure() -> CheckFailed:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(CheckFailed) as err:
        check_rms_norm(wrong_rms_norm)
    return err.value


def _every_part_failure() -> CheckFailed:
    """A failed comparison with a regime, a measured fact, a line of
    candidates, a located pair of lines and two causes."""
    chk = Check("f", expects="a tensor")
    chk.compare("float64", torch.ones(3), torch.zeros(3, dtype=torch.float32))
    chk.regime = {"name": "float64", "text": "right in float32, wrong in float64"}
    chk.measured("your result is 1 everywhere")
    chk.candidates("the sum is off by 3 (measured); candidates: a missing subtraction; a wrong constant")
    chk.diagnose("the most useful cause: fix it thus")  # a check diagnoses the best first; it is printed last
    chk.diagnose("the second most useful cause: fix it so")
    chk.located = Located("<cell>", 4, "f", "y = x + 1", ["yours: shape (3,)"], kind="missing", also=6,
                          also_code="return y")
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(CheckFailed) as err:
        chk.finish()
    return err.value


def _stopped_failure_with_added_lines() -> CheckFailed:
    """A call that raised, given a cause, a measured fact and candidates afterwards (as hints add them)."""
    def f(x):
        raise ValueError("no")

    chk = Check("f", expects="a tensor")
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(CheckFailed) as err:
        chk.call(f, torch.zeros(2), error_hints=[("no", "a cause matched on the error")])
    return (err.value.with_likely_bug("a cause confirmed later").with_line(measured("a fact measured later"))
            .with_line(candidates("a fact with candidates: one; another")))


FAILURES = {"a check's own failure": _rms_norm_failure, "every part": _every_part_failure,
            "a stop given lines afterwards": _stopped_failure_with_added_lines}


def _said(lines) -> list[str]:
    return [line.strip() for line in lines if line.strip().startswith(LABELS)]


def _page_lines(d: dict) -> list[str]:
    page = feedback._verdict({"score": 0.0, "max_score": 1.0, "recheck": "fail", "message": "", "diagnoses": [d]},
                             hidden=set())
    body = re.search(r'<div class="diagnosis">(.*)</div></div>$', page, re.S).group(1)
    body = re.sub(r'<div class="learner-markdown">.*?</pre></div>', "<br>", body, flags=re.S)  # the learner's frame
    return [html.unescape(re.sub(r"<[^>]+>", "", part)) for part in body.split("<br>")]


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_the_notebook_the_self_check_and_the_page_say_the_same_lines_in_the_same_order(name, tmp_path, monkeypatch):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv(DIAGNOSIS_LOG_ENV, str(log))
    err = FAILURES[name]()
    notebook = str(err).splitlines()
    fields = selfcheck._logged(log)[str(err)]
    table = selfcheck.format_rows([selfcheck.Row("check_f", 1.0, False, str(err), fields,
                                                 selfcheck.diagnosis_lines(fields))]).splitlines()
    d = capped_diagnosis(fields)
    page = _page_lines(d)

    said = _said(notebook)
    assert said and [l.split(":")[0] for l in said] == sorted((l.split(":")[0] for l in said), key=ORDER.index), \
        "measured facts, then the place, then the candidates, then the confirmed causes"
    assert _said(table) == said
    located = d.get("located") or {}
    function = diagnosis_text.function_words(str(located.get("function") or ""))
    learners = [f" of your {function}"] + [f", `{located[k]}`" for k in ("code", "also_code") if located.get(k)]
    graders = []
    for line in said:
        if line.startswith("Where: "):
            for text in learners:
                line = line.replace(text, "")
            place, _, rest = line.partition(": ")[2].partition(": ")
            line = f"Where: {place} of your answer: {rest}"
        graders.append(line)
    assert _said(page) == graders, "the page says the same, without the learner's own words (their line framed apart)"
    if d["kind"] == "failed":
        assert page[0] == notebook[0], "the same first line"
    assert said[-1].startswith("Likely bug: ") and said[-1].removeprefix("Likely bug: ") == d["likely_bugs"][-1]


def test_every_part_of_a_record_is_said_and_nothing_twice():
    said = _said(str(_every_part_failure()).splitlines())
    assert said == [
        "Measured: right in float32, wrong in float64",
        "Measured: your result is 1 everywhere",
        "Where: line 4 of your f, `y = x + 1` and line 6, `return y`: a step the reference takes between these lines "
        "is not between them: the value made here reaches a later line without it (yours: shape (3,))",
        "Candidates: the sum is off by 3 (measured); candidates: a missing subtraction; a wrong constant",
        "Likely bug: the second most useful cause: fix it so",
        "Likely bug: the most useful cause: fix it thus"]


def test_lines_added_to_a_stopped_check_take_their_place_by_their_kind():
    err = _stopped_failure_with_added_lines()
    said = _said(str(err).splitlines())
    assert [l for l in said if not l.startswith("Where: ")] == [
        "Measured: a fact measured later", "Candidates: a fact with candidates: one; another",
        "Likely bug: a cause matched on the error", "Likely bug: a cause confirmed later"]
    assert said[1].startswith("Where: ") and "`raise ValueError(\"no\")`: it raises here" in said[1], \
        "the line that raised, as the record has it, between the facts and the candidates"
    assert str(err).splitlines()[0].startswith("f: f raised ValueError"), "the stop's own lines stay first"
    assert err.diagnosis.facts == ["a fact measured later"], "a line of candidates is no measured fact"
    assert err.diagnosis.candidates == ["a fact with candidates: one; another"]


def test_a_line_of_candidates_must_name_them_as_candidates():
    with pytest.raises(ValueError):
        candidates("the cause is X")
    with pytest.raises(ValueError):
        Check("f").candidates("the cause is X")


def test_candidates_travel_in_their_own_field_to_the_page():
    """A result file's record keeps the candidates apart (capped like the other lists), and the page says
    them under their own label, escaped, and withholds them when they quote a hidden test."""
    record = capped_diagnosis({"exercise": "f", "kind": "failed", "rows": ["a"], "failed_rows": ["a"],
                               "facts": ["x is 3"], "candidates": ["<b>y</b> is 4; candidates: p; q", 7] * 20})
    assert record["facts"] == ["x is 3"] and 0 < len(record["candidates"]) <= 12
    assert set(record["candidates"]) == {"<b>y</b> is 4; candidates: p; q"}, "only strings, capped in number"
    page = feedback._verdict({"score": 0.0, "max_score": 1.0, "recheck": "fail", "message": "",
                              "diagnoses": [{**record, "candidates": record["candidates"][:1]}]}, hidden=set())
    assert "Candidates: &lt;b&gt;y&lt;/b&gt; is 4; candidates: p; q" in page and "<b>y" not in page
    hidden = feedback._verdict({"score": 0.0, "max_score": 1.0, "recheck": "fail", "message": "",
                                "diagnoses": [record]}, hidden={"<b>y</b> is 4"})
    assert "is 4" not in hidden, "a line of candidates that quotes a hidden test is withheld like any other"
