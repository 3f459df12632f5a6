"""Probes that verify_unseen.py adds for the fresh27 set: fresh26's own probes (bfloat16 and float16 inputs, a
caller's generator, the inputs generate_left_padded hands the model, a clip that bites, padding), which reach
situations this set's mistakes are about too, and param_counts for a config whose head_dim is set apart from
d_model / n_heads (q_proj is then not d x d), compared with the parameters of tinylm's own model. No check of
the course is run."""
from __future__ import annotations

import tinylm
from benchmarks.unseen_probes_fresh26 import EXTRA_PROBES as FRESH26_PROBES
from benchmarks.verify_heldout import attempt


def probe_05(ns) -> dict:
    config = tinylm.ModelConfig(vocab_size=32, d_model=16, n_layers=2, n_heads=2, n_kv_heads=1, head_dim=12,
                                max_seq_len=16)
    model_total = sum(p.numel() for p in tinylm.Transformer(config).parameters())
    return {"param_counts, head_dim 12 for d_model 16 / 2 heads: total == tinylm's parameters": attempt(
        lambda: sum(ns["param_counts"](config).values()) == model_total)}


EXTRA_PROBES = {**FRESH26_PROBES, "05": probe_05}
