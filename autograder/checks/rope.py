"""Checks for notebook 04: RoPE tables, rotation, and RoPE inside attention.

The reference rotation is written with complex numbers: the pair
(x[i], x[i + hd/2]) is the complex number x[i] + j·x[i + hd/2], and rotating
it by an angle is multiplying by exp(j·angle). That is independent of the
rotate_half trick the learner implements."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .core import Check, randn


def ref_angles(head_dim: int, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """(T, hd/2) float64 angles pos · theta^(-2i/hd), closed form."""
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return positions.double()[:, None] * theta ** (-2 * i / head_dim)[None, :]


def ref_tables(head_dim: int, max_seq_len: int, theta: float = 10000.0, dtype=torch.float32):
    """Half-split cos/sin tables (T, hd): feature i and i + hd/2 share an angle.
    float32 like a model's tables, or float64 to test float64 inputs exactly."""
    a = ref_angles(head_dim, torch.arange(max_seq_len), theta)
    a = torch.cat((a, a), dim=-1)
    return a.cos().to(dtype), a.sin().to(dtype)


def _table_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def ref_rotate(x: torch.Tensor, start_pos: int = 0, theta: float = 10000.0) -> torch.Tensor:
    """Rotate x (B, H, T, hd) as complex pairs (x[i], x[i + hd/2])."""
    hd, T = x.shape[-1], x.shape[-2]
    z = torch.complex(x[..., : hd // 2].double(), x[..., hd // 2:].double())     # (B, H, T, hd/2)
    angles = ref_angles(hd, torch.arange(start_pos, start_pos + T), theta)         # (T, hd/2)
    z = z * torch.polar(torch.ones_like(angles), angles)                          # rotate each pair
    return torch.cat((z.real, z.imag), dim=-1).to(x.dtype)                        # (B, H, T, hd)


def _interleaved_rotate(x: torch.Tensor) -> torch.Tensor:
    """(x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...): the paper's pairing."""
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)  # (..., hd/2, 2) -> (..., hd)


def _half_rotate(x: torch.Tensor, sign: int = 1) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return sign * torch.cat((-x2, x1), dim=-1)


def check_rope_cache(rope_cache, *, head_dim: int = 8, max_seq_len: int = 12, theta: float = 10000.0) -> None:
    """rope_cache(head_dim, max_seq_len, theta) -> (cos, sin), each (T, hd) float32."""
    __tracebackhide__ = True
    chk = Check("rope_cache", expects=f"a pair (cos, sin), each of shape (max_seq_len, head_dim) = {(max_seq_len, head_dim)}")
    out = chk.call(rope_cache, head_dim, max_seq_len, theta)
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        chk._stop(f"rope_cache returned {type(out).__name__}; it should return a pair (cos, sin)")
    cos, sin = out
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    pos = torch.arange(max_seq_len, dtype=torch.float64)

    def tables(inv_freq, positions=pos, interleave=False):
        a = positions[:, None] * inv_freq[None, :]
        a = a.repeat_interleave(2, dim=-1) if interleave else torch.cat((a, a), dim=-1)
        return a.cos().float(), a.sin().float()

    wrong = {
        "wrong frequency exponent: theta^(-i/head_dim) for i = 0..hd/2-1; the exponent is -2i/head_dim "
        "(torch.arange(0, head_dim, 2) / head_dim)": tables(theta ** (-i / head_dim)),
        "wrong frequency exponent: theta^(-2i) without dividing by head_dim": tables(theta ** (-2 * i)),
        "wrong frequency exponent: positive exponent theta^(+2i/head_dim); frequencies must fall from 1 to ~1/theta":
            tables(theta ** (2 * i / head_dim)),
        "wrong frequency exponent: theta^(-2i/(head_dim-2)); divide by head_dim": tables(theta ** (-2 * i / (head_dim - 2))),
        "wrong pairing convention: angles repeated element-wise (repeat_interleave), the interleaved layout; the "
        "half-split form concatenates [angles, angles] so feature i pairs with i + hd/2":
            tables(theta ** (-2 * i / head_dim), interleave=True),
        "positions start at 1: the first token sits at position 0 (angle 0)":
            tables(theta ** (-2 * i / head_dim), positions=pos + 1),
    }
    want_cos, want_sin = ref_tables(head_dim, max_seq_len, theta)
    for name, got, want, k in (("cos", cos, want_cos, 0), ("sin", sin, want_sin, 1)):
        chk.compare(f"{name} table", got, want, variants={bug: t[k] for bug, t in wrong.items()})
    chk.finish()


def rope_cases(seed: int, batch: int, heads: int, seq: int, head_dim: int, dtype):
    x = randn(batch, heads, seq, head_dim, seed=seed, dtype=dtype)
    yield "positions 0..T-1", x, 0
    yield "start_pos=5 (decoding after 5 cached tokens)", x, 5


def check_apply_rope(apply_rope, *, seed: int = 0, batch: int = 2, heads: int = 3, seq: int = 5, head_dim: int = 8,
                     dtype=torch.float32, theta: float = 10000.0) -> None:
    """apply_rope(x, cos, sin, start_pos) against complex multiplication, and
    the relative-position property q(m)·k(n) = f(m - n)."""
    __tracebackhide__ = True
    chk = Check("apply_rope", expects="a tensor shaped like x (batch, heads, seq, head_dim)")
    cos, sin = ref_tables(head_dim, seq + 16, theta, _table_dtype(dtype))
    for label, x, s in rope_cases(seed, batch, heads, seq, head_dim, dtype):
        c, si = cos[s:s + seq].to(dtype), sin[s:s + seq].to(dtype)
        got = chk.call(apply_rope, x, cos, sin, s)
        chk.compare(label, got, ref_rotate(x, s, theta), variants={
            "positions not offset: start_pos is ignored, so every call rotates as if the tokens began at 0; "
            "slice cos[start_pos:start_pos + T]": lambda: ref_rotate(x, 0, theta),
            "wrong pairing convention: pairs (2i, 2i+1) rotated (the interleaved form) with the half-split tables; "
            "pair feature i with i + hd/2 (rotate_half)": lambda: x * c + _interleaved_rotate(x) * si,
            "rotation direction flipped: rotate_half must map (x1, x2) -> (-x2, x1), not (x2, -x1)":
                lambda: x * c + _half_rotate(x, -1) * si,
            "rotate_half missing: x * cos + x * sin scales features instead of rotating pairs":
                lambda: x * c + x * si,
            "cos and sin swapped": lambda: x * si + _half_rotate(x) * c,
        })
    # Properties that hold for any correct rotation, checked on the learner's output alone.
    x = randn(1, 1, seq, head_dim, seed=seed + 7, dtype=torch.float64)
    y = randn(1, 1, seq, head_dim, seed=seed + 8, dtype=torch.float64)
    c64, s64 = ref_tables(head_dim, seq + 16, theta, torch.float64)  # exact tables: the properties hold to 1e-8
    rx0, ry0 = chk.call(apply_rope, x, c64, s64, 0), chk.call(apply_rope, y, c64, s64, 0)
    rx9, ry9 = chk.call(apply_rope, x, c64, s64, 9), chk.call(apply_rope, y, c64, s64, 9)
    if all(isinstance(t, torch.Tensor) and t.shape == x.shape for t in (rx0, ry0, rx9, ry9)):
        chk.require("norms preserved", torch.allclose(rx0.norm(dim=-1), x.norm(dim=-1), atol=1e-8),
                    "a rotation never changes a vector's length")
        scores0, scores9 = rx0 @ ry0.transpose(-2, -1), rx9 @ ry9.transpose(-2, -1)  # (1, 1, T, T)
        chk.require("q·k depends on m - n only", torch.allclose(scores0, scores9, atol=1e-8),
                    "shifting every position by 9 changed the scores q(m)·k(n)")
    chk.finish()


def check_rotary_attention(rotary_attention, *, seed: int = 0, batch: int = 2, heads: int = 3, seq: int = 6,
                           head_dim: int = 8, start_pos: int = 4, dtype=torch.float32, theta: float = 10000.0) -> None:
    """rotary_attention(q, k, v, cos, sin, start_pos): RoPE on q and k only,
    then causal attention; reference: complex rotation + F.sdpa."""
    __tracebackhide__ = True
    chk = Check("rotary_attention", expects="(batch, heads, seq, head_dim) attention outputs")
    cos, sin = ref_tables(head_dim, seq + start_pos + 4, theta, _table_dtype(dtype))
    q, k, v = (randn(batch, heads, seq, head_dim, seed=seed + i, dtype=dtype) * 2 for i in range(3))

    def attend(q_, k_, v_):
        return F.scaled_dot_product_attention(q_, k_, v_, is_causal=True)

    rot = lambda t, s=start_pos: ref_rotate(t, s, theta)  # noqa: E731
    for s in (0, start_pos):
        got = chk.call(rotary_attention, q, k, v, cos, sin, s)
        chk.compare(f"start_pos={s}", got, attend(rot(q, s), rot(k, s), v), variants={
            "RoPE applied to values: position enters through the q·k scores only; rotate q and k, leave v alone":
                lambda: attend(rot(q, s), rot(k, s), rot(v, s)),
            "RoPE applied to queries only: keys must be rotated too, or scores stop depending on relative position":
                lambda: attend(rot(q, s), k, v),
            "RoPE applied to keys only: queries must be rotated too": lambda: attend(q, rot(k, s), v),
            "RoPE missing: q and k are not rotated": lambda: attend(q, k, v),
            "RoPE applied after attention (to the output) instead of to q and k": lambda: rot(attend(q, k, v), s),
        })
    chk.finish()
