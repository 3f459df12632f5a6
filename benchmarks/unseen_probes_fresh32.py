"""Probes that verify_unseen.py adds for the fresh32 set: fresh31's (and through them the earlier sets') extra
probes, and the situations of its own: kv_cache_bytes for a model whose head_dim is set apart from
d_model / n_heads, whether train_step leaves the global random stream where it was, evaluate called while the
notebook's DEVICE names another device than the one the model lives on, and the types nll_sum_and_count returns.
Each compares the learner's answer with tinylm, PyTorch or a closed form; no check of the course is run."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from benchmarks.unseen_probes import Recorder, _kv_cache_nbytes
from benchmarks.unseen_probes_fresh31 import EXTRA_PROBES as FRESH31_PROBES
from benchmarks.verify_heldout import _config, attempt


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def probe_06(ns) -> dict:
    apart = _config(2, head_dim=12)  # 4 heads of 12 features on a 32-wide stream: 32 // 4 = 8 is not the head size
    return {"kv_cache_bytes, head_dim 12 for d_model 32 / 4 heads == KVCache nbytes": attempt(
        lambda: ns["kv_cache_bytes"](apart, 40, 2, torch.float32) == _kv_cache_nbytes(apart, 40, 2, torch.float32))}


def _global_stream_kept(ns) -> bool:
    """torch.rand after a train_step on a model with no randomness (a Recorder, SGD) draws what it draws without
    the step in between: a train_step that seeds the global generator resets every later draw of the caller."""
    model = Recorder(10)
    ids = torch.randint(0, 10, (2, 7), generator=_gen(320))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(321)
    ns["train_step"](model, optimizer, ids[:, :-1], ids[:, 1:])
    after = torch.rand(3)
    torch.manual_seed(321)
    return torch.equal(after, torch.rand(3))


def probe_09(ns) -> dict:
    return {"train_step leaves the global random stream where it was": attempt(lambda: _global_stream_kept(ns))}


def _evaluated_with_device_elsewhere(ns) -> bool:
    """evaluate on a model on the CPU while the notebook's DEVICE is the meta device (standing in for a GPU the
    model was not moved to): the batches go where the model's parameters are, so the loss is the token-weighted mean."""
    gen = _gen(322)
    model = Recorder()
    batches = [(torch.randint(0, 16, (2, 5), generator=gen), torch.randint(0, 16, (2, 5), generator=gen))]
    with torch.no_grad():
        expected = F.cross_entropy(model.emb(batches[0][0]).reshape(-1, 16), batches[0][1].reshape(-1)).item()
    before, ns["DEVICE"] = ns.get("DEVICE"), torch.device("meta")
    try:
        return math.isclose(ns["evaluate"](model, batches)["loss"], expected, rel_tol=1e-5)
    finally:
        ns["DEVICE"] = before


def _returned_types(ns) -> tuple:
    """The types nll_sum_and_count hands back: the exercise asks for (a float, an int)."""
    logits, targets = torch.randn(2, 4, 7, generator=_gen(323)), torch.randint(0, 7, (2, 4), generator=_gen(324))
    return tuple(type(value).__name__ for value in ns["nll_sum_and_count"](logits, targets))


def probe_10(ns) -> dict:
    return {"evaluate, the notebook's DEVICE not the model's: loss == token-weighted mean": attempt(
                lambda: _evaluated_with_device_elsewhere(ns)),
            "nll_sum_and_count: types of (sum, count)": attempt(lambda: _returned_types(ns))}


def _joined(first, second):
    return second if first is None else lambda ns: {**first(ns), **second(ns)}


EXTRA_PROBES = {**FRESH31_PROBES, **{nb: _joined(FRESH31_PROBES.get(nb), probe) for nb, probe in
                                     (("06", probe_06), ("09", probe_09), ("10", probe_10))}}
