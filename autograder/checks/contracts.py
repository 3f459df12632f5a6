"""Two promises every tensor exercise's text makes, checked the same way
everywhere: the function leaves its inputs as they were (no `x -= mean`,
no `masked_fill_` on the caller's logits), and the result keeps the
input's dtype (a float16 or bfloat16 case where the exercise casts).

    got = call_keeping_inputs(chk, rms_norm, x, weight, eps, names=("x", "weight"))

A changed input is measured (the argument's values differ after the call
from a copy taken before it), so it is named as the bug it is."""
from __future__ import annotations

import torch

from .core import Check, Row

INPUTS_ROW = "inputs unchanged"


def _changed(before: torch.Tensor, after: torch.Tensor) -> bool:
    if before.shape != after.shape or before.dtype != after.dtype:
        return True
    return not bool(torch.equal(torch.nan_to_num(before), torch.nan_to_num(after)))


def call_keeping_inputs(chk: Check, fn, *args, names: tuple[str, ...] = (), on_error=None, **kwargs):
    """chk.call(fn, *args, **kwargs), plus one table row per check saying
    whether every tensor argument still holds its values afterwards."""
    __tracebackhide__ = True
    copies = [(i, a, a.detach().clone()) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    got = chk.call(fn, *args, on_error=on_error, **kwargs)
    changed = [names[i] if i < len(names) else f"argument {i + 1}" for i, a, copy in copies if _changed(copy, a)]
    record_inputs(chk, changed)
    return got


def record_inputs(chk: Check, changed: list[str]) -> None:
    """The 'inputs unchanged' row: added on the first call, turned to FAIL
    (once, with the diagnosis) the first time a call changes an input."""
    row = next((r for r in chk.rows if r.name == INPUTS_ROW), None)
    if row is None:
        row = Row(INPUTS_ROW, True, close="ok")
        chk.rows.append(row)
    if not changed or not row.ok:
        return
    row.ok, row.close, row.note = False, "FAIL", f"{', '.join(changed)} changed by the call"
    what = " and ".join(f"`{n}`" for n in changed)
    chk.diagnose(f"{chk.fn_name} changes its input {what} in place (measured: its values differ after the call): "
                 "an in-place operation (`x -= ...`, `x *= ...`, `masked_fill_`, `.div_`, or `.float()` on a tensor "
                 "that already is float32, which returns x itself) writes into the caller's tensor; compute a new "
                 "tensor instead (`x = x - ...`, `masked_fill`)")
