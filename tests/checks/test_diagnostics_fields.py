"""Diagnoses as data: a CheckFailed carries its diagnosis as fields
(checks.core.Diagnosis), the grader's recheck stores them capped in its
verdict, grading reconciles them into the result file, and the feedback page
and the self-check read the fields, the learner's located line framed and
escaped as their own text."""
from __future__ import annotations

import contextlib
import html
import io
import json
import pickle

import pytest
import torch

from autograder.checks import CheckFailed, check_rms_norm
from autograder.checks.core import Diagnosis
from autograder.diagnosis_record import capped_diagnosis, measured
from autograder import selfcheck
from autograder.grading.publish import feedback
from autograder.grading.recheck.run import run_check as _run_check


def wrong_rms_norm(x, weight, eps=1e-6):
    x32 = x.float()
    return weight * (x32 * torch.rsqrt(x32.abs().mean(-1, keepdim=True) + eps)).to(x.dtype)


def _failure() -> CheckFailed:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(CheckFailed) as err:
        check_rms_norm(wrong_rms_norm)
    return err.value


def test_a_failure_carries_its_diagnosis_as_fields():
    err = _failure()
    d = err.diagnosis
    assert d.exercise == "rms_norm" and d.kind == "failed" and d.failed_rows and set(d.failed_rows) <= set(d.rows)
    assert d.likely_bugs and d.likely_bugs[-1] in str(err)
    assert d.located["function"] == "wrong_rms_norm" and "abs()" in d.located["code"]
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.diagnosis == d
    assert Diagnosis.from_dict(json.loads(json.dumps(d.to_dict()))) == d


def test_an_added_cause_reaches_the_fields():
    err = _failure()
    more = err.with_likely_bug("a cause found later").with_line(measured("a fact found later"))
    assert more.diagnosis.likely_bugs[-1] == "a cause found later"
    assert "a fact found later" in more.diagnosis.facts
    lines = str(more).splitlines()
    assert lines[-1].strip() == "Likely bug: a cause found later", "a cause added later is still the last line"
    assert lines.index("  Measured: a fact found later") < min(i for i, l in enumerate(lines) if "Likely bug:" in l), \
        "a fact added later is said with the other facts, before the causes"


def test_capped_diagnosis_keeps_known_fields_of_the_right_types():
    raw = {"exercise": "f", "kind": "failed", "rows": ["a"] * 100, "likely_bugs": ["x" * 10_000, 3, None],
           "located": {"file": "<answer f>", "line": "7", "code": "<script>" * 200, "facts": "not a list"},
           "regime": ["not", "a", "dict"], "unknown": "dropped", "error": 5}
    got = capped_diagnosis(raw)
    assert set(got) == set(Diagnosis.__dataclass_fields__)
    assert len(got["rows"]) <= 12 and got["likely_bugs"] == ["x" * 600]
    assert got["located"]["line"] is None and len(got["located"]["code"]) <= 600 and got["located"]["facts"] == []
    assert got["regime"] is None and got["error"] is None
    assert capped_diagnosis("garbage")["exercise"] == ""


def test_the_recheck_stores_the_fields_and_keeps_the_learners_line_out_of_its_message():
    verdict = _run_check("check_rms_norm(wrong_rms_norm)\ncheck_rms_norm(wrong_rms_norm, shape=(3, 4, 16))",
                         {"check_rms_norm": check_rms_norm, "wrong_rms_norm": wrong_rms_norm})
    assert verdict["status"] == "fail" and len(verdict["diagnoses"]) == 2
    assert all(d["exercise"] == "rms_norm" for d in verdict["diagnoses"])
    located = verdict["diagnoses"][0]["located"]
    assert "Where:" not in verdict["message"] and isinstance(located["line"], int) and located["kind"]
    assert set(located) <= {"file", "line", "also", "function", "kind"}, "no learner text in a verdict: no code, no facts"
    assert _run_check("x = 1", {}) == {"status": "pass", "message": ""}


def test_reconcile_carries_the_diagnoses_into_the_result_file():
    from autograder.grading.grade import reconcile as _reconcile
    d = capped_diagnosis(_failure().diagnosis.to_dict())
    result = {"flags": [], "cells": {}}
    _reconcile({"check_rms_norm": (0.0, 3.0)}, {"check_rms_norm": {"status": "fail", "message": "m", "diagnoses": [d, 7]}},
               {"check_rms_norm": 3.0}, result)
    assert result["cells"]["check_rms_norm"]["diagnoses"] == [d]


def _page_cell(diagnoses, message="the message text") -> str:
    return feedback._verdict({"score": 0.0, "max_score": 3.0, "recheck": "fail", "message": message,
                              "diagnoses": diagnoses}, hidden={"check_rms_norm(rms_norm, seed=17, shape=(3, 7, 40))"})


def test_feedback_reads_the_fields_and_frames_the_learners_line():
    d = capped_diagnosis(_failure().diagnosis.to_dict())
    d["located"]["code"] = "x = '<script>alert(1)</script>' + " + "y" * 400
    page = _page_cell([d], message="a reworded message nobody reads")
    assert "reworded" not in page and "Likely bug: " in page and "rms_norm failed" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert feedback.LEARNER_LABEL in page and page.count("y") < 300, "the learner's line is framed and capped"
    assert _page_cell([]).count("the message text") == 1, "a result without fields shows the message"


def test_feedback_withholds_a_diagnosis_that_quotes_a_hidden_test():
    d = capped_diagnosis(_failure().diagnosis.to_dict())
    d["facts"] = ["check_rms_norm(rms_norm, seed=17, shape=(3, 7, 40)) ran"]
    page = _page_cell([d])
    assert html.escape(feedback.WITHHELD) in page and "seed=17" not in page


def test_the_self_check_reads_the_logged_fields(tmp_path, monkeypatch):
    from autograder.checks.core import DIAGNOSIS_LOG_ENV
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv(DIAGNOSIS_LOG_ENV, str(log))
    err = _failure()
    logged = selfcheck._logged(log)
    assert logged[str(err)] == err.diagnosis.to_dict()
    lines = selfcheck.diagnosis_lines(logged[str(err)])
    row = selfcheck.Row("check_rms_norm", 3.0, False, str(err), logged[str(err)], lines)
    table = selfcheck.format_rows([row])
    assert f"Likely bug: {err.diagnosis.likely_bugs[-1]}" in table and "Where: line" in table


def test_a_trace_from_the_jailed_process_names_only_the_submissions_lines():
    from autograder.checks import trace
    t = torch.ones(3)
    op = ["mul", "<answer rms_norm>", 4, "rms_norm", [-2], [0], [t], {"dim": -1}, [[3]], False, False, False, False]
    forged = ["add", "/etc/passwd", 1, "x", [0], [0], [t], {}, [[3]], False, False, False, False]
    data = {"ops": [op, forged], "result": [t], "owners": [[1, 0]], "returned": ["<answer rms_norm>", 5, "rms_norm"],
            "truncated": False, "error": None, "raised": None}
    got = trace.from_plain_trace(data, {"<answer rms_norm>"})
    assert (got.ops[0].file, got.ops[0].line) == ("<answer rms_norm>", 4)
    assert (got.ops[1].file, got.ops[1].line) == ("", 0), "a file the grader does not hold is no place"
    assert got.returned == ("<answer rms_norm>", 5, "rms_norm") and not got.truncated
    bad = trace.from_plain_trace({"ops": [["mul", "f", 1, "g", [5], [0], [t], {}, [[3]], 0, 0, 0, 0]]}, set())
    assert bad.truncated and not bad.ops, "an op reading a later op is a malformed trace"


@pytest.mark.grader
@pytest.mark.slow
def test_the_recheck_locates_the_line_in_the_jailed_process(tmp_path):
    """A wrong rms_norm submitted for notebook 02: the trusted recheck traces it
    in the jailed child and names the submitted line, read from the submission."""
    import nbformat

    from autograder import course
    from autograder.grading.recheck.run import recheck_notebook
    from autograder.grading.sandbox.kernel import jail_for_recheck
    from autograder.notebook_format import nbg
    assignment = "02_rmsnorm"
    nb = nbformat.read(str(course.source_notebook(assignment)), as_version=4)
    for cell in nb.cells:
        if nbg(cell).get("grade_id") == "rms_norm" and nbg(cell).get("solution"):
            cell.source = cell.source.replace("x32.pow(2).mean(dim=-1, keepdim=True)", "x32.abs().mean(dim=-1, keepdim=True)")
    path = tmp_path / f"{assignment}.ipynb"
    nbformat.write(nb, str(path))
    with jail_for_recheck() as jail:
        verdicts = recheck_notebook(assignment, str(path), 60, jail, 240)
    first = verdicts["check_rms_norm"]["diagnoses"][0]
    assert verdicts["check_rms_norm"]["status"] == "fail"
    answer = next(c.source for c in nb.cells if nbg(c).get("grade_id") == "rms_norm" and nbg(c).get("solution"))
    wrong_line = next(i for i, line in enumerate(answer.splitlines(), 1) if "x32.abs().mean" in line)
    assert first["located"]["file"] == "<answer rms_norm>" and first["located"]["line"] == wrong_line
    assert "code" not in first["located"], "the verdict keeps the line's number, not the learner's text"
    assert "x32.abs()" not in verdicts["check_rms_norm"]["message"], "the learner's line travels only as a field"
