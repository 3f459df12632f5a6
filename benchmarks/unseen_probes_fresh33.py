"""Probes that verify_unseen.py adds for the fresh33 set: fresh32's (and through them the earlier sets') extra
probes, and one situation of its own: causal attention whose future keys score about 2.8e4 above the past ones,
where a finite additive mask of -1e4 no longer hides them. It compares the learner's answer with PyTorch's SDPA;
no check of the course is run."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.unseen_probes_fresh32 import EXTRA_PROBES as FRESH32_PROBES
from benchmarks.verify_heldout import attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _future_scores_high(ns) -> bool:
    """Keys 1..3 equal 100·1 and key 0 is 0, every query 100·1: a query's future keys score 100² · 8 / sqrt(8),
    about 2.8e4 above key 0, so only a mask that removes them entirely leaves query 0 with value 0."""
    q = torch.full((1, 1, 4, 8), 100.0)
    k = q.clone()
    k[..., 0, :] = 0.0
    v = torch.randn(1, 1, 4, 8, generator=_gen(330))
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return torch.allclose(ns["causal_attention"](q, k, v), reference, atol=1e-5)


def probe_03(ns) -> dict:
    return {"attention, future keys scoring 2.8e4 above the past == SDPA": attempt(lambda: _future_scores_high(ns))}


def _joined(first, second):
    return second if first is None else lambda ns: {**first(ns), **second(ns)}


EXTRA_PROBES = {**FRESH32_PROBES, **{nb: _joined(FRESH32_PROBES.get(nb), probe) for nb, probe in
                                     (("03", probe_03),)}}
