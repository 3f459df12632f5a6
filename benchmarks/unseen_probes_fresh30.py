"""Probes that verify_unseen.py adds for the fresh30 set: fresh29's (and through them the earlier sets') extra
probes, and three of its own: layer_norm on features whose mean is far from 0 (a one-pass variance
E[x²] - E[x]² loses its digits there), whether pre_norm_block leaves the caller's tensor as it was, and the mode
a model handed to generate_greedy in train mode or in eval mode is left in. No check of the course is run."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import tinylm
from benchmarks.unseen_probes_fresh29 import EXTRA_PROBES as FRESH29_PROBES
from benchmarks.verify_heldout import _config, _reference, attempt


def probe_02(ns) -> dict:
    gen = torch.Generator().manual_seed(300)
    shifted = torch.randn(4, 16, generator=gen) + 300.0  # unit spread around a mean of 300
    w, b = torch.randn(16, generator=gen), torch.randn(16, generator=gen)
    return {"layer_norm, features around 300 == F.layer_norm": attempt(lambda: torch.allclose(
        ns["layer_norm"](shifted, w, b), F.layer_norm(shifted, (16,), w, b, eps=1e-5), atol=1e-3))}


def probe_05(ns) -> dict:
    def caller_tensor_kept():
        x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(301))
        before = x.clone()
        ns["pre_norm_block"](x, torch.tanh, torch.sigmoid, lambda t: t * 2.0, lambda t: t * 0.5)
        return torch.equal(x, before)
    return {"pre_norm_block leaves the caller's x as it was": attempt(caller_tensor_kept)}


def probe_06(ns) -> dict:
    def mode_after(train: bool) -> bool:
        model = _reference(_config(4)).train(train)
        prompt = torch.randint(0, 256, (2, 3), generator=torch.Generator().manual_seed(302))
        ns["generate_greedy"](model, prompt, 2, tinylm.KVCache(model.config, 2))
        return model.training
    return {"generate_greedy, model handed over in train mode: training afterwards": attempt(lambda: mode_after(True)),
            "generate_greedy, model handed over in eval mode: training afterwards": attempt(lambda: mode_after(False))}


def _joined(first, second):
    return second if first is None else lambda ns: {**first(ns), **second(ns)}


EXTRA_PROBES = {**FRESH29_PROBES, "02": _joined(FRESH29_PROBES.get("02"), probe_02),
                "05": _joined(FRESH29_PROBES.get("05"), probe_05),
                "06": _joined(FRESH29_PROBES.get("06"), probe_06)}
