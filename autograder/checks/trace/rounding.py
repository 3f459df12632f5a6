"""Values matched only up to a lower precision's rounding (see align's tolerances).

The aligner counts a float32 value as the reference's when the two agree
within `tolerance_for(float32)` of their scale, which lets through the
rounding of a float16 or bfloat16 detour (angles built in float16 and cast
back). A later step can magnify that rounding beyond the tolerance (cos of
large angles near zero), and the frontier then sits on that later step,
although an earlier line already made values the reference never computes.

`rounded_before` finds that earlier line, from measurements only: a value on
the failing call's path, matched to a value on its counterpart's path, that
differs from it by far more than its own dtype's rounding, and that was
computed from a float16 or bfloat16 value of the learner's while the
reference's is wider. A float32 answer computed in another order differs by
float32 rounding (about 1e-7 of the scale) and has no such detour: it is
never blamed.
"""
from __future__ import annotations

import torch

from .align import ancestors, owner_value, path_between, Analysis
from .record import Op

LOW = (torch.float16, torch.bfloat16)
# A difference above this many of the value's own eps, relative to its largest magnitude, is not float32
# rounding noise (reordered sums stay within a few eps); float16's rounding is 2^13 float32 eps.
NOISE_EPS = 64


def _difference(mine: torch.Tensor, theirs: torch.Tensor) -> tuple[float, float] | None:
    """(largest absolute difference, largest magnitude of theirs), for finite values of one shape."""
    if tuple(mine.shape) != tuple(theirs.shape) or mine.numel() < 2:
        return None
    a, b = mine.detach().cpu().double(), theirs.detach().cpu().double()
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return None
    return float((a - b).abs().max()), float(b.abs().max())


def _made_low(op: Op) -> bool:
    """Whether the call's value is a float16 or bfloat16 tensor."""
    return bool(op.outputs) and isinstance(op.outputs[0], torch.Tensor) and op.outputs[0].dtype in LOW


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def rounded_before(seen: Analysis, first: Op, counterpart: Op) -> tuple[Op, list[str]] | None:
    """(the call to blame instead of `first`, the facts measured) when a
    value `first` is computed from was matched only up to the rounding of a
    float16 / bfloat16 detour, on the way to `counterpart`'s input, and the
    difference `first` shows is no larger than that detour's dtype's match
    tolerance; None otherwise."""
    if not first.outputs or not counterpart.outputs:
        return None
    final = _difference(first.outputs[0], counterpart.outputs[0])
    if final is None or first.outputs[0].dtype != counterpart.outputs[0].dtype:
        return None
    ops, reference = seen.ops, seen.reference
    target = (counterpart.index, 0)
    # Whether each call's value is computed from a float16 / bfloat16 value, in one pass (a decoding loop's
    # trace holds thousands of calls: no search per call).
    from_low: dict[int, bool] = {}
    for i in sorted(ancestors(ops, first.inputs)):
        op = ops[i]
        from_low[i] = any(from_low.get(j, False) for j in op.inputs) or _made_low(op)
        if not from_low[i] or not op.outputs or not seen.found[i] or not seen.found[i][0]:
            continue
        mine = op.outputs[0]
        if not isinstance(mine, torch.Tensor) or not mine.is_floating_point() or mine.dtype in LOW:
            continue
        eps = torch.finfo(mine.dtype).eps
        measured = []
        for owner in seen.found[i][0]:
            theirs = owner_value(reference, owner)
            if isinstance(theirs, torch.Tensor) and theirs.dtype == mine.dtype:
                d = _difference(mine, theirs)
                if d is not None and d[0] > NOISE_EPS * eps * d[1]:
                    measured.append((d, owner))
        measured = [m for m in sorted(measured, key=lambda m: m[0][0])
                    if m[1] == target or path_between(reference, target, m[1]) is not None]
        if not measured:
            continue  # float rounding of its own dtype (the same value), or off the failing call's path
        (diff, scale), owner = measured[0]
        low = [ops[j] for j in sorted(ancestors(ops, [i])) if _made_low(ops[j])]
        detour = low[0].outputs[0].dtype
        bound = torch.finfo(detour).eps
        if diff > 4 * bound * scale or final[0] > max(8 * bound * final[1], 4 * diff):
            # More than that dtype's rounding here, or a difference at the failing step beyond both its rounding
            # and a few times the difference it reads (cos, sin, sums move by about as much): another mistake.
            return None
        if any(_made_low(reference.ops[k]) for k in ancestors(reference.ops, [owner[0]])):
            return None  # the reference rounds on its way too
        blamed = min((o for o in [op] + low if o.file), key=lambda o: o.index, default=None)
        if blamed is None:
            return None
        by_line: dict[int, list[str]] = {}
        for o in low:
            if o.name not in by_line.setdefault(o.line, []):
                by_line[o.line].append(o.name)
        said = " and ".join(f"{', '.join(names[:3])}{', ...' if len(names) > 3 else ''} on line {line}"
                         for line, names in list(by_line.items())[:3]) + (" and ..." if len(by_line) > 3 else "")
        facts = [f"the values your {op.name} on line {op.line} makes differ from the reference's by up to {diff:.2g}, "
                 f"{diff / scale:.1g} of their largest magnitude ({scale:.3g}), while {_name(mine.dtype)}'s "
                 f"relative rounding step is {eps:.1g}",
                 f"they are computed from {_name(detour)} values (your {said}); the "
                 f"reference's value is {_name(mine.dtype)} and computed from no float16 or bfloat16 value",
                 f"the difference {'grows to' if final[0] > diff else 'is'} {final[0]:.2g} at line {first.line} "
                 f"({first.name}), where the values are of magnitude {final[1]:.3g}"]
        return blamed, facts
    return None
