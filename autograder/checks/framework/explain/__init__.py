"""The measurement explainers of a row that failed Check.compare: each looks
at the learner's result against the reference and, when its pattern holds
exactly, says what the result is ("Measured: ...") or names the cause it
proves. One small module each; explain_mismatch picks the ones that fit the
kind of mismatch, the way pytest picks a comparison's explanation by the
types it compares: a shape that differs gets the shape explainers, a right
shape with wrong values the value explainers. Each explainer reads and
writes only the Check it is given (its facts, diagnoses and the rows a
factor was said for), so the order below is the order lines are said in."""
from __future__ import annotations

import torch

from . import dtype, layout, merged_axes, part_kept, ratio, rounded, size_one_axis, whole

# A result whose shape differs from the reference's.
SHAPE_EXPLAINERS = (size_one_axis.explain, layout.explain, merged_axes.explain, part_kept.explain)
# A result of the reference's shape whose values differ.
VALUE_EXPLAINERS = (whole.explain, ratio.explain, rounded.explain)
# A result of the reference's shape in another dtype (its values may be right): said before the values are read.
explain_dtype = dtype.explain


def explainers_for(got: torch.Tensor, want: torch.Tensor) -> tuple:
    """The explainers that apply to this pair of results, in the order they run."""
    return SHAPE_EXPLAINERS if tuple(got.shape) != tuple(want.shape) else VALUE_EXPLAINERS


def explain_mismatch(chk, name: str, got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
    """Run each explainer that fits the mismatch of row `name` on `chk`."""
    for explain in explainers_for(got, want):
        explain(chk, name, got, want, atol, rtol)
