"""Rotary position embedding (RoPE), half-split form as in Llama checkpoints.

Feature i of a head is paired with feature i + head_dim/2, and each pair is
rotated by the angle position · theta^(-2i/head_dim). Because a dot product
of two rotated vectors depends only on the difference of their angles,
attention scores depend on relative position only.

The paper (and CS336) pairs neighbours (2i, 2i+1) instead: the "interleaved"
form. The two are the same rotation after permuting features, which is what
checkpoint converters do with q_proj and k_proj.
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable


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


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start_pos: int = 0,
               positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate queries or keys x (B, H, T, hd) as if they sat at positions
    start_pos .. start_pos + T - 1. start_pos is the KV-cache length when
    decoding; restarting it at 0 is a classic cache bug.

    positions (B, T), when given, replaces start_pos: each row's own
    positions, for a batch whose rows start at different places (left-padded
    prompts, whose first real token is position 0 of its row).

    The first half becomes x1·cos - x2·sin, the second x2·cos + x1·sin:
    each (i, i + hd/2) pair turned by its angle, x * cos + rotate_half(x) * sin
    (HF's form; _Rotation computes it and its gradient).
    """
    seq_len = x.shape[-2]
    if positions is not None:
        if positions.shape != (x.shape[0], seq_len):
            raise ValueError(f"apply_rope: positions must be (batch, seq) = {(x.shape[0], seq_len)}, got {tuple(positions.shape)}.")
        cos = cos[positions][:, None].to(x.dtype)  # (B, 1, T, hd): each row's own angles, broadcast over H
        sin = sin[positions][:, None].to(x.dtype)
    else:
        if start_pos + seq_len > cos.shape[0]:
            raise ValueError(
                f"apply_rope: positions {start_pos}..{start_pos + seq_len - 1} exceed the RoPE table "
                f"of {cos.shape[0]} positions (start_pos={start_pos}, x of shape {tuple(x.shape)}, positions "
                f"along axis -2). Either the sequence is longer than the table (build rope_cache with a larger "
                f"max_seq_len), or start_pos or x's positions are not those meant: x is (B, H, T, hd) with only "
                f"the new positions in it, start_pos the number of positions before them."
            )
        cos = cos[start_pos:start_pos + seq_len].to(x.dtype)  # (T, hd), broadcasts over (B, H)
        sin = sin[start_pos:start_pos + seq_len].to(x.dtype)
    # rotate_half's minus sign moved onto the small table: (-x2, x1) * (s1, s2)
    # = (x2, x1) * (-s1, s2), exactly, for any tables.
    sin_first, sin_second = sin.chunk(2, dim=-1)
    signed_sin = torch.cat((-sin_first, sin_second), dim=-1)  # (T, hd) or (B, 1, T, hd)
    if torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or signed_sin.requires_grad):
        return _Rotation.apply(x, cos, signed_sin)
    return _rotated(x, cos, signed_sin)  # nothing to differentiate: the same numbers without the Function's cost


def _rotated(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    return torch.addcmul(x * cos, _swap_halves(x), signed_sin)


class _Rotation(torch.autograd.Function):
    """x * cos + swap(x) * signed_sin, swap exchanging the halves of the last
    axis, with its backward in closed form: the transpose of a rotation is
    the rotation by the opposite angle, g * cos + swap(g * signed_sin).

    Under autograd the expression takes nine passes over x, forward and
    backward (torch.profiler: the products, the sum, the swap, and backward
    the same plus the swap's gradient and a copy back to the projection's
    layout); this takes six, the multiply-add as one addcmul. No in-place
    steps and no uninitialised tensors in the forward: the checks' trace
    records every operation of it."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
        # x only for the tables' own gradients (never needed in the model, whose tables are buffers)
        ctx.save_for_backward(cos, signed_sin, x if any(ctx.needs_input_grad[1:]) else None)
        return _rotated(x, cos, signed_sin)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        cos, signed_sin, x = ctx.saved_tensors
        grad_x = grad_cos = grad_sin = None
        if ctx.needs_input_grad[0]:  # swap(g * s) = swap(g) * swap(s): swap is its own transpose
            grad_x = torch.addcmul(grad * cos, _swap_halves(grad), _swap_halves(signed_sin))
        if ctx.needs_input_grad[1]:  # summed over what the table broadcast across
            grad_cos = (grad * x).sum_to_size(cos.shape)
        if ctx.needs_input_grad[2]:
            grad_sin = (grad * _swap_halves(x)).sum_to_size(signed_sin.shape)
        return grad_x, grad_cos, grad_sin


def _swap_halves(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (x2, x1) on the halves of the last axis."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x2, x1), dim=-1)
