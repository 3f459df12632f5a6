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


class _Detour:
    """A value on the failing call's path matched only up to a float16 / bfloat16 detour's rounding."""

    def __init__(self, op: Op, low: list[Op], diff: float, scale: float, eps: float, detour: torch.dtype):
        self.op, self.low, self.diff, self.scale, self.eps, self.detour = op, low, diff, scale, eps, detour

    def said(self) -> str:
        """The low-precision calls by line: "to, half on line 3"."""
        by_line: dict[int, list[str]] = {}
        for o in self.low:
            if o.name not in by_line.setdefault(o.line, []):
                by_line[o.line].append(o.name)
        return " and ".join(f"{', '.join(names[:3])}{', ...' if len(names) > 3 else ''} on line {line}"
                            for line, names in list(by_line.items())[:3]) + (" and ..." if len(by_line) > 3 else "")


def _detour(seen: Analysis, first: Op, counterpart: Op | None) -> _Detour | None:
    """`_measure_detour`'s answer for the pair, measured once per analysis."""
    known = seen.detours  # `rounded_before` declining and `rounded_earlier` asking next measure the same pair
    key = (first.index, counterpart.index if counterpart is not None else None)
    if key not in known:
        known[key] = _measure_detour(seen, first, counterpart)
    return known[key]


def _measure_detour(seen: Analysis, first: Op, counterpart: Op | None) -> _Detour | None:
    """The first value `first` is computed from that differs from its match by more than its own dtype's
    rounding, by no more than a float16 / bfloat16 detour's, was computed from a float16 / bfloat16 value of
    the learner's, and (with a counterpart) lies on the way to `counterpart`'s input; None when there is none."""
    ops, reference = seen.ops, seen.reference
    target = (counterpart.index, 0) if counterpart is not None else None
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
                    if target is None or m[1] == target or path_between(reference, target, m[1]) is not None]
        if not measured:
            continue  # float rounding of its own dtype (the same value), or off the failing call's path
        (diff, scale), owner = measured[0]
        if any(_made_low(reference.ops[k]) for k in ancestors(reference.ops, [owner[0]])):
            return None  # the reference rounds on its way too
        low = [ops[j] for j in sorted(ancestors(ops, [i])) if _made_low(ops[j])]
        if diff > 4 * torch.finfo(low[0].outputs[0].dtype).eps * scale:
            return None  # more than that dtype's rounding here: not a rounding detour
        return _Detour(op, low, diff, scale, eps, low[0].outputs[0].dtype)
    return None


def _final(first: Op, counterpart: Op) -> tuple[float, float] | None:
    """The difference `first` shows from its counterpart, for values of one dtype and shape."""
    if not first.outputs or not counterpart.outputs or first.outputs[0].dtype != counterpart.outputs[0].dtype:
        return None
    return _difference(first.outputs[0], counterpart.outputs[0])


def _beyond(detour: _Detour, final: tuple[float, float]) -> bool:
    """Whether the failing step's difference is beyond both the detour's rounding and a few times the
    difference it reads (cos, sin, sums move by about as much): another mistake, on the failing step's line."""
    bound = torch.finfo(detour.detour).eps
    return final[0] > max(8 * bound * final[1], 4 * detour.diff)


def rounded_before(seen: Analysis, first: Op, counterpart: Op) -> tuple[Op, list[str]] | None:
    """(the call to blame instead of `first`, the facts measured) when a
    value `first` is computed from was matched only up to the rounding of a
    float16 / bfloat16 detour, on the way to `counterpart`'s input, and the
    difference `first` shows is no larger than that detour's dtype's match
    tolerance; None otherwise."""
    final = _final(first, counterpart)
    detour = _detour(seen, first, counterpart) if final is not None else None
    if detour is None or _beyond(detour, final):
        return None
    op = detour.op
    blamed = min((o for o in [op] + detour.low if o.file), key=lambda o: o.index, default=None)
    if blamed is None:
        return None
    mine = op.outputs[0]
    facts = [f"the values your {op.name} on line {op.line} makes differ from the reference's by up to "
             f"{detour.diff:.2g}, {detour.diff / detour.scale:.1g} of their largest magnitude ({detour.scale:.3g}), "
             f"while {_name(mine.dtype)}'s relative rounding step is {detour.eps:.1g}",
             f"they are computed from {_name(detour.detour)} values (your {detour.said()}); the "
             f"reference's value is {_name(mine.dtype)} and computed from no float16 or bfloat16 value",
             f"the difference {'grows to' if final[0] > detour.diff else 'is'} {final[0]:.2g} at line {first.line} "
             f"({first.name}), where the values are of magnitude {final[1]:.3g}"]
    return blamed, facts


def rounded_earlier(seen: Analysis, first: Op, counterpart: Op | None) -> str | None:
    """The fact to set beside `first`'s line when an earlier value on its path
    was matched only up to a float16 / bfloat16 detour's rounding, but
    `first` differs by far more (another mistake, on `first`'s line): the
    earlier line is then not exactly the reference's either, and the
    learner should hear of it. None when there is no such detour."""
    final = _final(first, counterpart) if counterpart is not None else None
    if counterpart is not None and final is None:
        return None
    detour = _detour(seen, first, counterpart)
    if detour is None or final is not None and not _beyond(detour, final):
        return None
    return (f"before it, the values your {detour.op.name} on line {detour.op.line} makes differ from the "
            f"reference's by up to {detour.diff:.2g} ({detour.diff / detour.scale:.1g} of their largest magnitude), "
            f"the rounding of {_name(detour.detour)} (your {detour.said()}); this line's values differ beyond that "
            "rounding")
