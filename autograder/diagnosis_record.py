"""The record of a failed check: the Diagnosis fields every reader uses (the
notebook's message, the self-check, the benchmarks, the feedback page), the
words for where a located line goes wrong, and the capped form of a record
that may leave the learner's process. Plain Python (no torch), so the
grading process and the feedback page read it without importing the checks.

A record's `kind` is given by whoever makes it (Check._stop names it with
the stop), never read back from the message text."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


# What a diagnosis may carry into a grading result: each text field cut to
# TEXT_CAP characters and each list to LIST_CAP items.
TEXT_CAP = 600
LIST_CAP = 12


def capped_diagnosis(found) -> dict:
    """A diagnosis (Diagnosis.to_dict) with only its known
    fields, of the right types, sizes capped: what a verdict may carry into
    the result file. Anything else becomes empty."""
    def text(value) -> str | None:
        return value[:TEXT_CAP] if isinstance(value, str) else None

    def texts(value) -> list[str]:
        return [v[:TEXT_CAP] for v in value[:LIST_CAP] if isinstance(v, str)] if isinstance(value, list) else []
    found = found if isinstance(found, dict) else {}
    regime = found.get("regime") if isinstance(found.get("regime"), dict) else None
    located = found.get("located") if isinstance(found.get("located"), dict) else None
    return {
        "exercise": text(found.get("exercise")) or "", "kind": text(found.get("kind")) or "failed",
        "rows": texts(found.get("rows")), "failed_rows": texts(found.get("failed_rows")),
        "regime": {"name": text(regime.get("name")) or "", "text": text(regime.get("text")) or ""} if regime else None,
        "located": {"file": text(located.get("file")) or "", "function": text(located.get("function")) or "",
                    "code": text(located.get("code")) or "", "also_code": text(located.get("also_code")) or "",
                    "kind": text(located.get("kind")) or "", "facts": texts(located.get("facts")),
                    "line": located.get("line") if type(located.get("line")) is int else None,
                    "also": located.get("also") if type(located.get("also")) is int else None} if located else None,
        "variants": texts(found.get("variants")), "likely_bugs": texts(found.get("likely_bugs")),
        "facts": texts(found.get("facts")), "error": text(found.get("error")), "stop": text(found.get("stop")),
        "candidates": texts(found.get("candidates")),
    }


@dataclass
class Diagnosis:
    """A failure as data: what the report, the feedback page and the
    benchmarks read, so rewording a message changes none of them.

    exercise: the function or class checked; kind: "failed" (rows failed),
    "raised" (the learner's code raised), "not implemented", "delegated" or
    "stopped" (any other stop, e.g. not callable); rows: every row's name;
    failed_rows: those that failed; regime: the regime a failure showed in
    ({"name", "text"}: "float64", "right in float32, wrong in float64"), None
    when the table rows failed; located: the learner's line where the first
    wrong value is made ({"file", "line", "function", "code", "facts", "kind"};
    "code" is the learner's own text); variants: known wrong variants that
    reproduce every failing row; likely_bugs: every named cause, most useful
    last (variants included); facts: true measurements that name no bug;
    error: the type of the learner's exception; stop: the first line of a
    stop's message; candidates: measured facts each with the causes it fits,
    stated as candidates (none confirmed on the learner's code), kept apart
    from the facts so that no reader takes a candidate for a measurement or
    a cause."""
    exercise: str
    kind: str = "failed"
    rows: list[str] = field(default_factory=list)
    failed_rows: list[str] = field(default_factory=list)
    regime: dict | None = None
    located: dict | None = None
    variants: list[str] = field(default_factory=list)
    likely_bugs: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    error: str | None = None
    stop: str | None = None
    candidates: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"exercise": self.exercise, "kind": self.kind, "rows": list(self.rows),
                "failed_rows": list(self.failed_rows), "regime": dict(self.regime) if self.regime else None,
                "located": dict(self.located) if self.located else None, "variants": list(self.variants),
                "likely_bugs": list(self.likely_bugs), "facts": list(self.facts), "error": self.error,
                "stop": self.stop, "candidates": list(self.candidates)}

    @classmethod
    def from_dict(cls, data: Mapping) -> "Diagnosis":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def with_bug(self, bug: str) -> "Diagnosis":
        bugs = self.likely_bugs if bug in self.likely_bugs else [*self.likely_bugs, bug]
        return Diagnosis(**{**self.to_dict(), "likely_bugs": bugs})

    def with_fact(self, fact: str) -> "Diagnosis":
        facts = self.facts if fact in self.facts else [*self.facts, fact]
        return Diagnosis(**{**self.to_dict(), "facts": facts})

    def with_candidates(self, line: str) -> "Diagnosis":
        said = self.candidates if line in self.candidates else [*self.candidates, line]
        return Diagnosis(**{**self.to_dict(), "candidates": said})

    def with_evidence(self, evidence: "Evidence") -> "Diagnosis":
        """The record with one more line, in the field its kind says."""
        add = {CONFIRMED: self.with_bug, CANDIDATES: self.with_candidates}.get(evidence.kind, self.with_fact)
        return add(evidence.text)


# How a diagnosis line is known. MEASURED: a fact about the learner's output
# or error that names no cause. CANDIDATES: a measured fact and the causes it
# fits, stated as candidates (a record keeps it in its own field). CONFIRMED:
# a cause shown on the learner's own code (its likely_bugs).
MEASURED, CANDIDATES, CONFIRMED = "measured", "candidates", "confirmed"


@dataclass(frozen=True)
class Evidence:
    """One diagnosis line as data: what a hint gives a failure, so where it
    goes and how it is worded follow from `kind`, never from its text."""
    kind: str
    text: str

    def __post_init__(self):
        if self.kind not in (MEASURED, CANDIDATES, CONFIRMED):
            raise ValueError(f"unknown evidence kind {self.kind!r}")
        if self.kind == CANDIDATES and "candidate" not in self.text.lower():
            raise ValueError("a line of candidates names them as candidates")


def measured(text: str) -> Evidence:
    return Evidence(MEASURED, text)


def candidates(text: str) -> Evidence:
    return Evidence(CANDIDATES, text)


def confirmed(text: str) -> Evidence:
    return Evidence(CONFIRMED, text)


KIND_WORDS = {
    "value": "the first line whose value the reference never computes",
    "missing": "a step the reference takes between these lines is not between them: the value made here reaches a "
               "later line without it",
    "missing_here": "a step the reference takes on this line is not on it: the value made here reaches a later step "
                    "of this same line without it",
    "role": "a value is used in another's place: the value made here is not the one the reference uses there",
    "role_read": "a value is used in another's place: this line reads a value where the reference reads another",
    "swapped": "a value is used in another's place: the same line makes the value the reference uses there too",
    "layout": "the value made here reaches the later line with its axes split or ordered differently",
    "layout_here": "the value made here reaches a later step of this same line with its axes split or ordered "
                   "differently",
    "output": "your result is this value, which the reference has only before its last steps (a step after it is "
              "missing)",
    "permuted": "your result, made here, holds the reference's values at other places (the same values, "
                "permuted): the values are right, their order is not",
    "twice": "this step is applied twice: the value it reads already went through the same step",
    "ahead": "the value read here already went through later steps: the steps run in another order than the "
             "reference's",
    "number": "the first wrong value, made on the other line, reads a number bound here",
    "sizes": "the sizes this call is given differ from the reference's; they are read on the other line",
    "offset": "this slice has the shape of the reference's, not its bounds: it reads other entries",
    "offset_read": "a slice made inside the call on this line has the reference's length, not its bounds; the call "
                   "reads a name bound on the other line",
    "shape": "the value made here has the reference's numbers in another shape",
    # said alike when the line is itself a cast, to another dtype than the reference's
    "cast": "the value made here reaches the later line in another dtype than the reference's: a cast is missing or "
            "casts to another dtype",
    "cast_here": "the value made here reaches a later step of this same line in another dtype than the reference's: "
                 "a cast is missing on this line or casts to another dtype",
    "grad": "the gradient stops here",
    "raises": "it raises here",
    "unregistered": "this line stores a plain tensor where the module built on the CPU registers a Parameter or buffer",
    "order": "this call's arguments bind to other parameters than the names passed",
    "bound": "the value the line that raised reads is made here",
    "passed": "the value the line that raised reads is handed to it here",
    "read": "this line reads another value than the reference reads there, although your code makes that one too",
    "late": "a step is taken after the line that needs it: this line reads the value without it, and the other line "
            "makes, later, the value the reference reads here",
    "view": "a view that needs the memory it reads laid out in one stride pattern, which this value's is not (an "
            "expand, a transpose or a slice makes such values): .reshape copies where a view cannot",
    "dtype": "a dtype is fixed here",
    "promoted": "the values leave the dtype the result must have here",
    "uncast": "this line makes your result from values in another dtype than the result must have, made so on the "
              "other line",
    "saved": "this line registers a tensor that the module's state_dict saves with its weights",
    "flag": "this line assigns the model's own training flag, which leaves its submodules' flags as they were "
            "(model.eval() and model.train() set every submodule's)",
    "unmoved": "this line stores a tensor as a plain attribute, not a parameter or buffer: .to() and .cuda() do not "
               "move it",
    "block_input": "the value made here is what block 0 receives (measured at its input), and it is not the "
                   "embedding of the ids",
    "detour": "the values are rounded to a lower precision here, and keep that rounding in the result",
    "call": "this line calls the stage with other arguments than the reference's",
    "received": "the value made here is what the next stage receives (measured at its input), in place of the "
                "output of the stage before it",
    "spoiled": "the first value holding inf or nan is made here, from finite inputs",
    "untied": "this line, after the line tying the head to the embedding, assigns one of their weights again: from "
              "here on they are two Parameters",
    "appended": "a column past the prompt is added here, in the call that asked for no new token (measured: the call "
                "run again)",
    "attribute": "this line stores an attribute on self that no line of the class reads, and the other line reads one "
                 "that no line stores (one renamed in one place only?)",
    "name_apart": "this line binds a name that no line of the function reads, and the other line reads one that no "
                  "line binds (one renamed in one place only?)",
    "notebook_name": "this line reads a value bound in the notebook (an earlier cell), not one the call passes",
    "misplaced": "a call made here runs at another point of the step than where it belongs, as the measured order "
                 "of the step's calls shows",
    "count": "the number your code divides by is made here: the first line after which one of its names holds it, "
             "in each run measured",
    "helper": "this line calls a helper of yours, on the other line, with other values than the reference's step "
              "reads there",
}
