"""Grouped heads: the reference repeat of kv heads, the tiling mistake named
the same way wherever it shows, and the fact an error's head-axis mismatch
states."""
from __future__ import annotations

import re

from ...diagnosis_record import Evidence, measured


# A broadcast error at dimension 1 of (B, heads, T, ·) is a head-count
# mismatch, whichever tensor it comes from: the error text does not say
# whether k, v or both lacked the repetition, so only the fact is stated.
HEAD_MISMATCH = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
                           r"dimension (?:1|-3)\b")


def head_mismatch_fact(text: str) -> Evidence | None:
    m = HEAD_MISMATCH.search(text)
    if m is None:
        return None
    return measured(f"the error is on the head axis (dimension 1): {m.group(1)} heads met {m.group(2)}, so the keys "
                    "or the values (or both) reach attention with another head count than the queries' (not "
                    "repeated, or repeated another number of times); each of k and v needs repeat_kv(..., n_rep) "
                    "with n_rep = n_heads // n_kv_heads before attention")


# Said of the mapping measured, not of the call: x.repeat, torch.cat([x] * n_rep), an expand or a transpose
# before the kv axis all tile the heads the same way.
TILED = ("GQA head repetition wrong: tiling: the kv heads come tiled, 0 to n_kv - 1 and again from 0 (0, 1, 0, 1 for "
         "two kv heads), as x.repeat(1, n_rep, 1, 1), torch.cat([x] * n_rep, dim=1) or copies put before the kv axis "
         "give them, so query head h reads kv head h % n_kv; each kv head must serve a contiguous group of query "
         "heads (repeat_interleave, h // n_rep)")


def ref_repeat_kv(x, n_rep):
    """Correct exercise 1 of notebook 07 (for upstream attribution)."""
    return x.repeat_interleave(n_rep, dim=1)
