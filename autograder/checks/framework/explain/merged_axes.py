"""A result with the right values in the right order, adjacent axes merged (or
one split). One explainer of a failing row (see __init__)."""
from __future__ import annotations

import torch

from ..measure import axis_groups, close_to


def explain(chk, name: str, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
    """A result with the right values in the right order, some adjacent axes merged into one (or one axis
    split into several): which axes, by their sizes and where the call's inputs have them."""
    if got.numel() != want.numel() or got.dim() == want.dim() or got.numel() == 0 or \
            not close_to(got, want.reshape(got.shape), atol, rtol):
        return
    merged = got.dim() < want.dim()
    groups = axis_groups(tuple(want.shape), tuple(got.shape)) if merged else \
        axis_groups(tuple(got.shape), tuple(want.shape))
    if groups is None:
        return
    # A size that several of the inputs' axes have (the batch of four tensors, or the 2 a stack of two adds)
    # names no source on one call: only a size that one input axis has is named.
    owners = ({size: [n for n, s in chk.axes.items() if s == size] for size in set(chk.axes.values())}
              if chk.axes else {size: where for size, where in chk.sizes_named().items() if len(where) == 1})
    size_of = lambda n: f"{n}" + (f" = {' or '.join(owners[n])}" if owners.get(n) else "")  # noqa: E731
    fine = want.shape if merged else got.shape
    said = []
    for coarse, axes in enumerate(groups):
        if len(axes) > 1:
            sizes = " and ".join(size_of(int(fine[a])) for a in axes)
            axes_text = " and ".join(str(a) for a in axes)
            said.append(f"the expected axes {axes_text} (sizes {sizes}) are merged into your axis {coarse}"
                        if merged else f"the expected axis {coarse} (size {size_of(int(want.shape[coarse]))}) "
                                       f"is split into your axes {axes_text} (sizes {sizes})")
    fix = ("a flatten, view or reshape merges axes the result keeps apart (flatten(1) merges every axis after "
           "the first, view(-1, n) every axis before the last); merge only the axes that belong together, "
           "flatten(start_dim, end_dim), or reshape to the expected shape") if merged else \
        ("an axis the result keeps whole is split (a view or reshape given more sizes, or torch.stack where "
         "torch.cat joins along an existing axis): join along that axis, or reshape to the expected shape")
    chk.diagnose(f"your result has shape {tuple(got.shape)}, expected {tuple(want.shape)}, with the right "
                 f"values in the right order (measured: the right result reshaped to {tuple(got.shape)} equals "
                 f"yours): {'; '.join(said)}: {fix}")
