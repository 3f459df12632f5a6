"""Checks for notebook 07: grouped-query attention.

Reference: F.scaled_dot_product_attention(enable_gqa=True), which maps query
head h to kv head h // (n_heads // n_kv_heads), and torch's repeat_interleave.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .core import Check, randn
from .kv_cache import TILED, check_attention_step



def check_repeat_kv(repeat_kv, *, seed: int = 0, batch: int = 2, n_kv: int = 3, seq: int = 5, head_dim: int = 4,
                    n_reps: tuple = (2, 4, 1), dtype=torch.float32) -> None:
    """repeat_kv(x, n_rep): (B, n_kv, T, hd) -> (B, n_kv * n_rep, T, hd)."""
    __tracebackhide__ = True
    chk = Check("repeat_kv", expects="(batch, n_kv * n_rep, seq, head_dim), each kv head repeated n_rep times in place")
    x = randn(batch, n_kv, seq, head_dim, seed=seed, dtype=dtype)
    for n_rep in n_reps:
        got = chk.call(repeat_kv, x, n_rep)
        variants = {TILED: lambda r=n_rep: x.repeat(1, r, 1, 1)}
        variants |= {f"repeated along the wrong dim ({d}, the {axis} axis); repeat the kv-head axis, dim=1":
                     (lambda d=d, r=n_rep: x.repeat_interleave(r, dim=d))
                     for d, axis in ((0, "batch"), (2, "sequence"), (3, "head_dim"))}
        chk.compare(f"n_kv={n_kv}, n_rep={n_rep}", got, x.repeat_interleave(n_rep, dim=1), variants=variants)
    chk.finish()


def check_gqa_attention(gqa_attention, *, seed: int = 0, batch: int = 2, n_heads: int = 6, seq: int = 5,
                        head_dim: int = 4, kv_heads: tuple = (2, 1, 6), dtype=torch.float32) -> None:
    """gqa_attention(q, k, v): causal attention with fewer kv heads, against
    F.scaled_dot_product_attention(enable_gqa=True); MQA and MHA as the two ends."""
    __tracebackhide__ = True
    chk = Check("gqa_attention", expects="(batch, n_heads, seq, head_dim) attention outputs")
    q = randn(batch, n_heads, seq, head_dim, seed=seed, dtype=dtype)
    for n_kv in kv_heads:
        k = randn(batch, n_kv, seq, head_dim, seed=seed + 1, dtype=dtype) * 1.5
        v = randn(batch, n_kv, seq, head_dim, seed=seed + 2, dtype=dtype)
        rep = n_heads // n_kv
        want = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        got = chk.call(gqa_attention, q, k, v)
        kind = "MQA" if n_kv == 1 else "MHA" if n_kv == n_heads else "GQA"
        chk.compare(f"{kind}: {n_heads} q heads, {n_kv} kv heads", got, want, variants={
            TILED: lambda: F.scaled_dot_product_attention(q, k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1), is_causal=True),
            "no causal mask: every query sees the future": lambda: F.scaled_dot_product_attention(
                q, k, v, enable_gqa=True),
            "only the keys were repeated to the query heads with the right mapping; repeat the values the same way":
                lambda: F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat(1, rep, 1, 1), is_causal=True),
        })
    chk.finish()


def check_gqa_step(gqa_step, **kw) -> None:
    """The cached attention step of notebook 06 with n_kv_heads < n_heads:
    the cache must hold the kv heads only."""
    __tracebackhide__ = True
    kw.setdefault("batch", 3)
    kw.setdefault("n_heads", 4)
    kw.setdefault("n_kv_heads", 2)
    kw.setdefault("head_dim", 6)
    check_attention_step(gqa_step, fn_name="gqa_step", **kw)
