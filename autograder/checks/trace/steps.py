"""The reference's steps between a learner's value and the call that reads it in the reference: what a
Where line of kind "missing" (or "twice", "ahead") names as the steps in between."""
from __future__ import annotations

from .align import ancestors, path_between
from .record import LAYOUT_OPS, Op, Trace


def _steps_taken(reference: Trace, counterpart: Op | None, first: Op, blamed: Op, found: list,
                 ahead: bool = False) -> list[Op]:
    """The reference's calls (not counting layout) between the value the learner's `blamed` call made and
    the one the reference's `counterpart` reads in its place (ahead: from what the counterpart reads to the
    learner's value), first to last."""
    if counterpart is None or not blamed.outputs or blamed.index not in first.inputs:
        return []
    k = first.inputs.index(blamed.index)
    if k >= len(counterpart.inputs):
        return []
    w = (counterpart.inputs[k], (counterpart.slots or [0] * len(counterpart.inputs))[k])
    slot = (first.slots or [0] * len(first.inputs))[k]
    for owner in found[blamed.index][slot] if slot < len(found[blamed.index]) else []:
        path = path_between(reference, owner, w) if ahead else path_between(reference, w, owner)
        steps = [reference.ops[i] for i in reversed(path or []) if reference.ops[i].name not in LAYOUT_OPS]
        if steps:
            return steps
    return []


def steps_between(reference: Trace, counterpart: Op | None, first: Op, blamed: Op, found: list,
                  ahead: bool = False) -> str:
    """'its steps in between: pow, mean, add, rsqrt' (see _steps_taken), or ''."""
    names = [op.name for op in _steps_taken(reference, counterpart, first, blamed, found, ahead)]
    return "its steps in between: " + ", ".join(names[:8]) + (", ..." if len(names) > 8 else "") if names else ""


def made_later(first: Op, ops: list[Op], j: int, wanted, found: list) -> Op | None:
    """A call after `first` that makes the value the reference reads where `first` reads the value op j made,
    from that very value (the mask applied after the softmax that needed it, the keys rotated after the cache
    update): the step is there, taken after the line that reads its input; None when no later call does."""
    for op in ops[first.index + 1:]:
        if any(wanted in owners for owners in found[op.index]) and j in ancestors(ops, [op.index]):
            return op
    return None
