"""A result with the right values with its axes in another order. One explainer of a failing row (see __init__)."""
from __future__ import annotations

import itertools

import torch

from ..measure import close_to

# How a result with its axes in another order is said; a later row says it again only where its sizes name
# the moved axes better.
LAYOUT = "your result holds the right values with its axes in another order"
# Said where another row of the same function refutes that: the sizes in another order, no order the right values.
NOT_ALL = "no order of its axes gives the right result: the order of its axes is not all that is wrong"


def explain(chk, name: str, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
    """A result with the right values in another order of axes: which axes moved, and where they belong."""
    if got.dim() != want.dim() or sorted(got.shape) != sorted(want.shape) or got.dim() > 6:
        return
    for order in itertools.permutations(range(got.dim())):
        moved = got.permute(order)
        if tuple(moved.shape) == tuple(want.shape) and close_to(moved, want, atol, rtol):
            break
    else:
        _refuted(chk, name)
        return
    moved_axes = [(j, a) for j, a in enumerate(order) if j != a]
    if len(chk.result_axes) == want.dim():  # the result's own axes, by place: a size two axes share names neither
        named = {a: [chk.result_axes[j]] for j, a in moved_axes}
    else:  # the axes by the names the check gives them, else by where the call's inputs have their sizes
        owners = ({size: [n for n, s in chk.axes.items() if s == size] for size in set(chk.axes.values())}
                  if chk.axes else chk.sizes_named())
        named = {a: owners.get(got.shape[a], []) for _, a in moved_axes}
    place = lambda axis: "the last" if axis == want.dim() - 1 else f"{axis}"  # noqa: E731
    misplaced = [f"the axis of size {got.shape[a]}" + (f" ({' or '.join(named[a])})" if named[a] else "")
                 + f" is at position {a}, expected at {place(j)}" for j, a in moved_axes]
    shapes = f"shape is {tuple(got.shape)}, expected {tuple(want.shape)}, and your result.permute{tuple(order)}"
    refuted = chk.layout.get("refuted", {}).get(chk.fn_name)
    if refuted is not None:  # another row already shows more than the order wrong: said as this row's measure
        if not any(NOT_ALL in f for f in chk.facts):
            chk.measured(_only_some_rows(name, shapes, refuted))
        return
    text = (f"{LAYOUT} (measured: its {shapes} equals the right result): {'; '.join(misplaced)}; compute it in the "
            "expected layout, or transpose/permute the axes into place")
    # Said once, for the row whose moved axes the inputs' sizes name best (one owner each).
    unclear = sum(len(named[a]) != 1 for _, a in moved_axes)
    said = next((i for i, d in enumerate(chk.diagnoses) if d.startswith(LAYOUT)), None)
    if said is None:
        chk.diagnose(text)
    elif unclear < chk.layout.get("unclear", 0):
        chk.diagnoses[said] = text
        chk.read(text)
    else:
        chk.read(chk.diagnoses[said])  # this row reads the same, said once for the row that names it best
        return
    chk.layout.update(unclear=unclear, said=(chk.fn_name, name, shapes))


def _refuted(chk, name: str) -> None:
    """A row of the same function whose sizes are the expected ones in another order, and whose values no order of
    its axes makes right: a right result with its axes moved is not the whole mistake. A cause said already for
    another row becomes what it is, a measure of that row, with this row beside it."""
    chk.layout.setdefault("refuted", {}).setdefault(chk.fn_name, name)
    fn_name, row, shapes = chk.layout.get("said", (None, "", ""))
    said = next((d for d in chk.diagnoses if d.startswith(LAYOUT)), None)
    if said is not None and fn_name == chk.fn_name:
        chk.diagnoses.remove(said)
        chk.measured(_only_some_rows(row, shapes, name))


def _only_some_rows(row: str, shapes: str, refuted: str) -> str:
    return f"for {row} your result's {shapes} equals the right result, but for {refuted} {NOT_ALL}"
