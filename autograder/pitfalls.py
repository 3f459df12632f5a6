"""Deliberately wrong implementations, one per seed bug, for the Pitfalls
sections of the notebooks: `show_check(check_rms_norm, pitfalls.rms_norm_no_upcast)`
prints what a learner with that bug would see.

They live here, not in the notebooks, because each one is a solution with a
single line changed: printed in a release notebook it would give the answer
away. Each docstring names the changed line."""
from __future__ import annotations

import math

import torch
from torch import nn
import torch.nn.functional as F

from tinylm import apply_rope, causal_attention, causal_mask, rotate_half
import tinylm

# -- 01 embeddings --------------------------------------------------------------


def tie_by_copy(tok_emb, lm_head):
    """lm_head.weight = nn.Parameter(tok_emb.weight.detach().clone()): equal values, separate tensor."""
    lm_head.weight = nn.Parameter(tok_emb.weight.detach().clone())


def tie_transposed(tok_emb, lm_head):
    """lm_head.weight = nn.Parameter(tok_emb.weight.T ...): a [d, V] copy."""
    lm_head.weight = nn.Parameter(tok_emb.weight.detach().T.clone())


def tied_logits_transposed(x, weight):
    """x @ weight instead of x @ weight.T."""
    return x @ weight


# -- 02 RMSNorm -----------------------------------------------------------------


def _rms(x, weight, eps, *, dim=-1, eps_inside=True, gain=True, upcast=True):
    xs = x.float() if upcast else x
    ms = xs.pow(2).mean(dim, keepdim=True)
    y = xs * torch.rsqrt(ms + eps) if eps_inside else xs / (ms.sqrt() + eps)
    y = y.to(x.dtype)
    return weight * y if gain else y


def rms_norm_eps_outside(x, weight, eps=1e-6):
    """x / (sqrt(mean(x²)) + eps)."""
    return _rms(x, weight, eps, eps_inside=False)


def rms_norm_wrong_axis(x, weight, eps=1e-6):
    """x.pow(2).mean(dim=1, ...): averages over positions, not features."""
    return _rms(x, weight, eps, dim=1)


def rms_norm_no_gain(x, weight, eps=1e-6):
    """return x * inv_rms, without `weight *`."""
    return _rms(x, weight, eps, gain=False)


def rms_norm_no_upcast(x, weight, eps=1e-6):
    """x.pow(2) computed in x's own dtype (float16 overflows above 256)."""
    return _rms(x, weight, eps, upcast=False)


# -- 03 causal attention ----------------------------------------------------------


def _attend(q, k, v, *, dim=-1, scale=None, mask=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    mask = causal_mask(q.shape[-2], k.shape[-2]) if mask is None else mask
    scores = (q @ k.transpose(-2, -1) * scale).masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=dim) @ v


def attention_softmax_wrong_dim(q, k, v):
    """scores.softmax(dim=-2): normalises over queries."""
    return _attend(q, k, v, dim=-2)


def attention_no_scale(q, k, v):
    """scores = q @ k.transpose(-2, -1), without / sqrt(head_dim)."""
    return _attend(q, k, v, scale=1.0)


def attention_transposed_mask(q, k, v):
    """causal_mask(Tq, Tk).T: only broadcasts when Tq == Tk, and is anti-causal."""
    return _attend(q, k, v, mask=causal_mask(q.shape[-2], k.shape[-2]).T)


def causal_mask_strict(q_len, kv_len=None):
    """tril(diagonal=kv_len - q_len - 1): j < i, a token cannot see itself."""
    kv_len = q_len if kv_len is None else kv_len
    return torch.ones(q_len, kv_len, dtype=torch.bool).tril(diagonal=kv_len - q_len - 1)


def split_heads_view(x, n_heads):
    """x.view(B, H, T, hd): right shape, tokens mixed into heads."""
    B, T, d = x.shape
    return x.view(B, n_heads, T, d // n_heads)  # (B, H, T, hd) in shape only: memory is still (B, T, d)


def merge_heads_ok(y):
    """A correct merge, so only split_heads_view is at fault."""
    B, H, T, hd = y.shape
    return y.transpose(1, 2).reshape(B, T, H * hd)  # (B, T, H, hd) -> (B, T, d)


# -- 04 RoPE ----------------------------------------------------------------------


def _tables(head_dim, max_seq_len, theta, exponent):
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), theta ** exponent)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def rope_cache_half_exponent(head_dim, max_seq_len, theta=10000.0):
    """theta ** (-arange(hd // 2) / hd): exponent i/hd instead of 2i/hd."""
    return _tables(head_dim, max_seq_len, theta, -torch.arange(head_dim // 2, dtype=torch.float32) / head_dim)


def apply_rope_interleaved_pairs(x, cos, sin, start_pos=0):
    """rotate neighbours (2i, 2i+1) with the half-split tables."""
    T = x.shape[-2]
    neighbours = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)  # (..., hd/2, 2) -> (..., hd)
    return x * cos[start_pos:start_pos + T] + neighbours * sin[start_pos:start_pos + T]


def apply_rope_no_offset(x, cos, sin, start_pos=0):
    """cos[:T] instead of cos[start_pos:start_pos + T]."""
    T = x.shape[-2]
    return x * cos[:T] + rotate_half(x) * sin[:T]


def rotary_attention_values_too(q, k, v, cos, sin, start_pos=0):
    """v = apply_rope(v, ...) as well."""
    q, k, v = (apply_rope(t, cos, sin, start_pos) for t in (q, k, v))
    return causal_attention(q, k, v)


# -- 05 SwiGLU and the block ---------------------------------------------------------


def swiglu_swapped(x, w_gate, w_up, w_down):
    """silu(x @ w_up.T) * (x @ w_gate.T): gate and up swapped."""
    return (F.silu(x @ w_up.T) * (x @ w_gate.T)) @ w_down.T


def post_norm_block(x, attn, mlp, attn_norm, mlp_norm):
    """x = norm(x + branch(x)): the original Transformer's order."""
    x = attn_norm(x + attn(x))
    return mlp_norm(x + mlp(x))


def block_no_attn_residual(x, attn, mlp, attn_norm, mlp_norm):
    """x = attn(attn_norm(x)), without `x +`."""
    x = attn(attn_norm(x))
    return x + mlp(mlp_norm(x))


class PostNormBlock(nn.Module):
    """A block with tinylm's parts and the norms after the additions: the same
    parameters as a correct Block, another function."""

    def __init__(self, config):
        super().__init__()
        self.attn_norm, self.mlp_norm = (tinylm.RMSNorm(config.d_model, config.norm_eps) for _ in range(2))
        self.attn, self.mlp = tinylm.Attention(config), tinylm.SwiGLU(config)

    def forward(self, x, cos, sin, cache=None, layer_idx: int = 0):
        x = self.attn_norm(x + self.attn(x, cos, sin, cache, layer_idx))
        return self.mlp_norm(x + self.mlp(x))
