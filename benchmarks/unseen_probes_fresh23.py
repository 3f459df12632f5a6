"""Probes that verify_unseen.py adds for the fresh23 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about: a
top-k filter asked for more tokens than the vocabulary holds (every token is
kept), generate at a temperature other than 1 (the share of the likeliest
token is the closed-form softmax at that temperature), and the NLL sum of
large logits (a probability that underflows to 0 must not turn the sum
infinite). Each compares the learner's answer with tinylm, PyTorch or a closed
form; no check of the course is run."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import tinylm
from benchmarks.unseen_probes import share_of_token_0
from benchmarks.verify_heldout import attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def probe_08(ns) -> dict:
    logits = torch.randn(3, 12, generator=_gen(230))
    # closed form: at T = 2 the logits (3, 0, ..., 0) give token 0 the probability e^1.5 / (e^1.5 + 15)
    at_two = math.exp(1.5) / (math.exp(1.5) + 15)
    try:
        return {"top_k(20) on 12 tokens == tinylm (every token kept)": attempt(lambda: torch.equal(
                    ns["top_k_filter"](logits, 20), tinylm.top_k_filter(logits, 20))),
                "generate at temperature 2, logits (3, 0, ..., 0): share of token 0 == softmax +- 0.04": attempt(
                    lambda: abs(share_of_token_0(ns, 2.0, seed=231) - at_two) < 0.04)}
    finally:
        torch.set_grad_enabled(True)  # a generate that switched autograd off must not leak into later probes


def probe_10(ns) -> dict:
    logits = torch.randn(2, 5, 7, generator=_gen(232)) * 100  # most probabilities underflow float32's exp
    targets = torch.randint(0, 7, (2, 5), generator=_gen(233))
    reference = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum").item()
    return {"nll_sum_and_count, logits x 100: sum == F.cross_entropy": attempt(lambda: math.isclose(
        ns["nll_sum_and_count"](logits, targets)[0], reference, rel_tol=1e-5))}


EXTRA_PROBES = {"08": probe_08, "10": probe_10}
