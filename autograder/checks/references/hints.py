"""Calling a learner's function with error hints (a cause named only when its
pattern matches what the learner's code raised), and finishing a check that
may fail only because an earlier exercise it calls is wrong."""
from __future__ import annotations

import inspect
import re

from ...diagnosis_record import Evidence, confirmed
from ..contracts import call_keeping_inputs
from ..framework.check import Check
from ..framework.failure import CheckFailed


def call_with_hints(chk: Check, fn, *args, hints=(), inputs_row: bool = False, **kwargs):
    """chk.call, but when the learner's code raises, an error whose text
    matches one of `hints` ((regex, hint) pairs) ends with that hint: a
    cause (a string, or Evidence of any kind), or a function measuring the
    learner's code (or reading its error text, when it takes one) that gives
    one or None.
    `inputs_row`: the table also shows the inputs-unchanged row
    (contracts.call_keeping_inputs)."""
    __tracebackhide__ = True
    try:
        if inputs_row:
            return call_keeping_inputs(chk, fn, *args, **kwargs)
        return chk.call(fn, *args, **kwargs)
    except CheckFailed as err:
        if chk.error_measured:
            raise  # the error was explained by measuring the call, not guessed from its text
        for pattern, bug in hints:
            if re.search(pattern, err.error_text()) and (bug := _hint(bug, err.error_text())):
                raise err.with_line(bug if isinstance(bug, Evidence) else confirmed(bug)) from None
        raise


def _hint(bug, error: str):
    """A hint as given, or what a function measuring the learner's code gives (one that takes a parameter
    reads the learner's error text)."""
    if not callable(bug):
        return bug
    return bug(error) if inspect.signature(bug).parameters else bug()


def _passes(body) -> bool:
    try:
        return body().passed
    except CheckFailed:
        return False


def finish_with_upstream(name: str, body, fn, references: dict, labels: dict) -> None:
    """Run a check `body()` (builds and fills a Check, or stops with
    CheckFailed); when it fails and `fn` calls an earlier exercise of this
    notebook that is wrong (references: {name: correct version}), the
    earlier one is named first (Check.upstream re-runs body with the
    correct versions in place of the learner's)."""
    __tracebackhide__ = True
    try:
        chk = body()
    except CheckFailed as err:
        probe = Check(name)
        probe.errors.append("stopped")
        if probe.upstream(fn, references, lambda: _passes(body), labels):
            raise err.with_likely_bug(probe.diagnoses[0]) from None
        raise
    if not chk.passed:
        chk.upstream(fn, references, lambda: _passes(body), labels)
    chk.finish()
