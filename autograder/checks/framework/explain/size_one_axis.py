"""A result one axis of size 1 apart from the expected shape. One explainer of a failing row (see __init__)."""
from __future__ import annotations

import torch

from ...trace import size_one_axis


def explain(chk, name: str, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
    """A result one axis of size 1 apart from the expected shape: which axis, and what keeps or drops one."""
    got_shape, want_shape = tuple(got.shape), tuple(want.shape)
    extra, missing = size_one_axis(got_shape, want_shape), size_one_axis(want_shape, got_shape)
    if extra is not None:
        chk.measured(f"your result has shape {got_shape}, expected {want_shape}: an extra axis of size 1 at "
                     f"position {extra} (keepdim=True, a slice such as [:, -1:] where [:, -1] is meant, or an "
                     "unsqueeze keeps an axis the result must not have)")
    elif missing is not None:
        chk.measured(f"your result has shape {got_shape}, expected {want_shape}: the axis of size 1 at "
                     f"position {missing} is missing (a bare squeeze() drops every axis of size 1, such as a "
                     "batch of one or a one-token step: squeeze only the axis you mean, squeeze(dim))")
