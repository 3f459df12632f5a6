"""RMSNorm: rescale each vector to unit root-mean-square, then apply a gain."""
from __future__ import annotations

import torch
from torch import nn
from torch.autograd.function import once_differentiable


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """y = weight * x / sqrt(mean(x², last axis) + eps); weight has shape (d,).

    Squares of half-precision values overflow (fp16 max is 65504, so any
    |x| > 256 gives inf), so the statistic is taken in float32 and the result
    cast back, in the same order as Llama's reference code (float64 stays
    float64). The gradient is the closed form of _RMSNormFunction.backward."""
    if weight.shape != x.shape[-1:]:
        raise ValueError(f"rms_norm: weight must have shape ({x.shape[-1]},), the size of x's last axis, "
                         f"got {tuple(weight.shape)}.")
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return _RMSNormFunction.apply(x, weight, eps)
    return _normalized(x, weight, eps)[0]  # nothing to differentiate: the same numbers without the Function's cost


def _normalized(x: torch.Tensor, weight: torch.Tensor, eps: float):
    """(y, x / rms(x) in float32 or wider, 1 / rms(x)): the forward, and what its backward needs."""
    x_wide = x.to(torch.promote_types(x.dtype, torch.float32))
    # The mean of squares as a sum over the last axis divided by its length:
    # the same numbers as pow(2).mean().
    mean_square = (x_wide * x_wide).sum(dim=-1, keepdim=True) / x.shape[-1]  # (..., 1)
    inv_rms = torch.rsqrt(mean_square + eps)                                 # (..., 1)
    normed = x_wide * inv_rms                                                # (..., d), wide
    return weight * normed.to(x.dtype), normed, inv_rms


class _RMSNormFunction(torch.autograd.Function):
    """rms_norm's forward as written out, with its backward in closed form.

    Autograd would differentiate the forward's steps one by one: ten kernels
    over the whole activation backward, reductions included (torch.profiler,
    a (12, 64, 128) input). The closed form takes six: four element-wise, two
    of them in place, and two reductions. On CPU, where each element-wise
    step is a kernel of its own, those passes are a norm's share of a
    training step."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y, normed, inv_rms = _normalized(x, weight, eps)
        ctx.save_for_backward(normed, inv_rms, weight)
        ctx.x_dtype = x.dtype
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        # With n = x·r, r = 1/rms(x), y = w·n and g = dL/dy, gn = g·w:
        #   dL/dw = sum over rows of g·n
        #   dL/dx = r·(gn - n·mean(gn·n))   (r's own dependence on x removes
        #           from gn its component along n)
        # and mean(gn·n) = (g·n) @ w / d reuses g·n, a matrix-vector product.
        normed, inv_rms, weight = ctx.saved_tensors
        grad_times_normed = grad.to(normed.dtype) * normed  # (..., d)
        grad_weight = (grad_times_normed.sum_to_size(weight.shape).to(weight.dtype)
                       if ctx.needs_input_grad[1] else None)
        mean_along = (grad_times_normed @ weight.to(normed.dtype)).unsqueeze(-1) / normed.shape[-1]  # (..., 1)
        grad_x = (grad.to(normed.dtype) * weight).addcmul_(normed, mean_along, value=-1).mul_(inv_rms)
        return grad_x.to(ctx.x_dtype), grad_weight, None


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)  # the module-level function: a notebook can swap it

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"
