"""The reference's steps between a learner's value and the call that reads it, and whether the learner's
code takes those very steps on a later line.

A step the reference takes between two of the learner's lines may be absent from the learner's code, or
present after the later line (a log taken of the mean where the reference means the logs). The Where line
says "a step is missing between these lines" in both cases, which is true of the two lines it names; where
the learner's own trace shows the same steps further down the value's path, it says so as well, with the
line that takes them and the steps it takes first.
"""
from __future__ import annotations

from .align import path_between
from .record import LAYOUT_OPS, Op, Trace


def _names_between(reference: Trace, counterpart: Op | None, first: Op, blamed: Op, found: list,
                   ahead: bool = False) -> list[str]:
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
        names = [reference.ops[i].name for i in reversed(path or []) if reference.ops[i].name not in LAYOUT_OPS]
        if names:
            return names
    return []


def steps_between(reference: Trace, counterpart: Op | None, first: Op, blamed: Op, found: list,
                  ahead: bool = False) -> str:
    """'its steps in between: pow, mean, add, rsqrt' (see _names_between), or ''."""
    names = _names_between(reference, counterpart, first, blamed, found, ahead)
    return "its steps in between: " + ", ".join(names[:8]) + (", ..." if len(names) > 8 else "") if names else ""


def taken_later(ops: list[Op], reference: Trace, counterpart: Op | None, reader: Op, blamed: Op,
                found: list) -> str | None:
    """'your line 7 takes log later, after mean': the learner's calls on the path from `reader` (the call
    that reads the value without the reference's steps) hold those steps, in their order, after at least
    one step of another name; None when they do not."""
    names = _names_between(reference, counterpart, reader, blamed, found)
    if not names:
        return None
    reached = {reader.index}
    path = []
    for op in ops[reader.index + 1:]:
        if any(j in reached for j in op.inputs):
            reached.add(op.index)
            if op.name not in LAYOUT_OPS:
                path.append(op)
    wanted = list(names)
    before, taking = [], []
    for op in path:
        if wanted and op.name == wanted[0]:
            taking.append(op)
            wanted.pop(0)
        elif not taking:
            before.append(op.name)
        if not wanted:
            break
    if wanted or not before or len({(op.file, op.line) for op in taking}) != 1 or not taking[0].file:
        return None
    return (f"your line {taking[0].line} takes {', '.join(names)} later, on the value its "
            f"{', '.join(dict.fromkeys(before))} made")
