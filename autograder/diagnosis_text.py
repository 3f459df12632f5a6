"""The words a learner reads for a failed check, made from its record
(diagnosis_record.Diagnosis, or the dict a result file keeps): one renderer
for the notebook's CheckFailed message, the self-check's table and the
feedback page, so the three say the same lines in the same order. Plain
Python (no torch).

The order follows the evidence. First what was measured: the regime the
failure showed in, then the measured facts. Then where in the learner's code
the first wrong value is made (also measured, by the tracer). Then the lines
of candidates: a measured fact with the causes it fits, none of them shown
on the learner's code, so they come after everything measured and are
labelled apart ("Candidates:"), never read as a fact or as a cause. Last the
causes confirmed on their code, the most useful last: a notebook shows the
end of a long message, and the cause ends with its fix.

The Where line quotes the learner's own line and names their function only
when asked (learners_text): a page the grader publishes says "line 4 of your
answer" and frames the learner's line apart, as their text."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .diagnosis_record import CANDIDATES, CONFIRMED, KIND_WORDS, MEASURED, Diagnosis, Evidence

WHERE = "where"
LABELS = {MEASURED: "Measured", CANDIDATES: "Candidates", CONFIRMED: "Likely bug", WHERE: "Where"}


@dataclass(frozen=True)
class Line:
    """One line a learner reads: kind (an evidence kind, or WHERE) and the
    check's words."""
    kind: str
    text: str

    @property
    def label(self) -> str:
        return LABELS[self.kind]

    def __str__(self) -> str:
        return f"{self.label}: {self.text}"


def _fields(record: Diagnosis | Mapping) -> Mapping:
    return record.to_dict() if isinstance(record, Diagnosis) else record


def _strings(value) -> list[str]:
    return [v for v in value if isinstance(v, str) and v] if isinstance(value, list) else []


def headline(record: Diagnosis | Mapping) -> str:
    """The failure's first line: the rows that failed, or the stop's first
    line for a check that stopped ("" when the record has neither)."""
    d = _fields(record)
    failed, rows = _strings(d.get("failed_rows")), _strings(d.get("rows"))
    if d.get("kind") == "failed" and (failed or not d.get("stop")):
        return f"{d.get('exercise')} failed {len(failed)} of {len(rows)} checks: {'; '.join(failed)}."
    return str(d.get("stop") or "")


def function_words(qualname: str) -> str:
    """A learner's function as a message names it: a generator expression,
    comprehension or lambda inside it is its enclosing function's line
    ("self_attention", not "self_attention.<locals>.<genexpr>"), and a
    function defined inside another says so ("inner (inside outer)")."""
    parts = qualname.split(".<locals>.")
    while len(parts) > 1 and parts[-1].startswith("<"):
        parts.pop()
    return parts[0] if len(parts) == 1 else f"{parts[-1]} (inside {parts[-2]})"


def where(located: Mapping | None, learners_text: bool = True) -> str | None:
    """The Where line's words for a located place, None without a line
    number. learners_text=False leaves out what the learner chose (their
    line's text and their function's name): "line 4 of your answer"."""
    if not isinstance(located, Mapping) or type(located.get("line")) is not int:
        return None
    also = located.get("also") if type(located.get("also")) is int else None
    if learners_text:
        function = function_words(str(located.get("function") or ""))
        code, also_code = str(located.get("code") or ""), str(located.get("also_code") or "")
        place = f"line {located['line']}" + (f" of your {function}" if function and not function.startswith("<") else "")
        if code:
            place += f", `{code}`" + (f" and line {also}, `{also_code}`" if also else "")
        elif also:
            place += f" and line {also}"
    else:
        place = f"line {located['line']}" + (f" and line {also}" if also else "") + " of your answer"
    facts = "; ".join(_strings(located.get("facts")))
    words = KIND_WORDS.get(str(located.get("kind")))  # a kind the tracer does not have says nothing
    return place + (f": {words}" if words else "") + (f" ({facts})" if facts else "")


def lines(record: Diagnosis | Mapping, learners_text: bool = True) -> list[Line]:
    """The diagnosis lines of a record, in the order the module docstring gives."""
    d = _fields(record)
    facts = _strings(d.get("facts"))
    regime = d.get("regime") if isinstance(d.get("regime"), Mapping) else {}
    said = [Line(MEASURED, str(regime["text"]))] if regime.get("text") and regime["text"] not in facts else []
    said += [Line(MEASURED, f) for f in facts]
    place = where(d.get("located"), learners_text)
    if place:
        said.append(Line(WHERE, place))
    said += [Line(CANDIDATES, c) for c in _strings(d.get("candidates"))]
    return said + [Line(CONFIRMED, b) for b in _strings(d.get("likely_bugs"))]


def evidence_line(evidence: Evidence) -> Line:
    return Line(evidence.kind, evidence.text)
