"""Where a wrong answer goes wrong: the first line of the learner's code
whose value the reference never computes.

The place, from the first call of the frontier: a call the reference makes
too, from the same values, with another result, is wrong for sure (a wrong
axis, a wrong constant), and when such calls sit on one line, that line is
the place (unless that line reads `self.` attributes and writes no number
itself: the wrong number may have been set in the module's __init__, and
nothing is said); otherwise the frontier must sit on one line (a call the reference
never makes may be another right route that a later mistake spoiled), else
nothing is said. For that call: when the
reference's call of that kind reads a different value (a step was skipped,
or a value is used in another's role, keys for values), the line that made
the learner's value (for another layout of the same value, the learner's
last reshape or transpose of it); a value the reference only reaches after a cast the
learner skipped has no line of its own, and nothing is said. When every
value is good but the output is wrong, the learner returned an earlier
step's value: the place is the function's return line.

What is said about the place: the learner's value and the reference's at
that step (shape, dtype, the axis a reduction ran over, a few statistics),
never the reference tensor itself. The recorder's own failures end in
`None` (no place), never in an error of the learner's.
"""
from __future__ import annotations

import ast
import linecache
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..framework.watch import first_line_where
from ..learner_code import is_learners_file
from .align import owner_value, same_kind, same_values, tolerance_for, values_close, Analysis
from .blame import blame_of
from .rounding import rounded_before, rounded_earlier
from .sizes import not_the_same_step, own_sizes, same_length_elsewhere, sizes_differ, sliced_after
from .steps import steps_between
from .kinds import (gives_back_an_input, input_owners, module_init, one_line_kind, out_of_place, reference_maker,
                    shares_an_input, what_is_read)
from .record import REDUCTIONS, numbers_in, source_line, tensors_in, Lines, Op, Trace


@dataclass
class Located:
    """The line of the learner's code where the first wrong value is made."""
    file: str
    line: int
    function: str
    code: str
    facts: list[str]
    kind: str = "value"   # a key of KIND_WORDS
    also: int | None = None   # a second line of the same code (kind missing / role)
    also_code: str = ""

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "function": self.function, "code": self.code,
                "facts": list(self.facts), "kind": self.kind, "also": self.also, "also_code": self.also_code}


def line_making(fn, args: tuple, made: Callable[[Any], bool], facts: list[str], kind: str,
                within: Callable[[Any], bool] | None = None) -> Located | None:
    """The learner's line after which one of its locals first holds a value made(value) accepts, seen by running
    fn(*args) again under a line tracer (an error it raises again is the check's own call's to report), said with
    `facts` as a place of `kind`. within(code): the learner's code objects looked in (default: all of them)."""
    looked_in = lambda code: is_learners_file(code.co_filename) and (within is None or within(code))  # noqa: E731
    found = first_line_where(fn, args, looked_in,
                             lambda frame, event: True if any(made(v) for v in frame.f_locals.values()) else None)
    if found is None:
        return None
    code, line, _ = found
    return Located(code.co_filename, line, getattr(code, "co_qualname", code.co_name),
                   source_line(code.co_filename, line), facts, kind=kind)


def _used(line: int, second: int | None, first: Op, blamed: Op) -> str:
    """'line 5 uses the value line 4 makes', or, both on one line, which call of it reads which one's value."""
    if second is None or second == line:
        return f"line {line}'s {first.name} reads the value its {blamed.name} makes"
    return f"line {second} uses the value line {line} makes"


def _stats(t: torch.Tensor) -> str:
    if t.numel() == 0:
        return "empty"
    if not t.is_floating_point():
        if t.dtype == torch.bool:
            return f"{int(t.sum())} of {t.numel()} True"
        return f"values {int(t.min())} to {int(t.max())}"
    d = t.double()
    finite = d[torch.isfinite(d)]
    parts = []
    if finite.numel() < d.numel():
        parts.append(f"{d.numel() - finite.numel()} of {d.numel()} not finite")
    if finite.numel():
        parts.append(f"mean {float(finite.mean()):.3g}, range {float(finite.min()):.3g} to {float(finite.max()):.3g}")
    return ", ".join(parts)


def describe_value(t: torch.Tensor) -> str:
    return f"shape {tuple(t.shape)}, {str(t.dtype).removeprefix('torch.')}, {_stats(t)}"


def _reduced_axis(op: Op) -> str:
    """'over axis -1 (size 8)' for a reduction op, from its dim argument."""
    dim = op.kwargs.get("dim")
    if op.name not in REDUCTIONS or dim is None or not op.input_shapes:
        return ""
    shape = op.input_shapes[0]
    dims = dim if isinstance(dim, tuple) else (dim,)
    try:
        sizes = ", ".join(str(shape[d]) for d in dims)
    except (IndexError, TypeError):
        return ""
    return f" over axis {dim if not isinstance(dim, tuple) else list(dim)} (size {sizes})"


def locate(learner: Trace, reference: Trace) -> Located | None:
    """The place of the first wrong value (see the module docstring); None
    when a trace is incomplete, the output is right, nothing diverges, or
    the place cannot be told."""
    if learner.truncated or reference.truncated or not learner.ops:
        return None
    final_ref = [t.detach().cpu() for t in tensors_in(reference.result)] or _number_source(reference)
    outputs = tensors_in(learner.result) or _number_source(learner)
    if outputs and len(outputs) == len(final_ref) and all(same_values(t.detach().cpu(), r) for t, r in zip(outputs, final_ref)):
        return None
    out_ops = sorted({learner.producer[id(t)] for t in outputs if learner.producer.get(id(t), -1) >= 0})
    if not out_ops and outputs and not tensors_in(learner.result):  # a number read with .item(): from its tensor's op
        out_ops = [op.index for op in learner.ops if any(o is outputs[0] for o in op.outputs)]
    if not out_ops:
        return None
    seen = Analysis(learner, reference)
    frontier = seen.frontier(out_ops)
    if not frontier:
        final = {(reference.producer.get(id(t), -1), reference.slot.get(id(t), 0)) for t in tensors_in(reference.result)}
        if any(owner in final for owners in seen.found[max(out_ops)] for owner in owners):
            return None  # the right values in another shape: the table's shape column says it
        last = learner.ops[max(out_ops)]
        made_by = {reference.ops[i].name for owners in seen.found[last.index] for i, _ in owners if i >= 0}
        final_by = {reference.ops[i].name for i, _ in final if i >= 0}
        if last.name in made_by & final_by:
            return None  # the reference's loop makes this value at an earlier step: iterations are missing, not a line
        return _returned_early(learner, last, seen.matched, final_ref)
    return place(seen, frontier)


# Calls whose result's shape is set by numbers they are given (a count of copies, sizes, bounds).
SIZED_OPS = {"expand", "reshape", "view", "repeat", "repeat_interleave", "__getitem__", "narrow", "tile", "unflatten"}


def _number_written_in(file: str, line: int) -> tuple[str, int, int] | None:
    """(name, value, line) for the one name `line` reads that its function
    binds once, on an earlier line, to an integer literal (`n_rep = 2`)."""
    found = _bound_once_before(file, line, lambda value: isinstance(value, ast.Constant) and type(value.value) is int)
    return (found[0], found[1].value, found[2]) if found else None


def true_division_read(file: str, line: int) -> tuple[str, int] | None:
    """(name, line) for the one name `line` reads that its function binds
    once, on an earlier line, to a true division (`n_rep = a / b`: a float)."""
    found = _bound_once_before(file, line, lambda value: any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)
                                                             for n in ast.walk(value)))
    return (found[0], found[2]) if found else None


def function_around(file: str, line: int):
    """The innermost function definition of `file`'s source holding `line` (None if none, or no source)."""
    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError):
        return None
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return max(functions, key=lambda n: n.lineno) if functions else None


def signed_numbers(node: ast.AST) -> list[tuple[ast.AST, int | float]]:
    """(node, value) of each number written in `node`, signed as written: `-5` is the one number -5, not a 5 under
    a minus. Ints and floats; a bool is no number here."""
    plain = lambda n: isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) \
        and not isinstance(n.value, bool)  # noqa: E731
    under_minus, found = set(), []
    for n in ast.walk(node):  # breadth first: a minus comes before the number it negates
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and plain(n.operand):
            found.append((n, -n.operand.value))
            under_minus.add(id(n.operand))
        elif plain(n) and id(n) not in under_minus:
            found.append((n, n.value))
    return found


def _bound_once_before(file: str, line: int, kind: Callable) -> tuple[str, Any, int] | None:
    """(name, value node, line) for the one name `line` reads that its
    function binds exactly once, on an earlier line, with `kind(value)` true."""
    body = function_around(file, line)
    if body is None:
        return None
    read = {n.id for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.lineno == line}
    found = []
    for node in ast.walk(body):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value if isinstance(node, ast.Assign) else None
            found += [(t.id, value, node.lineno) for t in targets if isinstance(t, ast.Name) and t.id in read]
    chosen = [f for f in found if f[1] is not None and f[2] < line and kind(f[1])]
    if len(chosen) != 1 or sum(f[0] == chosen[0][0] for f in found) != 1:
        return None
    return chosen[0]


def _same_call(a: Op, b: Op) -> bool:
    """The same call with the same small arguments on values of the same shapes, giving the same shapes."""
    return a.name == b.name and a.kwargs == b.kwargs and a.input_shapes == b.input_shapes and \
        [o.shape for o in a.outputs] == [o.shape for o in b.outputs]


def blamed_lines(blamed: Op, also: Op | None) -> tuple[tuple[str, int, str], int | None]:
    """((file, line, function) of the blamed call, the second line or None).
    A value made inside a function the other call's function called (a
    block's result reaching the final norm) is shown where that caller
    got it: the line of their common caller that called the function."""
    place = (blamed.file, blamed.line, blamed.function)
    if also is None:
        return place, None
    lifted = _common_lines(blamed, also)
    if lifted is not None and blamed.stack and lifted[0] != blamed.stack[0][:3]:
        place = lifted[0]
    second = also.line if also.file == place[0] and also.line != place[1] else None
    return place, second


def _common_lines(a: Op, b: Op):
    """The lines of the innermost frame both calls ran in that made each
    (file, line, function), or None when they share no frame of the checked code."""
    sa, sb = list(reversed(a.stack)), list(reversed(b.stack))
    common = None
    for fa, fb in zip(sa, sb):
        if fa[3] != fb[3]:
            break
        common = (fa[:3], fb[:3])
    return common


def _argument_facts(mine: Op, theirs: Op) -> list[str]:
    """The small arguments (minlength=..., keepdim=..., a reduction's axis)
    in which the learner's call differs from the reference's call of the same kind."""
    facts = []
    for key in sorted(set(mine.kwargs) | set(theirs.kwargs)):
        if key in ("sizes", "index") or (key == "dim" and mine.name in REDUCTIONS) or key.startswith("_"):
            continue  # said with the shapes, or as the axis a reduction ran over; `_stacklevel`: torch's own
        a, b = mine.kwargs.get(key), theirs.kwargs.get(key)
        if a == b or (a is None and b is False):
            continue
        yours = f"{key}={a!r}" if key in mine.kwargs else f"no {key}"
        facts.append(f"your {mine.name} is called with {yours}, the reference's with "
                     + (f"{key}={b!r}" if key in theirs.kwargs else f"no {key}"))
    return facts[:3]


def _comparable(mine: Op, theirs: Op | None) -> bool:
    """Both calls give a tensor of one dtype: values that may stand for each other."""
    return (theirs is not None and bool(mine.outputs) and bool(theirs.outputs)
            and isinstance(mine.outputs[0], torch.Tensor) and isinstance(theirs.outputs[0], torch.Tensor)
            and mine.outputs[0].dtype == theirs.outputs[0].dtype)


def sizes_bound_at(file: str, line: int, call: str) -> int | str | None:
    """The one earlier line of the same function that binds every name the
    `call` (reshape, view, a slice...) on `line` reads as a size or bound,
    e.g. `B, T, H, hd = y.shape`; None when it reads no name bound in the
    function (numbers, arguments), "elsewhere" when they are bound on
    several lines."""
    body = function_around(file, line)
    if body is None:
        return None
    if call == "__getitem__":
        parts = [n.slice for n in ast.walk(body) if isinstance(n, ast.Subscript)
                 and n.lineno <= line <= (n.end_lineno or n.lineno)]
    else:
        parts = [a for n in ast.walk(body) if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == call for a in n.args]
    names = {n.id for a in parts for n in ast.walk(a) if isinstance(n, ast.Name)}
    if not names:
        return None
    binding: dict[str, set[int]] = {}
    for node in ast.walk(body):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign, ast.For)) else []
        for target in targets:
            for n in ast.walk(target):
                if isinstance(n, ast.Name) and n.id in names and node.lineno < line:
                    binding.setdefault(n.id, set()).add(node.lineno)
    lines = set().union(*binding.values()) if binding else set()
    return lines.pop() if len(lines) == 1 else "elsewhere" if lines else None


def _number_passed_at(file: str, line: int, computing: set) -> int | None:
    """The one earlier line of the same function that binds, once, a name
    `line` reads, with no tensor computed on that line (so a number, such as
    `start = past_k.shape[2] - 1`); None when there is not exactly one."""
    body = function_around(file, line)
    if body is None:
        return None
    # two calls of one function reading other names (q rotated from start, k from 0): which made it is not known
    calls: dict[str, list[set]] = {}
    for call in (n for n in ast.walk(body) if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)):
        calls.setdefault(ast.unparse(call.func), []).append(
            {n.id for n in ast.walk(call) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)})
    if any(len(names) > 1 and any(other != names[0] for other in names) for names in calls.values()):
        return None
    read = {n.id for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.lineno <= line <= (n.end_lineno or n.lineno)}
    binding: dict[str, list[int]] = {}
    for node in ast.walk(body):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign, ast.For)) else []
        for target in targets:
            for n in ast.walk(target):
                if isinstance(n, ast.Name) and n.id in read:
                    binding.setdefault(n.id, []).append(node.lineno)
    lines = {at[0] for at in binding.values() if len(at) == 1 and at[0] < line and (file, at[0]) not in computing}
    return lines.pop() if len(lines) == 1 else None


def _number_source(t: Trace) -> list:
    """For a call that returns a Python number made by .item(): the tensor it
    was read from (kept alive in the trace), standing for the result."""
    if not isinstance(t.result, (int, float)) or isinstance(t.result, bool):
        return []
    items = [op for op in t.ops if op.number_out and op.name == "item" and op.inputs]
    if not items or items[-1].inputs[0] < 0:
        return []
    source = t.ops[items[-1].inputs[0]]
    return [source.outputs[items[-1].slots[0] if items[-1].slots else 0]] if source.outputs else []


def _returned_early(learner: Trace, op: Op, matched: list[bool], final_ref: list) -> Located | None:
    """Every value is one the reference computes, yet the output is wrong:
    the output is an earlier step's value, made at `op`'s line; the steps
    after it are missing between that line and the return line."""
    if not matched[op.index] or op.factory:
        return None
    if sum((o.file, o.line) == (op.file, op.line) and o.name == op.name for o in learner.ops) > 1:
        return None  # a line run in a loop: the missing steps may be iterations, which have no line of their own
    if gives_back_an_input(learner, op):
        return None  # the step ran and changed nothing (a mask with no True): it is there, what it read is not right
    facts = [f"yours: {describe_value(op.outputs[0])}"]
    returned = learner.returned
    also = returned[1] if returned and returned[0] == op.file and returned[1] != op.line else None
    mine = [t.detach().cpu() for t in tensors_in(learner.result)]
    if len(mine) == 1 and len(final_ref) == 1 and _permutation_of(mine[0], final_ref[0]):
        # Every value is right and only their places differ: a layout step is wrong, no step is missing (a
        # later step would change the values, not only move them).
        facts = [f"yours: {describe_value(mine[0])}; the reference's result has the same shape and the very same "
                 "values, at other places"]
        return Located(op.file, op.line, op.function, source_line(op.file, op.line), facts, kind="permuted",
                       also=also, also_code=source_line(op.file, also) if also else "")
    if len(mine) == 1 and len(final_ref) == 1 and _permutation_of(mine[0], final_ref[0], any_shape=True):
        # The very same values in another shape (heads joined along the wrong axis): no step is missing either
        facts = [f"yours: {describe_value(mine[0])}; the reference's result, of shape {tuple(final_ref[0].shape)}, "
                 "has the very same values, in another shape and at other places"]
        return Located(op.file, op.line, op.function, source_line(op.file, op.line), facts, kind="permuted",
                       also=also, also_code=source_line(op.file, also) if also else "")
    if final_ref:
        facts.append(f"the reference goes on to {describe_value(final_ref[0])}")
    return Located(op.file, op.line, op.function, source_line(op.file, op.line), facts, kind="output",
                   also=also, also_code=source_line(op.file, also) if also else "")


def _permutation_of(mine: torch.Tensor, ref: torch.Tensor, any_shape: bool = False) -> bool:
    """The same shape (or with `any_shape`, as many values), dtype and
    multiset of values, not equal: the values are right, their places are not."""
    if not any_shape and tuple(mine.shape) != tuple(ref.shape) or mine.numel() != ref.numel() \
            or mine.dtype != ref.dtype or mine.numel() < 2:
        return False
    a, b = mine.flatten().double().sort().values, ref.flatten().double().sort().values
    return bool(values_close(a, b, tolerance_for(mine.dtype)))


def locate_numbers(learner: list[Lines], reference: list[Lines], rel: float = 1e-9) -> Located | None:
    """For Python-number answers: over the calls whose result differs from
    the reference's, the first line that binds a number the reference never
    has in that call; the same line in every such call, and a line whose
    numbers are wrong in most of the calls it runs in (a line right for most
    inputs computes well: the branch that led to it is the suspect, and
    nothing is said), or nothing is said."""
    places = set()
    runs: dict[tuple, int] = {}
    wrong: dict[tuple, int] = {}
    for mine, theirs in zip(learner, reference):
        if mine.error is not None or theirs.error is not None:
            continue
        want = numbers_in(theirs.result)
        known = [n for step in theirs.steps for n in step[3]] + want
        first = None
        for file, line, function, numbers in mine.steps:
            bad = any(not any(math.isclose(n, k, rel_tol=rel, abs_tol=1e-12) for k in known) for n in numbers)
            runs[file, line] = runs.get((file, line), 0) + 1
            wrong[file, line] = wrong.get((file, line), 0) + bad
            if bad and first is None:
                first = (file, line, function)
        got = numbers_in(mine.result)
        if len(got) == len(want) and all(math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-12) for g, w in zip(got, want)):
            continue
        if first is None:
            return None
        places.add(first)
    if len(places) != 1:
        return None
    file, line, function = places.pop()
    # Every call ran the same lines: no branch chose the way, so a line wrong for some inputs only is the place.
    one_path = len({frozenset((f, ln) for f, ln, _, _ in mine.steps) for mine in learner if mine.error is None}) == 1
    if 2 * wrong[file, line] <= runs[file, line] and not one_path:
        return None
    return Located(file, line, function, source_line(file, line),
                   [f"the numbers your code makes here are ones the reference never has, in {wrong[file, line]} of "
                    f"the {runs[file, line]} calls that run this line"], kind="value")


def locate_grad_cut(learner: Trace) -> Located | None:
    """The line where the learner's code leaves autograd: a call that reads
    a tensor requiring grad and returns floating values that do not (detach,
    .data, a copy made under no_grad) or Python numbers (item, tolist). Only
    when all such calls sit on one line."""
    if learner.truncated:
        return None
    cuts = [op for op in learner.ops if op.grad_in and not op.grad_out
            and (op.number_out or any(t.is_floating_point() for t in op.outputs))]
    if len({(op.file, op.line) for op in cuts}) != 1:
        return None
    op = cuts[0]
    what = "turns it into Python numbers" if op.number_out else "returns a tensor without a gradient"
    return Located(op.file, op.line, op.function, source_line(op.file, op.line),
                   [f"{op.name} reads a tensor that requires grad and {what}"], kind="grad")


def _made_elsewhere(seen: Analysis, counterpart: Op, first: Op) -> bool:
    """Whether a learner's call other than `first` makes the value the reference's `counterpart` makes."""
    wanted = {(counterpart.index, slot) for slot in range(len(counterpart.outputs))}
    return any(wanted & set(owners) for i, outputs in enumerate(seen.found) if i != first.index for owners in outputs)


def place(seen: Analysis, frontier: list[int]) -> Located | None:
    """The learner's line to show for the frontier `seen` found (see the module docstring), or None."""
    ops, reference = seen.ops, seen.reference
    frontier = [i for i in frontier if not module_init(ops[i])]
    blames = {i: blame_of(ops[i], ops, seen.found, reference, seen.given) for i in frontier}
    # A call that the reference makes too, from the same values, with another result, is wrong for sure; a
    # call the reference never makes may be another right route whose result only a later mistake spoiled.
    # So is one that reads an argument where the reference's call reads a value the learner made too.
    sure = [i for i in frontier if blames[i] is not None and blames[i][2] is not None and (
        blames[i][3] in ("value", "order") and same_kind(ops[i], blames[i][2]) or blames[i][3] == "swapped" or
        blames[i][3] == "read" and all(-1000 < j < 0 for j in out_of_place(ops[i], blames[i][2], ops, seen.found,
                                                                          seen.given)))]
    # A call made inside a library component (a module's forward, tinylm) got its arguments there, from what
    # the learner's line passed: a wrong value the learner's own code made earlier comes first.
    direct = [i for i in frontier if not ops[i].inside]
    if direct and any(ops[i].inside and i > direct[0] for i in sure):
        sure = [i for i in sure if not ops[i].inside or i < direct[0]]
        if not sure and len({(ops[i].file, ops[i].line) for i in direct}) == 1:
            sure = [direct[0]]
    if len({(ops[i].file, ops[i].line) for i in sure}) == 1 or sure and all(_same_call(ops[i], ops[sure[0]])
                                                                          for i in sure):
        chosen = sure[0]  # one line, or one mistake repeated line after line (cos and sin sliced alike): the first
    elif len({(ops[i].file, ops[i].line) for i in frontier}) == 1:
        chosen = frontier[0]
    else:
        return None
    first = ops[chosen]
    made = [ops[j] for j in first.inputs if j >= 0 and ops[j].factory and not seen.matched[j]]
    if any((m.file, m.line) != (first.file, first.line) for m in made):
        return None  # a constant the reference never has, read on another line: either line may be wrong
    blame = blames[chosen]
    if blame is None:
        return None
    blamed, also, counterpart, how = blame
    # a call of the same kind that reads another value (the steps taken in another order) is no counterpart to
    # set beside the learner's, though it is one to pair the line by
    paired, how = how != "order", "value" if how == "order" else how
    if how == "role" and counterpart is not None and (not _comparable(first, counterpart) or blamed is first
                                                       and _made_elsewhere(seen, counterpart, first)):
        # the two give values of different dtypes: paired by name, not by value; or this call reads an argument
        # where the counterpart reads another, and another call of the learner's makes the counterpart's very value
        # (q rotated, where this call rotates v too): this call stands in for no reference call, it is a step of
        # its own. None is set beside it.
        blamed, also, counterpart, how = first, None, None, "value"
    if how == "value" and counterpart is not None and (not shares_an_input(first, counterpart, seen)
                                                       or sliced_after(first, counterpart, ops)
                                                       or not_the_same_step(first, counterpart, ops, reference.ops)):
        counterpart = None  # no value read in common, or its slice taken after or beside this one: no counterpart
    maker = None
    if how == "read":  # the second op is where the value it should read is made, not a line of the pair
        maker, also = also, None
    if not blamed.file:
        return None  # a line of code whose text is not at hand (the grader keeps only the submission's cells)
    if how == "value" and counterpart is not None and same_kind(first, counterpart):
        rounded = rounded_before(seen, first, counterpart)  # an earlier line's values, matched up to float16 rounding
        if rounded is not None:
            op, facts = rounded
            return Located(op.file, op.line, op.function, source_line(op.file, op.line), facts, kind="value")
    code = source_line(first.file, first.line)
    sizes = sizes_differ(first, counterpart, ops) if how == "value" else None
    if how == "value" and counterpart is not None and same_kind(first, counterpart) and not sizes and \
            re.search(r"\bself\.[A-Za-z_]", code) and not re.search(r"(?<![\w.])\d", code):
        return None  # same values in, another result, no number on the line: it may come from the module's __init__
    # A call of several results (topk's values and indices) is shown by the one its later calls read.
    read = {(op.slots or [0] * len(op.inputs))[k] for op in ops[first.index + 1:] for k, j in enumerate(op.inputs)
            if j == first.index}
    shown = read.pop() if len(first.outputs) > 1 and len(read) == 1 else 0
    which = f", as its {('second', 'third', 'fourth')[min(shown, 3) - 1]} result," if shown else ""
    facts = [f"yours: {first.name}{_reduced_axis(first)} gives{which} {describe_value(first.outputs[shown])}"]
    # A reference call is set beside the learner's only where the two were aligned by value: for a value of
    # a kind the reference never computes, its first call on the same input is no counterpart of this line.
    if counterpart is not None and paired and (how != "value" or same_kind(first, counterpart)):
        facts.append(f"the reference's {counterpart.name}{_reduced_axis(counterpart)} gives "
                     f"{describe_value(counterpart.outputs[0])}")
        if how == "value" and same_kind(first, counterpart):
            arguments = _argument_facts(first, counterpart)
            if first.inside and arguments and all("training=" in a for a in arguments):
                return None  # a module's mode (train or eval), set elsewhere or nowhere: not this line's doing
            facts[1:1] = arguments
    if how == "value":
        earlier = rounded_earlier(seen, first, counterpart)  # "never computes" holds only beyond rounding
        if earlier is not None:
            facts.append(earlier)
    (file, line, function), second = blamed_lines(blamed, also)
    if how == "value" and blamed is not first:
        k = first.inputs.index(blamed.index) if blamed.index in first.inputs else 0
        slot = (first.slots or [0] * len(first.inputs))[k] if k < len(first.inputs) else 0
        if slot < len(blamed.outputs):
            facts.insert(0, f"line {second or line}'s {first.name} reads the value the {blamed.name} here makes, one "
                            f"the reference never computes: {describe_value(blamed.outputs[slot])}")
    if how == "shape":
        owners = input_owners(first, ops, seen.found, seen.given)
        theirs = [owner_value(reference, o) for owned in owners for o in owned]
        shapes = sorted({tuple(t.shape) for t in theirs if isinstance(t, torch.Tensor)})
        if not shapes:
            return None
        facts.append(f"the reference has these numbers in shape {' or '.join(str(s) for s in shapes[:2])}")
    if how == "layout":
        facts.insert(0, f"the value line {line} makes reaches " + (f"line {second}" if second else "a later step of it")
                        + f" in another layout than the reference's {counterpart.name} reads")
    elif how == "cast":
        k = first.inputs.index(blamed.index) if blamed.index in first.inputs else 0
        slot = (first.slots or [0] * len(first.inputs))[k] if k < len(first.inputs) else 0
        wanted = (counterpart.inputs[k], (counterpart.slots or [0] * len(counterpart.inputs))[k]) \
            if k < len(counterpart.inputs) else None
        theirs = owner_value(reference, wanted) if wanted is not None else None
        if theirs is not None and slot < len(blamed.outputs):
            facts.insert(0, f"the reference's {counterpart.name} reads the value line {line} makes cast to "
                            f"{str(theirs.dtype).removeprefix('torch.')}; yours reads it as "
                            f"{str(blamed.outputs[slot].dtype).removeprefix('torch.')}")
    elif how == "missing":
        steps = steps_between(reference, counterpart, also or first, blamed, seen.found)
        facts.insert(0, f"the reference's {counterpart.name} reads a value computed from the one line {line} makes, "
                        f"{steps or 'one or more steps later'}")
    elif how == "role" and counterpart is None:
        facts.insert(0, f"{_used(line, second, first, blamed)} where the reference uses another value")
    elif how == "role" and blamed is first:
        read = what_is_read(first, counterpart, ops, seen).replace("another value", "a value no call of yours makes")
        facts.insert(0, f"line {line}'s {first.name} reads {read} where the reference's {counterpart.name} reads "
                        "another value")
        how = "role_read"  # no line made the input read out of place (an argument), so the call is named
    elif how in ("role", "swapped"):
        facts.insert(0, f"{_used(line, second, first, blamed)} where the reference's {counterpart.name} reads another "
                        "value" + (", one that line makes too" if how == "swapped" else ""))
    elif how == "read":
        made = reference_maker(first, counterpart, maker, reference, ops, seen.found, seen.given)
        theirs = f"the value its {made.name} makes" if made is not None else "another value"
        facts.insert(0, f"your {first.name} reads {what_is_read(first, counterpart, ops, seen)} where the reference's "
                        f"{counterpart.name} reads {theirs}, a value your line {maker.line} makes too")
    elif how == "late" and second:
        facts.insert(0, f"your {first.name} reads a value the reference's {counterpart.name} reads only after a "
                        f"step that your line {second}'s {also.name} takes after line {line} has run: the value line "
                        f"{second} makes is the one the reference reads there, and line {line} does not read it")
    elif how in ("twice", "ahead"):
        steps = steps_between(reference, counterpart, also or first, blamed, seen.found, ahead=True)
        facts.insert(0, f"your {first.name} reads a value the reference has only after its own {counterpart.name}"
                        + (f" ({steps})" if steps else "") if how == "twice" else
                        f"your {first.name} reads a value the reference has only after more steps"
                        + (f" ({steps})" if steps else ""))
    if sizes is not None and not first.inside and same_length_elsewhere(first, counterpart):
        facts.insert(0, sizes)
        how = "offset"
    elif sizes is not None:
        # A call made inside a library component got its sizes there, from the numbers the line passed it.
        bound = _number_passed_at(file, line, {(o.file, o.line) for o in ops}) if first.inside else \
            sizes_bound_at(file, line, first.name)
        facts.insert(0, sizes)
        if bound == "elsewhere":
            return None  # the sizes come from names bound on several lines: any of them may be wrong
        if bound is not None and bound != line and \
                not own_sizes(function_around(file, line), line, bound, first, counterpart):
            # the slice inside the called component has the reference's length: only where it starts differs
            how, second = "offset_read" if first.inside and same_length_elsewhere(first, counterpart) else "sizes", bound
    if how == "value" and sizes is None and first.name in SIZED_OPS and blamed is first:
        written = _number_written_in(file, line)
        if written is not None:
            name, value, bound = written
            facts.insert(0, f"line {line} reads {name} = {value}, a number written in at line {bound}, where the "
                            f"reference's sizes follow from its inputs' shapes")
            how, second = "sizes", bound
    caller = _calling_again(first, ops, seen.matched) if how == "value" and blamed is first and not second else None
    if caller is not None:
        call_file, call_line, call_function = caller
        facts.insert(0, f"the helper's line {line} gave a value the reference computes on an earlier call, and on "
                        f"the call from line {call_line} one it never computes: its code is the same on both calls, so "
                        "what it reads on that call differs (what the call hands it, or a name it reads around it)")
        return Located(call_file, call_line, call_function, source_line(call_file, call_line), facts, kind="helper",
                       also=line, also_code=source_line(file, line))
    return Located(file, line, function, source_line(file, line), facts, kind=one_line_kind(how, also, file, line),
                   also=second, also_code=source_line(file, second) if second else "")


def _calling_again(first: Op, ops: list[Op], matched: list[bool]) -> tuple[str, int, str] | None:
    """(file, line, function) of the line that called the helper `first` runs in (a function or lambda of the
    learner's, called from the checked code), when the same call on the same helper line gave a value the
    reference has on an earlier call: then the helper is not what went wrong on this one."""
    if len(first.stack) < 2 or first.stack[0][:2] != (first.file, first.line):
        return None
    again = any(matched[op.index] and (op.file, op.line, op.name) == (first.file, first.line, first.name)
                and len(op.stack) >= 2 for op in ops[:first.index])
    if not again:
        return None
    file, line, function = first.stack[1][:3]
    return file, line, function
