"""What the trusted recheck writes into a verdict of what happened in the
learner's process: a check's own failure text, an error's type and no more,
a place only where the submitted cell confirms it. Each case sends a marker
the learner's code would have chosen; none reaches the verdict."""
from __future__ import annotations

import linecache

from autograder.grading.recheck.run import checked_place, how_it_ended, run_check, verdict_text

MARK = "QZX" + "MARK 6023301422529"


def test_a_checks_failure_keeps_its_words_and_any_other_error_only_its_type():
    assert verdict_text(AssertionError("causal_mask failed 1 of 2 checks")) == "causal_mask failed 1 of 2 checks"
    for err in (KeyError(MARK), ValueError(f"could not convert string to float: {MARK!r}"), RuntimeError(MARK)):
        said = verdict_text(err)
        assert MARK not in said and type(err).__name__ in said, said
    own = type("QZXMARKError", (Exception,), {})(MARK)
    assert "QZXMARK" not in verdict_text(own), "an exception class of the learner's own is not named"


def test_a_test_cell_that_stops_on_a_learners_value_says_only_the_type():
    verdict = run_check("answers['loss']\n", {"answers": {MARK: 1}})
    assert verdict["status"] == "fail" and MARK not in verdict["message"] and "KeyError" in verdict["message"]


def test_how_the_trusted_process_ended_is_the_error_type_or_the_status():
    assert how_it_ended(f"Traceback ...\nValueError: {MARK}", 1) == "ValueError"
    assert how_it_ended(f"Traceback ...\nQZXMARKError: {MARK}", 1) == "it exited with status 1"
    assert how_it_ended("", -9) == "it exited with status -9"


def test_a_located_place_is_kept_only_where_the_submitted_cell_has_it():
    label = "<answer causal_mask>"
    text = "def causal_mask(q_len, kv_len=None):\n    return q_len\n"
    linecache.cache[label] = (len(text), None, text.splitlines(True), label)
    try:
        honest = {"file": label, "line": 2, "function": "causal_mask", "kind": "value"}
        assert checked_place(honest) == honest
        forged = {"file": label, "line": 6023301, "also": 3, "function": MARK, "kind": MARK}
        assert checked_place(forged) == {"file": label}
        assert checked_place({**honest, "file": f"<{MARK}>"}) == {}, "a file this process does not hold"
    finally:
        del linecache.cache[label]
