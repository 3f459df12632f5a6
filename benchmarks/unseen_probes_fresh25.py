"""Probes that verify_unseen.py adds for the fresh25 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about:
layer_norm on tokens whose mean is far from 0 next to their spread (a
variance taken as E[x²] - E[x]² loses its digits there), generate at a
temperature other than 1 (the share of the likeliest token is the
closed-form softmax at that temperature), train_step on a model whose
layers sit one level down, handed over in eval mode (the mode must reach the
submodules, not only the outer module's flag), and the NLL sum of bfloat16
logits drawn with several seeds (one draw's roundings can happen to cancel). Each compares the learner's
answer with PyTorch, a closed form or the mode the solution leaves; no check of
the course is run."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.unseen_probes import Recorder, share_of_token_0
from benchmarks.verify_heldout import attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _close(a, b, **tol) -> bool:
    return a.shape == b.shape and torch.allclose(a.float(), b.float(), **tol)


def probe_02(ns) -> dict:
    gen = _gen(250)
    # 6 tokens of 16 features around 1000 with a spread of about 1: E[x²] near 1e6, where float32 steps by 0.06
    far = torch.randn(6, 16, generator=gen) + 1000.0
    w, b = torch.randn(16, generator=gen), torch.randn(16, generator=gen)
    return {"layer_norm, tokens of mean 1000 and spread 1 == F.layer_norm": attempt(lambda: _close(
        ns["layer_norm"](far, w, b), F.layer_norm(far, (16,), w, b, eps=1e-5), atol=1e-3, rtol=1e-3))}


def probe_08(ns) -> dict:
    # closed form: at T = 2 the logits (3, 0, ..., 0) give token 0 the probability e^1.5 / (e^1.5 + 15)
    at_two = math.exp(1.5) / (math.exp(1.5) + 15)
    try:
        return {"generate at temperature 2, logits (3, 0, ..., 0): share of token 0 == softmax +- 0.04": attempt(
            lambda: abs(share_of_token_0(ns, 2.0, seed=251) - at_two) < 0.04)}
    finally:
        torch.set_grad_enabled(True)  # a generate that switched autograd off must not leak into later probes


class Wrapped(nn.Module):
    """A Recorder one level down: the mode its forward sees is the submodule's own."""

    def __init__(self):
        super().__init__()
        self.inner = Recorder(10)

    def forward(self, idx):
        return self.inner(idx)


def probe_09(ns) -> dict:
    targets = torch.randint(0, 10, (2, 7), generator=_gen(252))
    model = Wrapped().eval()  # as after an evaluation
    attempt(lambda: ns["train_step"](model, torch.optim.SGD(model.parameters(), lr=0.1), targets[:, :-1], targets[:, 1:]))
    return {"train_step, wrapped model handed over in eval mode: the submodule's mode in the forward":
            model.inner.training_seen[:1]}


def _bfloat16_sums_match(ns) -> bool:
    """nll_sum_and_count of bfloat16 logits against cross_entropy of the same logits in float32, for four draws of 64
    targets: a log-probability rounded to bfloat16 (spacing 1/64 near 2) moves the sum by about 1e-4 of itself."""
    for seed in range(253, 257):
        gen = _gen(seed)
        logits, targets = torch.randn(1, 64, 7, generator=gen).bfloat16(), torch.randint(0, 7, (1, 64), generator=gen)
        reference = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="sum").item()
        if not math.isclose(ns["nll_sum_and_count"](logits, targets)[0], reference, rel_tol=1e-5):
            return False
    return True


def probe_10(ns) -> dict:
    return {"nll_sum_and_count, bfloat16 logits of four draws: sums == float32 sums": attempt(
        lambda: _bfloat16_sums_match(ns))}


EXTRA_PROBES = {"02": probe_02, "08": probe_08, "09": probe_09, "10": probe_10}
