"""A floating result whose values are the right ones rounded to whole numbers.
One explainer of a failing row (see __init__)."""
from __future__ import annotations

import torch

from ..measure import few


def explain(chk, name: str, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
    """A wrong floating result whose every value is the right one rounded
    down (or to the nearest) whole number: an integer division or an int()."""
    if not want.is_floating_point() or got.numel() == 0 or got.numel() != want.numel():
        return
    g, w = got.detach().double().cpu(), want.detach().double().cpu()
    if not bool(torch.isfinite(w).all()) or bool((w == w.round()).all()):
        return  # the right values are whole numbers themselves: nothing to tell
    if not bool((g != 0).any()) or not bool((w.abs() > 1).any()):
        # all zeros, or right values within [-1, 1] whose roundings are 0 and 1 only: code that gives 0 for
        # another reason (a ramp from 0) or a one-hot row (an argmax for a distribution) looks the same
        return
    for how, rounded in (("rounded down", w.floor()), ("truncated towards zero", w.trunc()),
                         ("rounded", w.round())):
        if torch.equal(g, rounded):
            chk.measured(f"`{name}`: your values are the right ones {how} to whole numbers (measured: yours "
                         f"{few(g)}, the right ones {few(w)}): an integer division (`//`), int() or round() "
                         "drops the fraction; divide with `/`")
            return
