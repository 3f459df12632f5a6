"""A Python number behind the first wrong value (see __init__).

The recorder follows tensors, so a number computed wrong on one line (a
group size, a scale, a start position) shows first where a torch call
reads it, a line or more later. When the located line reads a number that
an earlier line of the checked function binds, once and outside any loop,
that earlier line is named instead, but only once it is confirmed: the
learner's function, run again on the same inputs with another number bound
there (one the reference's run holds, or the reciprocal of one), returns
the reference's result, and no other number, on that line or another, does
so too. Nothing is said either when that number is already in a name no
line that ran reads (an unused parameter: the line reading the other name
may be the mistake), or when the runs cannot all be made in their time. A line the tracer shows already (the sizes of a slice
read on another line) keeps its place, and the number that makes the result
right is added to what it says. What is said is measured: the number the
line binds, and the number that makes the result right; never the names the
learner chose.
"""
from __future__ import annotations

import ast
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from ..learner_code import LearnerTimeout
from .align import tolerance_for, values_close
from .explain import Located, function_around
from .record import home_code, numbers_in, source_line, tensors_in


MAX_RUNS = 32  # runs of the learner's function with another number bound (a check waits for them); more: nothing said
MAX_SECONDS_PER_RUN = 1.0  # a function slower than this (a training loop) is not run again so many times
MAX_SECONDS = 2.0  # all the runs again together: past it (a number that makes a loop run long) nothing is said
MAX_WHOLE = 4096  # a whole number bound in place of the learner's is at most this large (sizes, counts, positions)
_TORCH_DIR = torch.__file__.rsplit("/", 1)[0]
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")


def locate_bound_number(found: Located | None, fn: Callable, reference: Callable, args: tuple, kwargs: dict | None = None,
                        *, call: Callable | None = None, copy: Callable = lambda v: v) -> Located | None:
    """The earlier line binding the number that `found`'s line reads, when
    another number bound there makes the learner's result the reference's
    (see the module docstring); None when there is none or it is not
    confirmed. call: what runs fn (a guarded wrapper); copy: fresh copies of
    the inputs for each run."""
    kwargs = kwargs or {}
    if found is None or found.kind in ("raises", "grad") or getattr(fn, "recheck_trace", None) is not None \
            or not all(_kept_apart(v) for v in (*args, *kwargs.values())):
        return None
    code = home_code(fn)[1]
    if code is None or found.file != code.co_filename:
        return None
    body = function_around(found.file, found.line)
    if body is None or body.name != code.co_name:
        return None
    bindings = _bound_once(body)
    reading = _statement_at(body, found.line)
    if reading is None or not _suspects(reading, bindings, None):
        return None  # the line reads no name bound before it: nothing to run again
    run = call or fn
    states = _random_states(args, kwargs)
    where = (reading.lineno, reading.end_lineno or reading.lineno)
    try:
        first = _learner_run(run, code, bindings, args, kwargs, copy, states, where,
                             deadline=time.perf_counter() + MAX_SECONDS_PER_RUN)
        bound = first.bound
        suspects = _suspects(reading, bindings, bound)
        if first.stopped or not suspects:
            return None
        want, numbers = _reference_run(reference, args, kwargs, copy, states)
        if _same_result(first.result, want) is not False:
            return None
        tries = [(statement, name, value) for statement, name in suspects for value in _candidates(bound[name], numbers)]
        if len(tries) > MAX_RUNS:
            return None  # that one number alone makes it right cannot be told without running them all
        fixes = []
        deadline = time.perf_counter() + MAX_SECONDS
        for statement, name, value in tries:
            again = _learner_run(run, code, bindings, args, kwargs, copy, states, where, deadline,
                                 (statement, name, value))
            if again.stopped:
                return None  # the runs left could each make it right too: that one alone does cannot be told
            if _same_result(again.result, want):
                fixes.append((statement, name, value))
    finally:
        _restore(states)
    if not fixes or len({(id(statement), name) for statement, name, _ in fixes}) != 1:
        return None  # no number makes it right, or numbers of several names do: which is wrong cannot be told
    statement, name, _ = fixes[0]
    values = [v for _, _, v in fixes]  # several for one name (a head count of 1 broadcasts as the right one does)
    unused = _unused(body, first.ran)
    if any(_alike(v, fix) for n, v in first.visible.items() if n in unused for fix in values):
        # The number that makes it right is already there, in a name no line that ran reads (a parameter, or a
        # number the function bound): the line reading the other name may be the mistake as much as the number is.
        return None
    line, end = statement.lineno, statement.end_lineno or statement.lineno
    names = _target_names(statement)
    which = (f"the {_ORDINALS[names.index(name)]} of the {len(names)} values line {line} binds"
             if len(names) > 1 and names.index(name) < len(_ORDINALS) else f"the number line {line} binds")
    shown = [_shown(v) for v in values]
    shown_values = f"{', '.join(shown[:-1])} or {shown[-1]}" if len(shown) > 1 else shown[0]
    measured = (f"with {shown_values} in place of {_shown(bound[name])}, {which}, your function returns the "
                "reference's result (measured: run again on the same inputs)")
    if any(shown is not None and line <= shown <= end for shown in (found.line, found.also)):
        found.facts.append(measured)  # the line is shown already, with what the tensors measured: the fix is added
        return found
    which = which.replace(f"line {line}", "this line")
    facts = [f"{which} is {_shown(bound[name])}" + (f", read at line {found.line}" if found.line != line else ""),
             f"with {shown_values} in its place your function returns the reference's result (measured: run again "
             "on the same inputs)"]
    facts += [f for f in found.facts if f.startswith("then line ")]  # what the call did next, as it was measured
    also = found.line if found.line != line else None
    return Located(found.file, line, found.function, source_line(found.file, line), facts, kind="number",
                   also=also, also_code=source_line(found.file, also) if also else "")


# -- the learner's function: which lines bind numbers, and running it with another ------------
def _scope_nodes(body: ast.AST):
    """The nodes of a function's own scope (not those of functions, lambdas or classes defined in it),
    with whether each sits in a loop."""
    todo = [(child, False) for child in ast.iter_child_nodes(body)]
    while todo:
        node, looped = todo.pop()
        yield node, looped
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
                             ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        inner = looped or isinstance(node, (ast.For, ast.AsyncFor, ast.While))
        todo += [(child, inner) for child in ast.iter_child_nodes(node)]


def _target_names(statement: ast.stmt) -> list[str]:
    targets = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
    return [n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)]


def _bound_once(body: ast.AST) -> dict[str, ast.stmt]:
    """{name: the assignment} for the names the function binds exactly once,
    in a plain assignment outside any loop (its parameters left out)."""
    count: dict[str, int] = {}
    plain: dict[str, ast.stmt] = {}
    for node, looped in _scope_nodes(body):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            count[node.id] = count.get(node.id, 0) + 1
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and not looped and node.value is not None:
            for name in _target_names(node):
                plain[name] = node
    parameters = {a.arg for a in ast.walk(body.args) if isinstance(a, ast.arg)}
    return {n: s for n, s in plain.items() if count.get(n) == 1 and n not in parameters}


def _statement_at(body: ast.AST, line: int) -> ast.stmt | None:
    """The innermost statement of the function holding `line`."""
    held = [n for n, _ in _scope_nodes(body) if isinstance(n, ast.stmt) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return min(held, key=lambda n: (n.end_lineno or n.lineno) - n.lineno) if held else None


def _unused(body: ast.AST, ran: set[int]) -> set[str]:
    """The parameters and names of the function that no statement of it that ran (lines `ran`) reads."""
    def statement_ran(line: int) -> bool:
        statement = _statement_at(body, line)
        return statement is not None and any(statement.lineno <= n <= (statement.end_lineno or n) for n in ran)
    read = {n.id for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and statement_ran(n.lineno)}
    stored = {n.id for n, _ in _scope_nodes(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return (stored | {a.arg for a in ast.walk(body.args) if isinstance(a, ast.arg)}) - read


def _read(statement: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _suspects(reading: ast.stmt, bindings: dict[str, ast.stmt], bound: dict | None) -> list[tuple[ast.stmt, str]]:
    """(assignment, name) for the numbers the located statement reads, and those their assignments read,
    bound before it: in the order of their lines (bound None: every such name, whatever it holds)."""
    seen: set[str] = set()
    todo = sorted(_read(reading))
    while todo:
        name = todo.pop()
        statement = bindings.get(name)
        if name in seen or statement is None or statement.lineno >= reading.lineno or \
                bound is not None and not _is_number(bound.get(name)):
            continue
        seen.add(name)
        todo += sorted(_read(statement))
    return sorted(((bindings[n], n) for n in seen), key=lambda s: (s[0].lineno, _target_names(s[0]).index(s[1])))


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class Run:
    """What one run of the learner's function gave: its result (None when it
    raised, or when its code ran more than once: recursion), the number each
    once-bound name was bound to, the numbers its names held when the located
    statement first ran, and the lines that ran."""
    result: Any = None
    bound: dict = field(default_factory=dict)
    visible: dict = field(default_factory=dict)
    ran: set = field(default_factory=set)
    stopped: bool = False  # stopped at its deadline, or by the checks' time limit for one call


class _OutOfTime(BaseException):
    """Raised in the learner's frame at its deadline (a BaseException, so the learner's `except Exception`
    lets it through)."""


def _learner_run(run: Callable, code, bindings: dict[str, ast.stmt], args: tuple, kwargs: dict, copy: Callable,
                 states: list, reading: tuple[int, int], deadline: float, replace: tuple | None = None) -> Run:
    """One run of the learner's function (see Run), with `replace` =
    (assignment, name, number): that name bound to that number right after
    the assignment runs."""
    spans = [(s.lineno, s.end_lineno or s.lineno, s) for s in bindings.values()]
    seen = Run()
    bound, ran, visible = seen.bound, seen.ran, seen.visible
    frames: list = []
    last: list = [None]

    def local(frame, event, arg):
        if event == "line" and time.perf_counter() > deadline:
            raise _OutOfTime
        if event in ("line", "return"):
            # Read once: each read of f_locals refreshes it from the frame, which would undo a number written in.
            names = frame.f_locals
            before = last[0]
            if before is not None and not (before[0] <= frame.f_lineno <= before[1]) or event == "return" and before:
                statement = before[2]
                for name in _target_names(statement):
                    if bindings.get(name) is statement and name in names:
                        bound[name] = names[name]
                if replace is not None and replace[0] is statement:
                    names[replace[1]] = replace[2]  # written back into the frame as the hook returns
            ran.add(frame.f_lineno)
            if event == "line" and not visible and reading[0] <= frame.f_lineno <= reading[1]:
                visible.update((k, v) for k, v in names.items() if _is_number(v))
            last[0] = next((span for span in spans if span[0] <= frame.f_lineno <= span[1]), None) \
                if event == "line" else None
        return local

    def calls(frame, event, arg):
        if event == "call" and frame.f_code is code:
            frames.append(1)
            return local
        return None
    _set_random(states)
    previous = sys.gettrace()
    sys.settrace(calls)
    result = None
    try:
        result = run(*copy(args), **copy(kwargs))
    except (_OutOfTime, LearnerTimeout):
        seen.stopped = True
    except Exception:  # noqa: BLE001: a run that raises is a run whose result is not the reference's
        pass
    finally:
        sys.settrace(previous)
    seen.result = result if len(frames) == 1 else None
    return seen


# -- the reference: its result, and the numbers its run holds ---------------------------------------
class _Scalars(TorchFunctionMode):
    """Collects the Python numbers passed to torch calls (a divisor, a fill, sizes)."""

    def __init__(self, found: list):
        super().__init__()
        self.found = found

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for value in (*args, *kwargs.values()):
            if isinstance(value, (tuple, list)) and len(value) <= 8:
                self.found += [v for v in value if _is_number(v)]
            elif _is_number(value):
                self.found.append(value)
        return func(*args, **kwargs)


def _reference_run(reference: Callable, args: tuple, kwargs: dict, copy: Callable, states: list) -> tuple[Any, list]:
    """(the reference's result, the numbers its run holds: those its own
    frames bind, those it passes to torch calls, those it returns)."""
    found: list = []
    seen: dict[int, dict] = {}

    def local(frame, event, arg):
        if event in ("line", "return"):
            before = seen.get(id(frame), {})
            now = dict(frame.f_locals)
            found.extend(v for k, v in now.items() if before.get(k, k) is not v and _is_number(v))
            seen[id(frame)] = now
        return local

    def calls(frame, event, arg):
        if event == "call" and not frame.f_code.co_filename.startswith(_TORCH_DIR) and len(found) < 2000:
            return local
        return None
    _set_random(states)
    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        with _Scalars(found):
            result = reference(*copy(args), **copy(kwargs))
    finally:
        sys.settrace(previous)
    return result, found + [n for n in numbers_in(result) if _is_number(n)]


def _candidates(mine, numbers: list) -> list:
    """The numbers to bind in place of the learner's `mine`: the reference's of the same kind (whole numbers
    for an int), and for a float their reciprocals too (a scale where the reference divides), each once."""
    if isinstance(mine, int):
        wanted = [int(n) for n in numbers if float(n).is_integer() and abs(n) <= MAX_WHOLE]
    else:
        wanted = [float(n) for n in numbers] + [1.0 / n for n in numbers if n]
    kept: list = []
    for n in wanted:
        if not _alike(n, mine) and not any(_alike(n, k) for k in kept):
            kept.append(n)
    return kept


def _alike(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _same_result(got, want) -> bool | None:
    """Whether the learner's result equals the reference's (its tensors, or its numbers); None when there
    is nothing to compare."""
    mine, theirs = tensors_in(got), tensors_in(want)
    if theirs:
        return len(mine) == len(theirs) and all(
            tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype
            and values_close(a.detach().cpu().double(), b.detach().cpu().double(), tolerance_for(b.dtype))
            for a, b in zip(mine, theirs))
    a, b = numbers_in(got), numbers_in(want)
    if not b:
        return None
    return len(a) == len(b) and all(_alike(x, y) for x, y in zip(a, b))


def _shown(n) -> str:
    return str(n) if isinstance(n, int) else f"{n:.6g}"


def _kept_apart(value, depth: int = 0) -> bool:
    """Whether each run gets its own copy of `value`, or one nothing it does changes for the next: tensors (copied
    for each run), numbers, strings, generators (their state set before each run) and modules; not an object
    such as a cache, which a run may grow for every later run and for the check after it."""
    if isinstance(value, (torch.Tensor, int, float, str, bytes, type(None), torch.Generator, torch.nn.Module,
                          torch.dtype, torch.device)):
        return True
    if isinstance(value, (tuple, list)) and depth < 3:
        return all(_kept_apart(v, depth + 1) for v in value)
    if isinstance(value, dict) and depth < 3:
        return all(_kept_apart(v, depth + 1) for v in value.values())
    return False


# -- the same random draws in every run -----------------------------------------------------------
def _random_states(args: tuple, kwargs: dict) -> list:
    """(generator, its state) for torch's default generator and those among the inputs."""
    generators = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Generator)]
    return [(None, torch.get_rng_state())] + [(g, g.get_state()) for g in generators]


def _set_random(states: list) -> None:
    for generator, state in states:
        if generator is None:
            torch.set_rng_state(state)
        else:
            generator.set_state(state)


_restore = _set_random  # the check goes on from the states it had
