"""Probes that verify_unseen.py adds for the fresh13 set, where the shared
probes of unseen_probes.py do not reach the situation a mistake is about: a
layer norm of rows whose mean is large against their spread, the gradient an
RMSNorm module passes back to its input, grouped-query attention with more
than two kv heads, a sampler handed logits it must not change, and an
evaluation whose model sits on another device than the notebook's DEVICE.
Each compares the learner's answer with PyTorch built-ins, tinylm or the
caller's own tensors; no check of the course is run."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import tinylm
from benchmarks.unseen_probes import Recorder


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _rms_input_gradient(norm: torch.nn.Module, x: torch.Tensor, upstream: torch.Tensor):
    """d sum(norm(x) * upstream) / d x, or None when no gradient reaches x."""
    leaf = x.clone().requires_grad_()
    out = norm(leaf)
    if not out.requires_grad:
        return None
    (out * upstream).sum().backward()
    return leaf.grad


def probe_02(ns) -> dict:
    gen = _gen(130)
    # mean 1e4, spread 1: E[x²] is about 1e8, where float32 numbers are 8 apart
    offset = 1e4 + torch.randn(4, 16, generator=gen)
    w, b = torch.randn(16, generator=gen), torch.randn(16, generator=gen)
    x, upstream = torch.randn(3, 8, generator=gen), torch.randn(3, 8, generator=gen)

    def input_gradient_matches() -> bool:
        grad = _rms_input_gradient(ns["RMSNorm"](8), x, upstream)
        reference = _rms_input_gradient(lambda t: tinylm.rms_norm(t, torch.ones(8)), x, upstream)
        return grad is not None and torch.allclose(grad, reference, atol=1e-5)
    return {"layer_norm, rows of mean 1e4 and spread 1 == F.layer_norm": bool(torch.allclose(
                ns["layer_norm"](offset, w, b), F.layer_norm(offset, (16,), w, b, eps=1e-5), atol=1e-2)),
            "RMSNorm module gradient wrt its input == tinylm's": input_gradient_matches()}


def probe_07(ns) -> dict:
    # 8 query heads on 4 kv heads: each kv head serves 2 query heads (the shared probes have 2 or 1 kv heads for 4)
    gen = _gen(134)
    q = torch.randn(1, 8, 5, 4, generator=gen)
    k, v = torch.randn(1, 4, 5, 4, generator=gen), torch.randn(1, 4, 5, 4, generator=gen)
    try:
        same = bool(torch.allclose(ns["gqa_attention"](q, k, v),
                                   F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), atol=1e-5))
    except Exception as err:  # a crash is an observation too
        same = f"raises {type(err).__name__}"
    return {"gqa_attention, 4 kv heads for 8 == SDPA enable_gqa": same}


def probe_08(ns) -> dict:
    logits = torch.randn(4, 10, generator=_gen(131))
    handed = logits.clone()
    ns["sample_next"](handed, 0.5, None, None, _gen(0))
    return {"sample_next(temperature=0.5) keeps the caller's logits": torch.equal(handed, logits)}


def probe_10(ns) -> dict:
    """evaluate of a model on the CPU while the notebook's DEVICE is another device (the meta device stands in for
    a GPU): the batches must go where the model is, so the loss is the CPU loss."""
    model = Recorder()
    batches = [(torch.randint(0, 16, (2, 5), generator=_gen(132)), torch.randint(0, 16, (2, 5), generator=_gen(133)))]
    with torch.no_grad():
        expected = F.cross_entropy(model(batches[0][0]).reshape(-1, 16), batches[0][1].reshape(-1)).item()
    before, ns["DEVICE"] = ns["DEVICE"], torch.device("meta")
    try:
        loss = ns["evaluate"](model, batches)["loss"]
    except Exception as err:  # a crash is an observation too
        return {"evaluate, model on the CPU, DEVICE elsewhere: loss": f"raises {type(err).__name__}"}
    finally:
        ns["DEVICE"] = before
    return {"evaluate, model on the CPU, DEVICE elsewhere: loss": abs(loss - expected) < 1e-5}


EXTRA_PROBES = {"02": probe_02, "07": probe_07, "08": probe_08, "10": probe_10}
