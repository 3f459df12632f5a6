"""Probes that verify_unseen.py adds for the fresh29 set: fresh28's (and through them fresh27's and fresh26's) extra
probes, and three of its own: kv_cache_bytes with 8 query heads for 2 kv heads (a group size apart from the
kv head count), rms_norm in half precision bit for bit against tinylm (the order of the cast and the gain
decides the rounding), and the mode evaluate's forward passes see over several batches of a model handed over in
train mode. No check of the course is run."""
from __future__ import annotations

import torch

import tinylm
from benchmarks.unseen_probes import Recorder, _kv_cache_nbytes
from benchmarks.unseen_probes_fresh28 import EXTRA_PROBES as FRESH28_PROBES
from benchmarks.verify_heldout import attempt


def probe_02(ns) -> dict:
    gen = torch.Generator().manual_seed(29)
    x, gain = torch.randn(4, 64, generator=gen) * 3, torch.randn(64, generator=gen)
    found = {}
    for name, dtype in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
        found[f"rms_norm, {name} x and {name} gain: bit for bit == tinylm"] = attempt(lambda dtype=dtype: torch.equal(
            ns["rms_norm"](x.to(dtype), gain.to(dtype)), tinylm.rms_norm(x.to(dtype), gain.to(dtype))))
    found["rms_norm, bfloat16 x and float32 gain: output dtype"] = attempt(
        lambda: str(ns["rms_norm"](x.bfloat16(), gain).dtype))
    return found


def probe_06(ns) -> dict:
    config = tinylm.ModelConfig(vocab_size=32, d_model=64, n_layers=2, n_heads=8, n_kv_heads=2, max_seq_len=16)
    expected = _kv_cache_nbytes(config, 16, 3, torch.bfloat16)
    return {"kv_cache_bytes, 8 heads / 2 kv heads == KVCache nbytes": attempt(
        lambda: ns["kv_cache_bytes"](config, 16, 3, torch.bfloat16) == expected)}


def probe_10(ns) -> dict:
    def modes_seen():
        model = Recorder().train()
        ids = torch.randint(0, 16, (2, 5), generator=torch.Generator().manual_seed(30))
        ns["evaluate"](model, [(ids, ids), (ids, ids), (ids, ids)])
        return model.training_seen
    return {"evaluate, model in train mode, 3 batches: mode of each forward": attempt(modes_seen)}


def _joined(first, second):
    return second if first is None else lambda ns: {**first(ns), **second(ns)}


EXTRA_PROBES = {**FRESH28_PROBES, "02": _joined(FRESH28_PROBES.get("02"), probe_02),
                "06": _joined(FRESH28_PROBES.get("06"), probe_06),
                "10": _joined(FRESH28_PROBES.get("10"), probe_10)}
