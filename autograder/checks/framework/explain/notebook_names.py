"""A function that reads a value the notebook bound (a demo's config, its sequence length, a tensor of an earlier
cell) where the call's own argument is meant: right on the notebook's demo, wrong on other inputs. Said only when
confirmed: the learner's function, run again on the failing calls' inputs with that one notebook name standing for
a value of the call (one of its arguments, or one of its tensors' sizes), returns the reference's result in every
failing call, and no other name or value does. The runs use a copy of the function's globals: the notebook's names
are never rebound, the inputs are fresh copies, and torch's random state is given back afterwards."""
from __future__ import annotations

import contextlib
import dataclasses
import dis
import io
import inspect
import time
import types
from typing import Any, Callable

import torch

from ..calling import guarded_call, independent_copy
from ..measure import close_to, tol_for

MAX_RUNS = 24       # runs again in all (names x values x failing calls); more: nothing is said
MAX_SECONDS = 2.0   # all the runs again together; past it nothing is said


def notebook_name_read(fn: Callable, calls: list[tuple[tuple, dict, Any]],
                       same: Callable[[Any, Any], bool] | None = None) -> dict | None:
    """{"name", "value_words", "line", "file", "function", "code"} of the one notebook name that, read in place of
    a value of the call, makes every failing call (args, kwargs, want) right; None when there is not exactly one."""
    if not calls or not inspect.isfunction(fn) or getattr(fn, "recheck_trace", None) is not None:
        return None
    if not all(_plain(v) for args, kwargs, _ in calls for v in (*args, *kwargs.values())):
        return None
    same = same or _same
    read = _globals_read(fn.__code__)
    names = [n for n in read if n in fn.__globals__ and _data(fn.__globals__[n])]
    if not names:
        return None
    tries: dict[tuple[str, str], list] = {}
    for name in names:
        attributes = _attributes_read(fn.__code__, name)
        for args, kwargs, _ in calls:
            for words, value in _stand_ins(fn, args, kwargs, name, fn.__globals__[name], attributes):
                tries.setdefault((name, words), []).append(value)
    tries = {key: values for key, values in tries.items() if len(values) == len(calls)}  # one value in each call
    if not tries or len(tries) * len(calls) > MAX_RUNS:
        return None
    state = torch.get_rng_state()
    deadline = time.perf_counter() + MAX_SECONDS
    fixes = []
    try:
        if any(_run_right(fn, {}, args, kwargs, want, same) is not False for args, kwargs, want in calls):
            return None  # as given it is right (or cannot be run) on one of them: nothing to explain
        for (name, words), values in tries.items():
            right = [_run_right(fn, {name: value}, args, kwargs, want, same)
                     for value, (args, kwargs, want) in zip(values, calls)]
            if time.perf_counter() > deadline:
                return None  # the runs left could each make it right too
            if all(r is True for r in right):
                fixes.append((name, words))
    finally:
        torch.set_rng_state(state)
    if len({name for name, _ in fixes}) != 1:
        return None  # none, or several names: which one is meant cannot be told
    name = fixes[0][0]
    words = " or ".join(words for _, words in fixes)  # one value of the call found in several places
    file, line = fn.__code__.co_filename, read[name]
    from ...trace.record import source_line  # the tracer's reading of a learner's source line
    return {"name": name, "value_words": words, "file": file, "line": line,
            "function": getattr(fn.__code__, "co_qualname", fn.__name__), "code": source_line(file, line)}


def _instructions(code: types.CodeType):
    """The bytecode of `code` and of the functions and lambdas defined in it, a code object at a time."""
    yield list(dis.get_instructions(code))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _instructions(const)


def _globals_read(code: types.CodeType) -> dict[str, int]:
    """{global name: the first line reading it} in `code` and the functions and lambdas defined in it."""
    found: dict[str, int] = {}
    for instructions in _instructions(code):
        for instruction in instructions:
            if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(instruction.argval, str):
                line = instruction.positions.lineno if instruction.positions else None
                found.setdefault(instruction.argval, line or code.co_firstlineno)
    return found


def _data(value: Any) -> bool:
    """A value a cell computed or configured (a number, a tensor, a config, a model), not code or a module."""
    return not (inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value)
                or isinstance(value, (torch.dtype, torch.device, str, type(None), bool)))


def _plain(value: Any) -> bool:
    """An argument the function can be run again on with a fresh copy: tensors, numbers, configs."""
    return isinstance(value, (torch.Tensor, int, float, bool, str, type(None), torch.dtype, torch.device)) \
        or dataclasses.is_dataclass(value) and not isinstance(value, type)


def _stand_ins(fn: Callable, args: tuple, kwargs: dict, name: str, held: Any, attributes: set[str]
               ) -> list[tuple[str, Any]]:
    """(words, value) of each value of this call that could stand where the notebook's `name` (holding `held`) is
    read: an argument of its kind; for a whole number, a size of a tensor argument; for a config, the config with
    one attribute the function reads on it set to an argument."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return []
    found = []
    for param, value in bound.arguments.items():
        if value is held:
            continue
        if _alike(value, held) and isinstance(held, torch.Tensor) and value.dtype != held.dtype:
            dtype = str(held.dtype).removeprefix("torch.")  # the notebook's tensor's dtype: bytes read as int64
            found.append((f"its argument `{param}`, as {dtype}, standing for `{name}`", value.to(held.dtype)))
        elif _alike(value, held):
            found.append((f"its argument `{param}` standing for `{name}`", value))
        if isinstance(held, int) and not isinstance(held, bool) and isinstance(value, torch.Tensor):
            found += [(f"the size of `{param}`'s axis {axis} standing for `{name}`", size)
                      for axis, size in enumerate(value.shape) if size != held]
        if dataclasses.is_dataclass(held) and not isinstance(held, type):
            for attribute in sorted(attributes):
                if _alike(value, getattr(held, attribute, None)):
                    try:
                        changed = dataclasses.replace(held, **{attribute: value})
                    except (TypeError, ValueError):
                        continue
                    found.append((f"its argument `{param}` standing for `{name}.{attribute}`", changed))
    return found


def _attributes_read(code: types.CodeType, name: str) -> set[str]:
    """The attributes `code` (and the functions defined in it) reads directly on the global `name` (name.attr)."""
    return {after.argval for instructions in _instructions(code) for before, after in zip(instructions, instructions[1:])
            if before.opname in ("LOAD_GLOBAL", "LOAD_NAME") and before.argval == name and after.opname == "LOAD_ATTR"}


def _alike(value: Any, held: Any) -> bool:
    if isinstance(held, torch.Tensor):  # the same kind of values and axes (bytes as uint8 or int64 alike)
        return isinstance(value, torch.Tensor) and value.dim() == held.dim() \
            and value.is_floating_point() == held.is_floating_point()
    if held is None or isinstance(held, bool):
        return False
    if isinstance(held, (int, float)):
        return type(value) is type(held) and value != held
    return type(value) is type(held)


def _fresh(value: Any) -> Any:
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def _run_right(fn: Callable, rebound: dict, args: tuple, kwargs: dict, want: Any, same: Callable) -> bool | None:
    """Whether fn, run with its globals' copy rebound, gives `want` (None: it raised)."""
    again = independent_copy(fn, rebound)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # a measurement: the learner's printing is not shown again
            got = guarded_call(again, tuple(_fresh(a) for a in args), {k: _fresh(v) for k, v in kwargs.items()})
    except Exception:  # noqa: BLE001: a run that raises is not a run that is right
        return None
    return bool(same(got, want))


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, torch.Tensor) and want.dim() == 0 and isinstance(got, (int, float)) \
            and not isinstance(got, bool):
        got = torch.tensor(got, dtype=want.dtype)  # a number returned (.item()), compared in the reference's dtype
    if isinstance(want, torch.Tensor):
        return isinstance(got, torch.Tensor) and got.shape == want.shape and got.dtype == want.dtype \
            and close_to(got, want, *tol_for(want.dtype))
    if isinstance(want, float):
        return isinstance(got, (int, float)) and abs(got - want) <= 1e-9 * max(1.0, abs(want))
    return type(got) is type(want) and got == want


def say_notebook_name(chk, fn: Callable, calls: list[tuple[tuple, dict, Any]],
                      same: Callable[[Any, Any], bool] | None = None) -> bool:
    """On `chk`, the notebook name `fn` reads in place of a value of the call, where notebook_name_read confirms
    one: the line reading it as the place, the cause as a likely bug. Whether it was said."""
    found = notebook_name_read(fn, calls, same)
    if found is None:
        return False
    from ...trace.explain import Located
    if chk.located is None:
        chk.located = Located(found["file"], found["line"], found["function"], found["code"], [], kind="notebook_name")
    every = "every failing call" if len(calls) > 1 else "the failing call"
    chk.diagnose(f"your {chk.fn_name} reads `{found['name']}`, a name bound in the notebook, where a value of the "
                 f"call is meant (measured: run again on {every}'s inputs with {found['value_words']}, it returns the "
                 "reference's result): use what the call passes, so that the "
                 "function gives the right result for any inputs, not only the notebook's own")
    return True


def notebook_generator_read(fn: Callable, args: tuple, kwargs: dict) -> dict | None:
    """{"name", "param", "line", "file", "function", "code"} where `fn` draws from a torch.Generator the notebook
    bound (`name`) instead of the call's generator argument (`param`): confirmed when two runs again, each with a
    copy of the call's generator standing for that name, give equal results, and a run with a generator in another
    state standing for it gives another. None otherwise. Neither the call's generator, the notebook's, torch's
    random state nor a module argument's train or eval mode is changed."""
    if not inspect.isfunction(fn) or getattr(fn, "recheck_trace", None) is not None:
        return None
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    given = [(param, value) for param, value in bound.arguments.items() if isinstance(value, torch.Generator)]
    read = _globals_read(fn.__code__)
    names = [n for n in read if isinstance(fn.__globals__.get(n), torch.Generator)]
    if len(given) != 1 or len(names) != 1:
        return None
    (param, generator), name = given[0], names[0]
    modules = [m for v in (*args, *kwargs.values()) if isinstance(v, torch.nn.Module) for m in v.modules()]
    modes = [m.training for m in modules]
    state = torch.get_rng_state()

    def drawn_with(standing: torch.Tensor):
        stand_in = torch.Generator(device=generator.device)
        stand_in.set_state(standing)
        again = independent_copy(fn, {name: stand_in})
        copies = tuple(_copy_generator(a) if a is generator else _fresh(a) for a in args)
        named = {k: _copy_generator(v) if v is generator else _fresh(v) for k, v in kwargs.items()}
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                return guarded_call(again, copies, named)
        except Exception:  # noqa: BLE001: a run that raises confirms nothing
            return None
        finally:
            for module, mode in zip(modules, modes):
                module.train(mode)

    try:
        callers = generator.get_state()
        first, second = drawn_with(callers), drawn_with(callers)
        other = torch.Generator(device=generator.device).manual_seed(int(generator.initial_seed()) + 1)
        third = drawn_with(other.get_state())
    finally:
        torch.set_rng_state(state)
    if not all(_tensors(r) for r in (first, second, third)) or not _equal(first, second) or _equal(first, third):
        return None
    file, line = fn.__code__.co_filename, read[name]
    from ...trace.record import source_line  # the tracer's reading of a learner's source line
    return {"name": name, "param": param, "file": file, "line": line,
            "function": getattr(fn.__code__, "co_qualname", fn.__name__), "code": source_line(file, line)}


def _tensors(result: Any) -> bool:
    """A tensor, or a tuple or list of tensors (get_batch's pair)."""
    return isinstance(result, torch.Tensor) or isinstance(result, (tuple, list)) and len(result) > 0 \
        and all(isinstance(t, torch.Tensor) for t in result)


def _equal(a: Any, b: Any) -> bool:
    """The same values in the same shapes: two tensors, or two tuples of tensors."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape \
            and torch.equal(a, b)
    return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))


def _copy_generator(generator: torch.Generator) -> torch.Generator:
    copy = torch.Generator(device=generator.device)
    copy.set_state(generator.get_state())
    return copy


def say_notebook_generator(chk, fn: Callable, args: tuple, kwargs: dict | None = None) -> bool:
    """On `chk`, the notebook's generator `fn` draws from in place of the call's, where notebook_generator_read
    confirms it: the line reading it as the place, the cause as a likely bug. Whether it was said."""
    found = notebook_generator_read(fn, args, kwargs or {})
    if found is None:
        return False
    from ...trace.explain import Located
    if chk.located is None:
        chk.located = Located(found["file"], found["line"], found["function"], found["code"], [], kind="notebook_name")
    chk.diagnose(f"your {chk.fn_name} draws from `{found['name']}`, a generator bound in the notebook, where the "
                 f"call's `{found['param']}` is meant (measured: run again twice with a copy of the call's generator "
                 f"standing for `{found['name']}`, both runs give the same result, and another generator's state "
                 f"gives another): draw from the `{found['param']}` the call passes")
    return True
