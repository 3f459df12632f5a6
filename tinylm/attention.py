"""Causal self-attention with grouped-query attention (MHA and MQA as the ends).

Layout inside attention is (batch, heads, seq, head_dim); outside it is
(batch, seq, d_model).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .derived import DerivedWeights
from .rope import apply_rope, apply_rope_pairs, pairs_adjacent, pairs_to_halves, rope_rotation


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


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float = 0.0) -> torch.Tensor:
    """The teaching reference: softmax(q kᵀ / sqrt(hd) + mask) v, step by step.

    q (B, nh, Tq, hd); k, v (B, n_kv, Tk, hd) with n_kv dividing nh; queries
    are the last Tq positions. Returns (B, nh, Tq, hd)."""
    n_heads, n_kv = q.shape[1], k.shape[1]
    if n_heads % n_kv:
        raise ValueError(f"causal_attention: {n_heads} query heads cannot be shared evenly by {n_kv} key/value heads.")
    k = repeat_kv(k, n_heads // n_kv)                                    # (B, nh, Tk, hd)
    v = repeat_kv(v, n_heads // n_kv)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])            # (B, nh, Tq, Tk)
    mask = causal_mask(q.shape[-2], k.shape[-2], device=q.device)         # (Tq, Tk), broadcasts over (B, nh)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)  # over keys: each query's weights sum to 1
    if dropout_p > 0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v                                                    # (B, nh, Tq, hd)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.n_kv_heads, config.head_dim
        self.attn_impl = config.attn_impl
        self.dropout = config.dropout
        self.q_proj = nn.Linear(config.d_model, config.n_heads * config.head_dim, bias=False)
        self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.v_proj = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.o_proj = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=False)
        self.derived = DerivedWeights()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache=None, layer_idx: int = 0,
                input_gain: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, d) -> (B, T, d). input_gain (d,), if given, scales x first
        (the fast path folds it into the q/k/v weights instead)."""
        B, T, _ = x.shape
        start_pos = cache.length if cache is not None else 0
        reference = self.attn_impl == "reference"
        if reference:
            q, k, v = self._project_reference(x if input_gain is None else x * input_gain, cos, sin, start_pos)
        else:
            q, k, v = self._project_fused(x, cos, sin, start_pos, input_gain, to_cache=cache is not None)
        if cache is not None:
            k, v = cache.update(layer_idx, k, v)  # (B, n_kv, start_pos + T, hd): the kv heads only

        dropout_p = self.dropout if self.training else 0.0
        y = causal_attention(q, k, v, dropout_p) if reference else self._sdpa(q, k, v, dropout_p)
        y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)  # (B, T, nh·hd): heads side by side
        return self.o_proj(y)

    def _heads(self, t: torch.Tensor, n: int) -> torch.Tensor:
        B, T, _ = t.shape
        return t.view(B, T, n, self.head_dim).transpose(1, 2)  # (B, T, n·hd) -> (B, n, T, hd)

    def _project_reference(self, x, cos, sin, start_pos: int):
        """Three projections, then RoPE on queries and keys: the order the notebooks teach.
        Position enters queries and keys only, never values."""
        q = apply_rope(self._heads(self.q_proj(x), self.n_heads), cos, sin, start_pos)     # (B, nh, T, hd)
        k = apply_rope(self._heads(self.k_proj(x), self.n_kv_heads), cos, sin, start_pos)  # (B, n_kv, T, hd)
        return q, k, self._heads(self.v_proj(x), self.n_kv_heads)                          # v: (B, n_kv, T, hd)

    def _project_fused(self, x, cos, sin, start_pos: int, input_gain=None, to_cache: bool = False):
        """The same q, k, v from one matmul, with q and k rotated in one complex
        product: q_proj and k_proj rows are reordered so each RoPE pair sits
        side by side (pairs_adjacent). Attention only needs q·k, which a feature
        permutation shared by q and k leaves unchanged, so q and k stay in that
        order, unless the keys go into a KV cache: then both are put back in
        half-split order, so the cache holds exactly the reference path's keys."""
        H, K, hd = self.n_heads, self.n_kv_heads, self.head_dim
        weight = self.derived.get("qkv", lambda: self._fused_weight(input_gain),
                                  self.q_proj.weight, self.k_proj.weight, self.v_proj.weight,
                                  *(() if input_gain is None else (input_gain,)))
        qk, v = F.linear(x, weight).split(((H + K) * hd, K * hd), dim=-1)   # (B, T, (H+K)·hd), (B, T, K·hd)
        rotation = self.derived.get("rope", lambda: rope_rotation(cos, sin), cos, sin)
        qk = apply_rope_pairs(self._heads(qk, H + K), rotation, start_pos)  # (B, H+K, T, hd), pairs adjacent
        q, k = (pairs_to_halves(qk) if to_cache else qk).split((H, K), dim=1)  # (B, nh, T, hd), (B, n_kv, T, hd)
        return q, k, self._heads(v, K).contiguous()

    def _fused_weight(self, input_gain=None) -> torch.Tensor:
        """[(nh + 2·n_kv)·hd, d]: q and k rows with RoPE pairs adjacent, then v."""
        weight = torch.cat((pairs_adjacent(self.q_proj.weight, self.n_heads),
                            pairs_adjacent(self.k_proj.weight, self.n_kv_heads), self.v_proj.weight))
        return weight if input_gain is None else weight * input_gain  # (x·g) Wᵀ = x (W·g)ᵀ

    @staticmethod
    def _sdpa(q, k, v, dropout_p: float) -> torch.Tensor:
        q_len, kv_len = q.shape[-2], k.shape[-2]
        gqa = q.shape[1] != k.shape[1]
        if q_len == kv_len:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True, enable_gqa=gqa)
        # is_causal aligns the triangle top-left, wrong when queries follow a
        # cached prefix; one decoded token sees everything, so needs no mask.
        mask = None if q_len == 1 else causal_mask(q_len, kv_len, device=q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, enable_gqa=gqa)
