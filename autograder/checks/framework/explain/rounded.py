"""A result in the right dtype whose every value is a float16 (or bfloat16)
number, each within that dtype's rounding of the reference's. One explainer
of a failing row (see __init__)."""
from __future__ import annotations

import torch

from .dtype import traced_again
from .together import rows_together

LOWER = (torch.float16, torch.bfloat16)


def _representable(t: torch.Tensor, low: torch.dtype) -> bool:
    return bool(torch.equal(t.to(low).to(t.dtype), t))


def explain(chk, name: str, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
    """Values of a float32 or float64 result that a cast to a lower
    precision leaves unchanged, where the reference's are not, each within
    that precision's rounding of the reference's: measured, and the
    learner's line that rounds looked for on their own call."""
    if not want.is_floating_point() or want.dtype in LOWER or got.dtype != want.dtype or got.numel() < 4:
        return
    g, w = got.detach().cpu(), want.detach().cpu()
    if not (bool(torch.isfinite(g).all()) and bool(torch.isfinite(w).all())) or bool((g == g.round()).all()):
        return  # whole numbers are float16 numbers whatever made them
    for low in LOWER:
        if not _representable(g, low) or _representable(w, low):
            continue
        eps = torch.finfo(low).eps
        scale = float(w.abs().max())
        if not torch.allclose(g.double(), w.double(), rtol=eps, atol=eps * scale):
            continue
        off = float(((g.double() - w.double()).abs() / w.double().abs().clamp_min(eps * scale)).max())
        low_name = str(low).removeprefix("torch.")
        rows = rows_together(chk, f"rounded to {low_name}", name)
        chk.measured(f"{' and '.join(f'`{r}`' for r in rows)}: every value of your result is exactly a {low_name} "
                     f"number (a cast to {low_name} changes none) and within {low_name}'s rounding of the reference's "
                     f"(largest relative difference {off:.2g}, {low_name}'s precision {eps:.2g}), where the "
                     f"reference's values are not {low_name} numbers")
        if len(rows) == 1:
            made = chk.last_made  # the call this row reads, before later calls replace it
            chk.locate_with(lambda: _where(chk.fn_name, made, got, low), last=True)
        return


def _where(exercise: str, made: tuple | None, got: torch.Tensor, low: torch.dtype):
    from ... import trace
    mine = traced_again(exercise, made, got)
    return None if mine is None else trace.locate_detour(mine, low)
