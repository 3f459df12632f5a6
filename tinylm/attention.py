"""Causal self-attention with grouped-query attention (MHA and MQA as the ends).

Layout inside attention is (batch, heads, seq, head_dim); outside it is
(batch, seq, d_model).

`Attention.forward` calls the module-level functions `apply_rope` and
`causal_attention` by these names, so a notebook that patches
`tinylm.attention.apply_rope` (or `causal_attention`) runs the model with its
own function.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .rope import apply_rope


def causal_mask(q_len: int, kv_len: int | None = None, device=None) -> torch.Tensor:
    """Bool (q_len, kv_len), True where query i may attend to key j.

    Queries are the last q_len of kv_len positions (bottom-right aligned), so
    query i sits at absolute position kv_len - q_len + i and sees keys j <= that.
    With q_len == kv_len this is the usual lower triangle; with a KV cache the
    one new query sees every cached key."""
    kv_len = q_len if kv_len is None else kv_len
    if q_len > kv_len:
        raise ValueError(f"causal_mask: q_len={q_len} > kv_len={kv_len}; queries must be the last q_len of the kv_len positions.")
    return torch.ones(q_len, kv_len, dtype=torch.bool, device=device).tril(diagonal=kv_len - q_len)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, n_kv, T, hd) -> (B, n_kv·n_rep, T, hd): each kv head repeated n_rep
    times in place, so query head h reads kv head h // n_rep. Equal to
    x.repeat_interleave(n_rep, dim=1); tiling (x.repeat) would be wrong."""
    if n_rep == 1:
        return x
    B, n_kv, T, hd = x.shape
    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)  # (B, n_kv, n_rep, T, hd), no copy yet
    return x.reshape(B, n_kv * n_rep, T, hd)         # (B, nh, T, hd)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float = 0.0,
                     mask: torch.Tensor | None = None) -> torch.Tensor:
    """The teaching reference: softmax(q kᵀ / sqrt(hd) + mask) v, step by step.

    q (B, nh, Tq, hd); k, v (B, n_kv, Tk, hd) with n_kv dividing nh; queries
    are the last Tq positions. Returns (B, nh, Tq, hd). mask, when given, is
    the bool (B, 1, Tq, Tk) mask to use instead of the causal one (True =
    may attend): causal and padding together, see padded_causal_mask."""
    n_heads, n_kv = q.shape[1], k.shape[1]
    if n_heads % n_kv:
        raise ValueError(f"causal_attention: {n_heads} query heads cannot be shared evenly by {n_kv} key/value heads.")
    k = repeat_kv(k, n_heads // n_kv)                                    # (B, nh, Tk, hd)
    v = repeat_kv(v, n_heads // n_kv)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])            # (B, nh, Tq, Tk)
    if mask is None:
        mask = causal_mask(q.shape[-2], k.shape[-2], device=q.device)     # (Tq, Tk), broadcasts over (B, nh)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)  # over keys: each query's weights sum to 1
    if dropout_p > 0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v                                                    # (B, nh, Tq, hd)


def padded_causal_mask(attention_mask: torch.Tensor, q_len: int) -> torch.Tensor:
    """attention_mask (B, Tk) of the whole sequence so far (True or 1 = a real
    token, False or 0 = padding) -> bool (B, 1, q_len, Tk), True where a query
    (the last q_len positions) may attend to a key: causally, and never to a
    padding key. A padding query's output is never read; it attends causally
    to every key so that its softmax row is not empty (an all -inf row gives
    NaN, and NaN values times a zero weight still spread NaN)."""
    real = attention_mask.bool()                                  # (B, Tk)
    kv_len = real.shape[-1]
    causal = causal_mask(q_len, kv_len, device=real.device)       # (Tq, Tk)
    query_real = real[:, kv_len - q_len:]                         # (B, Tq)
    allowed = causal & (real[:, None, :] | ~query_real[:, :, None])  # (B, Tq, Tk)
    return allowed[:, None]                                       # (B, 1, Tq, Tk): broadcasts over heads


class Attention(nn.Module):
    """q, k, v projections (Hugging Face's names), RoPE on q and k, causal
    attention over the cached and new keys, then the output projection.

    attn_impl "sdpa" attends with torch's fused F.scaled_dot_product_attention;
    "reference" with the explicit-softmax `causal_attention` the notebooks
    teach. Both use the same projections, rotation and cache."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.n_kv_heads, config.head_dim
        self.attn_impl = config.attn_impl
        self.dropout = config.dropout
        self.q_proj = nn.Linear(config.d_model, config.n_heads * config.head_dim, bias=False)
        self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.v_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.o_proj = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache=None, layer_idx: int = 0,
                positions: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, d) -> (B, T, d). With a cache, x holds the new positions
        only; they continue at position cache.length. positions (B, T): each
        row's RoPE positions, when rows start at different places (left
        padding); mask (B, 1, T, Tk): padded_causal_mask, instead of the
        causal mask alone."""
        B, T, _ = x.shape
        start_pos = 0 if cache is None else cache.length
        q = self._heads(self.q_proj(x), self.n_heads)     # (B, nh, T, hd)
        k = self._heads(self.k_proj(x), self.n_kv_heads)  # (B, n_kv, T, hd)
        v = self._heads(self.v_proj(x), self.n_kv_heads)  # (B, n_kv, T, hd)
        # Position enters queries and keys only, never values.
        # A learner's apply_rope (patched in by name) need not know `positions`: passed only when given.
        rope_at = {} if positions is None else {"positions": positions}
        q = apply_rope(q, cos, sin, start_pos, **rope_at)
        k = apply_rope(k, cos, sin, start_pos, **rope_at)
        if cache is not None:
            k, v = cache.update(layer_idx, k, v)  # (B, n_kv, start_pos + T, hd): the kv heads only

        dropout_p = self.dropout if self.training else 0.0
        masked = {} if mask is None else {"mask": mask}
        if self.attn_impl == "reference":
            y = causal_attention(q, k, v, dropout_p, **masked)  # (B, nh, T, hd)
        else:
            y = _sdpa_causal(q, k, v, dropout_p, mask)          # (B, nh, T, hd)
        y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)  # (B, T, nh·hd): heads side by side
        return self.o_proj(y)                                               # (B, T, d)

    def _heads(self, t: torch.Tensor, n: int) -> torch.Tensor:
        B, T, _ = t.shape
        return t.view(B, T, n, self.head_dim).transpose(1, 2)  # (B, T, n·hd) -> (B, n, T, hd)


def _sdpa_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float,
                 mask: torch.Tensor | None = None) -> torch.Tensor:
    """causal_attention computed by torch's fused kernel: the same numbers up to rounding.
    q (B, nh, Tq, hd); k, v (B, n_kv, Tk, hd) -> (B, nh, Tq, hd); mask as causal_attention's."""
    q_len, kv_len = q.shape[-2], k.shape[-2]
    gqa = q.shape[1] != k.shape[1]  # the kernel shares each kv head among nh / n_kv query heads
    if mask is not None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, enable_gqa=gqa)
    if q_len == kv_len:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True, enable_gqa=gqa)
    # is_causal aligns the triangle top-left, wrong when queries follow a
    # cached prefix: pass the bottom-right mask. One new query sees every key.
    mask = None if q_len == 1 else causal_mask(q_len, kv_len, device=q.device)  # (Tq, Tk)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, enable_gqa=gqa)
