"""The earlier line binding a value a raising call reads, where the error shows that value.

Sizes: a call such as `w.reshape(n_heads, hd // 2, 2, d_in)` that raises with "shape '[3, 1, 2, 24]' is
invalid" shows each size it was given. Where one argument of that call is a bare name the function binds
once on an earlier line, the error's number at that argument's position is the name's value in the raising
frame, and the check calls an axis of its inputs by that name with another size (the variable certainly
does not hold that axis), the Where line names that binding (the raising line beside it) with the value
and, for a shape unpacked from a tensor (`d_in, rows = w.shape`), the axis it came from. Only when exactly
one such name is found: with two, either binding may be the one to change.

nan: a tensor the raising line reads holds nan (the error names nan) and is bound once, earlier, in the
function: that binding, with whether the tensors it reads (not bound again after it) hold nan already.

Dtypes: the error is a dtype mismatch, the raising line reads tensors of two floating dtypes, and the
names holding the dtype that the function's untouched tensor parameters do not have are each bound once,
on one or two earlier lines: those lines.

Indices: the error is about an integer dtype where floats are needed, and an integer tensor the raising
line reads was bound once, earlier, by unpacking a call that returns (values, indices) (sort, topk, max and
min along a dim, ...) at the indices' place: that binding.

Named: a tensor the raising line reads whose name and dtype the error prints: the line that made it.

Axes: a tensor the raising line indexes with more indices than it has axes, bound once, earlier: that
binding (a squeeze() there said as removing every axis of size 1).

Ranges: an integer tensor the raising line reads whose smallest and largest values the error prints
("got 13..17", "index 12 is out of bounds"), or one end of it that the error shows out of range (a negative
id, an index above every bound the error prints): its one earlier binding, or, in a `for _ in range(n)` loop
past its first pass, the binding that is a statement of the loop's own body after the raising line.
"""
from __future__ import annotations

import ast
import linecache
import re

import torch

from ...diagnosis_text import function_words
from .explain import Located, function_around, signed_numbers
from .record import source_line

# A bracketed list of integers in an error's first line: the sizes a call was given.
_SIZES = re.compile(r"\[(-?\d+(?:\s*,\s*-?\d+)*)\]")


def size_bound_before(frames: list, err: BaseException, axes: dict | None, sizes: set | None) -> Located | None:
    """The earlier line binding the one name a raising call passes as a size its error prints, or None. Only
    for a name the check calls an axis of its inputs (`axes`: name -> size, a size of this call's inputs, in
    `sizes`) whose value is another number: the name then certainly holds what that axis is not."""
    if not axes or not sizes:
        return None
    frame, file, line, body = _raising(frames)
    first = first_line_of(err)
    shown = [[int(n) for n in m.group(1).split(",")] for m in _SIZES.finditer(first)]
    if body is None or not shown:
        return None
    code = frame.f_code
    params = set(parameters(code))
    found = {}
    for call in (n for n in ast.walk(body) if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)):
        args = call.args[0].elts if len(call.args) == 1 and isinstance(call.args[0], (ast.Tuple, ast.List)) else call.args
        for printed in shown:
            matched = _passed(args, printed, frame.f_locals)
            if matched is None:
                continue
            for name, value in matched:
                if name in params:
                    continue
                if name not in axes or axes[name] not in sizes or axes[name] == value:
                    continue
                at = _bound_once(body, name)
                if at is not None and at[0] < line:
                    found[name] = (value, at, _callee(call))
    if len(found) != 1:
        return None
    ((name, (value, (at, source), callee)),) = found.items()
    origin = f" from {source}" if source else ""
    return Located(file, at, getattr(code, "co_qualname", code.co_name), source_line(file, at), [
        f"`{name}` = {value} is bound here{origin}, where the input's {name} is {axes[name]}",
        f"line {line}'s {callee} passes `{name}` where its error shows {value} ({type(err).__name__}: {first[:160]})"],
        kind="bound", also=line, also_code=source_line(file, line))


def _passed(args: list, sizes: list[int], local: dict) -> list[tuple[str, int]] | None:
    """[(name, value)] of the bare names among a call's arguments, when the call's arguments agree with the
    sizes the error printed position by position (a written number is that number, a name holds it); else
    None."""
    if len(args) != len(sizes) or any(isinstance(a, ast.Starred) for a in args):
        return None
    names = []
    for arg, size in zip(args, sizes):
        if isinstance(arg, ast.Constant):
            if type(arg.value) is not int or arg.value != size:
                return None
        elif isinstance(arg, ast.Name):
            value = local.get(arg.id)
            if type(value) is not int or value != size:
                return None
            names.append((arg.id, value))
    return names or None


def _raising(frames: list) -> tuple:
    """(frame, file, line, the function's syntax tree or None) of the innermost frame, the line that raised."""
    tb = frames[-1]
    file, line = tb.tb_frame.f_code.co_filename, tb.tb_lineno
    return tb.tb_frame, file, line, function_around(file, line)


def parameters(code) -> tuple[str, ...]:
    """The names of a code object's parameters, positional and keyword-only, in their order."""
    return code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


def first_line_of(err: BaseException) -> str:
    """The error message's first line ("" for an empty message): what it says before any hint torch appends."""
    return (str(err).strip().splitlines() or [""])[0]


def _binders(body: ast.AST, name: str) -> list[tuple[ast.AST, ast.AST]]:
    """(statement, target) of every binding of `name` in the function `body`: assignments, loops, withs, `:=`,
    comprehensions; a statement with two targets that bind it gives two."""
    hits = []
    for node in ast.walk(body):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.NamedExpr, ast.comprehension)):
            targets = [node.target]
        elif isinstance(node, ast.With):
            targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
        else:
            continue
        hits += [(node, t) for t in targets if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(t))]
    return hits


def _bound_once(body: ast.AST, name: str) -> tuple[int, str] | None:
    """(line, where the value came from, or "") of the one assignment binding `name` in the function `body`;
    None when it is bound more than once or other than by assignment (a loop, a with)."""
    hits = _binders(body, name)
    if len(hits) != 1 or not isinstance(hits[0][0], (ast.Assign, ast.AnnAssign)):
        return None
    node, target = hits[0]
    source = ""
    value = node.value
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, ast.Attribute) and value.attr in ("shape",) \
            and not any(isinstance(t, ast.Starred) for t in target.elts):
        k = next(i for i, t in enumerate(target.elts) if any(isinstance(n, ast.Name) and n.id == name
                                                             for n in ast.walk(t)))
        if isinstance(target.elts[k], ast.Name):
            source = f"{ast.unparse(value)}[{k}]"
    return node.lineno, source


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "call")


def _bindings(body: ast.AST, name: str) -> list[int]:
    """The lines of every statement binding `name` in the function `body` (assignments, loops, withs...)."""
    statements = dict.fromkeys(node for node, _ in _binders(body, name))
    return [getattr(node, "lineno", None) or getattr(node.target, "lineno", 0) for node in statements]


def _read_on(body: ast.AST, line: int) -> list[str]:
    """The names read on `line` of the function `body`, in order, once each."""
    return list(dict.fromkeys(n.id for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                              and n.lineno <= line <= (n.end_lineno or n.lineno)))


def nan_bound_before(frames: list, err: BaseException, name: str) -> Located | None:
    """The one earlier line binding `name`, a tensor holding nan that the raising line reads, or None."""
    frame, file, line, body = _raising(frames)
    code = frame.f_code
    params = set(parameters(code))
    value = frame.f_locals.get(name)
    if body is None or name in params or not isinstance(value, torch.Tensor) or not value.is_floating_point():
        return None
    at = _bindings(body, name)
    if len(at) != 1 or at[0] >= line:
        return None
    at = at[0]
    nan = int(torch.isnan(value.detach()).sum())
    if not nan:
        return None
    facts = [f"`{name}` is bound here; at line {line} it holds {nan} nan among its {value.numel()} values"]
    # Made here for sure only from values free of nan and +inf (-inf is a masked logit, by design), each read
    # as it was when this line ran: a name bound again later, or this line's own name, is not at hand.
    read = [n for n in _read_on(body, at) if isinstance(frame.f_locals.get(n), torch.Tensor)]
    if name in read or any(not all(b < at for b in _bindings(body, n)) for n in read):
        return None
    floats = {n: frame.f_locals[n].detach() for n in read if frame.f_locals[n].is_floating_point()}
    if not floats or any(bool(torch.isnan(t).any()) or bool((t == float("inf")).any()) for t in floats.values()):
        return None
    minus = {n: int((t == float("-inf")).sum()) for n, t in floats.items()}
    facts.append(f"the {', '.join(f'`{n}`' for n in floats)} it reads hold{'s' if len(floats) == 1 else ''} no nan "
                 "and no +inf" + "".join(f" (`{n}`: {k} -inf)" for n, k in minus.items() if k))
    facts.append(f"then line {line} raises ({type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:160]})")
    return Located(file, at, getattr(code, "co_qualname", code.co_name), source_line(file, at), facts, kind="bound",
                   also=line, also_code=source_line(file, line))


# An error about two floating dtypes meeting in one call.
_DTYPE_ERROR = re.compile(r"expected scalar type \w+ but found \w+|expected .*same dtype|dtype", re.IGNORECASE)


def dtype_bound_before(frames: list, err: BaseException) -> Located | None:
    """The one or two earlier lines binding the tensors of another dtype than the function's untouched tensor
    parameters' (those the raising line reads, else all of them), when the raising line reads tensors of both
    dtypes and the error is a dtype mismatch."""
    if not _DTYPE_ERROR.search(str(err)):
        return None
    frame, file, line, body = _raising(frames)
    if body is None:
        return None
    code = frame.f_code
    params = set(parameters(code))
    tensors = {n: frame.f_locals[n] for n in _read_on(body, line)
               if isinstance(frame.f_locals.get(n), torch.Tensor) and frame.f_locals[n].is_floating_point()}
    kept = {n: t for n, t in tensors.items() if n in params and not _bindings(body, n)}
    if not kept:  # the line reads only tensors the function made: its untouched parameters hold the dtype given
        kept = {n: frame.f_locals[n] for n in parameters(code)
                if isinstance(frame.f_locals.get(n), torch.Tensor) and frame.f_locals[n].is_floating_point()
                and not _bindings(body, n)}
    given = {t.dtype for t in kept.values()}
    if len(given) != 1 or len({t.dtype for t in tensors.values()}) != 2:
        return None
    (want,) = given
    other = {n: t for n, t in tensors.items() if t.dtype != want}
    at = {n: _bindings(body, n) for n in other}
    if any(len(b) != 1 or b[0] >= line for b in at.values()):
        return None
    lines = sorted({b[0] for b in at.values()})
    if len(lines) > 2:
        return None
    got = str(next(iter(other.values())).dtype).removeprefix("torch.")
    named = ", ".join(f"`{n}` (line {at[n][0]})" for n in other)
    params_said = ", ".join(f"`{n}`" for n in kept)
    first = first_line_of(err)[:160]
    return Located(file, lines[0], getattr(code, "co_qualname", code.co_name), source_line(file, lines[0]), [
        f"{named} {'is' if len(other) == 1 else 'are'} bound to {got} tensors, while {params_said}, "
        f"{'a parameter' if len(kept) == 1 else 'parameters'} the function does not rebind, "
        f"{'is' if len(kept) == 1 else 'are'} {str(want).removeprefix('torch.')}",
        f"line {line} reads both and raises ({type(err).__name__}: {first})"], kind="bound",
        also=lines[1] if len(lines) == 2 else line,
        also_code=source_line(file, lines[1] if len(lines) == 2 else line))


# An integer dtype met by an operation that needs floats ("softmax ... not implemented for 'Long'").
_INTEGER_ERROR = re.compile(r"not implemented for '(Long|Int|Short|Char|Byte)'|expected .*float.* but found "
                            r"(Long|Int)|(Long|Int) .*(float|floating)", re.IGNORECASE)
# Calls that return (values, indices) when unpacked.
_VALUES_INDICES = ("sort", "topk", "max", "min", "kthvalue", "median", "mode", "cummax", "cummin")


def _unpacked_at(body: ast.AST, name: str) -> tuple[int, str, int] | None:
    """(line, callee, place in the tuple) of the one assignment binding `name`, when it unpacks a call's result."""
    hits = _binders(body, name)
    if len(hits) != 1:
        return None
    node, target = hits[0]
    if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(target, ast.Tuple) \
            or not isinstance(node.value, ast.Call):
        return None
    place = next((i for i, t in enumerate(target.elts) if isinstance(t, ast.Name) and t.id == name), None)
    return None if place is None else (node.lineno, _callee(node.value), place)


def indices_bound_before(frames: list, err: BaseException) -> Located | None:
    """The earlier line binding an integer tensor the raising line reads to the indices of a call that returns
    (values, indices), when the error is an integer dtype where floats are needed."""
    if not _INTEGER_ERROR.search(str(err)):
        return None
    frame, file, line, body = _raising(frames)
    if body is None:
        return None
    for name in _read_on(body, line):
        value = frame.f_locals.get(name)
        if not isinstance(value, torch.Tensor) or value.is_floating_point() or value.dtype == torch.bool:
            continue
        found = _unpacked_at(body, name)
        if found is None or found[0] >= line or found[1] not in _VALUES_INDICES or found[2] != 1:
            continue
        at, callee, _ = found
        first = first_line_of(err)[:160]
        return Located(file, at, getattr(frame.f_code, "co_qualname", frame.f_code.co_name), source_line(file, at), [
            f"`{name}` is bound here to the second thing {callee} returns, its indices "
            f"({str(value.dtype).removeprefix('torch.')}): {callee} returns (values, indices)",
            f"line {line} reads it and raises ({type(err).__name__}: {first})"], kind="bound", also=line,
            also_code=source_line(file, line))
    return None


def range_bound_before(frames: list, err: BaseException) -> Located | None:
    """The line that made an integer tensor the raising line reads, whose smallest and largest values the
    error prints (positions out of range: "got 13..17"): its one binding before that line, or, inside a
    `for _ in range(n)` loop past its first pass, the binding that is a statement of the loop's own body
    after the raising line (the value the previous pass left)."""
    frame, file, line, body = _raising(frames)
    first = first_line_of(err)
    printed = set(re.findall(r"(?<!\d\.)(?<!\w)-?\d+(?!\w)(?!\.\d)", first))  # whole numbers, "13..17" too
    if body is None or not printed:
        return None
    code = frame.f_code
    params = set(parameters(code))
    found = []
    for name in _read_on(body, line):
        value = frame.f_locals.get(name)
        if name in params or not isinstance(value, torch.Tensor) or value.is_floating_point() or \
                value.dtype == torch.bool or value.numel() == 0:
            continue
        low, high = int(value.min()), int(value.max())
        if low == high:
            continue
        # Both ends printed ("got 13..17"), or one end the error shows as the value out of range: a negative id,
        # or an index above every bound it prints ("index 300 is out of bounds ... size 256").
        numbers = {int(n) for n in printed}
        out_of_range = None  # the one end the error shows, where it does not print both
        if {str(low), str(high)} <= printed:
            said = "the numbers its error prints"
        elif str(low) in printed and low < 0:
            out_of_range, said = low, f"{low}, the number its error prints, the least of them"
        elif str(high) in printed and high == max(numbers) and len(numbers) > 1:
            out_of_range, said = high, f"{high}, the number its error prints, the largest of them"
        else:
            continue
        at = _made_by(body, name, line, frame.f_locals)
        if at is None and out_of_range is not None:  # the value out of range, written in on one line
            at = _written_in(body, name, line, out_of_range)
        if at is not None:
            found.append((name, low, high, at, said))
    if len(found) != 1:
        return None
    ((name, low, high, (at, why), said),) = found
    return Located(file, at, getattr(code, "co_qualname", code.co_name), source_line(file, at), [
        f"`{name}` is bound here{why}; at line {line} it holds values {low} to {high}, {said}",
        f"then line {line} raises ({type(err).__name__}: {first[:160]})"], kind="bound",
        also=line, also_code=source_line(file, line))


def _written_in(body: ast.AST, name: str, line: int, number: int) -> tuple[int, str] | None:
    """(line, words) of the one statement before `line` that binds or writes into `name` with `number` written in
    it as a literal, when no other statement binding or writing into it before `line` has it."""
    def literal(node) -> bool:
        return any(type(value) is int and value == number for _, value in signed_numbers(node))
    writes = [node for node, _ in _binders(body, name) if getattr(node, "lineno", line) < line]
    holding = [node for node in writes if literal(getattr(node, "value", None) or node)]
    if len(holding) != 1:
        return None
    return holding[0].lineno, f" with {number} written in"


def _made_by(body: ast.AST, name: str, line: int, local: dict, made_here=None) -> tuple[int, str] | None:
    """(line, words) of the binding that gave `name` its value at `line` (see range_bound_before), or None.
    made_here(line, own): whether that binding, not a line before it, made what is wrong with the value (by
    default: it reads no tensor another line makes, _made_from_inputs)."""
    made_here = made_here or (lambda at, own: _made_from_inputs(body, at, name, local, own=own))
    at = _bindings(body, name)
    if len(at) == 1 and at[0] < line:
        return (at[0], "") if made_here(at[0], False) else None
    loops = [n for n in ast.walk(body) if isinstance(n, ast.For) and n.lineno < line <= (n.end_lineno or n.lineno)]
    if not loops:
        return None
    loop = max(loops, key=lambda n: n.lineno)
    counts = isinstance(loop.iter, ast.Call) and getattr(loop.iter.func, "id", "") == "range" and \
        len(loop.iter.args) == 1 and isinstance(loop.target, ast.Name)
    passes = local.get(loop.target.id) if counts else None
    if type(passes) is not int:
        return None
    if passes == 0:  # the loop's first pass reads the value bound before the loop, on one line
        before = [b for b in at if b < loop.lineno]
        earlier_in_loop = [b for b in at if loop.lineno < b < line]
        if len(before) == 1 and not earlier_in_loop and made_here(before[0], False):
            return before[0], f" before the loop (its first pass, `{loop.target.id}` = 0, read it)"
        return None
    own = [s.lineno for s in loop.body if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and s.lineno > line
           and any(isinstance(t, ast.Name) and t.id == name for target in (
               s.targets if isinstance(s, ast.Assign) else [s.target]) for t in ast.walk(target))]
    inside = [b for b in at if loop.lineno < b <= (loop.end_lineno or loop.lineno)]
    if len(own) != 1 or inside != own or not made_here(own[0], True):
        return None
    return own[0], f" on the loop's previous pass (`{loop.target.id}` = {passes - 1})"


def _made_from_inputs(body: ast.AST, at: int, name: str, local: dict, own: bool) -> bool:
    """Whether the value line `at` binds to `name` reads no tensor that another line of the function makes:
    only the function's parameters, sizes (`.shape`) and, in a loop (`own`), the name's own value from the
    previous pass, which the raising line read then without raising. Else an earlier line may be the one."""
    code = [n for n in ast.walk(body) if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.lineno == at]
    if len(code) != 1:
        return False
    node = code[0]
    target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(node, "target", None)
    value = node.value
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        value = next((v for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Name) and t.id == name), None)
    if value is None:
        return False
    sized = {id(n.value) for n in ast.walk(value) if isinstance(n, ast.Attribute) and n.attr == "shape"}
    for n in ast.walk(value):
        if not isinstance(n, ast.Name) or id(n) in sized or not isinstance(local.get(n.id), torch.Tensor):
            continue
        if n.id == name and own:
            continue
        if _bindings(body, n.id):
            return False
    return True


# A dtype as torch prints it in an error ("got dtype torch.float32").
_DTYPE_NAMED = re.compile(r"\btorch\.(float64|float32|float16|bfloat16|int64|int32|int16|int8|uint8|bool)\b")


def named_dtype_bound_before(frames: list, err: BaseException) -> Located | None:
    """The line that made a tensor the raising line reads, when the error names it (its name, a word of the
    error) and the dtype it holds: its one binding before that line, or the one before a loop on the loop's
    first pass (see _made_by)."""
    first = first_line_of(err)
    dtypes = set(_DTYPE_NAMED.findall(first))
    frame, file, line, body = _raising(frames)
    if body is None or len(dtypes) != 1:
        return None
    words = set(re.findall(r"[A-Za-z_]\w*", first))
    code = frame.f_code
    params = set(parameters(code))
    found = [name for name in _read_on(body, line) if name in words and name not in params
             and isinstance(frame.f_locals.get(name), torch.Tensor)
             and str(frame.f_locals[name].dtype).removeprefix("torch.") in dtypes]
    if len(found) != 1:
        return None
    name = found[0]
    dtype = frame.f_locals[name].dtype

    def gives_the_dtype(at: int, own: bool) -> bool:  # no tensor the binding reads holds that dtype already
        return not any(isinstance(frame.f_locals.get(n), torch.Tensor) and frame.f_locals[n].dtype == dtype
                       for n in _read_on(body, at) if not (own and n == name))
    at = _made_by(body, name, line, frame.f_locals, gives_the_dtype)
    if at is None:
        return None
    return Located(file, at[0], getattr(code, "co_qualname", code.co_name), source_line(file, at[0]), [
        f"`{name}` is bound here{at[1]} to a {str(dtype).removeprefix('torch.')} tensor, the name and dtype line "
        f"{line}'s error names",
        f"then line {line} raises ({type(err).__name__}: {first[:160]})"], kind="bound",
        also=line, also_code=source_line(file, line))


# An index with more entries than the tensor has axes.
_TOO_MANY_INDICES = re.compile(r"too many indices for tensor of dimension (\d+)")


def axes_bound_before(frames: list, err: BaseException) -> Located | None:
    """The earlier line that made the tensor a raising line indexes with more indices than it has axes: the one
    tensor subscripted on that line with as many axes as the error prints, bound once, before that line."""
    found = _TOO_MANY_INDICES.search(first_line_of(err))
    if found is None:
        return None
    axes = int(found.group(1))
    frame, file, line, body = _raising(frames)
    if body is None:
        return None
    indexed = dict.fromkeys(n.value.id for n in ast.walk(body) if isinstance(n, ast.Subscript)
                            and isinstance(n.value, ast.Name) and n.lineno <= line <= (n.end_lineno or n.lineno))
    held = [(name, frame.f_locals[name], _bindings(body, name)) for name in indexed
            if isinstance(frame.f_locals.get(name), torch.Tensor) and frame.f_locals[name].dim() == axes]
    if len(held) != 1 or len(held[0][2]) != 1 or held[0][2][0] >= line:
        return None
    (name, value, (at,)), = held
    code = source_line(file, at)
    squeezed = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "squeeze"
                   and not n.args and not n.keywords for node, _ in _binders(body, name) for n in ast.walk(node))
    facts = [f"`{name}` is bound here; at line {line} it has {axes} ax{'i' if axes == 1 else 'e'}s (shape "
             f"{tuple(value.shape)}), and line {line} indexes it with more ({type(err).__name__}: "
             f"{first_line_of(err)[:120]})"]
    if squeezed:
        facts.append("squeeze() without a dim removes every axis of size 1, not only the one meant (a batch of one "
                     "loses its batch axis too); squeeze(dim) removes that axis alone")
    return Located(file, at, getattr(frame.f_code, "co_qualname", frame.f_code.co_name), code, facts, kind="bound",
                   also=line, also_code=source_line(file, line))


def passed_down(frames: list, err: BaseException) -> Located | None:
    """The caller's line that handed a raising method the tensor it raised on: the method's one tensor
    parameter read at the raising line, never bound again in it, a size of which the error prints, against a
    tensor of the method's own module read on that line, another size of which the error prints (a norm whose
    gain is d_model wide handed vocab-wide logits); the learner's frame below it is the line that called it.
    The value is said as handed in there, not as made wrong: which side is wrong is not measured."""
    if len(frames) < 2:
        return None
    tb, caller = frames[-1], frames[-2]
    frame, line = tb.tb_frame, tb.tb_lineno
    code = frame.f_code
    body = function_around(code.co_filename, line)
    if body is None:
        return None
    shown = {int(n) for n in re.findall(r"\d+", first_line_of(err))}
    read = _read_on(body, line)
    held = [name for name in code.co_varnames[:code.co_argcount] if name in read and name != "self"
            and isinstance(frame.f_locals.get(name), torch.Tensor) and not _bindings(body, name)
            and any(int(s) in shown for s in frame.f_locals[name].shape)]
    if len(held) != 1:
        return None
    name, value = held[0], frame.f_locals[held[0]]
    # Only a clash with a tensor of the function's own module (its gain, its weight), read on the same line: then
    # the two sides of the error are the value handed in and the module's own, never a step of the function.
    owner = frame.f_locals.get("self")
    own = [(attr, getattr(owner, attr)) for attr in dict.fromkeys(
               n.attr for n in ast.walk(body) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
               and n.value.id == "self" and n.lineno <= line <= (n.end_lineno or n.lineno))
           if isinstance(getattr(owner, attr, None), torch.Tensor)]
    clash = [(attr, t) for attr, t in own if any(int(s) in shown and int(s) not in value.shape for s in t.shape)]
    if len(clash) != 1:
        return None
    attr, theirs = clash[0]
    file, at = caller.tb_frame.f_code.co_filename, caller.tb_lineno
    where = function_words(getattr(code, "co_qualname", code.co_name))
    return Located(file, at, getattr(caller.tb_frame.f_code, "co_qualname", caller.tb_frame.f_code.co_name),
                   source_line(file, at), [
                       f"line {line} of your {where} raises on its parameter `{name}`, a tensor of shape "
                       f"{tuple(value.shape)} handed to it by this line, against its own `{attr}` of shape "
                       f"{tuple(theirs.shape)} ({(str(err).strip().splitlines() or [''])[0]})"],
                   kind="passed")


# AttributeError: "'RMSNorm' object has no attribute 'eps'".
_NO_ATTRIBUTE = re.compile(r"'(\w+)' object has no attribute '(\w+)'")


def attribute_stored_apart(frames: list, err: BaseException) -> Located | None:
    """The line of the learner's class storing, on self, the one attribute no line of the class reads, where the
    raising line reads `self.<name>`, which no line of the class stores (an attribute renamed in __init__ only)."""
    found = _NO_ATTRIBUTE.search(first_line_of(err)) if isinstance(err, AttributeError) else None
    if found is None:
        return None
    frame, file, line, body = _raising(frames)
    instance = frame.f_locals.get("self")
    if body is None or instance is None or type(instance).__name__ != found.group(1):
        return None
    missing = found.group(2)
    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError):
        return None
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == found.group(1)
               and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if len(classes) != 1:
        return None
    on_self = [n for n in ast.walk(classes[0]) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
               and n.value.id == "self"]
    stored = {}
    for n in on_self:
        if isinstance(n.ctx, ast.Store):
            stored.setdefault(n.attr, n.lineno)
    read = {n.attr for n in on_self if isinstance(n.ctx, ast.Load)}
    reads_missing = any(n.attr == missing and n.lineno <= line <= (n.end_lineno or n.lineno) for n in on_self)
    unread = [name for name in stored if name not in read]
    if missing in stored or not reads_missing or len(unread) != 1:
        return None
    at = stored[unread[0]]
    method = function_around(file, at)
    return Located(file, at, f"{found.group(1)}.{method.name}" if method is not None else found.group(1),
                   source_line(file, at), [
                       f"`self.{unread[0]}` is stored here and no line of the class reads it; line {line} reads "
                       f"`self.{missing}`, which no line of the class stores",
                       f"then line {line} raises ({type(err).__name__}: {first_line_of(err)[:120]})"],
                   kind="attribute", also=line, also_code=source_line(file, line))


# NameError: "name 'n_tokens' is not defined" (a name no line binds, nor the notebook).
_NOT_DEFINED = re.compile(r"name '(\w+)' is not defined")


def name_bound_apart(frames: list, err: BaseException) -> Located | None:
    """The line of the raising function binding the one name no line of it reads, where the raising line reads a
    name that nothing binds (a variable renamed where it is made, not where it is used)."""
    found = _NOT_DEFINED.search(first_line_of(err)) if isinstance(err, NameError) else None
    if found is None:
        return None
    frame, file, line, body = _raising(frames)
    if body is None:
        return None
    names = [n for n in ast.walk(body) if isinstance(n, ast.Name)]
    arguments = {a.arg for a in ast.walk(body.args) if isinstance(a, ast.arg)}
    read = {n.id for n in names if isinstance(n.ctx, ast.Load)}
    bound: dict[str, int] = {}
    for n in names:
        if isinstance(n.ctx, ast.Store) and not n.id.startswith("_"):
            bound.setdefault(n.id, n.lineno)
    unread = [name for name in bound if name not in read and name not in arguments]
    if found.group(1) in bound or len(unread) != 1:
        return None
    at = bound[unread[0]]
    return Located(file, at, getattr(frame.f_code, "co_qualname", frame.f_code.co_name), source_line(file, at), [
        f"`{unread[0]}` is bound here and no line of the function reads it; line {line} reads `{found.group(1)}`, "
        "which no line of the function binds",
        f"then line {line} raises ({type(err).__name__}: {first_line_of(err)[:120]})"],
        kind="name_apart", also=line, also_code=source_line(file, line))

