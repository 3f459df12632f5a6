"""Grouped heads: the reference repeat of kv heads, the tiling mistake named
the same way wherever it shows, and the fact an error's head-axis mismatch
states."""
from __future__ import annotations

import re

from ...diagnosis_record import Evidence, candidates, measured


# A broadcast error at dimension 1 of (B, heads, T, ·) is a head-count
# mismatch, whichever tensor it comes from: the error text does not say
# whether k, v, both or a mask had the other count, so the fact is stated with
# the head counts measured at the attention call, or else with candidates.
HEAD_MISMATCH = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
                           r"dimension (?:1|-3)\b")


def head_mismatch_fact(text: str, operands: dict[str, int | None] | None = None) -> Evidence | None:
    """operands: the head counts the first attention call got (spies.attention_operands), or None."""
    m = HEAD_MISMATCH.search(text)
    if m is None:
        return None
    error = f"the error is on the head axis (dimension 1): {m.group(1)} heads met {m.group(2)}"
    counts = {name: n for name, n in (operands or {}).items() if n is not None}
    if len(set(counts.values()) & {int(m.group(1)), int(m.group(2))}) == 2:
        by_count: dict[int, list[str]] = {}
        for name, n in counts.items():
            by_count.setdefault(n, []).append(name)
        held = "; ".join(f"the {_listed(names)} {'have' if len(names) > 1 or names[0] != 'mask' else 'has'} {n}"
                         for n, names in by_count.items())
        return measured(f"{error}; measured at your attention call (head axis): {held}. q, k and v need one "
                        "head count (k and v repeated with repeat_kv(..., n_rep), n_rep = n_heads // n_kv_heads), "
                        "and a mask 1 there (it broadcasts over the heads) or n_heads")
    return candidates(f"{error}: a tensor reaching attention has another head count than the others; candidates: the "
                      "keys or the values (or both), not repeated or repeated another number of times (each needs "
                      "repeat_kv(..., n_rep) with n_rep = n_heads // n_kv_heads before attention); or a mask with a "
                      "head axis other than 1 or n_heads")


def _listed(names: list[str]) -> str:
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]


# Said of the mapping measured, not of the call: x.repeat, torch.cat([x] * n_rep), an expand or a transpose
# before the kv axis all tile the heads the same way.
TILED = ("GQA head repetition wrong: tiling: the kv heads come in the order 0, 1, 0, 1 (as x.repeat(1, n_rep, 1, 1), "
         "torch.cat([x] * n_rep, dim=1) or copies put before the kv axis give them), so query head h reads kv head "
         "h % n_kv; each kv head must serve a contiguous group of query heads (repeat_interleave, h // n_rep)")


def ref_repeat_kv(x, n_rep):
    """Correct exercise 1 of notebook 07 (for upstream attribution)."""
    return x.repeat_interleave(n_rep, dim=1)
