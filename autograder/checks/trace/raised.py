"""Where a call that raised went wrong: the learner's line before a raise
that made the value the raising line reads (locate_raise, locate_error), the
values the raising line read (values_at_raise)."""
from __future__ import annotations

import ast
import linecache
import re

import torch

from ..learner_code import is_learners_file, walk_traceback
from .align import one_axis_apart, owner_value, path_between, same_kind, Analysis
from .blame import CASTS, blame_of
from .explain import (Located, SIZED_OPS, describe_value, function_around, signed_numbers, sizes_bound_at,
                      true_division_read, blamed_lines, place)
from .kinds import input_owners, one_line_kind
from .sizes import sizes_differ
from .record import source_line, Op, Trace
from .bound import (attribute_stored_apart, axes_bound_before, dtype_bound_before, first_line_of, indices_bound_before,
                    name_bound_apart, named_dtype_bound_before, nan_bound_before, parameters, passed_down,
                    range_bound_before, size_bound_before)


def locate_raise(learner: Trace, reference: Trace | None = None) -> Located | None:
    """Where the traced call raised: with the reference's trace on the same
    inputs, the first wrong value the raising call depends on (a wrong
    value, or the reference's numbers in another shape) when there is one;
    else the error's own frames, or, for a trace made in the grader's jailed
    process, the place it sent."""
    if learner.error is None:
        return None
    if reference is not None:
        try:
            before = _before_raise(learner, reference)
        except Exception:  # noqa: BLE001: the tracer's own failure only costs the place
            before = None
        if before is not None:
            return before
    found = locate_error(learner.error)
    if found is not None and found.kind == "raises":
        try:  # the earlier line binding the value the raising line reads, where the error shows it
            found = values_at_raise(learner.error)[1] or found
        except Exception:  # noqa: BLE001: the tracer's own failure only costs the place
            pass
    if found is None and learner.raised is not None:
        file, line, function = learner.raised
        kind = str(learner.error) if type(learner.error) is Exception else type(learner.error).__name__  # a sent type name
        found = Located(file, line, function, source_line(file, line), [kind], kind="raises")
    return found


def _before_raise(learner: Trace, reference: Trace) -> Located | None:
    """The place of the first wrong value the call that raised reads, or of
    a value it reads whose numbers are the reference's in another shape."""
    if learner.truncated or reference.truncated or reference.error is not None:
        return None
    if learner.failed is None:
        return _before_a_check(learner, reference)
    failed = learner.ops[learner.failed]
    raises = f"then line {failed.line} raises ({_error_line(learner.error)})"
    if isinstance(learner.error, TypeError) and "float" in str(learner.error) and "int" in str(learner.error):
        division = true_division_read(failed.file, failed.line)
        if division is not None:  # a count made a float by `/`: the number is wrong, not a tensor
            name, bound = division
            return Located(failed.file, bound, failed.function, source_line(failed.file, bound), [
                f"line {failed.line} passes {name}, a float made by the true division `/` on line {bound}, where a "
                f"count (sizes, repeats) must be an int: `//` divides to an int", raises], kind="sizes",
                also=failed.line, also_code=source_line(failed.file, failed.line))
    reads = [j for j in failed.inputs if j >= 0]
    if not reads:
        return None
    seen = Analysis(learner, reference)
    frontier = seen.frontier(reads)
    if frontier:
        found = place(seen, frontier)
        if found is not None and found.line != failed.line:
            found.facts.append(raises)
        return found
    if failed.name in _STRIDED_VIEWS and _STRIDE_ERROR in str(learner.error):
        # No wrong value before it: the values are right, their memory layout is one a view cannot merge, and
        # the call that asks for a view is the one to change.
        j = reads[0]
        return Located(failed.file, failed.line, failed.function, source_line(failed.file, failed.line),
                       [f"it reads the value {learner.ops[j].name} makes on line {learner.ops[j].line}, of shape "
                        f"{tuple(failed.input_shapes[0]) if failed.input_shapes else '?'}, and raises "
                        f"({_error_line(learner.error)})"], kind="view")
    shapes = {tuple(t.shape) for op in reference.ops for t in op.outputs} | {tuple(t.shape) for t in reference.inputs}
    # An index out of bounds raises on the index's numbers in any shape: a value read in a shape of its own is
    # then no account of the error (gather's (B, T, 1) index holding the padding's -100).
    in_shape = not _INDEX_VALUE_ERROR.search(str(learner.error))
    for j, slot in zip(failed.inputs, failed.slots or [0] * len(failed.inputs)) if in_shape else []:
        if j < 0 or slot >= len(learner.ops[j].outputs) or not seen.found[j][slot]:
            continue
        value = learner.ops[j].outputs[slot]
        owners = seen.found[j][slot]
        theirs = [owner_value(reference, o) for o in owners]
        theirs = [t for t in theirs if t is not None]
        if failed.name in _GROWING and any(_unit_axis_added(value.shape, t.shape) for t in theirs):
            continue  # a size-1 axis inserted for an expand to grow is what the expand reads: its sizes are not here
        if theirs and all(tuple(t.shape) != tuple(value.shape) for t in theirs) and \
                (tuple(value.shape) not in shapes or any(one_axis_apart(value.shape, t.shape) for t in theirs)):
            op = learner.ops[j]
            while op.inputs and op.inputs[0] >= 0 and seen.found[op.inputs[0]] and (
                    len(op.inputs) == 1 and op.input_shapes and tuple(op.input_shapes[0]) == tuple(value.shape)
                    or _reshaped_input(learner, seen, reference, op)):
                op = learner.ops[op.inputs[0]]  # back to the call that gave the value this shape (~, .to, clone...)
            if op is not learner.ops[j] and op.outputs and seen.found[op.index] and seen.found[op.index][0]:
                value = op.outputs[0]
                theirs = [t for t in (owner_value(reference, o) for o in seen.found[op.index][0]) if t is not None]
            return Located(op.file, op.line, op.function, source_line(op.file, op.line),
                           [f"yours: {op.name} gives {describe_value(value)}",
                            f"the reference has these numbers in shape {tuple(theirs[0].shape)}", raises], kind="shape")
    return (_bounds_before_raise(learner, reference, seen, failed, raises)
            or _cast_before_raise(learner, reference, seen, failed, raises))


# Calls that grow size-1 axes: the value they read has such axes by design.
_GROWING = {"expand", "expand_as", "broadcast_to"}


def _unit_axis_added(shape, theirs) -> bool:
    """shape is `theirs` with one size-1 axis inserted."""
    shape, theirs = tuple(shape), tuple(theirs)
    return len(shape) == len(theirs) + 1 and any(shape[i] == 1 and shape[:i] + shape[i + 1:] == theirs
                                                  for i in range(len(shape)))


def _before_a_check(learner: Trace, reference: Trace) -> Located | None:
    """A raise outside any traced call (a library's own check of its
    arguments, such as a model refusing float ids): the one place the values
    made before it first go wrong, when there is one."""
    if not learner.ops or learner.error is None:
        return None
    seen = Analysis(learner, reference)
    frontier = seen.frontier(list(range(len(learner.ops))))
    found = place(seen, frontier) if frontier else None
    if found is not None:
        where = locate_error(learner.error)
        found.facts.append(f"then line {where.line if where else '?'} raises ({_error_line(learner.error)})")
    return found


def _reshaped_input(learner: Trace, seen: "Analysis", reference: Trace, op: Op) -> bool:
    """op's first input already has the reference's numbers one size-1 axis
    apart from the reference's shape: the axis was kept (or lost) earlier."""
    j = op.inputs[0]
    slot = (op.slots or [0])[0]
    if slot >= len(learner.ops[j].outputs) or slot >= len(seen.found[j]):
        return False
    value = learner.ops[j].outputs[slot]
    theirs = [t for t in (owner_value(reference, o) for o in seen.found[j][slot]) if t is not None]
    return bool(theirs) and all(one_axis_apart(value.shape, t.shape) for t in theirs)


# Calls that return a view of their input's memory and raise when its strides cannot express the new shape.
_STRIDED_VIEWS = {"view", "view_as"}


_INDEX_VALUE_ERROR = re.compile(r"index -?\d+ is out of bounds|index out of range")


_STRIDE_ERROR = "view size is not compatible with input tensor's size and stride"


def _bounds_before_raise(learner: Trace, reference: Trace, seen: "Analysis", failed: Op, raises: str) -> Located | None:
    """The call that raised reads a value made by a slice, reshape or view
    that the reference makes too, from the same value, with other bounds or
    sizes, on the way to what its own call of that kind reads (a table
    sliced to every row where the reference takes the sequence's): that
    call's line, what each side was given, and the line that bound the
    sizes it read."""
    blame = blame_of(failed, learner.ops, seen.found, reference, seen.given)
    if blame is None or blame[2] is None:
        return None
    counterpart = blame[2]
    theirs_slots = counterpart.slots or [0] * len(counterpart.inputs)
    for k, j in enumerate(failed.inputs[:len(counterpart.inputs)]):
        while j >= 0 and learner.ops[j].name in CASTS | {"contiguous", "clone", "detach"} and learner.ops[j].inputs:
            j = learner.ops[j].inputs[0]    # back through casts and copies to the call that set the shape
        if j < 0 or learner.ops[j].name not in SIZED_OPS or not learner.ops[j].outputs:
            continue
        mine = learner.ops[j]
        wanted = (counterpart.inputs[k], theirs_slots[k])
        owned = input_owners(mine, learner.ops, seen.found, seen.given)
        for ref_op in reference.ops:
            if not same_kind(mine, ref_op) or len(ref_op.inputs) != len(mine.inputs) or not ref_op.outputs or \
                    tuple(ref_op.outputs[0].shape) == tuple(mine.outputs[0].shape) or \
                    path_between(reference, wanted, (ref_op.index, 0)) is None:
                continue
            ref_slots = ref_op.slots or [0] * len(ref_op.inputs)
            if not all((i, s) in owners for i, s, owners in zip(ref_op.inputs, ref_slots, owned)):
                continue
            sizes = sizes_differ(mine, ref_op, learner.ops)
            if sizes is None:
                continue
            bound = None if mine.inside else sizes_bound_at(mine.file, mine.line, mine.name)
            if bound == "elsewhere":
                return None  # the sizes come from names bound on several lines: any of them may be wrong
            second = bound if isinstance(bound, int) and bound != mine.line else None
            return Located(mine.file, mine.line, mine.function, source_line(mine.file, mine.line),
                           [sizes, raises], kind="sizes" if second else "value", also=second,
                           also_code=source_line(mine.file, second) if second else "")
    return None


def _cast_before_raise(learner: Trace, reference: Trace, seen: "Analysis", failed: Op, raises: str) -> Located | None:
    """The call that raised reads a value the reference's call of its kind
    reads only after a cast (an int64 one-hot met by float weights): the
    line that made it, and the dtype the reference casts it to."""
    blame = blame_of(failed, learner.ops, seen.found, reference, seen.given)
    if blame is None or blame[3] not in ("layout", "missing", "cast") or blame[2] is None or blame[0].index not in failed.inputs:
        return None
    blamed, _, counterpart, _ = blame
    k = failed.inputs.index(blamed.index)
    slot = (failed.slots or [0] * len(failed.inputs))[k]
    wanted = (counterpart.inputs[k], (counterpart.slots or [0] * len(counterpart.inputs))[k])
    for owner in seen.found[blamed.index][slot] if slot < len(seen.found[blamed.index]) else []:
        path = path_between(reference, wanted, owner)
        if path and all(reference.ops[i].name in CASTS for i in path) and reference.ops[path[0]].outputs:
            got, want = blamed.outputs[slot].dtype, reference.ops[path[0]].outputs[0].dtype
            (file, line, function), second = blamed_lines(blamed, failed)
            return Located(file, line, function, source_line(file, line), [
                f"yours: {blamed.name} gives {describe_value(blamed.outputs[slot])}",
                f"the reference's {counterpart.name} reads this value cast to {str(want).removeprefix('torch.')}, yours "
                f"reads it as {str(got).removeprefix('torch.')}", raises], kind=one_line_kind("cast", failed, file, line),
                also=second,
                also_code=source_line(file, second) if second else "")
    return None


def _error_line(err: BaseException | None) -> str:
    first = first_line_of(err)[:160] if err is not None else ""
    return f"{type(err).__name__}: {first}" if err is not None else ""


def locate_error(err: BaseException | None) -> Located | None:
    """The learner's line an error was raised at (its innermost frame there)."""
    if err is None:
        return None
    frames = [t for t in walk_traceback(err.__traceback__) if is_learners_file(t.tb_frame.f_code.co_filename)]
    if not frames:
        return None
    crossed = _crossed_arguments(frames, err)
    if crossed is not None:
        return crossed
    tb = frames[-1]
    code = tb.tb_frame.f_code
    first = first_line_of(err)[:200]
    numbers = _out_of_range_literals(code.co_filename, tb.tb_lineno, str(err))
    return Located(code.co_filename, tb.tb_lineno, getattr(code, "co_qualname", code.co_name),
                   source_line(code.co_filename, tb.tb_lineno), [f"{type(err).__name__}: {first}", *numbers],
                   kind="raises")


def values_at_raise(err: BaseException | None, axes: dict | None = None,
                    sizes: set | None = None) -> tuple[list[str], Located | None]:
    """What the learner's line that raised was reading, measured in its
    frame: a name holding a value of a type the error names (a tuple, a
    module class's instance), with the line that bound it; a tensor of
    log-probabilities, or one holding inf or nan. ([facts], the binding's
    place or None)."""
    if err is None:
        return [], None
    frames = [t for t in walk_traceback(err.__traceback__) if is_learners_file(t.tb_frame.f_code.co_filename)]
    if not frames:
        return [], None
    tb = frames[-1]
    frame, file, line = tb.tb_frame, tb.tb_frame.f_code.co_filename, tb.tb_lineno
    body = function_around(file, line)
    if body is None:
        return [], None
    names = list(dict.fromkeys(n.id for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                               and n.lineno <= line <= (n.end_lineno or n.lineno)))
    text = str(err)
    facts, place = [], None
    for name in names:
        if name not in frame.f_locals:
            continue
        value = frame.f_locals[name]
        if isinstance(value, torch.Tensor):
            fact = _tensor_at_raise(name, value, "inf" in text or "nan" in text, _parameter_holding(frame, name, value))
            if fact:
                facts.append(fact)
                if place is None and "nan" in fact:
                    place = nan_bound_before(frames, err, name)
            continue
        kind = type(value).__name__
        qualified = f"{type(value).__module__}.{kind}"  # torch.return_types.min, as an error names it
        if isinstance(value, (bool, int, float, str, type(None))) or not re.search(
                rf"'(?:{re.escape(kind)}|{re.escape(qualified)})'", text):
            continue
        facts.append(f"at the line that raised, `{name}` is {_short(value)}")
        if place is None:
            place = _binding_of(frames, name, value)
    if place is None:
        place = size_bound_before(frames, err, axes, sizes) or dtype_bound_before(frames, err) or \
            indices_bound_before(frames, err) or range_bound_before(frames, err) or axes_bound_before(frames, err) or \
            named_dtype_bound_before(frames, err) or passed_down(frames, err) or attribute_stored_apart(frames, err) \
            or name_bound_apart(frames, err)
    return facts, place


# A Python number that a tensor of this dtype cannot hold ("value cannot be converted to type c10::Half without
# overflow"): torch's names of the low-precision dtypes in that error.
_OVERFLOWING_NUMBER = re.compile(r"cannot be converted to type (?:c10::|at::)?(Half|BFloat16) without overflow")
_DTYPE_OF = {"Half": torch.float16, "BFloat16": torch.bfloat16}


def _out_of_range_literals(file: str, line: int, text: str) -> list[str]:
    """The numbers written on the raising line that lie outside the range of the dtype its overflow error names
    (the source is read only for that error)."""
    found = _OVERFLOWING_NUMBER.search(text)
    body = function_around(file, line) if found is not None else None
    if body is None:
        return []
    dtype = _DTYPE_OF[found.group(1)]
    largest = torch.finfo(dtype).max
    numbers = []
    for node, value in signed_numbers(body):
        if node.lineno <= line <= (node.end_lineno or node.lineno) and abs(value) > largest and value not in numbers:
            numbers.append(value)
    if len(numbers) != 1:
        return []
    name = str(dtype).removeprefix("torch.")
    shown = f"{numbers[0]:g}".replace("e+", "e")  # -1e10 as written, not -1e+10
    return [f"{shown}, written on this line, lies outside {name}'s range (its largest finite value is "
            f"{largest:g}), so a {name} tensor cannot hold it; float('-inf'), or torch.finfo(dtype).min, is held by "
            "every floating dtype"]


def _parameter_holding(frame, name: str, value: torch.Tensor) -> str | None:
    """The raising function's tensor parameter, other than `name`, whose values `value` holds unchanged."""
    for param in parameters(frame.f_code):
        held = frame.f_locals.get(param)
        if param != name and isinstance(held, torch.Tensor) and held.shape == value.shape \
                and held.dtype == value.dtype and torch.equal(held.detach(), value.detach()):
            return param
    return None


def _tensor_at_raise(name: str, value: torch.Tensor, error_names_inf: bool, handed: str | None = None) -> str | None:
    """A tensor the raising line read, when it is notable: nan (never meant), inf where the error speaks of
    inf or nan (masked scores hold -inf by design), or log-probabilities (handed: the parameter whose values
    it holds unchanged, whose values these inputs make log-probabilities too)."""
    if not value.is_floating_point() or value.numel() == 0:
        return None
    v = value.detach().double()
    nan, inf = int(torch.isnan(v).sum()), int(torch.isinf(v).sum())
    if nan or (inf and error_names_inf):
        what = " and ".join(f"{n} {kind}" for n, kind in ((nan, "nan"), (inf, "inf")) if n)
        return f"at the line that raised, `{name}` holds {what} among its {v.numel()} values"
    if v.dim() and float(v.max()) <= 0 and torch.allclose(v.exp().sum(-1), torch.ones(()).double(), atol=1e-4):
        if handed:  # the check's own inputs happen to be normalised: the values are the parameter's, as handed in
            return (f"at the line that raised, `{name}` holds the values of the parameter `{handed}` as handed in, "
                    "unchanged (on these inputs they are log-probabilities too: every value <= 0, and their exp sums "
                    f"to 1 along the last axis): probabilities come from `{handed}` by a softmax")
        return (f"at the line that raised, `{name}` holds log-probabilities (every value <= 0, and their exp sums to 1 "
                f"along the last axis): exp() of them are the probabilities")
    return None


def _binding_of(frames: list, name: str, value) -> Located | None:
    """The line that gave `name` its value: its one binding earlier in the
    same function, or, for a parameter, the caller's argument when that is
    an attribute `self.X` set once in the caller's source (`self.eps = eps,`)."""
    tb = frames[-1]
    file, line = tb.tb_frame.f_code.co_filename, tb.tb_lineno
    body = function_around(file, line)
    bindings = [node.lineno for node in ast.walk(body) if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                and any(isinstance(t, ast.Name) and t.id == name for n in (
                    node.targets if isinstance(node, ast.Assign) else [node.target]) for t in ast.walk(n))] if body else []
    if len(bindings) == 1 and bindings[0] < line:
        at = bindings[0]
        return Located(file, at, tb.tb_frame.f_code.co_name, source_line(file, at),
                       [f"`{name}` is bound here, to {_short(value)}"], kind="bound")
    code = tb.tb_frame.f_code
    params = list(parameters(code))
    if name not in params or len(frames) < 2:
        return None
    caller = frames[-2]
    c_file, c_line = caller.tb_frame.f_code.co_filename, caller.tb_lineno
    c_body = function_around(c_file, c_line)
    attrs = {n.attr for n in ast.walk(c_body) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
             and n.value.id == "self" and n.lineno <= c_line <= (n.end_lineno or n.lineno)} if c_body else set()
    try:
        tree = ast.parse("".join(linecache.getlines(c_file)))
    except (SyntaxError, ValueError):
        return None
    for attr in attrs:
        if caller.tb_frame.f_locals.get("self") is None or getattr(caller.tb_frame.f_locals["self"], attr, None) is not value:
            continue
        sets = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name) and t.value.id == "self"
            for t in n.targets)]
        if len(sets) == 1:
            at = sets[0].lineno
            return Located(c_file, at, "", source_line(c_file, at),
                           [f"`self.{attr}`, passed as `{name}` at line {c_line}, is set here to "
                            f"{_short(value)}"], kind="bound")
    return None


def _crossed_arguments(frames: list, err: BaseException) -> Located | None:
    """A call of the learner's own function, on the way to the error, that
    passes by position a name of the callee's parameters to another of its
    parameters (`attn(x, cos, sin, layer_idx, cache)` into
    forward(self, x, cos, sin, cache, layer_idx)): the calling line, and what
    each parameter received."""
    for caller, callee in zip(frames, frames[1:]):
        code = callee.tb_frame.f_code
        params = list(code.co_varnames[:code.co_argcount])
        file, line = caller.tb_frame.f_code.co_filename, caller.tb_lineno
        body = function_around(file, line)
        if body is None or not params:
            continue
        calls = [n for n in ast.walk(body) if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)
                 and not any(isinstance(a, ast.Starred) for a in n.args)]
        for call in calls:
            name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
            bound = params[1:] if params[0] == "self" else params
            if name != code.co_name and code.co_name != "forward" or len(call.args) > len(bound):
                continue
            crossed = [(a.id, p) for a, p in zip(call.args, bound)
                       if isinstance(a, ast.Name) and a.id != p and a.id in bound]
            if not crossed:
                continue
            received = callee.tb_frame.f_locals
            said = ", ".join(f"`{given}` lands in `{param}`" + (f" (= {_short(received[param])})" if param in received
                                                                 else "") for given, param in crossed)
            owner = getattr(code, "co_qualname", code.co_name)
            return Located(file, line, getattr(caller.tb_frame.f_code, "co_qualname", caller.tb_frame.f_code.co_name),
                           source_line(file, line),
                           [f"{said}: positional arguments bind in the order of {owner}({', '.join(params)}); "
                            f"pass them in that order or by keyword", f"then it raises ({_error_line(err)})"],
                           kind="order")
    return None


def _short(value) -> str:
    """A value in a few words: a tensor's shape, a number or a short container's repr, an object's class."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (int, float, str, bool, type(None))):
        return repr(value)[:40]
    if isinstance(value, (tuple, list)) and all(isinstance(v, (int, float, str, bool, type(None))) for v in value):
        return f"the {type(value).__name__} {repr(value)[:40]}"
    kind = type(value).__name__
    if type(value).__module__ == "torch.return_types":  # what max, min, topk, sort, ... return when given a dim
        return (f"the pair (values, indices) that torch's {kind} returns (a torch.return_types.{kind}), not a "
                "tensor: its .values is the tensor of values")
    return f"an instance of {kind} ({'an nn.Module' if isinstance(value, torch.nn.Module) else 'not a tensor'})"
