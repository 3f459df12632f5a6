"""Which kind of place a frontier call is (blame_of asks): the
reference owners of what a call read (input_owners); a value made wrongly
rather than a right one read in another's place (made_wrong); the right
numbers only laid out anew (relaid); the reference's steps taken by the
same run of the function after the call, in another order, rather than
missing (taken_later_here), or taken where they change nothing
(step_taken_as_identity)."""
from __future__ import annotations

import torch

from .align import base_name, path_between
from .record import LAYOUT_OPS, LEAF, Op, Trace


def input_owners(op: Op, ops: list[Op], found: list, given: dict | None = None) -> list[set]:
    """For each tensor `op` read: the reference owners its value matches
    (given: those of the call's inputs and of the leaves, by owner code)."""
    owned = []
    for j, slot in zip(op.inputs, op.slots or [0] * len(op.inputs)):
        if j <= -2:
            owned.append(set(given[j]) if given and j in given else {(j, 0)} if j > LEAF else set())
        elif j >= 0 and slot < len(found[j]):
            owned.append(set(found[j][slot]))
        else:
            owned.append(set())
    return owned


def out_of_place(first: Op, counterpart: Op, ops: list[Op], found: list, given: dict | None) -> list[int]:
    """The producers of what `first` reads where its counterpart reads another value."""
    owners = input_owners(first, ops, found, given)
    theirs = zip(counterpart.inputs, counterpart.slots or [0] * len(counterpart.inputs))
    return [j for j, wanted, owned in zip(first.inputs, theirs, owners) if wanted not in owned]


def what_is_read(first: Op, counterpart: Op, ops: list[Op], seen) -> str:
    """What `first` reads where its counterpart reads another value: an argument, or the value a call makes."""
    read = out_of_place(first, counterpart, ops, seen.found, seen.given)
    if not read or read[0] <= LEAF:
        return "another value"
    if read[0] < 0:
        return "an argument of your function"
    maker = ops[read[0]]
    return f"the value your {maker.name} makes" + (f" on line {maker.line}" if maker.file == first.file else "")


def reference_maker(first: Op, counterpart: Op, maker: Op, reference: Trace, ops: list[Op], found: list,
                    given: dict | None) -> Op | None:
    """The reference's own call that makes the value its `counterpart` reads where `first` reads another, a
    value the learner's `maker` makes too. Its name is the reference's, which the learner's need not be: the
    same numbers come from other operations (tinylm's apply_rope takes an addcmul where the reference adds
    two products). None when the counterpart reads it as an argument."""
    made = {owner for owners in found[maker.index] for owner in owners}
    theirs = zip(counterpart.inputs, counterpart.slots or [0] * len(counterpart.inputs))
    for wanted, owned in zip(theirs, input_owners(first, ops, found, given)):
        if wanted not in owned and wanted in made and wanted[0] >= 0:
            return reference.ops[wanted[0]]
    return None


def made_wrong(first: Op, ops: list[Op], j: int, found: list, given: dict | None, best: Op | None):
    """The blame for a call that reads, where the reference reads another value, a value the reference never
    computes (a constant made on the line, a route only a later match vouched for): no right value sits in a
    wrong place, a value is made wrongly. Its maker's line is named when that call read only values the
    reference has (so no earlier line made a value the reference never computes); else the call itself."""
    if best is not None and not (first.outputs and best.outputs and first.outputs[0].dtype == best.outputs[0].dtype):
        best = None  # values of two dtypes: paired by name, not by value, so none is set beside it
    maker = ops[j]
    if maker.factory or (maker.file, maker.line) == (first.file, first.line) or not maker.inputs:
        return first, None, best, "value"
    # The calls before it that made the first values the reference never computes (each read only values the
    # reference has): the maker's line is the first such line only when they all sit on it.
    roots, todo, seen = set(), [j], set()
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        unmatched = [m for m, owners in zip(ops[i].inputs, input_owners(ops[i], ops, found, given)) if not owners]
        if any(m < 0 for m in unmatched):
            return first, None, best, "value"   # an input of the call the reference has not: no line made it
        roots |= {(ops[i].file, ops[i].line)} if not unmatched else set()
        todo += unmatched
    if roots != {(maker.file, maker.line)}:
        return first, None, best, "value"
    return maker, first, None, "value"


def relaid(first: Op, ops: list[Op], j: int, slot: int) -> bool:
    """Whether `first` only lays out anew the very numbers it read from op j (a [None], a reshape): its result
    holds them all, in another shape."""
    if first.name not in LAYOUT_OPS | {"__getitem__"} or not first.outputs or slot >= len(ops[j].outputs):
        return False
    mine, read = first.outputs[0], ops[j].outputs[slot]
    return (isinstance(mine, torch.Tensor) and isinstance(read, torch.Tensor) and mine.dtype == read.dtype
            and mine.numel() == read.numel() > 0 and tuple(mine.shape) != tuple(read.shape)
            and torch.equal(mine.flatten().sort().values, read.flatten().sort().values))


def taken_later_here(first: Op, ops: list[Op], reference: Trace, paths: list) -> bool:
    """Whether every computing step the reference takes between a value and its call is taken, on a value
    computed from `first`'s result and not on what `first` read, by the same run of the same function (not by
    the next block's norm, nor by the next step of a loop in the caller)."""
    if not first.stack:
        return False
    frame = first.stack[0][2:]
    steps = {base_name(reference.ops[i].name) for p in paths if p for i in p if reference.ops[i].name not in LAYOUT_OPS}
    later, taken, read = {first.index}, set(), {i for i in first.inputs if i >= 0}
    for op in ops[first.index + 1:]:
        if any(i in later for i in op.inputs) and op.stack and op.stack[0][2:] == frame:
            later.add(op.index)
            if not read & set(op.inputs):  # a step that also reads what `first` read (the next residual's add) is
                taken |= _FUSED.get(base_name(op.name), {base_name(op.name)})  # another step, not this one moved
    return bool(steps) and steps <= taken


def step_taken_as_identity(ops: list[Op], j: int, first: Op, reference: Trace, paths: list) -> bool:
    """Whether the learner's code takes, between op j and `first`, a step of
    a kind the reference takes there, one that left its input unchanged (a
    division by sqrt(head_dim // n_heads) = 1): the value then looks like
    one that skipped the step."""
    kinds = {base_name(reference.ops[i].name) for p in paths if p for i in p
             if reference.ops[i].name not in LAYOUT_OPS}
    for op in ops[max(j, 0):first.index]:
        if base_name(op.name) not in kinds or not op.outputs or not isinstance(op.outputs[0], torch.Tensor):
            continue
        for i in op.inputs:
            if i >= 0 and ops[i].outputs and isinstance(ops[i].outputs[0], torch.Tensor) and \
                    tuple(ops[i].outputs[0].shape) == tuple(op.outputs[0].shape) and \
                    torch.equal(ops[i].outputs[0], op.outputs[0]):
                return True
    return False


# Calls that take several steps at once (a library's apply_rope may add with addcmul where the reference adds).
_FUSED = {"addcmul": {"add", "mul", "addcmul"}, "addcdiv": {"add", "div", "addcdiv"}, "addmm": {"add", "matmul", "addmm"},
          "linear": {"matmul", "add", "linear"}}


def gives_back_an_input(learner: Trace, op: Op) -> bool:
    """Whether the call's value equals, shape and numbers, an input of the function it read: the function's
    steps ran and its result is what it was given (a mask with no True), not an intermediate value returned
    early."""
    mine = op.outputs[0] if op.outputs else None
    if not isinstance(mine, torch.Tensor):
        return False
    for j in op.inputs:
        read = learner.inputs[-2 - j] if j <= -2 and -2 - j < len(learner.inputs) else None
        if isinstance(read, torch.Tensor) and (read.shape, read.dtype) == (mine.shape, mine.dtype) \
                and torch.equal(read.detach().cpu(), mine.detach().cpu()):
            return True
    return False


def accumulated_by_the_same_step(first: Op, reference: Trace, paths: list) -> bool:
    """Whether every step the reference takes between the value and its call is a call of `first`'s kind: the
    reference reads what repeats of this step made of the value (a sequence grown by cat in a loop)."""
    steps = [reference.ops[i].name for p in paths if p is not None for i in p]
    return bool(steps) and all(base_name(name) == base_name(first.name) for name in steps)


def one_line_kind(how: str, later: Op | None, file: str, line: int) -> str:
    """The kind of a place whose value reaches the later call (`later`) without a step, a cast or a layout: its
    one-line form where that call sits on the very same line, which then has no later line to speak of."""
    if how in ("missing", "cast", "layout") and later is not None and (later.file, later.line) == (file, line):
        return how + "_here"
    return how


def shares_an_input(first: Op, counterpart: Op, seen) -> bool:
    """Whether `first` reads a value its reference counterpart reads too, or only laid out anew (logits
    flattened): else the two were paired by name only (the learner's slice of the sequence beside the
    reference's slice of the new token)."""
    theirs = set(zip(counterpart.inputs, counterpart.slots or [0] * len(counterpart.inputs)))
    owned = set().union(*input_owners(first, seen.ops, seen.found, seen.given)) if first.inputs else set()
    reference = seen.reference
    return not first.inputs or bool(owned & theirs) or any(
        (p := path_between(reference, t, o)) and all(reference.ops[i].name in LAYOUT_OPS for i in p)
        for t in theirs for o in owned)


# In-place initialisers: the values they leave do not depend on those of the tensor they write into.
_FILLS = {"fill_", "zero_", "normal_", "uniform_", "ones_", "zeros_", "trunc_normal_", "kaiming_uniform_"}


def module_init(op: Op) -> bool:
    """Whether `op` is an in-place initialiser run inside a library component (a module's new gain filled with
    ones in its constructor): its value is the initialiser's own numbers, whatever the tensor it writes into held,
    so it is no step of the computation. A mask a library builds from the numbers it was passed is made by other
    calls and stays a place: those numbers are the line's."""
    return op.inside and op.name in _FILLS
