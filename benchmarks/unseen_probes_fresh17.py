"""Probes that verify_unseen.py adds for the fresh17 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about: an
evaluation whose targets hold -100 padding, compared with PyTorch's own
cross-entropy over the real targets. No check of the course is run."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import tinylm
from benchmarks.verify_heldout import attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def probe_10(ns) -> dict:
    torch.manual_seed(172)
    model = tinylm.Transformer(tinylm.ModelConfig(vocab_size=32, d_model=32, n_layers=1, n_heads=4, max_seq_len=16))
    x = torch.randint(0, 32, (2, 8), generator=_gen(173))
    y = torch.randint(0, 32, (2, 8), generator=_gen(174))
    y[0, 5:] = -100  # the first row has three padded targets
    with torch.no_grad():
        logits = model.eval()(x)
    # the token-weighted mean NLL over the 13 real targets, straight from PyTorch
    ref = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum").item() / 13

    def padded_loss_matches() -> bool:
        got = ns["evaluate"](model, [(x, y)])["loss"]
        return math.isclose(got, ref, rel_tol=1e-5)
    return {"evaluate with -100 padding == mean NLL over real targets": attempt(padded_loss_matches)}


EXTRA_PROBES = {"10": probe_10}
