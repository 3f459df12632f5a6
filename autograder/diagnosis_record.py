"""The record of a failed check that may leave the learner's process: a
diagnosis's known fields, of the right types, sizes capped. Plain Python
(no torch), so the grading process can cap what a verdict carries without
importing the checks."""
from __future__ import annotations


# What a diagnosis may carry into a grading result: each text field cut to
# TEXT_CAP characters and each list to LIST_CAP items.
TEXT_CAP = 600
LIST_CAP = 12


def capped_diagnosis(found) -> dict:
    """A diagnosis (checks.core.Diagnosis.to_dict) with only its known
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
    }
