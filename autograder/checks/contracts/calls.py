"""Calling the learner's function under a contract: one call in a regime with
its printing silenced and its inputs given back (call_in_regime), results
compared in the contract's terms (same_result), a case split into its
named arguments and back (split_case, positional_args); fresh copies of a
case's values come from the framework (fresh)."""
from __future__ import annotations

import contextlib
import io
import math

import torch

from .. import trace
from ..framework.calling import call_giving_inputs_back, guarded_call, refuse_delegation
from ..framework.measure import close_to, tol_for
from ..learner_code import LearnerTimeout


def same_result(contract, got, want, dtype: torch.dtype | None) -> bool:
    if contract.same is not None:
        return bool(contract.same(got, want))
    if isinstance(want, (tuple, list)):
        return (isinstance(got, (tuple, list)) and len(got) == len(want)
                and all(same_result(contract, g, w, dtype) for g, w in zip(got, want)))
    if isinstance(want, float) and is_number(got):  # the same formula written another way rounds otherwise
        return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-12)
    if not isinstance(want, torch.Tensor):
        return got == want
    if not isinstance(got, torch.Tensor) or got.dtype != want.dtype or got.device != want.device:
        return False
    atol, rtol = (contract.tolerance or tol_for)(want.dtype)
    return close_to(got, want, atol, rtol)


def dtype_of_result(value) -> torch.dtype | None:
    tensors = trace.tensors_in(value)
    return tensors[0].dtype if tensors else None


def call_in_regime(fn, contract, args: tuple, kwargs: dict, left: list[str] | None = None,
          written: list[str] | None = None, named: list | None = None):
    """(result, error) of one learner call in a regime; printing silenced;
    `left` collects the torch settings it left changed (given back);
    `written` the names among `named` ((name, value) of the call's
    arguments) that it wrote into (their values given back, its result kept)."""
    with refuse_delegation(contract.exercise, fn), contextlib.redirect_stdout(io.StringIO()):
        try:
            return call_giving_inputs_back(named or [], lambda: guarded_call(fn, args, kwargs, left), written), None
        except (Exception, LearnerTimeout) as err:  # noqa: BLE001: a regime that raises is a finding
            if type(err).__name__ == "Delegation":
                raise
            return None, err


def split_case(contract, case) -> tuple[str, dict, dict]:
    label, args, kwargs = case
    named = dict(zip(contract.names, args))
    return label, named, dict(kwargs)


def positional_args(contract, named: dict) -> tuple:
    return tuple(named[n] for n in contract.names if n in named)


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
