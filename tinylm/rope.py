"""Rotary position embedding (RoPE), half-split form as in Llama checkpoints.

Feature i of a head is paired with feature i + head_dim/2, and each pair is
rotated by the angle position · theta^(-2i/head_dim). Because a dot product
of two rotated vectors depends only on the difference of their angles,
attention scores depend on relative position only.

The paper (and CS336) pairs neighbours (2i, 2i+1) instead: the "interleaved"
form. The two are the same rotation after permuting features, which is what
checkpoint converters do with q_proj and k_proj.

The model's fast path uses that permutation too: it reorders the rows of
q_proj and k_proj so that each rotating pair sits side by side
(`pairs_adjacent`), rotates the pairs as complex numbers in one
multiplication (`apply_rope_pairs`), and puts the features back in
half-split order (`pairs_to_halves`), so that its queries and keys (and the
KV cache) are exactly those of `apply_rope`, the readable reference the
tests compare it with. A single decoding step needs no reordering at all:
rotate_half is linear, so the turned q and k come out of the same matrix
multiplication (`rotate_half_rows`) and the rotation is q·cos + turned·sin.
"""
from __future__ import annotations

import torch


def rope_cache(head_dim: int, max_seq_len: int, theta: float = 10000.0, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables, each (max_seq_len, head_dim), in float32.

    Computed once per model: the tables depend on shapes only, not on data."""
    if head_dim % 2:
        raise ValueError(f"rope_cache: head_dim must be even (features rotate in pairs), got {head_dim}.")
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)  # (hd/2,)
    positions = torch.arange(max_seq_len, device=device, dtype=torch.float32)                        # (T,)
    angles = torch.outer(positions, inv_freq)                                                        # (T, hd/2)
    angles = torch.cat((angles, angles), dim=-1)  # (T, hd): feature i and i + hd/2 share an angle
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last axis: the 90° turn
    of every (i, i + hd/2) pair."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
    """Rotate queries or keys x (B, H, T, hd) as if they sat at positions
    start_pos .. start_pos + T - 1. start_pos is the KV-cache length when
    decoding; restarting it at 0 is a classic cache bug.

    Equal to x * cos + rotate_half(x) * sin, written as the 2-D rotation of
    each pair (x1, x2) = (x_i, x_{i+hd/2}): fewer tensor ops, same numbers."""
    seq_len, half = x.shape[-2], x.shape[-1] // 2
    if start_pos + seq_len > cos.shape[0]:
        raise ValueError(
            f"apply_rope: positions {start_pos}..{start_pos + seq_len - 1} exceed the RoPE table "
            f"of {cos.shape[0]} positions; build rope_cache with a larger max_seq_len."
        )
    cos = cos[start_pos:start_pos + seq_len, :half].to(x.dtype)  # (T, hd/2), broadcasts over (B, H)
    sin = sin[start_pos:start_pos + seq_len, :half].to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def pairs_adjacent(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Rows of a q or k projection [n_heads·hd, d_in] reordered within each
    head from (0..hd/2-1, hd/2..hd-1) to (0, hd/2, 1, hd/2+1, ...): the output
    features then hold every rotating pair (i, i + hd/2) side by side."""
    rows, d_in = weight.shape
    head_dim = rows // n_heads
    return (weight.view(n_heads, 2, head_dim // 2, d_in)   # (heads, half, i, d_in)
            .transpose(1, 2)                                # (heads, i, half, d_in)
            .reshape(rows, d_in))


def pairs_to_halves(x: torch.Tensor) -> torch.Tensor:
    """(..., hd) in adjacent-pair order (0, hd/2, 1, hd/2+1, ...) -> half-split
    order (0..hd-1): the inverse of pairs_adjacent, on features. Returns a
    contiguous tensor."""
    half = x.shape[-1] // 2
    return x.unflatten(-1, (half, 2)).transpose(-1, -2).flatten(-2)  # (..., hd/2, 2) -> (..., 2, hd/2) -> (..., hd)


def rotate_half_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The rows of a q or k projection [n_heads·hd, d_in] turned the way
    rotate_half turns features: x @ rotate_half_rows(W).T equals
    rotate_half(x @ W.T) head by head. rotate_half is linear, so the turn can
    live in the weights and RoPE becomes (x @ W.T)·cos + (x @ W'.T)·sin, two
    products out of one matrix multiplication (the decoding step uses this)."""
    rows, d_in = weight.shape
    per_head = weight.view(n_heads, rows // n_heads, d_in).transpose(1, 2)  # (heads, d_in, hd): features last
    return rotate_half(per_head).transpose(1, 2).reshape(rows, d_in)


def rope_rotation(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The cos/sin tables as (max_seq_len, hd/2, 2) float32 pairs (cos θ, sin θ),
    one per rotating pair: the layout torch.view_as_complex reads as cos θ + i·sin θ."""
    half = cos.shape[-1] // 2
    return torch.stack((cos[:, :half], sin[:, :half]), dim=-1).float()


def apply_rope_pairs(x: torch.Tensor, rotation: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
    """apply_rope for x (B, H, T, hd) whose features come in adjacent pairs
    (x_i, x_{i+hd/2}), as `pairs_adjacent` weights produce them; rotation
    from rope_rotation.

    Each pair is the complex number x_i + i·x_{i+hd/2}; rotating it by the
    angle θ is one multiplication by cos θ + i·sin θ. One complex product
    replaces the six real products and sums of apply_rope, forward and
    backward. Computed in float32 (complex half precision is not supported
    everywhere), returned in x's dtype."""
    seq_len, half = x.shape[-2], x.shape[-1] // 2
    if start_pos + seq_len > rotation.shape[0]:
        raise ValueError(
            f"apply_rope_pairs: positions {start_pos}..{start_pos + seq_len - 1} exceed the RoPE table "
            f"of {rotation.shape[0]} positions; build rope_cache with a larger max_seq_len."
        )
    turn = rotation[start_pos:start_pos + seq_len]    # (T, hd/2, 2)
    pairs = x.float().unflatten(-1, (half, 2))        # (B, H, T, hd/2, 2)
    if x.device.type == "mps":  # complex kernels are incomplete on MPS: the same rotation in reals
        a, b = pairs.unbind(-1)
        c, s = turn.unbind(-1)
        return torch.stack((a * c - b * s, b * c + a * s), dim=-1).flatten(-2).to(x.dtype)
    rotated = torch.view_as_complex(pairs) * torch.view_as_complex(turn)  # (B, H, T, hd/2)
    return torch.view_as_real(rotated).flatten(-2).to(x.dtype)            # (B, H, T, hd)
