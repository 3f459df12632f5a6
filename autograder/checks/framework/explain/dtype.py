"""A result of the right shape and values in another dtype than the one it
must have. One explainer of a failing row (see __init__)."""
from __future__ import annotations

import torch

from ..calling import fresh, guarded_call, refuse_delegation
from ..measure import close_to


def explain(chk, got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, atol: float, rtol: float) -> None:
    """Values that are the reference's once cast, in another dtype: the step
    that makes the other dtype is asked for, and the learner's line where
    their values leave `dtype` is looked for on their own call (where)."""
    if not close_to(got.to(want.dtype), want, atol, rtol):
        return
    # The expected dtype is not always the inputs' (a bool mask from two ints, int64 ids from uint8 bytes): the
    # step to find is the one that made the other dtype.
    right = "are right" if torch.equal(got.to(want.dtype), want) else "match within the check's tolerance"
    # the dtype an input of the call has is that input's, whatever it is in another call: named so, not fixed
    given = next((n for n, v in chk.last_call if isinstance(v, torch.Tensor) and v.dtype == dtype
                  and n.isidentifier()), None)  # a parameter's own name (not `args[0]`, `argument 2`)
    give, cast = (f"{dtype}, the dtype of `{given}`,", f"{given}.dtype") if given else (f"{dtype}", f"{dtype}")
    chk.diagnose(f"the values {right} but the result is {got.dtype}, expected {dtype}: find the step "
                 f"that makes {got.dtype} (for example a dtype= argument, a cast such as .float() or "
                 ".int(), torch.tensor(...) of Python numbers, which takes the default dtype, or "
                 f"arithmetic that promotes) and give {give} instead (or cast with .to({cast}))")
    made = chk.last_made  # the call this row reads, before later calls replace it
    chk.locate_with(lambda: where(chk.fn_name, made, got, dtype), last=True)


def where(exercise: str, made: tuple | None, got: torch.Tensor, want: torch.dtype):
    """The learner's line where the values leave `want` (trace.locate_dtype, trace.locate_promotion)."""
    from ... import trace  # the tracer sits above the framework's calling layer it uses
    mine = traced_again(exercise, made, got)
    return None if mine is None else trace.locate_dtype(mine, want) or trace.locate_promotion(mine, want)


def traced_again(exercise: str, made: tuple | None, got: torch.Tensor):
    """The learner's trace of the call `made` (fn, args, kwargs), made again on copies under the tracer; only
    when it gives `got` again, dtype and values (a row compared against another call's result gets None)."""
    from ... import trace
    if made is None:
        return None
    fn, args, kwargs = made
    with refuse_delegation(exercise, fn):
        mine = trace.record_learner(fn, fresh(args), fresh(kwargs), call=lambda *a, **k: guarded_call(fn, a, k))
    again = trace.tensors_in(mine.result)
    if mine.error is not None or not again or again[0].dtype != got.dtype or not torch.equal(again[0], got):
        return None
    return mine
