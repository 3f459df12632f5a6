"""The learner's line for a contract's failure: each side traced on the same
inputs (traces) and the first wrong value located, for one regime, one call
or a list of cases."""
from __future__ import annotations

import contextlib
import io
from typing import Callable

import torch

from .. import trace
from ..framework.calling import fresh, guarded_call, refuse_delegation
from .calls import positional_args, split_case


def locate_regime(fn, contract, regime, args, kwargs, error, got, want):
    """The learner's line for a failing regime; None when it cannot be told."""
    if not contract.locate:
        return None
    try:
        if contract.numbers:
            return _locate_number_calls(fn, contract, [(args, kwargs)])
        with torch.enable_grad() if regime.grad else contextlib.nullcontext():
            mine, theirs = traces(fn, contract, args, kwargs)
        if mine.error is None and error is not None:
            return trace.locate_error(error)
        if regime.grad and mine.error is None:
            return trace.locate_grad_cut(mine)
        found = trace.locate_raise(mine, theirs) if mine.error is not None else trace.locate(mine, theirs)
        if mine.error is None and regime.dtype is not None:
            # a tensor made new, in the dtype the result has, on the result's path fixes that dtype: its line comes
            # before a value that is only one the reference never has (a slice read into a preallocated float32 out)
            found = trace.locate_dtype(mine, regime.dtype) or found
        return number_first(found, fn, contract.exercise, contract.reference, args, kwargs)
    except Exception:  # noqa: BLE001: the tracer's own failure is never the learner's
        return None


def traces(fn, contract, args: tuple, kwargs: dict):
    """(the learner's trace, the reference's) on copies of the same inputs."""
    return traced_pair(fn, contract.exercise, contract.reference, args, kwargs)


def traced_pair(fn, exercise: str, reference: Callable, args: tuple, kwargs: dict):
    """traces() for a reference that no contract declares."""
    with refuse_delegation(exercise, fn), contextlib.redirect_stdout(io.StringIO()):
        theirs = trace.record(reference, fresh(args), fresh(kwargs), learner=False)
        mine = trace.record_learner(fn, fresh(args), fresh(kwargs), call=lambda *a, **k: guarded_call(fn, a, k))
    return mine, theirs


def locate_call(fn, reference: Callable, args: tuple, kwargs: dict | None = None, exercise: str = ""):
    """The learner's first wrong line when fn(*args) and reference(*args) differ (None if it cannot be told)."""
    kwargs = kwargs or {}
    mine, theirs = traced_pair(fn, exercise, reference, args, kwargs)
    if theirs.error is not None:
        return None
    found = trace.locate_raise(mine, theirs) if mine.error is not None else trace.locate(mine, theirs)
    return number_first(found, fn, exercise, reference, args, kwargs)


def number_first(found, fn, exercise: str, reference: Callable, args: tuple, kwargs: dict):
    """`found`, or the earlier line binding a Python number its line reads
    when another number there is measured to make the result right, where
    the call returned or raised (trace.locate_bound_number)."""
    if found is None:
        return None
    try:
        with refuse_delegation(exercise, fn), contextlib.redirect_stdout(io.StringIO()):
            better = trace.locate_bound_number(found, fn, reference, args, kwargs,
                                               call=lambda *a, **k: guarded_call(fn, a, k), copy=fresh)
    except Exception:  # noqa: BLE001: the tracer's own failure is never the learner's
        better = None
    return better or found


def locate_cases(fn, contract, cases: list):
    """The learner's first wrong line on the first visible case that shows one."""
    if contract.numbers:
        return _locate_numbers(fn, contract, cases)
    for case in cases:
        _, named, kwargs = split_case(contract, case)
        args = positional_args(contract, named)
        mine, theirs = traces(fn, contract, args, kwargs)
        if theirs.error is not None:
            continue
        found = trace.locate_raise(mine, theirs) if mine.error is not None else trace.locate(mine, theirs)
        found = number_first(found, fn, contract.exercise, contract.reference, args, kwargs)
        if found is not None:
            return found
    return None


def _locate_numbers(fn, contract, cases: list):
    """The first line binding a number the reference never has, over every visible case."""
    calls = []
    for case in cases:
        _, named, kwargs = split_case(contract, case)
        calls.append((positional_args(contract, named), kwargs))
    return _locate_number_calls(fn, contract, calls)


def _locate_number_calls(fn, contract, calls: list):
    """The first line binding a number the reference never has, over the (args, kwargs) calls."""
    if getattr(fn, "recheck_trace", None) is not None:
        return None  # the grader's recheck traces tensors in the learner's process, not Python numbers
    mine, theirs = [], []
    for args, kwargs in calls:
        with refuse_delegation(contract.exercise, fn), contextlib.redirect_stdout(io.StringIO()):
            theirs.append(trace.record_lines(contract.reference, args, kwargs, learner=False))
            mine.append(trace.record_lines(lambda *a, **k: guarded_call(fn, a, k), args, kwargs, subject=fn))
    errors = [m.error for m in mine if m.error is not None]
    if errors:
        return trace.locate_error(errors[0])
    return trace.locate_numbers(mine, theirs)
