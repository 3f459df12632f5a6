"""A result that is exactly c times the right one, c a size of the call or a
known constant. One explainer of a failing row (see __init__)."""
from __future__ import annotations

import math

import torch

from ..measure import KNOWN_FACTORS, close_to
from .together import rows_together


def explain(chk, name: str, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
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
    sizes = chk.sizes_named()
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
    rows = rows_together(chk, key, name)  # the earlier rows' line: a fact or (measured on one value) candidates
    on = f" on `{name}`" if len(rows) > 1 else ""
    said = f"{' and '.join(f'`{r}`' for r in rows)}: your result {key} (measured{on}: {float(g[at]):.6g} against " \
           f"{float(w[at]):.6g})"
    if size is None and value in (2.0, 0.5):
        # a factor 2 comes from many codes (a count of half the rows is half of it on these inputs, and not on others)
        chk.candidates(f"{said}; candidates: {how}, or another mistake that gives this factor on these inputs")
        return
    if size is None:
        chk.measured(f"{said}: {how}")
        return
    grows, root = value > 1, f"sqrt({size})" if "sqrt" in factor else f"{size}"
    cause = (f"{'product with' if grows else 'division by'} {root} that the formula does not have (or a "
             f"{'division by' if grows else 'product with'} it missing)")
    if len(rows) == 1 and int(torch.unique(w).numel()) == 1:
        # One right value, one ratio: a size of the call that equals it may be a coincidence (a cosine at its
        # far end gives max_lr, 10 times a min_lr of max_lr / 10, with 10 warmup steps)
        chk.candidates(f"{said}, and {size} is {' and '.join(sizes[size])} in this call; measured on one value, so "
                       f"candidates: a {cause}, or another mistake that gives this one value")
        return
    chk.measured(f"{said}, and {size} is {' and '.join(sizes[size])} in this call: a {cause}")
