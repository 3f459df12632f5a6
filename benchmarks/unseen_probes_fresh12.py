"""Probes that verify_unseen.py adds for the fresh12 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about: the
gradient that reaches RMSNorm's gain, and gradient accumulation whose clipping
bites on the first micro-batch already. Each compares the learner's answer
with tinylm or with one plain step on the whole batch; no check of the course
is run."""
from __future__ import annotations

import torch

import tinylm
from benchmarks.unseen_probes import Recorder
from benchmarks.unseen_probes_later import _accumulated_matches


def _gain_gradient(norm: torch.nn.Module, x: torch.Tensor, upstream: torch.Tensor):
    """d sum(norm(x) * upstream) / d gain, or None when the gain received no gradient. x is made a leaf that
    requires grad, so the backward pass runs even where the gain is cut off from the graph."""
    (norm(x.clone().requires_grad_()) * upstream).sum().backward()
    return norm.weight.grad


def probe_02(ns) -> dict:
    gen = torch.Generator().manual_seed(90)
    x, upstream = torch.randn(3, 8, generator=gen), torch.randn(3, 8, generator=gen)
    gain = torch.ones(8, requires_grad=True)
    (tinylm.rms_norm(x, gain) * upstream).sum().backward()

    def matches() -> bool:
        grad = _gain_gradient(ns["RMSNorm"](8), x, upstream)
        return grad is not None and torch.allclose(grad, gain.grad, atol=1e-6)
    return {"RMSNorm gain gradient == tinylm's": matches()}


def probe_09(ns) -> dict:
    # clipped to 1e-3: the first micro-batch's share alone is far above it, so clipping part-way changes the step
    return {"train_step_accumulated, micro-batches of 2 and 2 rows, padding, clipped to 1e-3: (weights, loss) == "
            "one step on the whole batch": _accumulated_matches(ns, (2, 2), True, 1e-3, lambda: Recorder(10))}


EXTRA_PROBES = {"02": probe_02, "09": probe_09}
