"""Where a result's dtype goes wrong, on the learner's recorded call: a line
that makes a new tensor in another dtype than the inputs' (locate_dtype),
or the first step on the result's path that turns values of the wanted
dtype into the result's (a mixed-dtype product promotes, a cast converts;
locate_promotion), a detour through a lower precision (locate_detour), or
the first line that makes a tensor in the caller's default dtype
(locate_made_in_default). All are read off the learner's own trace: what a
line is said to read and give is what it read and gave there."""
from __future__ import annotations

import torch

from .align import ancestors
from .blame import CASTS
from .explain import Located
from .record import LEAF, source_line, tensors_in, Trace


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _result_path(learner: Trace) -> tuple[list[torch.Tensor], set[int]]:
    outputs = tensors_in(learner.result)
    return outputs, ancestors(learner.ops, [learner.producer.get(id(t), -1) for t in outputs])


def locate_dtype(learner: Trace, want: torch.dtype) -> Located | None:
    """Where a result's dtype is fixed: a call that makes a tensor from no
    tensor at all (torch.zeros, torch.tensor, arange...) with a floating
    dtype other than `want`, the result's own, on the output's path. Only
    when it is one line."""
    outputs, on_path = _result_path(learner)
    if learner.truncated or not outputs or outputs[0].dtype == want:
        return None
    ops = learner.ops
    made = [ops[i] for i in sorted(on_path) if ops[i].factory and ops[i].outputs
            and ops[i].outputs[0].is_floating_point() and ops[i].outputs[0].dtype != want
            and ops[i].outputs[0].dtype == outputs[0].dtype]
    lines = sorted({(op.file, op.line) for op in made})
    # two lines: a result of two tensors (keys and values), each made new alike
    if len(lines) > 2 or (len(lines) == 2 and lines[0][0] != lines[1][0]) or not lines:
        return None
    op = made[0]
    also = lines[1][1] if len(lines) == 2 else None
    where = "on each of these lines" if also else "here"
    # an input's dtype is the fix only where an input has the wanted one; from Python numbers alone (a mask from
    # two lengths) the wanted dtype itself is what to give
    follows = any(t.dtype == want for t in learner.inputs)
    inputs = "whatever the inputs' dtypes" if learner.inputs else "where no input of your function is a tensor"
    fix = ("dtype= (an input's .dtype, and its .device, where the result follows an input)" if follows
           else f"dtype={want} in place of {_name(op.outputs[0].dtype)}")
    return Located(op.file, op.line, op.function, source_line(op.file, op.line),
                   [f"{op.name} makes a new {_name(op.outputs[0].dtype)} tensor {where}, {inputs}, "
                    f"and your result keeps that dtype where it must be {_name(want)}; give it {fix}"], kind="dtype",
                   also=also, also_code=source_line(op.file, also) if also else "")


def _read(learner: Trace, owner: int, slot: int) -> tuple[torch.dtype | None, str, int | None]:
    """The dtype of a tensor a call read, where it came from in words, and the index of the call that made it."""
    if owner >= 0:
        outputs = learner.ops[owner].outputs
        return (outputs[slot].dtype if slot < len(outputs) else None), f"made on line {learner.ops[owner].line}", owner
    if LEAF < owner <= -2 and -2 - owner < len(learner.inputs):
        return learner.inputs[-2 - owner].dtype, "an argument of your function", None
    if owner <= LEAF and LEAF - owner < len(learner.leaves):
        return learner.leaves[LEAF - owner].dtype, "a tensor no call of yours made: a weight, a buffer, a table", None
    return None, "", None


def _read_all(learner: Trace, op) -> list[torch.dtype | None]:
    return [_read(learner, j, s)[0] for j, s in zip(op.inputs, op.slots or [0] * len(op.inputs))]


def _downstream(ops, on_path: set[int], start: int) -> list[int]:
    """The calls on the result's path after `start` that read its value, directly or through another."""
    reached, found = {start}, []
    for k in sorted(i for i in on_path if i > start):
        if any(j in reached for j in ops[k].inputs):
            reached.add(k)
            found.append(k)
    return found


def locate_made_in_default(learner: Trace, default: torch.dtype = torch.float64) -> Located | None:
    """The first call on the result's path that makes a `default` tensor from
    inputs none of which is `default` (none at all, for a factory): where a
    result follows the caller's default dtype."""
    outputs, on_path = _result_path(learner)
    if learner.truncated or learner.error is not None or not outputs:
        return None
    for i in sorted(on_path):
        op = learner.ops[i]
        if not op.outputs or op.outputs[0].dtype != default:
            continue
        read = _read_all(learner, op)
        if None in read or default in read:
            continue  # a tensor the recorder did not see made, or the dtype came in
        made_from = "no tensor" if not read else ", ".join(_name(d) for d in read)
        return Located(op.file, op.line, op.function, source_line(op.file, op.line), [
            f"{op.name} here makes a {_name(default)} tensor from {made_from}: the caller's default dtype"],
            kind="dtype")
    return None


def _place(op, facts: list[str], kind: str, also: int | None) -> Located:
    return Located(op.file, op.line, op.function, source_line(op.file, op.line), facts, kind=kind, also=also,
                   also_code=source_line(op.file, also) if also else "")


def locate_promotion(learner: Trace, want: torch.dtype) -> Located | None:
    """Where the values leave `want`: on the result's path, the first call
    that reads a floating tensor of dtype `want` and gives one of the
    result's floating dtype. Said: what it read and gave, and, when every
    later step on the path keeps that dtype, that the values stay in it up
    to the result."""
    outputs, on_path = _result_path(learner)
    if learner.truncated or not outputs or not want.is_floating_point:
        return None
    wrong = outputs[0].dtype
    if wrong == want or not wrong.is_floating_point:
        return None
    ops = learner.ops
    for i in sorted(on_path):
        op = ops[i]
        if not op.outputs or op.outputs[0].dtype != wrong:
            continue
        read = [_read(learner, j, s) for j, s in zip(op.inputs, op.slots or [0] * len(op.inputs))]
        if not any(dtype == want for dtype, _, _ in read):
            continue
        others = [r for r in read if r[0] is not None and r[0] != want]
        later = [ops[k] for k in _downstream(ops, on_path, i)]
        kept = all(o.outputs and o.outputs[0].dtype == wrong for o in later)
        keeps = f"; every later step to your result keeps {_name(wrong)}" if kept else ""
        if others:
            dtype, origin, maker = others[0]
            made = ops[maker] if maker is not None else None
            also = made.line if made is not None and made.file == op.file and made.line != op.line else None
            return _place(op, [f"{op.name} reads {_name(want)} and {_name(dtype)} ({origin}) and gives "
                               f"{_name(wrong)}, as torch promotes a mixed pair{keeps}"], "promoted", also)
        fact = (f"{op.name} on line {op.line} turns a {_name(want)} value into {_name(wrong)}" if op.name in CASTS
                else f"{op.name} on line {op.line} reads a {_name(want)} value and gives {_name(wrong)}")
        last = ops[learner.producer.get(id(outputs[0]), i)] if learner.producer.get(id(outputs[0]), -1) >= 0 else op
        if kept and last.file == op.file and last.line != op.line:
            # the cast may be one the solution takes too (float32 for the sums): what is measured wrong is that
            # nothing casts back, so the result's line is the place, the cast's beside it
            return _place(last, [f"{fact}, and no step from there to your result casts back"], "uncast", op.line)
        return _place(op, [fact + keeps], "promoted", None)
    return None


def locate_detour(learner: Trace, low: torch.dtype) -> Located | None:
    """Where a result not in `low` went through it: the first call on the
    result's path that gives a `low` tensor from values of another floating
    dtype, and the first later call on the path that gives the result's
    dtype back from a `low` value (its line beside, when another)."""
    outputs, on_path = _result_path(learner)
    if learner.truncated or not outputs or outputs[0].dtype == low or not outputs[0].is_floating_point():
        return None
    result = outputs[0].detach()
    if not torch.equal(result.to(low).to(result.dtype), result):
        return None  # a value the cast would change did not keep the rounding
    ops, back = learner.ops, outputs[0].dtype
    for i in sorted(on_path):
        op = ops[i]
        read = _read_all(learner, op)
        if not (op.outputs and op.outputs[0].dtype == low
                and any(d is not None and d != low and d.is_floating_point for d in read)):
            continue
        fact = f"{op.name} on line {op.line} turns {_name(back)} values into {_name(low)}"
        returns = [ops[k] for k in _downstream(ops, on_path, i) if ops[k].outputs and ops[k].outputs[0].dtype == back]
        also = None
        if returns:
            home = returns[0]
            fact += f", and {home.name} on line {home.line} gives {_name(back)} back with {_name(low)}'s rounding kept"
            also = home.line if home.file == op.file and home.line != op.line else None
        return _place(op, [fact], "detour", also)
    return None
