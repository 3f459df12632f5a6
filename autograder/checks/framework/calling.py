"""Calling the learner's code: what a check hands it and what it must give
back. A call runs under a time limit with its printing capped
(guarded_call); the tensors it writes into are given back from copies the
learner never sees, never overwriting what it returned
(call_giving_inputs_back, measuring_call); torch's process-wide settings and
the modules' flags it leaves changed are measured and restored
(given_back); and an answer may not hand its exercise to tinylm's own
version (refuse_delegation)."""
from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import io
import sys
import types
from typing import Any, Callable, Mapping

import torch

from ..learner_code import LearnerTimeout
from .failure import Delegation


# Seconds one call of the learner's function may take in a check (its inputs
# are tiny: a call this long is an endless loop). None: no limit (the
# grader's trusted recheck, whose calls run in another process with their
# own limits). The limit needs SIGALRM and the main thread; elsewhere none.
CALL_TIME_LIMIT: float | None = 30.0


# Characters of the learner's own printing shown per call; the rest is counted.
PRINT_LIMIT = 4000


class _CappedOutput(io.TextIOBase):
    """Passes the first PRINT_LIMIT characters through, counts the rest."""

    def __init__(self, target):
        self.target, self.shown, self.dropped = target, 0, 0

    def write(self, text: str) -> int:
        room = max(PRINT_LIMIT - self.shown, 0)
        if room:
            self.target.write(text[:room])
            self.shown += min(room, len(text))
        self.dropped += max(len(text) - room, 0)
        return len(text)

    def flush(self) -> None:
        pass  # the real stream flushes on its own schedule (a notebook's would split the cell's output otherwise)


def torch_settings() -> dict[str, Any]:
    """torch's process-wide settings that every later line of a notebook runs under."""
    return {"grad mode": torch.is_grad_enabled(), "default dtype": torch.get_default_dtype(),
            "default device": torch.get_default_device()}


def _set_default_device(device: torch.device) -> None:
    torch.set_default_device(None if device.type == "cpu" else device)  # None: no device mode left installed


_SETTERS = {"grad mode": torch.set_grad_enabled, "default dtype": torch.set_default_dtype,
            "default device": _set_default_device}


@contextlib.contextmanager
def torch_settings_kept():
    """torch_settings() given back as they were, whatever the block did to them."""
    before = torch_settings()
    try:
        yield
    finally:
        for setting, value in before.items():
            _SETTERS[setting](value)


def _short(value: Any) -> str:
    return str(value).removeprefix("torch.")


# How a function uses gradients, as its exercise's contract says (Check.gradients): the grad-mode fix it is
# told depends on it. CALLERS: it leaves grad mode to its caller (a forward pass, a loss); WITHOUT: it computes
# without gradients whatever the caller trains (decoding, an evaluation); NEEDS: it needs them (a training step).
CALLERS, WITHOUT, NEEDS = "caller's", "without", "needs"


def _grad_mode_fix(fn_name: str, before: bool, gradients: str) -> str:
    """The fix for a call that left grad mode switched, for the entry state
    it was measured from (`before`) and how the function uses gradients:
    a block that gives the caller's mode back when it ends, never a switch."""
    if before:  # switched off: whatever the function is, the part without gradients goes in a block
        return "put what must run without gradients in a `with torch.no_grad():` block, which gives the mode back when it ends"
    if gradients == WITHOUT:
        return (f"{fn_name} computes without gradients: run its work in a `with torch.no_grad():` block and switch "
                "nothing by hand; the block gives the caller back the mode it had when it ends (off here, on for a "
                "caller that trains)")
    if gradients == NEEDS:
        return ("put what needs gradients in a `with torch.enable_grad():` block, which gives the caller back the mode "
                "it had when it ends")
    return ("grad mode is the caller's: switch nothing by hand (a part that must run without gradients goes in a "
            "`with torch.no_grad():` block, which gives the mode back when it ends)")


def _setting_left(fn_name: str, setting: str, before: Any, after: Any, gradients: str = CALLERS) -> str:
    """What a call that changed one of torch_settings() did, and the fix."""
    if setting == "grad mode":
        state = "off" if before else "on where the caller had it off"
        return (f"{fn_name} leaves autograd switched {state} (measured: torch.is_grad_enabled() is {before} before "
                f"the call, {after} after it): torch.set_grad_enabled({after}) switches it for the whole process, so "
                f"every later forward pass {'records no graph and no training step can backpropagate' if before else 'records a graph'}"
                f"; {_grad_mode_fix(fn_name, before, gradients)}")
    what, setter, arg = (("dtype", "set_default_dtype", "dtype=") if setting == "default dtype" else
                         ("device", "set_default_device", "device="))
    return (f"{fn_name} leaves torch's default {what} at {_short(after)} (measured: torch.get_default_{what}() is "
            f"{_short(before)} before the call, {_short(after)} after it): torch.{setter} changes every tensor made "
            f"later without {arg} in the whole process; pass {arg} to the tensors your function makes instead")


def _modules_of(fn: Callable, args: tuple, kwargs: Mapping) -> list[tuple[str, torch.nn.Module]]:
    """The modules a call is handed (its own module too, for a forward pass), each with its argument's name."""
    named = argument_names(fn, args, kwargs) if any(isinstance(v, torch.nn.Module) for v in (*args, *kwargs.values())) \
        else []
    found = [(name, v) for name, v in named if isinstance(v, torch.nn.Module)]
    return found + ([("self", fn)] if isinstance(fn, torch.nn.Module) else [])


def _flags_left(fn_name: str, name: str, flags: list) -> str | None:
    """What a call that changed requires_grad on a module's parameters did (flags: (parameter, flag before)); they are
    given back."""
    changed = [(p, was) for p, was in flags if p.requires_grad != was]
    if not changed:
        return None
    for p, was in changed:
        p.requires_grad_(was)
    frozen = all(was for _, was in changed)
    shown = "model" if name == "self" else f"`{name}`"
    text = (f"{fn_name} leaves {len(changed)} of the {len(flags)} parameters of {shown} with requires_grad="
            f"{not changed[0][1]} (measured on each parameter before and after the call; they had {changed[0][1]})")
    if frozen:
        return (text + ": requires_grad_(False) freezes them for good, so after this call the model no longer "
                "trains (no gradient reaches them); to compute without gradients use a `with torch.no_grad():` "
                "block, which records no graph and changes no parameter")
    return text + ": a function may not change which parameters train; leave requires_grad as the caller set it"


@contextlib.contextmanager
def given_back(fn: Callable, args: tuple, kwargs: Mapping, left: list[str] | None = None, gradients: str = CALLERS):
    """Around one learner call: torch's settings (torch_settings) and the
    requires_grad flags of the modules it is handed are given back as they
    were; what the call had changed is appended to `left`, in words (the
    fix worded for how fn uses gradients, CALLERS / WITHOUT / NEEDS)."""
    before = torch_settings()
    modules = _modules_of(fn, args, kwargs)
    flags = [[(p, p.requires_grad) for p in m.parameters()] for _, m in modules]
    try:
        yield
    finally:
        found = []
        for setting, value in torch_settings().items():
            if value != before[setting]:
                _SETTERS[setting](before[setting])
                found.append(_setting_left(getattr(fn, "__name__", type(fn).__name__), setting, before[setting], value,
                                           gradients))
        for (name, _), saved in zip(modules, flags):
            text = _flags_left(getattr(fn, "__name__", type(fn).__name__), name, saved)
            if text:
                found.append(text)
        if left is not None:
            left.extend(found)


def argument_names(fn: Callable, args: tuple, kwargs: Mapping) -> list[tuple[str, Any]]:
    """(name, value) of a call's arguments, named by the learner's own parameters (`argument 2` where they cannot
    be bound; each item of *args by its position)."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return [*((f"argument {i + 1}", v) for i, v in enumerate(args)), *kwargs.items()]
    named = []
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            named += [(f"{name}[{i}]", v) for i, v in enumerate(value)]
        elif kind is inspect.Parameter.VAR_KEYWORD:
            named += list(value.items())
        else:
            named.append((name, value))
    return named


def guarded_call(fn: Callable, args: tuple = (), kwargs: Mapping | None = None, left: list[str] | None = None,
                 gradients: str = CALLERS):
    """fn(*args, **kwargs) with the learner's printing capped (PRINT_LIMIT)
    and, where SIGALRM exists and this is the main thread, a time limit:
    past CALL_TIME_LIMIT seconds the call is interrupted with LearnerTimeout
    (raised again every second should the learner's code swallow it).
    torch's settings and the flags of the modules it is handed are given
    back afterwards (given_back); `left` collects what it had changed."""
    import signal
    import threading
    kwargs = kwargs or {}
    limit = CALL_TIME_LIMIT
    alarm = (limit is not None and hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
             and signal.getitimer(signal.ITIMER_REAL)[0] == 0)
    capped = _CappedOutput(sys.stdout)
    previous = None
    if alarm:
        def stop(signum, frame):
            raise LearnerTimeout(f"the call did not return within {limit:g} s (an endless loop?); the check stopped it")
        previous = signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, limit, 1.0)
    try:
        with contextlib.redirect_stdout(capped), given_back(fn, args, kwargs, left, gradients):
            return fn(*args, **kwargs)
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        if capped.dropped:
            print(f"... ({capped.dropped} more characters printed by {getattr(fn, '__name__', 'your code')} "
                  "are not shown)")


def tensors_named(named: list[tuple[str, Any]], depth: int = 2) -> list[tuple[str, torch.Tensor]]:
    """The tensors among a call's named arguments, those inside tuples and lists too (`batches[0][1]`)."""
    found = []
    for name, value in named:
        if isinstance(value, torch.Tensor):
            found.append((name, value))
        elif depth and isinstance(value, (tuple, list)) and len(value) <= 64:
            found += tensors_named([(f"{name}[{i}]", v) for i, v in enumerate(value)], depth - 1)
    return found


def fresh(value):
    """A copy of the tensors in `value` (same strides, same requires_grad), so
    a call made again, or the reference's side, cannot change what another
    reads."""
    if isinstance(value, torch.Tensor):
        copy = value.detach().clone()
        return copy.requires_grad_(True) if value.requires_grad and copy.is_floating_point() else copy
    if isinstance(value, tuple):
        return tuple(fresh(v) for v in value)
    if isinstance(value, list):
        return [fresh(v) for v in value]
    if isinstance(value, dict):
        return {k: fresh(v) for k, v in value.items()}
    return value


def changed(before: torch.Tensor, after: torch.Tensor) -> bool:
    if before.shape != after.shape or before.dtype != after.dtype:
        return True
    return not bool(torch.equal(torch.nan_to_num(before), torch.nan_to_num(after)))


def call_giving_inputs_back(named: list[tuple[str, Any]], call: Callable[[], Any], written: list[str] | None = None):
    """call() for one learner call: each tensor argument that holds other
    values afterwards is named in `written` and given its values back from a
    copy the learner's code never sees (the check goes on reading the
    caller's inputs, as the notebook would). What the call returned is never
    changed: a returned tensor that shares memory with an input given back
    (an in-place `masked_fill_` that returns its input) is copied first, so
    the check measures the values the learner's function returned."""
    copies = [(name, t, t.detach().clone()) for name, t in tensors_named(named) if not t.is_meta]
    def written_into() -> list:  # the copies of the arguments the call changed
        return [c for c in copies if changed(c[2], c[1].detach())]
    try:
        result = call()
    except BaseException:
        _give_back(written_into(), written)
        raise
    dirty = written_into()
    if dirty:
        result = unshared(result, [t for _, t, _ in dirty])
        _give_back(dirty, written)
    return result


def measuring_call(fn: Callable, args: tuple = (), kwargs: Mapping | None = None):
    """guarded_call(fn, args, kwargs) for a measurement: the tensor
    arguments it writes into are given their values back, what it returned
    kept (call_giving_inputs_back), so the next measurement reads the same
    inputs."""
    return call_giving_inputs_back(argument_names(fn, args, kwargs or {}), lambda: guarded_call(fn, args, kwargs))


def _give_back(dirty: list, written: list[str] | None) -> None:
    for name, t, copy in dirty:
        if written is not None:
            written.append(name)
        if t.dtype != copy.dtype:
            continue
        with torch.no_grad():
            if t.shape != copy.shape:  # an out= that resized the caller's tensor: its shape is given back too
                try:
                    t.resize_(copy.shape)
                except RuntimeError:  # a view or a tensor autograd tracks cannot be resized: left as the call left it
                    continue
            t.copy_(copy)


def _storage(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a tensor without storage (a subclass, a meta tensor) shares none
        return 0


def unshared(value, inputs: list[torch.Tensor], depth: int = 3):
    """`value` with every tensor in it (inside tuples, lists and dicts too)
    that shares memory with one of `inputs` replaced by a copy of itself
    (autograd history kept): what giving those inputs back cannot reach."""
    if isinstance(value, torch.Tensor):
        if value.is_meta:
            return value
        shared = _storage(value)
        return value.clone() if shared and any(_storage(t) == shared for t in inputs) else value
    if depth and isinstance(value, tuple):
        items = [unshared(v, inputs, depth - 1) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        if hasattr(value, "_make"):  # a namedtuple keeps its type
            return type(value)._make(items)
        try:
            return type(value)(items)  # torch.return_types and other tuple types built from a sequence
        except TypeError:
            return tuple(items)
    if depth and isinstance(value, list):
        items = [unshared(v, inputs, depth - 1) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    if depth and isinstance(value, dict):
        items = {k: unshared(v, inputs, depth - 1) for k, v in value.items()}
        return value if all(items[k] is v for k, v in value.items()) else items
    return value


@contextlib.contextmanager
def random_states_watched(generator: torch.Generator | None = None):
    """Around one call: afterwards the dict it yields says whether the state
    of torch's global CPU generator ("global") and, with a caller's
    `generator`, that generator's state ("caller's") changed during the call.
    It only reads the states: what the call drew stays drawn."""
    seen: dict[str, bool] = {}
    before = torch.get_rng_state()
    own = generator.get_state() if generator is not None else None
    try:
        yield seen
    finally:
        seen["global"] = not torch.equal(before, torch.get_rng_state())
        if own is not None:
            seen["caller's"] = not torch.equal(own, generator.get_state())


def keeping_the_random_stream(check):
    """A check draws its own random inputs: run it on a fork of torch's
    random state, so that the learner's later cells (a seeded training run,
    its dropout masks) draw the same numbers whether or not a check ran."""
    @functools.wraps(check)
    def run(*args, **kwargs):
        __tracebackhide__ = True
        cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
        with torch.random.fork_rng(devices=cuda):
            return check(*args, **kwargs)
    return run


def _tinylm_original(name: str):
    try:
        tinylm = importlib.import_module("tinylm")
    except ImportError:
        return None, None
    return tinylm, getattr(tinylm, name, None)


def globals_of(fn) -> list[dict]:
    """The global namespaces the learner's code of `fn` reads names from: a
    function's, or those of a class's (or a module instance's class's) methods."""
    if isinstance(fn, types.FunctionType):
        return [fn.__globals__]
    cls = fn if isinstance(fn, type) else type(fn)
    found = []
    for value in vars(cls).values():
        g = getattr(value, "__globals__", None)
        if isinstance(g, dict) and all(g is not f for f in found):
            found.append(g)
    return found


def delegation_message(name: str, original) -> str:
    verb = "is or uses" if isinstance(original, type) else "calls"
    return (f"{name} {verb} tinylm.{name}: write it yourself (the exercise is to implement it; "
            f"torch built-ins are fine)")


@contextlib.contextmanager
def refuse_delegation(name: str, fn):
    """While the learner's `fn` runs as exercise `name`, tinylm's object of
    that name (on the package, on its defining module and wherever fn's
    globals bind it) raises Delegation. Used by Check.call and by the
    recheck's jailed child, so the out-of-process grade refuses it too."""
    tinylm, original = _tinylm_original(name)
    if original is None or fn is None:
        yield
        return
    message = delegation_message(name, original)
    if fn is original or (isinstance(original, type) and (
            (isinstance(fn, type) and issubclass(fn, original)) or isinstance(fn, original))):
        raise Delegation(message)

    refused = _refusing_stand_in(original, message)

    spots = [(vars(tinylm), name)]
    home = sys.modules.get(getattr(original, "__module__", "") or "")
    if home is not None and vars(home).get(name) is original:
        spots.append((vars(home), name))
    for g in globals_of(fn):
        spots += [(g, key) for key, value in list(g.items()) if value is original]
    saved = [(space, key, space[key]) for space, key in spots]
    try:
        for space, key, _ in saved:
            space[key] = refused
        yield
    finally:
        for space, key, value in saved:
            space[key] = value


def _refusing_stand_in(original, message: str):
    """What stands in for tinylm's `original` while the learner's answer runs:
    calling it raises Delegation. A class stays a class, so code that only
    asks isinstance/issubclass of it (torch, the course's given code) still works."""
    if not isinstance(original, type):
        def refused(*args, **kwargs):
            raise Delegation(message)
        return refused

    class Refusing(type(original)):
        def __instancecheck__(cls, obj):
            return isinstance(obj, original)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, original)

        def __call__(cls, *args, **kwargs):
            raise Delegation(message)

    return Refusing(original.__name__, (), {})


def independent_copy(fn: types.FunctionType, rebound: Mapping[str, Any] | None = None) -> types.FunctionType:
    """A new function object with fn's code: for tests that use tinylm's
    implementation as a correct answer (tinylm's object itself is refused).
    rebound: names its globals hold otherwise in the copy, read from a copy of
    fn's globals (the notebook's own names are never rebound)."""
    scope = {**fn.__globals__, **rebound} if rebound else fn.__globals__
    copy = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def quiet_call(fn, *args):
    """fn(*args) for a measurement: None when it raises, its printing silenced."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return measuring_call(fn, args)
    except Exception:  # noqa: BLE001: a probe that raises measures nothing
        return None
