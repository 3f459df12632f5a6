"""RMSNorm: rescale each vector to unit root-mean-square, then apply a gain."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """y = weight * x / sqrt(mean(x², last axis) + eps).

    Squares of half-precision values overflow (fp16 max is 65504, so any
    |x| > 256 gives inf), so the statistic is taken in float32 and the result
    cast back, in the same order as Llama's reference code."""
    dtype = x.dtype
    x32 = x.float()
    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1)
    return weight * (x32 * inv_rms).to(dtype)


def _inv_rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """1 / sqrt(mean(x², last axis) + eps), shape (..., 1): one reduction
    (the vector norm), then in-place arithmetic on the small result."""
    return torch.linalg.vector_norm(x, dim=-1, keepdim=True).square_().div_(x.shape[-1]).add_(eps).rsqrt_()


class _Normalize(torch.autograd.Function):
    """x / rms(x) for float32/float64, with a hand-written backward.

    Autograd through the formula records five operations and replays them
    backwards; this one saves y = x / rms and 1 / rms and needs three
    full-size operations for the gradient (about twice as fast on CPU at d = 64):
        dL/dx = (1/rms) * (g - y * mean(g * y))
    tests/test_layers.py checks it against autograd of rms_norm and gradcheck."""

    @staticmethod
    def forward(ctx, x, eps):
        inv_rms = _inv_rms(x, eps)
        y = x * inv_rms
        ctx.save_for_backward(y, inv_rms)
        return y

    @staticmethod
    def backward(ctx, grad):
        y, inv_rms = ctx.saved_tensors
        minus_projection = torch.linalg.vecdot(grad, y).unsqueeze_(-1).div_(-y.shape[-1])  # -mean(g * y): (..., 1)
        return torch.addcmul(grad, y, minus_projection).mul_(inv_rms), None


def normalize(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """rms_norm without the gain: x / sqrt(mean(x², last axis) + eps)."""
    full_precision = x.dtype in (torch.float32, torch.float64)
    if full_precision and torch.is_grad_enabled() and x.requires_grad:
        return _Normalize.apply(x, eps)
    if full_precision:  # no gradient needed (e.g. decoding): torch's own, one call
        return F.rms_norm(x, (x.shape[-1],), None, eps)
    x32 = x.float()  # half precision: the statistic in float32, as rms_norm does
    return (x32 * _inv_rms(x32, eps)).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * self.normalize(x)  # = rms_norm(x, self.weight, self.eps)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """The normalised input before the gain. The model's fast path
        multiplies the gain into the next layer's weights instead."""
        return normalize(x, self.eps)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"
