"""A floating result whose values are the right ones rounded to whole numbers.
One explainer of a failing row (see __init__)."""
from __future__ import annotations

import torch

from ..measure import few

# What drops the fraction in each way of rounding the values show; several fit one result (a positive value is
# rounded down and truncated alike), and the code is not read here: they are said as candidates.
_CAUSES = (
    ("rounded down", lambda w: w.floor(), "an integer division (`//`) or torch.floor"),
    ("truncated towards zero", lambda w: w.trunc(), "a cast to an integer dtype (`.long()`, `.int()`, `.to()` with an "
                                                     "integer tensor's dtype), int() or torch.trunc"),
    ("rounded", lambda w: w.round(), "round() or torch.round"),
)


def explain(chk, name: str, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
    """A wrong floating result whose every value is the right one rounded
    down, truncated or rounded to a whole number: the values measured, and
    what drops a fraction that way as candidates."""
    if not want.is_floating_point() or got.numel() == 0 or got.numel() != want.numel():
        return
    g, w = got.detach().double().cpu(), want.detach().double().cpu()
    if not bool(torch.isfinite(w).all()) or bool((w == w.round()).all()):
        return  # the right values are whole numbers themselves: nothing to tell
    if not bool((g != 0).any()) or not bool((w.abs() > 1).any()):
        # all zeros, or right values within [-1, 1] whose roundings are 0 and 1 only: code that gives 0 for
        # another reason (a ramp from 0) or a one-hot row (an argmax for a distribution) looks the same
        return
    fits = [(how, causes) for how, rounding, causes in _CAUSES if torch.equal(g, rounding(w))]
    if not fits:
        return
    kind = "" if got.is_floating_point() else f", and your result is {str(got.dtype).removeprefix('torch.')}"
    chk.measured(f"`{name}`: your values are the right ones {fits[0][0]} to whole numbers{kind} (measured: yours "
                 f"{few(g)}, the right ones {few(w)})")
    causes = [c for _, c in fits]
    if not got.is_floating_point():  # an integer result: its dtype came from a cast or an integer operand
        causes = [_CAUSES[1][2], *(c for c in causes if c != _CAUSES[1][2])]
    chk.candidates(f"values {fits[0][0]} to whole numbers come from a step that drops the fraction; candidates: "
                   f"{'; '.join(causes)}")
