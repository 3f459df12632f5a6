"""The check framework every notebook exercise uses.

A check calls the learner's function on seeded inputs, compares each result
with an independent reference (a torch built-in or closed-form math, never
tinylm's own code), prints one table row per quantity, and raises
AssertionError on any failure so nbgrader takes the points away.

It never prints an expected tensor: only shapes, dtypes, pass/fail, the
largest absolute difference and measured properties of the learner's own
output (which axis sums to 1, a fitted scale factor, an identified
activation). A failure ends with the most useful line: the diagnosis.

A "Likely bug:" line names a cause, and only where the learner's own
output (or error) shows it; every other observation is a "Measured:" line
(`chk.measured(...)`). The sources of "Likely bug:", best first:
  * measurements of the learner's output (`chk.diagnose(...)`, called only
    in a branch whose condition measured that output), phrased as what the
    output is and how it differs from what it should be;
  * known wrong variants (the same inputs pushed through a deliberately buggy
    formula), named only when a variant reproduces EVERY failing row it was
    offered for (a partial match never produces a name);
  * the learner's error message (`chk.call(..., error_hints=[(regex, bug)])`),
    named only when the regex matches what their code raised;
  * upstream attribution (`chk.upstream(...)`): a later exercise that fails
    only because an earlier answer it calls is wrong says so.
A CheckFailed caught to add a cause gets it with `err.with_likely_bug(bug)`
(keeps the learner's frames; a line already there is not repeated).

What a failure shows: the table (printed), then the message. In a notebook
the message renders without a traceback (CheckFailed._render_traceback_),
and an error raised by the learner's code shows the learner's frames only.
The raising call is the table's last row, and its "Called with" line and
the sizes named from its error come from that same call (CallRecord).

Usage inside a check function:

    chk = Check("rms_norm", expects="a tensor shaped like x")
    got = chk.call(fn, x, w, eps, row_label="float32")   # learner exceptions -> a short message
    chk.compare("float32", got, want, variants={"eps outside the sqrt": bad})
    chk.finish()                               # prints the table, raises on failure
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.util
import inspect
import io
import itertools
import json
import linecache
import math
import os
import re
import sys
import traceback
import types
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch

from ..diagnosis_record import Diagnosis
from ..learner_values import describe, known_sizes, shown_shape
from .learner_code import LearnerTimeout, is_learners_file, walk_traceback
from .trace import size_one_axis

# Tolerances per dtype of the learner's output: half precision keeps ~3
# significant digits, so its differences are judged relative to that.
TOLERANCES = {
    torch.float64: (1e-8, 1e-6),
    torch.float32: (1e-5, 1e-4),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (2e-3, 5e-3),
}

# Called with the learner's function or class (Check.subject, None when the
# check never called one) after a check passed / failed. A hook may return a
# note: appended to the PASS line, or a "Saved:" line of the failure. A
# hook's own error becomes a note and never fails (or passes) the check.
PASS_HOOKS: list[Callable[[Any], str | None]] = []
FAIL_HOOKS: list[Callable[[Any], str | None]] = []

# Exercise name -> locate(fn, args, kwargs): the learner's first wrong line for one of its calls that raised,
# traced against the exercise's step-by-step reference (each contracts.Contract registers its own).
RAISE_LOCATORS: dict[str, Callable[[Callable, tuple, dict], Any]] = {}


class CheckFailed(AssertionError):
    """Raised when a learner's function fails a check. An AssertionError, so
    nbgrader scores the test cell zero and plain `assert` users understand it.

    In IPython (a notebook, nbgrader's kernel) it renders itself
    (_render_traceback_): the check's diagnosis, preceded by the learner's
    own frames when their code raised (learner_error), never the check's
    frames or source. Plain Python and pytest show the usual traceback. A
    line repeated in the message is kept once. `diagnosis` holds the same
    failure as fields (Diagnosis)."""

    def __init__(self, message: str = "", *, learner_error: BaseException | None = None,
                 diagnosis: Diagnosis | None = None):
        super().__init__(unique_lines(str(message)))
        self.learner_error = learner_error
        self.diagnosis = diagnosis
        _log_diagnosis(self)

    def __reduce__(self):  # the learner's error holds frames, which do not pickle
        return _rebuild_failure, (str(self), self.diagnosis.to_dict() if self.diagnosis else None)

    def error_text(self) -> str:
        """The text of the error the learner's code raised (the stop line,
        without the learner's quoted code, when the error itself is not at
        hand): what an error-message hint may be matched against, never the
        check's own words ("Called with a torch.uint8 tensor ...")."""
        if self.learner_error is not None:
            return str(self.learner_error)
        stop = self.diagnosis.stop if self.diagnosis is not None and self.diagnosis.stop else ""
        return re.sub(r"\(line \d+: `[^`]*`\)", "", stop) if self.diagnosis is not None and self.diagnosis.kind == "raised" else ""

    def with_likely_bug(self, bug: str) -> "CheckFailed":
        """The same failure with one more 'Likely bug:' line (kept once)."""
        diagnosis = self.diagnosis.with_bug(bug) if self.diagnosis else None
        return self.with_line(f"Likely bug: {bug}", diagnosis)

    def with_line(self, line: str, diagnosis: Diagnosis | None = None) -> "CheckFailed":
        """The same failure with one more diagnosis line, e.g. a 'Measured:'
        fact, keeping the learner's error and frames."""
        if diagnosis is None and self.diagnosis is not None:
            text = line.strip()
            diagnosis = (self.diagnosis.with_fact(text.removeprefix("Measured: ")) if text.startswith("Measured:") else
                         self.diagnosis.with_bug(text.removeprefix("Likely bug: ")) if text.startswith("Likely bug:")
                         else self.diagnosis)
        return CheckFailed(f"{self}\n  {line}", learner_error=self.learner_error, diagnosis=diagnosis)

    def _render_traceback_(self) -> list[str]:
        return render_failure(self)


def _rebuild_failure(message: str, diagnosis: dict | None) -> CheckFailed:
    return CheckFailed(message, diagnosis=Diagnosis.from_dict(diagnosis) if diagnosis else None)


# Where a self-check run (`python -m autograder check`) collects the
# diagnoses of the failures its kernel raises, one JSON object a line.
DIAGNOSIS_LOG_ENV = "TINYLM_DIAGNOSIS_LOG"


def _log_diagnosis(err: CheckFailed) -> None:
    path = os.environ.get(DIAGNOSIS_LOG_ENV)
    if not path or err.diagnosis is None:
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"message": str(err), "diagnosis": err.diagnosis.to_dict()}) + "\n")
    except (OSError, TypeError, ValueError):  # the log is a convenience: a failure to write it changes no verdict
        pass


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


def _setting_left(fn_name: str, setting: str, before: Any, after: Any) -> str:
    """What a call that changed one of torch_settings() did, and the fix."""
    if setting == "grad mode":
        state = "off" if before else "on where the caller had it off"
        block = "torch.no_grad()" if before else "torch.enable_grad()"
        return (f"{fn_name} leaves autograd switched {state} (measured: torch.is_grad_enabled() is {before} before "
                f"the call, {after} after it): torch.set_grad_enabled({after}) switches it for the whole process, so "
                f"every later forward pass {'records no graph and no training step can backpropagate' if before else 'records a graph'}"
                f"; put the code in a `with {block}:` block, which gives the mode back when it ends")
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
def given_back(fn: Callable, args: tuple, kwargs: Mapping, left: list[str] | None = None):
    """Around one learner call: torch's settings (torch_settings) and the
    requires_grad flags of the modules it is handed are given back as they
    were; what the call had changed is appended to `left`, in words."""
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
                found.append(_setting_left(getattr(fn, "__name__", type(fn).__name__), setting, before[setting], value))
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


def guarded_call(fn: Callable, args: tuple = (), kwargs: Mapping | None = None, left: list[str] | None = None):
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
        with contextlib.redirect_stdout(capped), given_back(fn, args, kwargs, left):
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
        if t.shape == copy.shape and t.dtype == copy.dtype:
            with torch.no_grad():
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


class CheckStopped(RuntimeError):
    """Raised by a check's own instrument inside the learner's call (a hook
    that stops a loop past its bound): its text is the check's measurement,
    never the learner's words, and is reported as one."""


class Delegation(Exception):
    """Raised when an answer hands its exercise to tinylm's own function of
    the same name instead of implementing it."""


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed: int, dtype=torch.float32) -> torch.Tensor:
    """Seeded normal noise, created on CPU in float64 then cast, so the same
    seed gives the same values on every platform and for every dtype."""
    return torch.randn(*shape, generator=seeded(seed), dtype=torch.float64).to(dtype)


def axis_groups(fine: tuple, coarse: tuple) -> list[list[int]] | None:
    """For each axis of `coarse`, the adjacent axes of `fine` it merges (in
    order), or None when `coarse` is no such merging of `fine`."""
    groups, i = [], 0
    for size in coarse:
        group, product = [], 1
        while i < len(fine) and (product < size or not group) and product * fine[i] <= size:
            group.append(i)
            product *= fine[i]
            i += 1
        if product != size or not group:
            return None
        groups.append(group)
    return groups if i == len(fine) else None


def tol_for(dtype: torch.dtype) -> tuple[float, float]:
    return TOLERANCES.get(dtype, TOLERANCES[torch.float32])


def shorten(text: str, width: int = 80) -> str:
    """text on one line, cut at the last word or punctuation boundary that
    fits in `width` characters, with an ellipsis when something was cut."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    boundary = max(cut.rfind(c) for c in " ,;:(")
    return (cut[:boundary] if boundary > width // 2 else cut).rstrip(" ,;:(") + "…"


def unique_lines(message: str) -> str:
    """message with each repeated 'Measured:' / 'Likely bug:' line kept
    once, where it first appears (several paths can reach one diagnosis)."""
    seen, kept = set(), []
    for line in message.splitlines():
        key = line.strip()
        if key.startswith(("Measured:", "Likely bug:", "Saved:", "Where:")):
            if key in seen:
                continue
            seen.add(key)
        kept.append(line)
    return "\n".join(kept)


def _max_abs_diff(got: torch.Tensor, want: torch.Tensor) -> float | None:
    """Largest |got - want| over the entries where both are finite, when
    both have the same ±inf pattern (masked logits are -inf on purpose);
    None when the inf/nan patterns differ (no single number describes that)."""
    if got.numel() == 0:
        return 0.0
    g, w = got.detach().double().cpu(), want.detach().double().cpu()
    finite = torch.isfinite(g) & torch.isfinite(w)
    same_pattern = bool(torch.equal(torch.isinf(g), torch.isinf(w)) and torch.equal(g[torch.isinf(g)], w[torch.isinf(w)])
                        and torch.equal(torch.isnan(g), torch.isnan(w)))
    if not same_pattern:
        return None
    return float((g[finite] - w[finite]).abs().max()) if finite.any() else 0.0


def _format_diff(got: torch.Tensor, want: torch.Tensor) -> str:
    diff = _max_abs_diff(got, want)
    if diff is not None:
        return f"{diff:.2e}"
    n_nan = int(torch.isnan(got.detach().double().cpu()).sum())
    return f"{n_nan} nan" if n_nan else "inf differ"


def close_to(got: Any, want: torch.Tensor, atol: float, rtol: float, equal_nan: bool = False) -> bool:
    """Same shape and allclose in float64 (NaN never equals anything)."""
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
        return False
    g, w = got.detach().double().cpu(), want.detach().double().cpu()
    # Both infinite with the same sign counts as equal: a variant that
    # overflows matches a learner output that overflows the same way.
    return bool(torch.allclose(g, w, atol=atol, rtol=rtol, equal_nan=equal_nan))


# ---------------------------------------------------------------------------
# delegation: an answer may not hand its exercise to tinylm's own version

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


def independent_copy(fn: types.FunctionType) -> types.FunctionType:
    """A new function object with fn's code: for tests that use tinylm's
    implementation as a correct answer (tinylm's object itself is refused)."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


# ---------------------------------------------------------------------------
# measurements: what the learner's output is, in words and numbers

def sums_to_one_axes(weights: torch.Tensor, atol: float = 1e-4) -> list[int]:
    """The axes (non-negative indices) over which `weights` sums to 1 everywhere."""
    w = weights.detach().double()
    return [a for a in range(w.dim()) if w.shape[a] > 1 and bool(torch.allclose(w.sum(a), torch.ones(()).double(), atol=atol))]


def fit_scale(got: torch.Tensor, want: torch.Tensor) -> tuple[float, float] | None:
    """Least-squares c with got ≈ c · want, and the relative residual
    |got - c·want| / |got|. None when either side is zero or not finite."""
    g, w = got.detach().double().flatten(), want.detach().double().flatten()
    if g.shape != w.shape or not (torch.isfinite(g).all() and torch.isfinite(w).all()):
        return None
    ww = float(w @ w)
    if ww == 0 or float(g @ g) == 0:
        return None
    c = float(g @ w) / ww
    return c, float((g - c * w).norm() / g.norm())


def describe_factor(c: float, named: Mapping[str, float] | None = None, rel: float = 0.02) -> str:
    """'1/6.93 = 1/sqrt(48)' style text for a fitted factor, naming the
    closest of `named` (label -> value) when within `rel`."""
    text = f"{c:.3g}" if abs(c) >= 1 else f"1/{1 / c:.3g}" if c else "0"
    for label, value in (named or {}).items():
        if value and abs(c / value - 1) < rel:
            return f"{text} = {label}"
    return text


ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "SiLU (x·sigmoid(x))": lambda a: a * torch.sigmoid(a),
    "ReLU": torch.relu,
    "GELU": torch.nn.functional.gelu,
    "GELU (tanh approximation)": lambda a: torch.nn.functional.gelu(a, approximate="tanh"),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "softplus": torch.nn.functional.softplus,
    "leaky ReLU": torch.nn.functional.leaky_relu,
    "identity (no activation)": lambda a: a,
}


def identify_activation(act: Callable[[torch.Tensor], torch.Tensor], probe: torch.Tensor | None = None,
                        atol: float = 1e-4) -> str | None:
    """The name of the elementwise function `act` computes on a probe grid
    (None when it is none of ACTIVATIONS)."""
    x = torch.linspace(-4, 4, 81, dtype=torch.float64) if probe is None else probe.double()
    try:
        y = act(x)
    except Exception:
        return None
    if not isinstance(y, torch.Tensor) or y.shape != x.shape:
        return None
    for name, f in ACTIVATIONS.items():
        if torch.allclose(y.double(), f(x), atol=atol):
            return name
    return None


def permutation_of(got: torch.Tensor, want: torch.Tensor, dim: int = -1) -> bool:
    """True when got holds the same values as want along `dim` (each slice
    the same multiset) but not in the same order."""
    if got.shape != want.shape or torch.equal(got, want):
        return False
    g, w = got.detach().double(), want.detach().double()
    return bool(torch.allclose(g.sort(dim).values, w.sort(dim).values, atol=1e-6, equal_nan=True))


def python_number_problem(value: Any, kind: type) -> str | None:
    """None when `value` is a plain Python `kind` (float or int); otherwise
    what it is, e.g. 'a 0-dim torch.float32 tensor (call .item())'."""
    if kind is float and isinstance(value, float):
        return None
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return None
    if isinstance(value, torch.Tensor):
        hint = " (call .item() to get a Python number)" if value.numel() == 1 else ""
        return f"{describe(value)}{hint}"
    return describe(value)


def parameter_problems(module: torch.nn.Module, name: str) -> str | None:
    """None when module.<name> is a registered nn.Parameter that requires
    grad; otherwise what is wrong with it."""
    value = getattr(module, name, None)
    if value is None:
        return f"the module has no attribute `{name}`"
    if not isinstance(value, torch.nn.Parameter):
        return (f"`self.{name}` is {describe(value)}, not an nn.Parameter, so it is not among the module's "
                f"parameters() and no optimizer would train it; wrap it: self.{name} = nn.Parameter(...)")
    if not value.requires_grad:
        return f"`self.{name}` has requires_grad=False, so it can never be trained"
    return None


def _few(t: torch.Tensor) -> str:
    return ", ".join(f"{float(v):.4g}" for v in t.flatten()[:3]) + (", ..." if t.numel() > 3 else "")


def mode_split(model: torch.nn.Module) -> str | None:
    """None when every module of `model` is in the mode `model.training`
    says; otherwise what differs (the top flag was set alone)."""
    others = [name for name, m in model.named_modules() if name and m.training != model.training]
    if not others:
        return None
    mode = "train" if model.training else "eval"
    return (f"the model's own flag says {mode} mode, but {len(others)} of its submodules ({', '.join(others[:3])}"
            f"{', ...' if len(others) > 3 else ''}) are not (measured on every module): assigning model.training sets "
            "one flag only; model.train(was_training) sets the mode of every submodule, dropout among them")


def parameter_dtypes(module: torch.nn.Module, want: Mapping[str, torch.dtype] | None = None) -> str | None:
    """None when every floating parameter of a freshly built module has the
    dtype `want` gives it (by state_dict name; default: the default dtype);
    otherwise which one differs and what that costs."""
    for name, value in module.state_dict().items():
        if not value.is_floating_point():
            continue
        expected = (want or {}).get(name, torch.get_default_dtype())
        if value.dtype != expected:
            short = lambda d: str(d).removeprefix("torch.")  # noqa: E731
            return (f"`{name}` is stored in {short(value.dtype)}, where a fresh module's parameters are "
                    f"{short(expected)}: a trained or loaded value is rounded to {short(value.dtype)} (and trains in it); "
                    "leave dtype= out when you make it (module.to(dtype) casts a whole model when that is wanted)")
    return None


def gradient_reaches(output: Any, param: torch.Tensor) -> bool:
    """True when a backward pass from `output` gives `param` a nonzero .grad.
    In the grader's recheck the output arrives as plain data; the jailed
    child, where the learner's graph exists, has answered for it with
    reached_by_gradient."""
    remote = getattr(output, "recheck_gradient_reaches", None)
    if remote is not None:
        return any(t is param for t in remote)
    return bool(reached_by_gradient(output, [(0, param)]))


def reached_by_gradient(output: Any, candidates) -> list:
    """The keys of the (key, tensor) candidates to which a backward pass from
    `output` gives a nonzero gradient (output summed in float64)."""
    if not isinstance(output, torch.Tensor) or not output.requires_grad:
        return []
    pairs = [(key, t) for key, t in candidates if isinstance(t, torch.Tensor) and t.requires_grad]
    if not pairs:
        return []
    total = output.sum() if output.dtype == torch.float64 else output.double().sum()
    grads = torch.autograd.grad(total, [t for _, t in pairs], allow_unused=True)
    return [key for (key, _), g in zip(pairs, grads) if g is not None and bool(g.abs().sum() > 0)]


# ---------------------------------------------------------------------------
# the table and the verdict

@dataclass
class Row:
    name: str
    ok: bool
    shape: str = ""
    dtype: str = ""
    close: str = ""
    diff: str = ""
    note: str = ""


# The rows a call adds when it writes into its inputs, or leaves torch's settings or its modules' flags changed.
INPUTS_ROW = "inputs unchanged"
SETTINGS_ROW = "torch settings and requires_grad given back"
LAYOUT = "your result holds the right values with its axes in another order"


# The six factors between logarithms in bases e, 2 and 10 (log_a(x) / log_b(x) = ln b / ln a), named as a
# learner writes them.
LOG_BASE_CONSTANTS = {"ln 2": math.log(2), "ln 10": math.log(10), "log10(2)": math.log10(2), "log2(10)": math.log2(10),
                      "log2(e)": math.log2(math.e), "log10(e)": math.log10(math.e)}


def _log_base_factors() -> list[tuple[float, str, str]]:
    """(factor, its name, how code makes it) for every change of logarithm
    base among e, 2 and 10: log_a(x) / log_b(x) = ln b / ln a, and the same
    swap in a divisor gives the inverse."""
    bases = (("e", "math.log"), ("2", "math.log2"), ("10", "math.log10"))
    names = {("e", "2"): "ln 2", ("2", "e"): "log2(e)", ("e", "10"): "ln 10", ("10", "e"): "log10(e)",
             ("2", "10"): "log2(10)", ("10", "2"): "log10(2)"}
    inverse = {"log2(e)": " = 1/ln 2", "log10(e)": " = 1/ln 10"}
    nats_to_bits = {"2": " (nats where bits are meant: the division by math.log(2) = ln 2 is missing)",
                    "10": " (math.log10(2) for math.log(2) = ln 2, the divisor that turns nats into bits)"}
    found = []
    for (a, log_a), (b, log_b) in itertools.permutations(bases, 2):
        name = names[(a, b)]
        found.append((LOG_BASE_CONSTANTS[name], name + inverse.get(name, ""),
                      f"a change of logarithm base (log_b(x) = ln(x) / ln(b)): {log_a}(...) where {log_b}(...) is "
                      f"meant, or {log_b}(...) where {log_a}(...) is meant in a divisor"
                      + (nats_to_bits[b] if a == "e" else "")))
    return found


# Constants a formula's factor is mixed up with, as (factor, its name, how code makes it); sizes of the call come first.
KNOWN_FACTORS = _log_base_factors() + [
    (2.0, "2", "a term counted twice, or a factor 2 the formula does not have"),
    (0.5, "1/2", "a term counted half, or a division by 2 the formula does not have"),
    (math.pi, "π", "a factor π too many (math.pi where the formula has none)"),
    (1 / math.pi, "1/π", "a division by π the formula does not have"),
    (2 * math.pi, "2π", "a factor 2π: radians where turns are meant (or a 2π missing from the other side)"),
    (1 / (2 * math.pi), "1/(2π)", "a division by 2π: turns where radians are meant (or a 2π missing)"),
    (180 / math.pi, "180/π", "degrees where radians are meant: math.degrees where the formula works in radians"),
    (math.pi / 180, "π/180", "radians where degrees are meant, or math.radians applied to radians"),
    (math.e, "e", "an exp of a value 1 too large (exp(x + 1) = e · exp(x)), or a factor e"),
    (1 / math.e, "1/e", "an exp of a value 1 too small (exp(x - 1) = exp(x) / e), or a division by e"),
]


@dataclass
class CallRecord:
    """One call of the learner's function that raised: what it was given
    and the error. Its table row, its "Called with" line and the sizes read
    from its error all come from this one record."""
    args: tuple
    kwargs: dict
    error: BaseException
    row_label: str | None = None

    def values(self) -> list:
        return [*self.args, *self.kwargs.values()]

    def label(self) -> str:
        if self.row_label:
            return self.row_label
        shapes = [str(tuple(v.shape)) if isinstance(v, torch.Tensor) else type(v).__name__ for v in self.values()]
        return shorten("inputs " + " ".join(shapes), 60)

    def for_row(self) -> str:
        return f" (the row `{self.row_label}`)" if self.row_label else ""

    def called_with(self) -> str:
        named = [f"{key}={describe(value)}" for key, value in self.kwargs.items()]
        return ", ".join([describe(a) for a in self.args] + named)

    def sizes(self) -> set[int]:
        """Every axis size of this call's tensor inputs, and its int inputs."""
        found: set[int] = set()
        for value in self.values():
            if isinstance(value, torch.Tensor):
                found.update(int(d) for d in value.shape)
            elif isinstance(value, int) and not isinstance(value, bool):
                found.add(value)
        return found


@dataclass
class Check:
    """Collects rows for one exercise, then prints and judges them."""

    fn_name: str
    expects: str = ""
    rows: list[Row] = field(default_factory=list)
    diagnoses: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)       # true measurements that name no bug
    errors: list[str] = field(default_factory=list)
    offered: dict[str, int] = field(default_factory=dict)  # known bug -> failing rows it was tried on
    votes: dict[str, int] = field(default_factory=dict)    # known bug -> failing rows it reproduces
    refuted: set = field(default_factory=set)               # known bugs whose output would fail a row the learner passed
    subject: Any = None                                     # the first callable passed to call()
    axes: dict[str, int] = field(default_factory=dict)      # axis name -> size, to read shape errors
    regime: dict | None = None                              # {"name", "text"} of the regime a failure showed in
    located: Any = None                                     # trace.Located: the learner's first wrong line
    error_measured: bool = False                            # a raise was explained by measurement: no guess from its text
    locators: list = field(default_factory=list)            # find `located` when the check fails (see locate_with)
    last_call: list = field(default_factory=list)           # (name, value) of the last call's arguments: its sizes
    layout_unclear: int = 0                                 # the layout said: how many moved axes its sizes leave unnamed
    ratio_rows: dict = field(default_factory=dict)          # a factor said ("1/3 of") -> the rows showing it

    # -- calling the learner -------------------------------------------------
    def call(self, fn: Callable, *args, on_error: Callable[[Exception], str | None] | None = None,
             row_label: str | None = None, error_hints: tuple = (), **kwargs):
        """Call the learner's function; an exception becomes a short message
        naming the function and what was expected, and stops the check.

        The raising call gets its own table row (row_label, else its input
        shapes), and the "Called with" line and the sizes named from its
        error come from that same call. error_hints: (regex, likely bug)
        pairs; a bug is named only when its regex matches the learner's
        error message (the measured evidence). on_error(err) may return a
        diagnosis for this particular call (e.g. 'it fails only when
        start_pos > 0: ...').

        Every call is measured for what it must leave as it found it: a
        tensor argument it writes into (the 'inputs unchanged' row), torch's
        grad mode and default dtype and device, and the requires_grad flags
        of the modules it is handed (a row of its own); each is given back
        at once, so the rest of the check reads what the notebook would."""
        __tracebackhide__ = True
        if not callable(fn):
            self._stop(f"{self.fn_name} is {describe(fn)}, not a function. Run the cell that defines it first.")
        if self.subject is None:
            self.subject = fn
        self.last_call = argument_names(fn, args, kwargs)
        written: list[str] = []
        left: list[str] = []
        try:
            with refuse_delegation(self.fn_name, fn), self._given_back(written, left):
                return call_giving_inputs_back(self.last_call, lambda: guarded_call(fn, args, kwargs, left), written)
        except LearnerTimeout as err:
            self._stop_on_error(CallRecord(args, kwargs, err, row_label), None, ())  # never traced: it would hang again
        except NotImplementedError:
            self._stop(f"{self.fn_name} is not implemented yet (it raised NotImplementedError). "
                       f"Replace the `raise NotImplementedError()` line with your code; it should return {self.expects}.",
                       kind="not implemented")
        except CheckFailed:
            raise
        except Exception as err:  # the learner's bug, reported in one line
            if type(err).__name__ == "Delegation":  # also the recheck's re-raised form
                self._stop(_first_line(err), kind="delegated")
            self._locate_raise(fn, args, kwargs)
            if self._number_type_tells(fn, args, kwargs):
                self.error_measured = True
                error_hints = ()  # the measurement says what the error's text would only guess
            self._stop_on_error(CallRecord(args, kwargs, err, row_label), on_error, error_hints)

    @contextlib.contextmanager
    def _given_back(self, written: list[str], left: list[str]):
        """Records, once the call ends (before an error of its is reported),
        the inputs it wrote into and the settings it left changed."""
        try:
            yield
        finally:
            self.record_inputs(written)
            if left and not any(r.name == SETTINGS_ROW for r in self.rows):
                self.require(SETTINGS_ROW, False, "changed by the call")
                for text in left:
                    self.diagnose(text)

    def record_inputs(self, written: list[str], row: bool = False) -> None:
        """The 'inputs unchanged' row (added at once with row=True, else at
        the first change), turned to FAIL, with the diagnosis, the first time
        a call writes into an input."""
        found = next((r for r in self.rows if r.name == INPUTS_ROW), None)
        if found is None and (row or written):
            found = Row(INPUTS_ROW, True, close="ok")
            self.rows.append(found)
        if not written or not found.ok:
            return
        written = list(dict.fromkeys(written))
        found.ok, found.close, found.note = False, "FAIL", f"{', '.join(written)} changed by the call"
        what = " and ".join(f"`{n}`" for n in written)
        self.diagnose(f"{self.fn_name} changes its input {what} in place (measured: its values differ after the call "
                      "from a copy taken before it): an in-place operation (`x -= ...`, `x *= ...`, `x[mask] = ...`, "
                      "`masked_fill_`, `.div_`, or `.float()` on a tensor that already is float32, which returns x "
                      "itself) writes into the caller's tensor; compute a new tensor instead (`x = x - ...`, "
                      "`masked_fill`, `torch.where`, or work on `x.clone()`)")

    def _number_type_tells(self, fn: Callable, args: tuple, kwargs: dict) -> bool:
        """A call that raised, made again with one whole-number argument in
        the other type (0.0 as 0, 2 as 2.0): when that call does not raise,
        the code tells the two apart (`is 0`, isinstance, type()), and that is
        said. True when it was."""
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except (TypeError, ValueError):
            return False
        for name, value in bound.arguments.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    (isinstance(value, float) and not value.is_integer()):
                continue
            other = float(value) if isinstance(value, int) else int(value)
            again = inspect.BoundArguments(bound.signature, {**bound.arguments, name: other})
            copies = [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in again.args]
            try:
                with refuse_delegation(self.fn_name, fn), contextlib.redirect_stdout(io.StringIO()):
                    guarded_call(fn, tuple(copies), dict(again.kwargs))
            except (Exception, LearnerTimeout):
                continue
            self.measured(f"the same call with {name}={other!r} ({type(other).__name__}) instead of {name}={value!r} "
                          f"({type(value).__name__}) does not raise: your code treats the two differently; compare "
                          f"numbers by value (`{name} == {other!r}`), not by identity (`is`) or by type")
            return True
        return False

    def _locate_raise(self, fn: Callable, args: tuple, kwargs: dict) -> None:
        """The place of the first wrong value a raising call reads (RAISE_LOCATORS), when one is found."""
        locator = RAISE_LOCATORS.get(self.fn_name)
        if locator is None or self.located is not None:
            return
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                self.located = locator(fn, args, kwargs)
        except Exception:  # noqa: BLE001: the tracer's own failure is never the learner's
            self.located = None

    def _stop_on_error(self, record: "CallRecord", on_error, error_hints) -> None:
        __tracebackhide__ = True
        err = record.error
        for pattern, bug in error_hints:
            if re.search(pattern, str(err)):
                self.diagnose(bug)
        hint = on_error(err) if on_error is not None else None
        if hint:
            self.diagnose(hint)
        try:
            from .trace import values_at_raise
            read, bound = values_at_raise(err)
        except Exception:  # noqa: BLE001: the tracer's own failure is never the learner's
            read, bound = [], None
        for fact in read:
            self.measured(fact)
        if bound is not None and (self.located is None or self.located.kind == "raises"):
            self.located = bound
        sizes = self._name_sizes(str(err), record.sizes())
        if sizes:
            self.measured(sizes)
        if isinstance(err, CheckStopped):
            self.measured(str(err))
        # The row is printed with this failure only: a check that catches it (a probe) keeps its own table.
        row = Row(record.label(), False, note=f"raised {type(err).__name__}: see below")
        self._stop(f"{self.fn_name} raised {type(err).__name__}{_learner_place(err)}: {_first_line(err)}\n"
                   f"  Called with {record.called_with()}{record.for_row()}; it should return {self.expects}.",
                   learner_error=err, extra_row=row)

    def probe(self, fn: Callable, *args, **kwargs):
        """Call the learner's function for a measurement: None when it raises
        (the comparison rows report exceptions; a probe only explains). A
        probe gives back what the call changed in its inputs, as call() does,
        so the next probe reads the same inputs."""
        try:
            with refuse_delegation(self.fn_name, fn), contextlib.redirect_stdout(io.StringIO()):
                return measuring_call(fn, args, kwargs)
        except Delegation as err:
            self._stop(_first_line(err), kind="delegated")
        except (Exception, LearnerTimeout):
            return None

    def _name_sizes(self, text: str, call_sizes: set[int] | None = None) -> str | None:
        """'in that error 10 = d_ff, 6 = d_model' for the sizes a shape error
        mentions that are the size of exactly one named axis (self.axes)
        and, when call_sizes is given, a size of that call's own inputs."""
        if not self.axes:
            return None
        numbers = []
        groups = " ".join(re.findall(r"\(([^()]*)\)|\[([^\[\]]*)\]", text) and
                          [a or b for a, b in re.findall(r"\(([^()]*)\)|\[([^\[\]]*)\]", text)])
        for n in re.findall(r"(?<![\w.])(\d+)(?![\w.])", groups.replace("x", " ")):
            owners = [name for name, size in self.axes.items() if size == int(n)]
            if call_sizes is not None and int(n) not in call_sizes:
                continue
            if len(owners) == 1 and int(n) > 1 and f"{n} = {owners[0]}" not in numbers:
                numbers.append(f"{n} = {owners[0]}")
        return f"in that error {', '.join(numbers)}" if numbers else None

    def explain_scale(self, what: str, got: Any, want: torch.Tensor, named: Mapping[str, float] | None = None) -> bool:
        """When got is exactly c · want (c != 1), say so with c named."""
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            return False
        fit = fit_scale(got, want)
        if fit is None or fit[1] > 1e-4 or abs(fit[0] - 1) < 1e-3:
            return False
        self.diagnose(f"{what} is the right result scaled by {describe_factor(fit[0], named)}: drop that factor")
        return True

    def _stop(self, message: str, learner_error: BaseException | None = None, extra_row: Row | None = None, *,
              kind: str | None = None):
        """Print the table and raise the failure. kind: the Diagnosis kind of
        this stop, named by the caller ("not implemented", "delegated"); by
        default "raised" when the learner's code raised, else "stopped"."""
        __tracebackhide__ = True
        self.errors.append(message)
        self._print_table([*self.rows, extra_row] if extra_row else self.rows)
        hints = "".join(f"\n  {line}" for line in self._explanation())
        if kind is None:
            kind = ("delegated" if type(learner_error).__name__ == "Delegation" else
                    "raised" if learner_error is not None else "stopped")
        rows = [*self.rows, extra_row] if extra_row else self.rows
        if kind == "raised" and self.located is None:
            from .trace import locate_error
            try:
                self.located = locate_error(learner_error)
            except Exception:  # noqa: BLE001: the tracer's own failure is never the learner's
                self.located = None
        diagnosis = self.diagnosis(kind, rows=rows, stop=message.splitlines()[0],
                                   error=type(learner_error).__name__ if learner_error is not None else None)
        raise self._failure(f"{self.fn_name}: {message}{hints}", learner_error, diagnosis) from None

    # -- recording results ---------------------------------------------------
    def compare(self, name: str, got: Any, want: torch.Tensor, *, dtype: torch.dtype | None = None,
                atol: float | None = None, rtol: float | None = None,
                variants: Mapping[str, Any] | None = None) -> bool:
        """One table row: `got` (learner) against `want` (reference).

        dtype: the dtype the learner's output must have (default want.dtype).
        variants: {bug description: wrong output, or a zero-argument function
        computing it}; consulted only when the row fails."""
        dtype = want.dtype if dtype is None else dtype
        d_atol, d_rtol = tol_for(dtype)
        atol, rtol = (d_atol if atol is None else atol), (d_rtol if rtol is None else rtol)
        known = known_sizes(want.shape, *(v.shape for _, v in self.last_call if isinstance(v, torch.Tensor)))
        if not isinstance(got, torch.Tensor):
            self.rows.append(Row(name, False, shape="-", note=f"returned {describe(got, known)}, expected a tensor"))
            hint = " (a missing `return`?)" if got is None else ""
            self.diagnose(f"{self.fn_name} returned {describe(got, known)}{hint}; it should return {self.expects}")
            return False
        shape_ok = tuple(got.shape) == tuple(want.shape)
        dtype_ok = got.dtype == dtype
        close = close_to(got, want, atol, rtol)
        row = Row(name, shape_ok and dtype_ok and close,
                  shape="ok" if shape_ok else f"{shown_shape(got.shape, known)} != {tuple(want.shape)}",
                  dtype="ok" if dtype_ok else f"{got.dtype} != {dtype}",
                  close=("ok" if close else "FAIL") if shape_ok else "-",
                  diff=_format_diff(got, want) if shape_ok else "-")
        self.rows.append(row)
        if not shape_ok:
            self._measure_size_one_axis(got.shape, want.shape)
            self._measure_layout(got, want, atol, rtol)
            self._measure_merged_axes(got, want, atol, rtol)
            self._measure_part_kept(name, got, want, atol, rtol)
        if row.ok and got.is_inference() and not want.is_inference():
            row.ok, row.close, row.note = False, "FAIL", "an inference tensor"
            self.measured(f"your result is an inference tensor (measured: .is_inference() is True): it was made under "
                          "torch.inference_mode(), and autograd refuses it later (training on it raises 'Inference "
                          "tensors cannot be saved for backward'); use torch.no_grad(), whose results are ordinary "
                          "tensors")
        if shape_ok and not dtype_ok and close_to(got.to(want.dtype), want, atol, rtol):
            self.diagnose(f"the values are right but the result is {got.dtype}, expected {dtype}: keep the dtype "
                          "of the inputs (cast with .to(...) where your code changes it)")
        if not row.ok and shape_ok:
            self._measure_whole(name, got, want)
            self._measure_ratio(name, got, want, atol, rtol)
        if not row.ok and variants:
            self.try_variants(row, got, variants, atol=max(atol, 1e-6), rtol=max(rtol, 1e-5), want=want)
        elif variants:
            self.refute(variants, want, atol, rtol)
        return row.ok

    def _measure_whole(self, name: str, got: torch.Tensor, want: torch.Tensor) -> None:
        """A wrong floating result whose every value is the right one rounded
        down (or to the nearest) whole number: an integer division or an int()."""
        if not want.is_floating_point() or got.numel() == 0 or got.numel() != want.numel():
            return
        g, w = got.detach().double().cpu(), want.detach().double().cpu()
        if not bool(torch.isfinite(w).all()) or bool((w == w.round()).all()):
            return  # the right values are whole numbers themselves: nothing to tell
        for how, rounded in (("rounded down", w.floor()), ("truncated towards zero", w.trunc()),
                             ("rounded", w.round())):
            if torch.equal(g, rounded):
                self.measured(f"`{name}`: your values are the right ones {how} to whole numbers (measured: yours "
                              f"{_few(g)}, the right ones {_few(w)}): an integer division (`//`), int() or round() "
                              "drops the fraction; divide with `/`")
                return

    def _sizes_named(self) -> dict[int, list[str]]:
        """size -> where the last call's inputs have it (`x.shape[0]`, an int argument, `model.config.n_heads`, an
        axis all of a list's items share: `batches[i][1].shape[1]`), sizes above 1 only."""
        found: dict[int, list[str]] = {}

        def add(size, where):
            if isinstance(size, int) and not isinstance(size, bool) and size > 1 and where not in found.get(size, []):
                found.setdefault(size, []).append(where)
        for name, value in self.last_call:
            if isinstance(value, torch.Tensor):
                for axis, size in enumerate(value.shape):
                    add(int(size), f"{name}.shape[{axis}]")
            elif isinstance(value, int):
                add(value, f"`{name}`")
            elif isinstance(value, torch.nn.Module) and dataclasses.is_dataclass(getattr(value, "config", None)):
                for f in dataclasses.fields(value.config):
                    add(getattr(value.config, f.name), f"{name}.config.{f.name}")
            elif isinstance(value, (tuple, list)) and value:
                items = [tensors_named([("", v)]) for v in value]
                for i, (path, t) in enumerate(items[0]):
                    for axis, size in enumerate(t.shape):
                        if all(len(it) == len(items[0]) and it[i][1].dim() > axis and it[i][1].shape[axis] == size
                               for it in items):
                            add(int(size), f"{name}[i]{path}.shape[{axis}] (of every item)")
        return found

    def _measure_ratio(self, name: str, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
        """A wrong result that is exactly c times the right one on every value:
        c a size n of the call's inputs (or 1/n, sqrt(n), 1/sqrt(n)), said with
        every input that has it, or a constant a formula is mixed up with
        (KNOWN_FACTORS: a change of logarithm base, 2, π, e...)."""
        if not (got.is_floating_point() and want.is_floating_point()) or got.numel() == 0:
            return
        g, w = got.detach().double().cpu().flatten(), want.detach().double().cpu().flatten()
        if not (bool(torch.isfinite(g).all()) and bool(torch.isfinite(w).all())) or float(w.abs().max()) == 0:
            return
        at = int(w.abs().argmax())
        ratio = float(g[at] / w[at])
        if ratio <= 0 or not close_to(g, ratio * w, atol, rtol):  # the same factor on every value
            return
        sizes = self._sizes_named()
        # (factor, how it is said, the size it is made of or None, how code makes it)
        candidates = [(float(n), f"{n} times", n, "") for n in sizes if n >= 3]
        candidates += [(1 / n, f"1/{n} of", n, "") for n in sizes if n >= 3]
        candidates += [(n ** 0.5, f"sqrt({n}) = {n ** 0.5:.4g} times", n, "") for n in sizes if math.isqrt(n) ** 2 != n]
        candidates += [(n ** -0.5, f"1/sqrt({n}) = 1/{n ** 0.5:.4g} of", n, "") for n in sizes
                       if math.isqrt(n) ** 2 != n]
        candidates += [(c, f"{c:.4g} = {label} times", None, how) for c, label, how in KNOWN_FACTORS]
        # the rounding of the result's own dtype bounds how exactly a factor can be measured
        coarsest = max(torch.finfo(got.dtype).eps, torch.finfo(want.dtype).eps)
        value, factor, size, how = min(candidates, key=lambda c: abs(math.log(ratio / c[0])))
        if abs(ratio / value - 1) > max(1e-5, 2 * coarsest):
            return
        key = f"is exactly {factor} the right value"
        rows = self.ratio_rows.setdefault(key, [])  # rows with the same factor are said in one line
        self.facts = [f for f in self.facts if not (rows and f.startswith(f"`{rows[0]}`"))]
        rows.append(name)
        said = f"{' and '.join(f'`{r}`' for r in rows)}: your result {key} (measured: {float(g[at]):.6g} against " \
               f"{float(w[at]):.6g})"
        if size is None:
            self.measured(f"{said}: {how}")
            return
        grows, root = value > 1, f"sqrt({size})" if "sqrt" in factor else f"{size}"
        self.measured(f"{said}, and {size} is {' and '.join(sizes[size])} in this call: a "
                      f"{'product with' if grows else 'division by'} {root} that the formula does not have (or a "
                      f"{'division by' if grows else 'product with'} it missing)")

    def _measure_layout(self, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
        """A result with the right values in another order of axes: which axes moved, and where they belong."""
        if got.dim() != want.dim() or sorted(got.shape) != sorted(want.shape) or got.dim() > 6:
            return
        for order in itertools.permutations(range(got.dim())):
            moved = got.permute(order)
            if tuple(moved.shape) == tuple(want.shape) and close_to(moved, want, atol, rtol):
                break
        else:
            return
        # the axes by the names the check gives them, else by where the call's inputs have their sizes
        owners = ({size: [n for n, s in self.axes.items() if s == size] for size in set(self.axes.values())}
                  if self.axes else self._sizes_named())
        moved_axes = [(j, a) for j, a in enumerate(order) if j != a]
        place = lambda axis: "the last" if axis == want.dim() - 1 else f"{axis}"  # noqa: E731
        misplaced = [f"the axis of size {got.shape[a]}" + (f" ({' or '.join(owners[got.shape[a]])})"
                                                            if owners.get(got.shape[a]) else "")
                     + f" is at position {a}, expected at {place(j)}" for j, a in moved_axes]
        text = (f"{LAYOUT} (measured: its shape is {tuple(got.shape)}, expected {tuple(want.shape)}, and your "
                f"result.permute{tuple(order)} equals the right result): {'; '.join(misplaced)}; compute it in the "
                "expected layout, or transpose/permute the axes into place")
        # Said once, for the row whose moved axes the inputs' sizes name best (one owner each).
        unclear = sum(len(owners.get(got.shape[a], [])) != 1 for _, a in moved_axes)
        said = next((i for i, d in enumerate(self.diagnoses) if d.startswith(LAYOUT)), None)
        if said is None:
            self.diagnose(text)
        elif unclear < self.layout_unclear:
            self.diagnoses[said] = text
        else:
            return
        self.layout_unclear = unclear

    def _measure_merged_axes(self, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
        """A result with the right values in the right order, some adjacent axes merged into one (or one axis
        split into several): which axes, by their sizes and where the call's inputs have them."""
        if got.numel() != want.numel() or got.dim() == want.dim() or got.numel() == 0 or \
                not close_to(got, want.reshape(got.shape), atol, rtol):
            return
        merged = got.dim() < want.dim()
        groups = axis_groups(tuple(want.shape), tuple(got.shape)) if merged else \
            axis_groups(tuple(got.shape), tuple(want.shape))
        if groups is None:
            return
        owners = ({size: [n for n, s in self.axes.items() if s == size] for size in set(self.axes.values())}
                  if self.axes else self._sizes_named())
        size_of = lambda n: f"{n}" + (f" = {' or '.join(owners[n])}" if owners.get(n) else "")  # noqa: E731
        fine = want.shape if merged else got.shape
        said = []
        for coarse, axes in enumerate(groups):
            if len(axes) > 1:
                sizes = " and ".join(size_of(int(fine[a])) for a in axes)
                axes_text = " and ".join(str(a) for a in axes)
                said.append(f"the expected axes {axes_text} (sizes {sizes}) are merged into your axis {coarse}"
                            if merged else f"the expected axis {coarse} (size {size_of(int(want.shape[coarse]))}) "
                                           f"is split into your axes {axes_text} (sizes {sizes})")
        fix = ("a flatten, view or reshape merges axes the result keeps apart (flatten(1) merges every axis after "
               "the first, view(-1, n) every axis before the last); merge only the axes that belong together, "
               "flatten(start_dim, end_dim), or reshape to the expected shape") if merged else \
            ("an axis the result keeps whole is split (a view or reshape given more sizes, or torch.stack where "
             "torch.cat joins along an existing axis): join along that axis, or reshape to the expected shape")
        self.diagnose(f"your result has shape {tuple(got.shape)}, expected {tuple(want.shape)}, with the right "
                      f"values in the right order (measured: the right result reshaped to {tuple(got.shape)} equals "
                      f"yours): {'; '.join(said)}: {fix}")

    def _measure_part_kept(self, name: str, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
        """A result shorter than the right one along one axis that holds its first or last entries there: how many
        were dropped, and from which end."""
        if got.dim() != want.dim() or got.dim() == 0:
            return
        apart = [a for a in range(got.dim()) if got.shape[a] != want.shape[a]]
        if len(apart) != 1 or not 0 < got.shape[apart[0]] < want.shape[apart[0]]:
            return
        axis, n, total = apart[0], got.shape[apart[0]], want.shape[apart[0]]
        for end, part in (("last", want.narrow(axis, total - n, n)), ("first", want.narrow(axis, 0, n))):
            if close_to(got, part, atol, rtol):
                said = self.ratio_rows.setdefault("part kept", [])  # one row says it; the others would repeat it
                said.append(name)
                if len(said) > 1:
                    return
                dropped, gone = "first" if end == "last" else "last", total - n
                owners = self._sizes_named().get(gone)
                self.diagnose(f"`{name}` holds the {end} {n} of the {total} entries the right result has along axis "
                              f"{axis} (measured: they equal the right result's {end} {n} there): the {dropped} "
                              f"{gone}" + (f" ({' and '.join(owners)})" if owners else "")
                              + (" are" if gone > 1 else " is") + " dropped; keep every entry: no part of the result "
                              "may be cut to a fixed length")
                return

    def _measure_size_one_axis(self, got_shape, want_shape) -> None:
        """A result one axis of size 1 apart from the expected shape: which axis, and what keeps or drops one."""
        got_shape, want_shape = tuple(got_shape), tuple(want_shape)
        extra, missing = size_one_axis(got_shape, want_shape), size_one_axis(want_shape, got_shape)
        if extra is not None:
            self.measured(f"your result has shape {got_shape}, expected {want_shape}: an extra axis of size 1 at "
                          f"position {extra} (keepdim=True, a slice such as [:, -1:] where [:, -1] is meant, or an "
                          "unsqueeze keeps an axis the result must not have)")
        elif missing is not None:
            self.measured(f"your result has shape {got_shape}, expected {want_shape}: the axis of size 1 at "
                          f"position {missing} is missing (a bare squeeze() drops every axis of size 1, such as a "
                          "batch of one or a one-token step: squeeze only the axis you mean, squeeze(dim))")

    def refute(self, variants: Mapping[str, Any], want: torch.Tensor, atol: float, rtol: float) -> None:
        """On a row the learner passed: the known bugs whose output would have
        failed it are refuted, and never named for another row."""
        for bug, wrong in variants.items():
            if bug in self.refuted:
                continue
            try:
                value = wrong() if callable(wrong) else wrong
            except Exception:  # a variant that cannot run here says nothing about it
                continue
            if isinstance(value, torch.Tensor) and tuple(value.shape) == tuple(want.shape) and \
                    not close_to(value, want, atol, rtol, equal_nan=True):
                self.refuted.add(bug)

    def try_variants(self, row: Row, got: torch.Tensor, variants: Mapping[str, Any], atol: float, rtol: float,
                     want: torch.Tensor | None = None) -> None:
        """Record which known wrong variants reproduce this failing row."""
        for bug in variants:
            self.offered[bug] = self.offered.get(bug, 0) + 1
        bugs = matching_variants(got, variants, atol=atol, rtol=rtol, want=want)
        if bugs:
            row.note = "matches a known bug"
        for bug in bugs:
            self.votes[bug] = self.votes.get(bug, 0) + 1

    def require(self, name: str, ok: bool, failure: str = "", diagnosis: str | None = None) -> bool:
        """A property row (causality, sharing, invariance...) without tensors."""
        self.rows.append(Row(name, bool(ok), close="ok" if ok else "FAIL", note="" if ok else failure))
        if not ok and diagnosis:
            self.diagnose(diagnosis)
        return bool(ok)

    def diagnose(self, message: str) -> None:
        """A named cause of the failure (printed as 'Likely bug: ...')."""
        if message not in self.diagnoses:
            self.diagnoses.append(message)

    def measured(self, message: str) -> None:
        """A true measurement of the learner's output that names no bug by
        itself (printed as 'Measured: ...', before the likely bugs)."""
        if message not in self.facts:
            self.facts.append(message)

    def upstream(self, fn: Callable, references: Mapping[str, Callable], rerun: Callable[[], bool],
                 labels: Mapping[str, str] | None = None) -> bool:
        """Tell a bug in this exercise from one in an earlier answer it calls.

        references: {earlier exercise's name: a correct implementation};
        rerun: recomputes this check's comparison, True when it passes.
        The names fn's globals bind are replaced by the references (one at a
        time, then all together) and rerun; if that passes, the earlier
        answer is named as the cause. Globals are always restored."""
        if self.passed:
            return False
        spaces = [g for g in globals_of(fn)]
        present = [n for n in references if any(n in g and g[n] is not references[n] for g in spaces)]
        if not present:
            return False
        labels = labels or {}

        def passes_with(names) -> bool:  # names=[]: the learner's own answers, nothing replaced
            saved = [(g, n, g[n]) for g in spaces for n in names if n in g]
            try:
                for g, n, _ in saved:
                    g[n] = references[n]
                with contextlib.redirect_stdout(io.StringIO()):
                    return bool(rerun())
            except Exception:
                return False
            finally:
                for g, n, value in saved:
                    g[n] = value

        if passes_with([]):  # the rerun does not reproduce this failure, so it cannot tell the cases apart
            return False
        culprit = next(([n] for n in present if passes_with([n])), None)
        if culprit is None and len(present) > 1 and passes_with(present):
            culprit = present
        if culprit is None:  # the bug is in this exercise itself: the other diagnoses speak
            return False
        names = " and ".join(f"`{n}`" + (f" ({labels[n]})" if n in labels else "") for n in culprit)
        self.diagnoses.insert(0, f"{names} {'fails' if len(culprit) == 1 else 'fail'} {'its' if len(culprit) == 1 else 'their'} "
                                 f"own check; fix it first: with a correct version in its place {self.fn_name} passes")
        return True

    def named_variants(self) -> list[str]:
        """Known bugs that reproduce every failing row they were tried on,
        the ones explaining the most rows first."""
        full = [bug for bug, n in self.votes.items() if n == self.offered.get(bug, n) and bug not in self.diagnoses]
        # Several that the failing rows cannot tell apart: those a passing row refutes are dropped (a variant
        # whose text covers more than its formula, the only one left, is kept).
        kept = [bug for bug in full if bug not in self.refuted] or full
        return sorted(kept, key=lambda bug: -self.votes[bug])

    def likely_bugs(self) -> list[str]:
        return self.diagnoses + self.named_variants()

    def _explanation(self) -> list[str]:
        """Measurements first (the regime a failure showed in among them),
        then the learner's first wrong line, then named bugs; the last line
        is the most useful."""
        bugs = self.likely_bugs()
        lines = [f"Measured: {f}" for f in self.facts]
        if self.regime and self.regime.get("text") and f"Measured: {self.regime['text']}" not in lines:
            lines.insert(0, f"Measured: {self.regime['text']}")
        if self.located is not None:
            lines.append(f"Where: {self.located.text()}")
        return lines + [f"Likely bug: {d}" for d in reversed(bugs)]

    def locate_with(self, locator: Callable[[], Any]) -> None:
        """locator() -> trace.Located or None, run if the check fails (on the
        visible check's own inputs): the learner's first wrong line. A check
        of several functions registers one per function; the first that
        finds a line is used (a right function's locator finds none)."""
        self.locators.append(locator)

    def _locate(self) -> None:
        for locator in self.locators:
            if self.located is not None:
                return
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    self.located = locator()
            except Exception:  # noqa: BLE001: the tracer's own failure is never the learner's
                self.located = None

    def diagnosis(self, kind: str = "failed", *, rows: list[Row] | None = None, stop: str | None = None,
                  error: str | None = None) -> Diagnosis:
        """This check's failure as fields."""
        rows = self.rows if rows is None else rows
        return Diagnosis(self.fn_name, kind, [r.name for r in rows], [r.name for r in rows if not r.ok],
                         dict(self.regime) if self.regime else None,
                         self.located.to_dict() if self.located is not None else None,
                         self.named_variants(), list(reversed(self.likely_bugs())), list(self.facts), error, stop)

    # -- verdict ---------------------------------------------------------------
    @property
    def passed(self) -> bool:
        return not self.errors and all(r.ok for r in self.rows)

    def finish(self) -> None:
        __tracebackhide__ = True
        self._print_table()
        if self.passed:
            notes = self._run_hooks(PASS_HOOKS)
            print(f"PASS {self.fn_name}: {len(self.rows)}/{len(self.rows)} checks" + "".join(f"; {n}" for n in notes))
            return
        self._locate()
        failed = [r.name for r in self.rows if not r.ok]
        lines = [f"{self.fn_name} failed {len(failed)} of {len(self.rows)} checks: {'; '.join(failed)}."]
        explanation = self._explanation()
        if not explanation:
            notes = [r.note for r in self.rows if not r.ok and r.note]
            if not notes:
                lines.append("  Compare your code with the formula in the exercise text; the rows above show "
                             "which inputs give a different result.")
        lines += [f"  {line}" for line in explanation]
        raise self._failure("\n".join(lines), diagnosis=self.diagnosis())

    def _failure(self, message: str, learner_error: BaseException | None = None,
                 diagnosis: Diagnosis | None = None) -> CheckFailed:
        """The CheckFailed to raise, with FAIL_HOOKS' notes as 'Saved:' lines after the first line."""
        first, _, rest = message.partition("\n")
        notes = "".join(f"\n  Saved: {n}" for n in self._run_hooks(FAIL_HOOKS))
        return CheckFailed(first + notes + (f"\n{rest}" if rest else ""), learner_error=learner_error,
                           diagnosis=diagnosis)

    def _run_hooks(self, hooks: list) -> list[str]:
        """Each hook's note (a hook returns a string or None) for self.subject."""
        notes = []
        for hook in hooks:
            try:
                note = hook(self.subject)
            except Exception as err:  # a helper's hook must never cost the learner the exercise
                note = (f"(note: {getattr(hook, '__name__', 'a hook')} after {self.fn_name} failed: "
                        f"{type(err).__name__}: {_first_line(err)})")
            if isinstance(note, str) and note:
                notes.append(note)
        return notes

    def _print_table(self, rows: list[Row] | None = None) -> None:
        rows = self.rows if rows is None else rows
        if not rows:
            return
        width = max(len("check"), *(len(r.name) for r in rows))
        # each column at least as wide as its widest cell, so a "(2, 3) != (2, 3, 5)" shape keeps the others aligned
        columns = [(title, key, max(least, *(len(getattr(r, key) or "-") for r in rows)))
                   for title, key, least in (("shape", "shape", 6), ("dtype", "dtype", 6), ("allclose", "close", 8),
                                             ("max|diff|", "diff", 9))]
        print(f"{self.fn_name}:")
        print(f"  {'check':<{width}}  " + " ".join(f"{title:<{w}}" for title, _, w in columns))
        for r in rows:
            line = f"  {r.name:<{width}}  " + " ".join(f"{getattr(r, key) or '-':<{w}}" for _, key, w in columns)
            print(line + (f"  <- {r.note}" if r.note else ""))


def matching_variants(got: torch.Tensor, variants: Mapping[str, Any], atol: float, rtol: float,
                      want: torch.Tensor | None = None) -> list[str]:
    """The descriptions of the wrong variants that reproduce `got`. With
    `want`, a variant counts only when it is much nearer to `got` than the
    right result is (an output that is almost right is not explained by a
    variant that is almost right too)."""
    found = []
    off = _max_abs_diff(got, want) if isinstance(want, torch.Tensor) and tuple(want.shape) == tuple(got.shape) else None
    for description, wrong in variants.items():
        try:
            value = wrong() if callable(wrong) else wrong
        except Exception:  # a variant that cannot even run on these inputs
            continue
        # A variant only explains the output if it yields the same dtype too.
        if isinstance(value, torch.Tensor) and value.dtype == got.dtype and close_to(got, value, atol, rtol, equal_nan=True):
            near = _max_abs_diff(got, value) if off else None
            if near is None or near <= 0.25 * off:
                found.append(description)
    return found


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0][:200] if text else "(no message)"


def learner_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback chain of `tb` keeping only the learner's frames (see
    is_learners_file): the check's frames and torch's internals are dropped."""
    kept = [t for t in walk_traceback(tb) if is_learners_file(t.tb_frame.f_code.co_filename)]
    chain = None
    for t in reversed(kept):
        chain = types.TracebackType(chain, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return chain


def _learner_place(err: BaseException) -> str:
    """' inside your repeat_kv (line N: `code`)' for the innermost frame of
    the learner's code, '' when none of the error's frames is theirs."""
    frames = list(walk_traceback(learner_frames(err.__traceback__)))
    if not frames:
        return ""
    code = frames[-1].tb_frame.f_code
    name = getattr(code, "co_qualname", code.co_name)
    where = f" inside your {name}" if not name.startswith("<") else ""
    lineno = frames[-1].tb_lineno
    text = linecache.getline(code.co_filename, lineno).strip()
    return f"{where} (line {lineno}: `{text}`)" if text else f"{where} (line {lineno})"


def _format_frames(err: BaseException, tb: types.TracebackType) -> list[str]:
    """The learner's frames as IPython prints them ("Cell In[2], line 3, in
    f" with the cell's lines), or as plain Python does outside IPython."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    formatter = getattr(shell, "InteractiveTB", None)
    if formatter is not None:
        try:
            saved = err.__cause__, err.__context__, err.__suppress_context__
            err.__cause__ = err.__context__ = None  # only this error's frames, not what it was raised while handling
            try:
                return list(formatter.structured_traceback(type(err), err, tb, tb_offset=0))
            finally:
                err.__cause__, err.__context__, err.__suppress_context__ = saved
        except Exception:  # noqa: BLE001: an IPython that formats differently falls back to plain frames
            pass
    return ["Traceback of the error in your code (most recent call last):\n" +
            "".join(traceback.format_list(traceback.extract_tb(tb))).rstrip("\n"),
            f"{type(err).__name__}: {_first_line(err)}"]


def render_failure(err: CheckFailed) -> list[str]:
    """What IPython shows for a CheckFailed (its _render_traceback_): the
    learner's frames of the error their code raised, if any, then the
    message. Few entries, the message last and whole: the grader keeps a
    cell's last traceback entries only."""
    lines: list[str] = []
    learner = err.learner_error
    tb = learner_frames(learner.__traceback__) if learner is not None else None
    if tb is not None:
        lines += _format_frames(learner, tb)
    lines.append(f"\x1b[0;31mCheckFailed\x1b[0m: {err}")
    return lines


def show_check(check: Callable, fn: Callable, *args, **kwargs) -> None:
    """Run a check on a deliberately wrong function and print what a learner
    would see, without failing the cell: used in the Pitfalls sections."""
    try:
        check(fn, *args, **kwargs)
    except CheckFailed as err:
        print(f"--> CheckFailed: {err}")
    else:
        print("--> the check passed (this variant is not a bug)")
