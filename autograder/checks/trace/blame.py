"""Which call of the learner's to blame for the first value the reference
never computes, and how it went wrong (blame_of): the call itself gives
another result, reads a value in another's place or layout, reads it before
or after steps the reference takes, or skips a cast. trace.explain words
what is found; trace.raised asks the same of a call that raised."""
from __future__ import annotations

import torch

from .align import (base_name, owner_value, path_between, same_values, sized_axes, steps_joined_after,
                    steps_taken_later, tolerance_for, values_close, Owner)
from .kinds import (accumulated_by_the_same_step, input_owners, made_wrong, relaid, step_taken_as_identity,
                    taken_later_here)
from .record import LAYOUT_OPS, tensors_in, Op, Trace
from .steps import made_later

# Calls that change only a tensor's dtype.
CASTS = {"float", "double", "half", "bfloat16", "to", "type", "type_as"}


def blame_of(first: Op, ops: list[Op], found: list, reference: Trace, given: dict | None = None):
    """(op to blame, a second op or None, the reference's call of the same
    kind, how) for the frontier op `first`, or None when no line can be
    told (see trace.explain's docstring). how: "value" (the call itself gives
    another result), "order" (a value too, made before steps the reference
    takes first: its call of the same kind reads another value), "missing"
    (it reads a value the reference only uses after more steps: they are
    missing between the two lines), "role" (it reads a value the reference
    uses elsewhere)."""
    owned = input_owners(first, ops, found, given)
    kind = base_name(first.name)
    candidates = [r for r in reference.ops if base_name(r.name) == kind and len(r.inputs) == len(first.inputs)]
    if not candidates:
        if _cast_skipped(first, owned, reference):
            return None  # the reference casts this input first: the missing step has no line of its own
        return first, None, _reference_step(owned, reference), "value"

    def same_input(r: Op, k: int) -> bool:
        slots = r.slots or [0] * len(r.inputs)
        return (r.inputs[k], slots[k]) in owned[k] and sized_axes(r.input_shapes[k]) == sized_axes(first.input_shapes[k])

    def agreement(r: Op) -> float:  # an input in the very same shape counts more than one in another axis order
        return sum(same_input(r, k) * (1.0 if tuple(r.input_shapes[k]) == tuple(first.input_shapes[k]) else 0.5)
                   for k in range(len(r.inputs)))

    def shaped_alike(r: Op) -> bool:
        return bool(r.outputs and first.outputs and tuple(r.outputs[0].shape) == tuple(first.outputs[0].shape))

    # Among calls that share as much with this one, the one whose result has this one's shape is its
    # counterpart (a decode step's one-row slice of the RoPE table beside the reference's one-row slice, not
    # beside the prefill's, which comes first).
    best = max(candidates, key=lambda r: (agreement(r), shaped_alike(r)))
    slots = best.slots or [0] * len(best.inputs)
    differing = [k for k in range(len(best.inputs)) if not same_input(best, k)]
    if not differing and first.name not in LAYOUT_OPS:
        # The same values, but one of them laid out otherwise (transposed): a computing call, right on a wrong
        # layout (a reshape given the wrong layout is itself the place: it is where a permute is missing).
        for k in range(len(best.inputs)):
            j, slot = first.inputs[k], (first.slots or [0] * len(first.inputs))[k]
            theirs = owner_value(reference, (best.inputs[k], slots[k]))
            if j >= 0 and theirs is not None and slot < len(ops[j].outputs) and ops[j].outputs[slot].numel() > 1:
                mine = ops[j].outputs[slot]
                if tuple(mine.shape) != tuple(theirs.shape) or not values_close(mine.double(), theirs.double(),
                                                                          tolerance_for(mine.dtype)):
                    return ops[j], first, best, "layout"
    if not differing:
        return first, None, best, "value"   # the same call on the same values, another result: its own arguments
    tied = [r for r in candidates if agreement(r) == agreement(best)]
    if len({tuple(k for k in range(len(r.inputs)) if not same_input(r, k)) for r in tied}) > 1:
        # Reference calls of this kind that share as much with it, each another of its inputs (x * sin beside
        # x * cos and rotate_half(x) * sin): which input is out of place cannot be told, so no line that made
        # one is named; the call itself is a value the reference never computes.
        return first, None, None, "value"
    k = differing[0]
    wanted = (best.inputs[k], slots[k])
    paths = [path_between(reference, wanted, owner) for owner in owned[k]]
    lagging = any(p is not None for p in paths)
    layout_only = lagging and all(reference.ops[i].name in LAYOUT_OPS for p in paths if p is not None for i in p)
    if lagging and not layout_only and _sign_or_scale(first) and _commute_with_a_scale(reference, paths):
        # a sign or a scale by a number, taken before steps the reference takes first that commute with it (the
        # NLL negated per token, the reference negating the masked sum): the code may be a right route, so no line
        # is told. A sign or a scale the code lacks (the steps between are one) stays a step missing.
        return None
    j = first.inputs[k]
    if not lagging and j >= 0 and any(wanted in owners for owners in found[j]):
        # Another result of the very call that made the value read is the one the reference reads here (the
        # results of var_mean, chunk or split unpacked in another order).
        return ops[j], first, best, "swapped"
    if not lagging and j >= 0 and len(tied) == 1:
        # The value read is one the reference makes only later, from the one its call reads: the learner's
        # value already went through more steps; through this very call (applied twice) or others (an order).
        ahead = [p for p in (path_between(reference, owner, wanted) for owner in owned[k]) if p]
        if ahead and any(reference.ops[i].name not in LAYOUT_OPS for p in ahead for i in p):
            through = any(best.index in p for p in ahead)
            direct = any(best.index in p and all(i == best.index or reference.ops[i].name in LAYOUT_OPS for i in p)
                         for p in ahead)
            if through and not (direct and _made_through(ops, j, kind)):
                # The value read already went through the reference's own call of this kind, but not as the
                # learner's own earlier call of it (topk(k).values where the reference sorts and slices; a sum
                # of log-probabilities beside the reference's row totals): this call is no second application
                # of that step, nor its counterpart; it is a value of its own.
                return first, None, None, "value"
            if through:
                return ops[j], first, best, "twice"
            if all(owner[0] < best.index for owner in owned[k]):
                # the reference makes that value before this call too, and reads it elsewhere (the normalised x
                # beside the raw x a residual adds): nothing runs in another order; a value is in another's place
                return ops[j], first, best, "role"
            return ops[j], first, best, "ahead"
    while not layout_only and j >= 0 and ops[j].name in LAYOUT_OPS and ops[j].inputs:
        j = ops[j].inputs[0]                # back through reshapes and transposes to the call that made the value
    if j < 0:
        # an input of the call: used in another's place (the using line is the place), or read where the
        # reference reads it only after steps of its own. When the learner's code takes those steps too, but
        # later, on what this call made (silu(x) @ W where the reference has silu(x @ W)), the order goes wrong
        # here: this line is the place. Steps it never takes have no line of the learner's: nothing can be told.
        if lagging and not layout_only and steps_taken_later(first, ops, reference, paths):
            return (first, None, None, "value") if _sign_or_scale_only(reference, paths) else (first, None, best, "order")
        maker = next((op for op in ops[:first.index] if any(wanted in owners for owners in found[op.index])), None)
        if lagging and not layout_only and maker is not None:
            return first, maker, best, "read"  # the learner made the value the reference reads here, and reads another
        if layout_only and first.name not in LAYOUT_OPS and \
                not any(reference.ops[i].name in CASTS for p in paths if p is not None for i in p):
            # the reference's call reads this input only reshaped: the same call on the same values, another result
            # (log_softmax over the positions of (B, T, V) where the reference's runs over V of (B·T, V))
            return first, None, best, "value"
        if not lagging and owned[k] and not agreement(best):
            return first, None, None, "value"  # no input in common: the reference's call is paired by name only
        return None if lagging or not owned[k] else (first, None, best, "role")
    if not layout_only and not lagging and not agreement(best):
        # no input in common: the reference's call is paired by name only, so none is named. When the reference
        # reads this very value itself, in this shape, or returns it, the value is right where it is: this call
        # is a step the reference never takes (a slice of the result, the heads tiled with cat), not a value in
        # another's place; otherwise the line that made the value read is still the place.
        if _reference_reads(reference, owned[k], first.input_shapes[k] if k < len(first.input_shapes) else None):
            return first, None, None, "value"
        if not owned[k]:
            return made_wrong(first, ops, j, found, given, None)
        if relaid(first, ops, j, (first.slots or [0] * len(first.inputs))[k]):
            return first, None, None, "shape"  # the right numbers given a shape of its own: no value is out of place
        return ops[j], first, None, "role"
    if layout_only and j >= 0 and _cast_only(ops[j], (first.slots or [0] * len(first.inputs))[k], reference, wanted,
                                             paths):
        return ops[j], first, best, "cast"  # the same shape, another dtype: the steps between are a cast, no layout
    if lagging and not layout_only and steps_joined_after(first, ops, reference, paths):
        if _sign_or_scale_only(reference, paths):
            return first, None, None, "value"
        return first, None, best, "order"  # the steps are there, on a branch the next calls meet
    if lagging and not layout_only and step_taken_as_identity(ops, j, first, reference, paths):
        return None  # the step is there, on a number that comes out 1 (or 0): no step is missing, and no line
        # can be told from the values, which are those the step would leave alone
    if not lagging and not layout_only and not owned[k]:
        return made_wrong(first, ops, j, found, given, best)
    if lagging and not layout_only:
        # "A step is missing" only where the code lacks it: a value the reference reads here that the code makes
        # too is read in its place (the token where the sequence so far belongs); steps the same call of the
        # function takes later, on what this call made, are there in another order (an eps added after the rsqrt,
        # a cast moved before them): this call's value is one the reference never computes.
        maker = next((op for op in ops[:first.index] if any(wanted in owners for owners in found[op.index])), None)
        if maker is not None and maker.index != j:
            return first, maker, best, "read"
        later = made_later(first, ops, j, wanted, found)
        if later is not None:
            return first, later, best, "late"
        if taken_later_here(first, ops, reference, paths):
            return first, None, best, "value"
        if accumulated_by_the_same_step(first, reference, paths):
            # the reference reads what repeats of this very step (a loop's cat) made of the value, the code reads
            # the value itself: it is there, used where the accumulated one belongs; no step is missing
            return ops[j], first, best, "role"
    return ops[j], first, best, "layout" if layout_only else "missing" if lagging else "role"


def _sign_or_scale(op: Op) -> bool:
    """A negation, or a product or quotient of one tensor by a Python number."""
    return base_name(op.name) == "negative" or base_name(op.name) in ("mul", "div") and len(op.inputs) == 1


# Calls that give c·f(x) for f(c·x), c a number: a sign or a scale taken before them or after them is the same.
_SCALE_COMMUTES = {"sum", "mean", "mul", "div", "masked_fill", "where", "gather", "index_select", "getitem", "select",
                   "take_along_dim", "negative"}


def _commute_with_a_scale(reference: Trace, paths: list) -> bool:
    """Whether the reference's computing steps between a value and its call
    all commute with a sign or a scale, and are not only a sign or a scale."""
    steps = [reference.ops[i] for p in paths if p for i in p if reference.ops[i].name not in LAYOUT_OPS]
    return bool(steps) and all(base_name(op.name) in _SCALE_COMMUTES for op in steps) and \
        not _sign_or_scale_only(reference, paths)


def _sign_or_scale_only(reference: Trace, paths: list) -> bool:
    """Whether the reference's computing steps between a value and its call
    are only a sign or a scale by a number (neg, x * c, x / c): such a step
    commutes with a linear call, so code that takes it elsewhere (the sign
    of rotate_half put on the sin table) may be a right route, and the call
    reading the value before it is not wrong for sure."""
    steps = [reference.ops[i] for p in paths if p for i in p if reference.ops[i].name not in LAYOUT_OPS]
    return bool(steps) and all(_sign_or_scale(op) for op in steps)


def _made_through(ops: list[Op], j: int, kind: str) -> bool:
    """Whether the learner's value made at op j went through a call of
    `kind` of the learner's own (q / sqrt(hd) before a scaled attention)."""
    seen, todo = set(), [j]
    while todo:
        i = todo.pop()
        if i < 0 or i in seen:
            continue
        seen.add(i)
        if base_name(ops[i].name) == kind:
            return True
        todo.extend(ops[i].inputs)
    return False


def _reference_reads(reference: Trace, owners: set, shape) -> bool:
    """Whether the reference itself reads a value of `owners`, in `shape`, in a
    call of its own, or returns it."""
    if not owners or shape is None:
        return False
    for r in reference.ops:
        slots = r.slots or [0] * len(r.inputs)
        if any((i, s) in owners and tuple(h) == tuple(shape)
               for i, s, h in zip(r.inputs, slots, r.input_shapes or [()] * len(r.inputs))):
            return True
    returned = [t for t in tensors_in(reference.result) if tuple(t.shape) == tuple(shape)]
    return any(value is not None and tuple(value.shape) == tuple(shape) and same_values(value.detach().cpu(), t.detach().cpu())
               for value in (owner_value(reference, o) for o in owners) for t in returned)


def _cast_only(made: Op, slot: int, reference: Trace, wanted: Owner, paths: list) -> bool:
    """The learner's value and the one the reference reads in its place have one shape and two dtypes, and the
    reference's steps between them hold a cast: what is missing is the cast, not a reshape or a transpose."""
    theirs = owner_value(reference, wanted)
    mine = made.outputs[slot] if slot < len(made.outputs) else None
    return (isinstance(mine, torch.Tensor) and isinstance(theirs, torch.Tensor) and mine.dtype != theirs.dtype
            and tuple(mine.shape) == tuple(theirs.shape)
            and any(reference.ops[i].name in CASTS for p in paths if p is not None for i in p))


def _cast_skipped(op: Op, owned: list[set], reference: Trace) -> bool:
    """True when every reference call that reads what the learner's `op`
    read is a dtype cast (and `op` is not): the learner skipped a cast."""
    if op.name in CASTS:
        return False
    owners = set().union(*owned) if owned else set()
    readers = [r for r in reference.ops if any((j, s) in owners for j, s in zip(r.inputs, r.slots or [0] * len(r.inputs)))]
    return bool(readers) and all(r.name in CASTS for r in readers)


def _reference_step(owned: list[set], reference: Trace) -> Op | None:
    """The reference's first call (not a pure layout change) that reads a
    reference value the learner's op read: what the reference did there."""
    owners = set().union(*owned) if owned else set()
    for ref_op in reference.ops:
        if ref_op.name not in LAYOUT_OPS and ref_op.outputs and any(
                (j, s) in owners for j, s in zip(ref_op.inputs, ref_op.slots or [0] * len(ref_op.inputs))):
            return ref_op
    return None
