"""A result shorter than the right one along one axis, holding its first or
last entries. One explainer of a failing row (see __init__)."""
from __future__ import annotations

import torch

from ..measure import close_to


def explain(chk, name: str, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
    """A result shorter than the right one along one axis that holds its first or last entries there: how many
    were dropped, and from which end."""
    if got.dim() != want.dim() or got.dim() == 0:
        return
    apart = [a for a in range(got.dim()) if got.shape[a] != want.shape[a]]
    if len(apart) != 1 or not 0 < got.shape[apart[0]] < want.shape[apart[0]]:
        return
    axis, n, total = apart[0], got.shape[apart[0]], want.shape[apart[0]]
    kept = [end for end, part in (("last", want.narrow(axis, total - n, n)), ("first", want.narrow(axis, 0, n)))
            if close_to(got, part, atol, rtol)]
    if len(kept) != 1:  # neither end, or both alike (a row compared on placeholders, equal entries): nothing measured
        return
    said = chk.ratio_rows.setdefault("part kept", [])  # one row says it; the others would repeat it
    said.append(name)
    if len(said) > 1:
        return
    end = kept[0]
    dropped, gone = "first" if end == "last" else "last", total - n
    # The count missing is a difference of two lengths: an input's size along another axis (the batch) that
    # equals it is a coincidence of the test shapes as often as its source; one along the same axis (the
    # prompt's length, the cached positions) is read as where it may come from.
    owners = [w for w in chk.sizes_named().get(gone, []) if w.endswith(f".shape[{axis}]")]
    chk.diagnose(f"`{name}` holds the {end} {n} of the {total} entries the right result has along axis "
                 f"{axis} (measured: they equal the right result's {end} {n} there): the {dropped} "
                 f"{gone}" + (f" (= {' or '.join(owners)})" if owners else "")
                 + (" are" if gone > 1 else " is") + " missing; every entry belongs in the result "
                 f"(e.g. a slice that cuts {'them' if gone > 1 else 'it'} off"
                 # a loop that stops early leaves the first entries right and lacks only the last ones
                 + (f", or a loop that runs {gone} step{'s' if gone > 1 else ''} fewer" if dropped == "last" else "")
                 + ")")
