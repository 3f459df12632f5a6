"""Checks for notebook 04: RoPE tables, rotation, and RoPE inside attention.

The reference rotation is written with complex numbers: the pair
(x[i], x[i + hd/2]) is the complex number x[i] + j·x[i + hd/2], and rotating
it by an angle is multiplying by exp(j·angle). That is independent of the
rotate_half trick the learner implements."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import math
import re

from . import trace
from .contracts import Contract, call_keeping_inputs, defaults, run_contract
from ..learner_values import describe
from .framework.check import CandidatesVariant, Check
from .framework.calling import independent_copy, quiet_call
from .framework.watch import first_line_where
from .framework.measure import close_to, randn, tol_for
from .references.rope import apply_rope_steps, ref_angles, ref_rotate


def ref_tables(head_dim: int, max_seq_len: int, theta: float = 10000.0, dtype=torch.float32):
    """Half-split cos/sin tables (T, hd): feature i and i + hd/2 share an angle.
    float32 like a model's tables, or float64 to test float64 inputs exactly."""
    a = ref_angles(head_dim, torch.arange(max_seq_len), theta)
    a = torch.cat((a, a), dim=-1)
    return a.cos().to(dtype), a.sin().to(dtype)


def _table_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


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
        chk._stop(f"rope_cache returned {describe(out)}; it should return a pair (cos, sin)")
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
        "odd exponents theta^(-(2i+1)/head_dim): torch.arange(0, head_dim, 2) starts at 0, so the first frequency "
        "is theta^0 = 1": tables(theta ** (-(2 * i + 1) / head_dim)),
        "exponent doubled: theta^(-4i/head_dim); the exponent is -2i/head_dim": tables(theta ** (-4 * i / head_dim)),
        "angles in degrees: torch.cos and torch.sin take radians; angle = position · frequency, no 180/pi":
            tables(theta ** (-2 * i / head_dim), positions=pos * 180 / math.pi),
        "tables of head_dim/2 columns: feature i and i + head_dim/2 share an angle, so concatenate "
        "[angles, angles] to (max_seq_len, head_dim)": tuple(t[:, : head_dim // 2] for t in tables(theta ** (-2 * i / head_dim))),
    }
    turned = (theta ** (-2 * i / head_dim))[:, None] * pos[None, :]  # (hd/2, T): the outer product the other way
    wrong["the outer product taken the other way round, torch.outer(inv_freq, positions): its angles are (head_dim/2, "
          "max_seq_len), and concatenated along the last axis they make tables of (head_dim/2, 2·max_seq_len); take "
          "torch.outer(positions, inv_freq)"] = (torch.cat((turned, turned), -1).cos().float(),
                                                 torch.cat((turned, turned), -1).sin().float())
    want_cos, want_sin = ref_tables(head_dim, max_seq_len, theta)
    if close_to(cos, want_sin, 1e-5, 1e-4) and close_to(sin, want_cos, 1e-5, 1e-4):
        chk.diagnose("cos and sin swapped: your first table holds the sines; return (cos, sin) in that order")
    for name, got, want, k in (("cos", cos, want_cos, 0), ("sin", sin, want_sin, 1)):
        chk.compare(f"{name} table", got, want, variants={bug: t[k] for bug, t in wrong.items()})
    # theta must be used: another base must give other tables.
    other = 500.0 if theta != 500.0 else 10000.0
    out2 = chk.call(rope_cache, head_dim, max_seq_len, other) if chk.passed else None
    if isinstance(out2, (tuple, list)) and len(out2) == 2:
        want2 = ref_tables(head_dim, max_seq_len, other)
        ok = close_to(out2[0], want2[0], 1e-5, 1e-4) and close_to(out2[1], want2[1], 1e-5, 1e-4)
        same = all(isinstance(t, torch.Tensor) and isinstance(u, torch.Tensor) and t.shape == u.shape
                   and torch.equal(t, u) for t, u in zip(out2, (cos, sin)))
        if not chk.require(f"theta={other:g} changes the tables", ok,
                           f"rope_cache(..., theta={other:g}) does not give the theta={other:g} tables") and same:
            _same_tables_for_another_theta(chk, rope_cache, head_dim, max_seq_len, theta, other)
    if not chk.passed and not chk.likely_bugs():
        _explain_frequencies(chk, cos, sin, head_dim, theta)
    run_contract(chk, rope_cache, ROPE_CACHE)
    _positions_rounded(chk, rope_cache, head_dim, theta)
    chk.finish()


def _same_tables_for_another_theta(chk: Check, rope_cache, head_dim: int, max_seq_len: int, theta: float,
                                   other: float) -> None:
    """rope_cache(..., other) gave the tables of `theta`: asked at sizes it
    was never asked before, either it builds the other theta's tables there
    (the tables came back from an earlier call, kept without theta) or
    `theta`'s again (it never reads theta)."""
    size = (head_dim + 2, max_seq_len + 3)
    fresh = quiet_call(rope_cache, *size, other)
    said = (f"rope_cache(..., theta={other:g}) returns the same tables as theta={theta:g} (measured at "
            f"head_dim={head_dim}, max_seq_len={max_seq_len})")
    built = lambda base: isinstance(fresh, (tuple, list)) and len(fresh) == 2 and all(  # noqa: E731
        close_to(t, u, 1e-5, 1e-4) for t, u in zip(fresh, ref_tables(*size, base)))
    if built(other):
        chk.diagnose(f"{said}, and at sizes it was not asked before (head_dim={size[0]}, max_seq_len={size[1]}) it "
                     f"builds the theta={other:g} tables: tables kept from an earlier call are handed back without "
                     "theta being looked at; key what you keep on theta too, or build the tables at every call")
    elif built(theta):
        chk.diagnose(f"theta is ignored: {said}, and at head_dim={size[0]}, max_seq_len={size[1]} too; use the "
                     "theta argument as the base, theta ** (...)")
    else:
        chk.measured(said)


def _positions_rounded(chk: Check, rope_cache, head_dim: int, theta: float) -> None:
    """Tables right for a short length and wrong for a long one: the position each row was made for, read off
    the slowest column (its angle, position · theta^-(hd-2)/hd, stays below π there), and, where those positions
    are the integers a half-precision dtype holds, that dtype."""
    lengths = [int(m.group(1)) for row in chk.rows if not row.ok
               for m in [re.search(r"max_seq_len=(\d+)", row.name)] if m]
    if not lengths or any(not row.ok for row in chk.rows if "max_seq_len=" not in row.name):
        return
    n = lengths[0]
    slowest = theta ** (-(head_dim - 2) / head_dim)
    if n * slowest >= math.pi:
        return
    out = quiet_call(rope_cache, head_dim, n, theta)
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)
            and tuple(out[0].shape) == (n, head_dim) == tuple(out[1].shape)):
        return
    read = torch.atan2(out[1][:, head_dim // 2 - 1].double(), out[0][:, head_dim // 2 - 1].double()) / slowest
    positions = torch.arange(n, dtype=torch.float64)
    off = (read - positions).abs() > 0.25
    if not bool(off.any()):
        return
    first = int(off.nonzero()[0])
    fact = (f"row {first} of your tables for max_seq_len={n} holds the angles of position {float(read[first]):.4g} "
            "(read off the slowest frequency)")
    for dtype in (torch.bfloat16, torch.float16):
        held = torch.arange(n).to(dtype).double()
        if bool(((read - held).abs() <= 0.25).all()):
            chk.diagnose(f"the positions are rounded to the integers {str(dtype)[6:]} holds (measured: {fact}, and "
                         f"every row holds torch.arange({n}) rounded to {str(dtype)[6:]}): make the positions in "
                         "float32, torch.arange(max_seq_len, dtype=torch.float32)")
            return
    chk.measured(fact)


_FIT_TOL = 1e-3   # how far (in exponent) a column may lie from a printed law theta^(b + s·i)
_STILL = 1e-5     # rad: a column whose angles all stay this close to row 0's, unsteadily, shows no turn


def _steady_turns(a: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """a: the tables' angles (rows, columns), each in (-π, π]. Per column, the
    angle per row of the line through row 0 that fits the unwrapped angles
    best, and whether every row lies on it to 0.1% of the angle turned, or to
    the rounding of an angle read from tables with machine epsilon eps."""
    d = a.diff(dim=0)
    turned = d - 2 * math.pi * torch.round(d / (2 * math.pi))     # into [-π, π], a tiny turn kept exact
    u = torch.cat((torch.zeros_like(a[:1]), turned.cumsum(dim=0)))
    p = torch.arange(len(a), dtype=a.dtype)[:, None]
    step = (p * u).sum(dim=0) / p.square().sum()
    ok = ((u - p * step).abs() <= 1e-3 * p * step.abs() + 4 * eps * (a.abs() + a[:1].abs())).all(dim=0)
    return step, ok


def _explain_frequencies(chk: Check, cos, sin, head_dim: int, theta: float) -> None:
    """Read from the learner's tables the angle each column i < hd/2 turns per
    position, as theta^e_i. A law theta^(b + s·i) is printed only where every
    column's exponent lies within _FIT_TOL of it; otherwise each column's
    exponent. Whole positions show an angle only modulo 2π: a column that
    stays at row 0's angle up to rounding (no turn, or whole turns) gets no
    exponent. Where the rows stop turning steadily, the rows before say it;
    nothing is said when under three rows do."""
    half = head_dim // 2
    if not all(isinstance(t, torch.Tensor) and t.dim() == 2 and t.shape[0] > 2 and t.shape[1] >= half
               and t.dtype.is_floating_point for t in (cos, sin)) or cos.shape != sin.shape:
        return
    eps = max(torch.finfo(cos.dtype).eps, torch.finfo(sin.dtype).eps)
    c, s = cos.double()[:, :half], sin.double()[:, :half]
    if not bool(((c.square() + s.square()) - 1).abs().max() <= 4 * eps + 1e-6):
        return                                                     # not the cosine and sine of one angle
    a = torch.atan2(s, c)
    near_start = (a - a[:1]).abs().amax(dim=0) < _STILL
    rows = len(a)
    while rows >= 3:
        step, ok = _steady_turns(a[:rows], eps)
        if bool((ok | near_start).all()):
            break
        rows -= 1
    else:
        return
    still = (near_start & ~ok) | (step == 0)
    if bool((step[~still] < 0).any()):
        return                                                     # a column turning backwards: signs, not frequencies
    exps = [None if z else float(f.log() / math.log(theta)) for f, z in zip(step, still.tolist())]
    want = [-2 * k / head_dim for k in range(half)]
    source = "your tables" if rows == len(a) else f"rows 0..{rows - 1} of your tables (row {rows} breaks their steady turn)"
    if not any(still.tolist()):
        i = torch.arange(half, dtype=torch.float64)
        e = torch.tensor(exps, dtype=torch.float64)
        slope = float(((e - e.mean()) * (i - i.mean())).sum() / (i - i.mean()).pow(2).sum())
        intercept = float(e.mean() - slope * i.mean())
        if bool(((intercept + slope * i) - e).abs().max() <= _FIT_TOL):
            if round(intercept, 3) == 0 and round(slope, 3) == round(-2 / head_dim, 3):
                chk.measured(f"fitted from {source}: frequency i = theta^({-2 / head_dim:+.3f}·i) = "
                             "theta^(-2i/head_dim) modulo 2π, as expected (to 3 decimals)")
            else:
                chk.measured(f"fitted from {source}: frequency i = theta^({intercept:+.3f} {slope:+.3f}·i) modulo 2π, "
                             f"every column i = 0..{half - 1} within {_FIT_TOL:g} of that exponent; expected "
                             f"theta^(-2i/head_dim) = theta^(0 {-2 / head_dim:+.3f}·i)")
            return
    shown = ", ".join("none" if x is None else _exponent(x) for x in exps)
    fixed = [k for k, z in enumerate(still.tolist()) if z]
    note = (f"; column{'s' if len(fixed) > 1 else ''} {', '.join(map(str, fixed))} stay{'' if len(fixed) > 1 else 's'} "
            f"within {_STILL:g} rad of row 0's angle, with no steady turn: no turn, or whole turns, which tables at "
            "whole positions cannot tell apart" if fixed else f"; no line b + s·i is within {_FIT_TOL:g} of every exponent")
    chk.measured(f"from {source}: frequency i (the angle column i turns per position, modulo 2π) is theta^e with "
                 f"e = {shown} for i = 0..{half - 1}{note}; expected e = -2i/head_dim = {', '.join(map(_exponent, want))}")


def _exponent(x: float) -> str:
    text = f"{x:.3f}"
    return "0.000" if text == "-0.000" else text


NOT_OFFSET = ("positions not offset: start_pos is ignored, so every call rotates as if the tokens began at 0; "
              "slice cos[start_pos:start_pos + T]")


def _start_pos_rebound(apply_rope, args: tuple) -> tuple[int, str, object] | None:
    """(line, its code, the value) where apply_rope's start_pos parameter first holds another value than the call
    passed, seen on a line tracer of the call run again; None when it never does (or no frame of the learner's)."""
    code = getattr(apply_rope, "__code__", None)
    if code is None or code.co_argcount < 4 or getattr(apply_rope, "recheck_trace", None) is not None:
        return None
    name = code.co_varnames[3]
    found = first_line_where(apply_rope, args, lambda seen: seen is code, lambda frame, event: (
        frame.f_locals[name] if _other_int(frame.f_locals.get(name), args[3]) else None))
    return None if found is None else (found[1], trace.source_line(code.co_filename, found[1]), found[2])


def _other_int(value, given: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value != given


def rope_cases(seed: int, batch: int, heads: int, seq: int, head_dim: int, dtype):
    x = randn(batch, heads, seq, head_dim, seed=seed, dtype=dtype)
    yield "positions 0..T-1", x, 0
    yield "start_pos=5 (decoding after 5 cached tokens)", x, 5
    # Another length than the other rows' (and than any other axis): a length read from anywhere but x shows.
    yield f"{seq - 1} positions from start_pos=1", x[:, :, 1:].clone(), 1


def check_apply_rope(apply_rope, *, seed: int = 0, batch: int = 2, heads: int = 3, seq: int = 5, head_dim: int = 8,
                     dtype=torch.float32, theta: float = 10000.0) -> None:
    """apply_rope(x, cos, sin, start_pos) against complex multiplication, and
    the relative-position property q(m)·k(n) = f(m - n)."""
    __tracebackhide__ = True
    chk = Check("apply_rope", expects="a tensor shaped like x (batch, heads, seq, head_dim)")
    chk.axes = {"batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim}
    half_right = _explain_rotate_half(chk, apply_rope, randn(batch, heads, seq, head_dim, seed=seed + 3, dtype=dtype))
    cos, sin = ref_tables(head_dim, seq + 16, theta, _table_dtype(dtype))
    first_failing = None
    for label, x, s in rope_cases(seed, batch, heads, seq, head_dim, dtype):
        c, si = cos[s:s + x.shape[-2]].to(dtype), sin[s:s + x.shape[-2]].to(dtype)
        only_offset = s > 0 and chk.passed and x.shape[-2] == seq  # the first row's length, another start
        rows_before = len(chk.rows)
        got = call_keeping_inputs(chk, apply_rope, x, cos, sin, s, on_error=(lambda err, s=s: (
            f"it passes with start_pos=0 and fails with start_pos={s}: take the T rows that start at start_pos, "
            "cos[start_pos:start_pos + T] (and the same rows of sin)")) if only_offset else None)
        chk.compare(label, got, ref_rotate(x, s, theta), variants={
            NOT_OFFSET: lambda: ref_rotate(x, 0, theta),
            "wrong pairing convention: pairs (2i, 2i+1) rotated (the interleaved form) with the half-split tables; "
            "pair feature i with i + hd/2 (rotate_half)": lambda: x * c + _interleaved_rotate(x) * si,
            FLIPPED: lambda: x * c + _half_rotate(x, -1) * si,
            "rotate_half missing: x * cos + x * sin scales features instead of rotating pairs":
                lambda: x * c + x * si,
            "cos and sin swapped": lambda: x * si + _half_rotate(x) * c,
        })
        if first_failing is None and any(not r.ok for r in chk.rows[rows_before:]):
            first_failing = (x, s, got)
        if s > 0 and NOT_OFFSET in chk.named_variants() and NOT_OFFSET not in chk.said_by:
            rebound = _start_pos_rebound(apply_rope, (x, cos, sin, s))
            if rebound is not None:
                chk.diagnose(f"positions not offset: the caller's start_pos is ignored: line {rebound[0]} of your "
                             f"apply_rope, `{rebound[1]}`, rebinds it (measured: it holds {rebound[2]!r} after that "
                             f"line, where the call passed {s}), so every call rotates as if the tokens began at "
                             f"{rebound[2]!r}; keep the start_pos the caller gives", states=[NOT_OFFSET])
    if first_failing is not None and not chk.named_variants() and not chk.diagnoses \
            and not _halves_interleaved(chk, *first_failing, theta):
        _table_rows_read(chk, *first_failing, cos.to(dtype), sin.to(dtype))
    if half_right and FLIPPED in chk.named_variants():
        chk.diagnose(FLIPPED_IN_APPLY, states=[FLIPPED])
    if not half_right and chk.passed and callable(apply_rope.__globals__.get("rotate_half")):
        _, x, start = next(rope_cases(seed, batch, heads, seq, head_dim, dtype))
        _rotate_half_made_up_for(chk, apply_rope, x, start, cos, sin)
    # The dtype is kept: a float16 x rotated by the float32 tables a model stores stays float16.
    x16 = randn(batch, heads, seq, head_dim, seed=seed + 5, dtype=torch.float16)
    got = call_keeping_inputs(chk, apply_rope, x16, cos.float(), sin.float(), 3)
    chk.compare("float16 x, float32 tables, start_pos=3", got, ref_rotate(x16.double(), 3, theta).half(),
                atol=1e-2, rtol=1e-2)
    # Properties that hold for any correct rotation, checked on the learner's output alone.
    x = randn(1, 1, seq, head_dim, seed=seed + 7, dtype=torch.float64)
    y = randn(1, 1, seq, head_dim, seed=seed + 8, dtype=torch.float64)
    c64, s64 = ref_tables(head_dim, seq + 16, theta, torch.float64)  # exact tables: the properties hold to 1e-8
    rx0, ry0 = chk.call(apply_rope, x, c64, s64, 0), chk.call(apply_rope, y, c64, s64, 0)
    rx9, ry9 = chk.call(apply_rope, x, c64, s64, 9), chk.call(apply_rope, y, c64, s64, 9)
    if all(isinstance(t, torch.Tensor) and t.shape == x.shape for t in (rx0, ry0, rx9, ry9)):
        chk.require("norms preserved", torch.allclose(rx0.norm(dim=-1), x.norm(dim=-1), atol=1e-8),
                    "a rotation never changes a vector's length")
        if not chk.rows[-1].ok:
            chk.candidates("not a rotation: your output's length differs from the input's, so the features are not "
                           "turned in pairs, each pair by one angle; candidates: rotate_half pairs features other than i "
                           "and i + head_dim/2, or cos and sin come from different rows or angles (cos² + sin² = 1 only "
                           "for one angle)")
        scores0, scores9 = rx0 @ ry0.transpose(-2, -1), rx9 @ ry9.transpose(-2, -1)  # (1, 1, T, T)
        chk.require("q·k depends on m - n only", torch.allclose(scores0, scores9, atol=1e-8),
                    "shifting every position by 9 changed the scores q(m)·k(n)")
    run_contract(chk, apply_rope, APPLY_ROPE)
    chk.finish()


def _rotate_half_made_up_for(chk: Check, apply_rope, x: torch.Tensor, start: int, cos, sin) -> None:
    """apply_rope right with a rotate_half that is not (-x2, x1): a row of its own, as the docstring gives
    rotate_half a result of its own. Measured: apply_rope run again with the right rotate_half in its place (a copy
    of its globals) turns each pair by -angle, so it makes up for the flip."""
    chk.require("rotate_half on its own: (x1, x2) -> (-x2, x1)", False,
                "your apply_rope's results are right, your rotate_half's are not")
    got = quiet_call(independent_copy(apply_rope, {"rotate_half": _half_rotate}), x.clone(), cos, sin, start)
    c, s = cos[start:start + x.shape[-2]].to(x.dtype), sin[start:start + x.shape[-2]].to(x.dtype)
    if isinstance(got, torch.Tensor) and got.shape == x.shape and close_to(got, x * c + _half_rotate(x, -1) * s,
                                                                          *tol_for(x.dtype)):
        chk.measured("your apply_rope makes up for your rotate_half: run again with a rotate_half returning "
                     "(-x2, x1) in its place, it turns each pair by -angle (x * cos - rotate_half(x) * sin); fix "
                     "both together: rotate_half returns (-x2, x1), apply_rope adds the sin term")


def _halves_interleaved(chk: Check, x, start: int, got, theta: float) -> bool:
    """Whether the learner's output is the right rotation with its features in the interleaved order (feature
    2i the right result's i, 2i + 1 its i + head_dim/2) or the right one read so: measured on the values."""
    hd = x.shape[-1]
    if not isinstance(got, torch.Tensor) or got.shape != x.shape or hd % 2:
        return False
    want, mine = ref_rotate(x.double(), start, theta), got.detach().double()
    to_pairs = torch.arange(hd).view(2, hd // 2).T.flatten()  # (0, hd/2, 1, hd/2 + 1, ...)
    orders = (("feature 2i holds the right result's feature i and feature 2i + 1 its feature i + head_dim/2: the "
               "halves interleaved, as pairs (first half, second half) side by side", to_pairs),
              ("feature i holds the right result's feature 2i and feature i + head_dim/2 its feature 2i + 1: the "
               "right result read as interleaved pairs and split into halves", torch.argsort(to_pairs)))
    for said, order in orders:
        if close_to(mine, want[..., order], 1e-4, 1e-3):
            chk.measured(f"your result holds the right rotation's values in another order along head_dim: {said} "
                         "(measured); the half layout returns every pair's first feature, then every pair's second "
                         "(a flatten of (..., head_dim/2, 2) pairs interleaves them)")
            return True
    return False


def _table_rows_read(chk: Check, x, start: int, got, cos, sin) -> None:
    """Which rows of the tables the learner's rotation used: its output recomputed as x * cos[a:a + T] +
    rotate_half(x) * sin[b:b + T] for every pair of first rows (a, b); said when exactly one pair gives it."""
    T, n = x.shape[-2], cos.shape[0]
    if not isinstance(got, torch.Tensor) or got.shape != x.shape:
        return
    x, got, cos, sin = x.double(), got.detach().double(), cos.double(), sin.double()
    turned = _half_rotate(x)
    found = [(a, b) for a in range(n - T + 1) for b in range(n - T + 1)
             if torch.allclose(got, x * cos[a:a + T] + turned * sin[b:b + T], atol=1e-5, rtol=1e-4)]
    if len(found) != 1 or found[0] == (start, start):
        return
    a, b = found[0]

    def rows(first: int) -> str:
        return f"{first}..{first + T - 1}" + (" (the table's last T rows)" if first == n - T else "")
    tables = (f"cos and sin rows {rows(a)}" if a == b else f"cos rows {rows(a)} and sin rows {rows(b)}")
    chk.diagnose(f"the table rows are not the T rows from start_pos (measured: with start_pos = {start}, T = {T} and "
                 f"tables of {n} rows, your output is x * cos + rotate_half(x) * sin with {tables}, where rows "
                 f"{start}..{start + T - 1} of both belong): take cos[start_pos:start_pos + T] and "
                 "sin[start_pos:start_pos + T]")


# What the output shows is the rotation by -angle: rotate_half returning (x2, -x1) and an apply_rope that subtracts
# the sin term give it alike; the rule is said, and the place only where rotate_half is measured on its own.
FLIPPED = ("rotation direction flipped: your output is x * cos - rotate_half(x) * sin, each pair turned by -angle; "
           "RoPE adds the sin term, x * cos + rotate_half(x) * sin, with rotate_half mapping (x1, x2) -> (-x2, x1)")
FLIPPED_IN_APPLY = ("rotation direction flipped in apply_rope (measured: your rotate_half returns (-x2, x1), right on "
                    "its own, and your apply_rope returns x * cos - rotate_half(x) * sin, each pair turned by -angle): "
                    "add the sin term, x * cos + rotate_half(x) * sin")
# The fix is said with the unpacking it assumes: a learner who named the halves the other way round has the
# very text `torch.cat((-x2, x1), dim=-1)` already.
HALVES_FIX = ("the second half, negated, first: x1, x2 = x.chunk(2, dim=-1) in that order, then "
              "torch.cat((-x2, x1), dim=-1)")
FLIPPED_HALF = f"(x2, -x1): the direction is flipped; return {HALVES_FIX}"
_ROTATE_HALF_VARIANTS = {
    FLIPPED_HALF: lambda x: _half_rotate(x, -1),
    "(-x[1::2], x[::2]) interleaved pairs: the course pairs feature i with i + head_dim/2 (halves)":
        _interleaved_rotate,
    f"(-x1, x2): the first half negated but the halves not swapped; return {HALVES_FIX}":
        lambda x: torch.cat((-x.chunk(2, -1)[0], x.chunk(2, -1)[1]), dim=-1),
    "(-x[1::2], x[::2]) concatenated: even/odd features split, but put back as halves; split with "
    "x.chunk(2, dim=-1)": lambda x: torch.cat((-x[..., 1::2], x[..., ::2]), dim=-1),
}


def _explain_rotate_half(chk: Check, apply_rope, x: torch.Tensor) -> bool:
    """Check the learner's rotate_half (from apply_rope's globals, where the
    notebook defines it) on its own: (x1, x2) -> (-x2, x1). True when it was
    found and is right."""
    rotate_half = getattr(apply_rope, "__globals__", {}).get("rotate_half")
    if not callable(rotate_half):
        return False
    got = chk.probe(rotate_half, x)
    want = _half_rotate(x)
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        # Which step is wrong (the split into halves or the join) the shape alone does not tell: both are named.
        chk.diagnose(f"rotate_half returns {'an error' if got is None else describe(got)} for x of shape "
                     f"{tuple(x.shape)}; it must return a tensor of x's shape: the two halves of the last axis, "
                     "x1, x2 = x.chunk(2, dim=-1), joined back along it, torch.cat((-x2, x1), dim=-1)")
        return False
    if torch.allclose(got, want):
        return True
    what = next((name for name, f in _ROTATE_HALF_VARIANTS.items() if torch.allclose(got, f(x))), None)
    if what == FLIPPED_HALF:  # the output's known variant FLIPPED, measured on rotate_half itself: one line for both
        chk.diagnose("rotation direction flipped: your rotate_half returns (x2, -x1) for the halves (x1, x2) = "
                     "x.chunk(2, dim=-1); it must return (-x2, x1): torch.cat((-x2, x1), dim=-1)", states=[FLIPPED])
        return False
    chk.diagnose("rotate_half is wrong: for the halves (x1, x2) = x.chunk(2, dim=-1) it must return (-x2, x1)"
                 + (f"; yours returns {what}" if what else ""))
    return False


def _one_side_ahead(ahead: str, behind: str) -> CandidatesVariant:
    """One side's positions start_pos ahead of the other's: two causes give that output alike."""
    return CandidatesVariant(
        f"the {ahead}' positions run start_pos ahead of the {behind}' (your output is attention with the {behind} "
        f"rotated start_pos behind the {ahead}); candidates: the {behind} rotated from position 0 (start_pos not "
        f"passed for them), or the {ahead} shifted by start_pos twice (a table sliced at start_pos and start_pos "
        "given as well); rotate both once, from start_pos")


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

    def swapped_tables(t, s):
        """x * sin + rotate_half(x) * cos: what apply_rope(t, sin, cos, s) computes."""
        c, si = cos[s:s + seq].to(dtype), sin[s:s + seq].to(dtype)
        return t * si + _half_rotate(t) * c
    outputs = {}
    for s in (0, start_pos):
        got = outputs[s] = chk.call(rotary_attention, q, k, v, cos, sin, s)
        chk.compare(f"start_pos={s}", got, attend(rot(q, s), rot(k, s), v), variants={
            "RoPE applied to values: position enters through the q·k scores only; rotate q and k, leave v alone":
                lambda: attend(rot(q, s), rot(k, s), rot(v, s)),
            "RoPE applied to the values instead of the keys (your output is attention of rotated q on unrotated k, "
            "mixing rotated v): rotate q and k, leave v alone": lambda: attend(rot(q, s), k, rot(v, s)),
            "RoPE applied to the values instead of the queries (your output is attention of unrotated q on rotated "
            "k, mixing rotated v): rotate q and k, leave v alone": lambda: attend(q, rot(k, s), rot(v, s)),
            "RoPE applied to the values only (your output is attention of unrotated q and k, mixing rotated v): "
            "rotate q and k, leave v alone": lambda: attend(q, k, rot(v, s)),
            "RoPE applied to queries only: keys must be rotated too, or scores stop depending on relative position":
                lambda: attend(rot(q, s), k, v),
            "RoPE applied to keys only: queries must be rotated too": lambda: attend(q, rot(k, s), v),
            "RoPE has no effect on the scores (your output is attention without any rotation): q and k are not "
            "rotated, or rotated along another axis than the positions, e.g. in a (B, T, H, hd) layout where "
            "apply_rope reads the heads as positions, so every position of a head gets the same angle":
                lambda: attend(q, k, v),
            "RoPE applied after attention (to the output) instead of to q and k": lambda: rot(attend(q, k, v), s),
            # The scores see the difference of positions only: one output for each pair of offsets that differ alike.
            _one_side_ahead("queries", "keys"): lambda: attend(rot(q, s), rot(k, 0), v),
            _one_side_ahead("keys", "queries"): lambda: attend(rot(q, 0), rot(k, s), v),
            "no causal mask: attention after RoPE is still causal (use causal attention, not plain SDPA)":
                lambda: F.scaled_dot_product_attention(rot(q, s), rot(k, s), v),
            "sin and cos passed in the wrong order for the queries: apply_rope(q, cos, sin, start_pos)":
                lambda: attend(swapped_tables(q, s), rot(k, s), v),
            "sin and cos passed in the wrong order for the keys: apply_rope(k, cos, sin, start_pos)":
                lambda: attend(rot(q, s), swapped_tables(k, s), v),
        })

    if not chk.passed and not chk.named_variants() and not chk.diagnoses:
        _positions_apart(chk, outputs, lambda s, dq, dk: attend(rot(q, s + dq), rot(k, s + dk), v))

    def reference_apply_rope(x, cos_, sin_, start_pos_=0):
        T = x.shape[-2]
        c, si = cos_[start_pos_:start_pos_ + T].to(x.dtype), sin_[start_pos_:start_pos_ + T].to(x.dtype)
        return x * c + _half_rotate(x) * si

    chk.upstream(rotary_attention, {"apply_rope": reference_apply_rope},
                 rerun=lambda: all(close_to(rotary_attention(q, k, v, cos, sin, s), attend(rot(q, s), rot(k, s), v),
                                          1e-5, 1e-4) for s in (0, start_pos)),
                 labels={"apply_rope": "exercise 2"})
    run_contract(chk, rotary_attention, ROTARY_ATTENTION)
    chk.finish()


def _positions_apart(chk: Check, outputs: dict, attention) -> None:
    """The learner's output at every start_pos recomputed as attention with the queries rotated d positions ahead of
    the keys (d = -3..3, not 0): named when one d gives every output. RoPE scores depend only on the difference of
    the two positions, so which of q and k is shifted is not told, and the line does not tell it."""
    def gives(got, want) -> bool:
        return isinstance(got, torch.Tensor) and got.shape == want.shape and close_to(got, want, 1e-5, 1e-4)
    for d in (1, -1, 2, -2, 3, -3):
        if all(gives(got, attention(s, max(d, 0), max(-d, 0))) for s, got in outputs.items()):
            ahead, behind = ("queries", "keys") if d > 0 else ("keys", "queries")
            starts = " and ".join(str(s) for s in outputs)
            chk.diagnose(f"the {ahead} are rotated {abs(d)} position{'s' * (abs(d) > 1)} ahead of the {behind} "
                         f"(measured: with start_pos = {starts}, your output is causal attention with q and k rotated "
                         f"{abs(d)} apart, the {ahead} ahead; the scores depend only on the difference, so whether "
                         f"the {ahead} are ahead or the {behind} behind is not told): rotate q and k with the same "
                         "start_pos, apply_rope(q, cos, sin, start_pos) and apply_rope(k, cos, sin, start_pos)")
            return


# -- contracts: the regimes each exercise promises, and its step-by-step reference ---------------
def rope_cache_steps(head_dim: int, max_seq_len: int, theta: float = 10000.0):
    # the exercise's order: the minus sign on the even indices, then the division (the same numbers either way)
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)
    positions = torch.arange(max_seq_len, dtype=torch.float32)
    angles = torch.outer(positions, inv_freq)                                  # (T, hd/2)
    angles = torch.cat((angles, angles), dim=-1)                               # (T, hd)
    return angles.cos(), angles.sin()


def rotary_attention_steps(q, k, v, cos, sin, start_pos: int = 0) -> torch.Tensor:
    from .references.attention import attention_steps
    return attention_steps(apply_rope_steps(q, cos, sin, start_pos), apply_rope_steps(k, cos, sin, start_pos), v)


def _rope_cache_cases():
    p = defaults(check_rope_cache)
    return [("tables", (p["head_dim"], p["max_seq_len"], p["theta"]), {})]


def _apply_rope_cases():
    p = defaults(check_apply_rope)
    cos, sin = ref_tables(p["head_dim"], p["seq"] + 16, p["theta"], _table_dtype(p["dtype"]))
    return [(label, (x, cos, sin, s), {}) for label, x, s in
            rope_cases(p["seed"], p["batch"], p["heads"], p["seq"], p["head_dim"], p["dtype"])]


def _rotary_cases():
    p = defaults(check_rotary_attention)
    cos, sin = ref_tables(p["head_dim"], p["seq"] + p["start_pos"] + 4, p["theta"], _table_dtype(p["dtype"]))
    q, k, v = (randn(p["batch"], p["heads"], p["seq"], p["head_dim"], seed=p["seed"] + i, dtype=p["dtype"]) * 2
               for i in range(3))
    return [(f"start_pos={s}", (q, k, v, cos, sin, s), {}) for s in (p["start_pos"], 0)]


# Past 256 positions a low-precision count of the positions rounds (bfloat16's 8-bit mantissa); Llama 3's theta.
ROPE_CACHE = Contract("rope_cache", rope_cache_steps, _rope_cache_cases, names=("head_dim", "max_seq_len", "theta"),
                      dtypes=(), default_dtype=True, params=(("head_dim", 16), ("max_seq_len", 600), ("theta", 500000.0)))
APPLY_ROPE = Contract("apply_rope", apply_rope_steps, _apply_rope_cases, names=("x", "cos", "sin", "start_pos"),
                      batch=("x",), views=("x",), cast=("x",), grad=("x",))
# Code that rotates q and k from another common position changes no score exactly, and its rounding differs
# from the reference's: the tables stay float32 when q, k and v are cast, so a float64 result is as exact as
# float32 tables allow; in bfloat16, scores of a few units carry a rounding of 0.03 to 0.06, which moves the
# weights by a few percent (measured: 0.0625 at most on the check's inputs).
ROTARY_ATTENTION = Contract("rotary_attention", rotary_attention_steps, _rotary_cases,
                            names=("q", "k", "v", "cos", "sin", "start_pos"), batch=("q", "k", "v"),
                            views=("q", "k", "v"), cast=("q", "k", "v"), grad=("q", "k", "v"),
                            tolerance=lambda dtype: (0.1, 0.05) if dtype in (torch.bfloat16, torch.float16)
                            else tol_for(torch.float32 if dtype == torch.float64 else dtype))
