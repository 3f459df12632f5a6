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
    if len(set(counts.values()) & {int(m.group(1)), int(m.group(2))}) == 2 and "queries" in counts:
        q = counts["queries"]
        kv = [name for name in ("keys", "values") if counts.get(name) not in (None, q)]
        said = [f"the {_listed([name for name in ('queries', 'keys', 'values') if counts.get(name) == q])} have {q}"]
        for n in sorted({counts[name] for name in kv}):
            names = [name for name in kv if counts[name] == n]
            said.append(f"the {_listed(names)} {'have' if len(names) > 1 else 'has'} {n}, "
                        + (f"not repeated to the queries' {q}" if n < q else f"repeated past the queries' {q}")
                        + " (attention needs each kv head copied n_rep = n_heads // n_kv_heads times before it, "
                        "by a repeat_kv given that count, whether the call is missing or its count is another; a "
                        "KV cache keeps them unrepeated)")
        if counts.get("mask") not in (None, 1, q):
            said.append(f"the mask has {counts['mask']}, where a mask has 1 (it broadcasts over the heads) or the "
                        f"queries' {q}")
        return measured(f"{error}; measured at your attention call (head axis): {'; '.join(said)}")
    return candidates(f"{error}: a tensor reaching attention has another head count than the others; candidates: the "
                      "keys or the values (or both), not repeated or repeated another number of times (each needs "
                      "repeat_kv(..., n_rep) with n_rep = n_heads // n_kv_heads before attention); or a mask with a "
                      "head axis other than 1 or n_heads")


def _listed(names: list[str]) -> str:
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]


# Said of the mapping measured, not of the call: x.repeat, torch.cat([x] * n_rep), an expand or a transpose
# before the kv axis all tile the heads the same way.
TILED = ("GQA head repetition wrong: tiling: the kv heads come tiled, 0 to n_kv - 1 and again from 0 (0, 1, 0, 1 for "
         "two kv heads), as x.repeat(1, n_rep, 1, 1), torch.cat([x] * n_rep, dim=1) or copies put before the kv axis "
         "give them, so query head h reads kv head h % n_kv; each kv head must serve a contiguous group of query "
         "heads (repeat_interleave, h // n_rep)")


def ref_repeat_kv(x, n_rep):
    """Correct exercise 1 of notebook 07 (for upstream attribution)."""
    return x.repeat_interleave(n_rep, dim=1)
