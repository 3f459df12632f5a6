"""Checks for notebook 02: RMSNorm (function and module) and LayerNorm."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .core import Check, randn


def _ref_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """torch's built-in RMSNorm on a float32 copy, gain applied after casting
    back (the order of Llama's reference code)."""
    y = F.rms_norm(x.float(), (x.shape[-1],), eps=eps)
    return weight * y.to(x.dtype)


def _rms_variants(x, weight, eps):
    """Known wrong versions of RMSNorm, evaluated on the same inputs."""
    dtype = x.dtype
    x32 = x.float()
    return {
        "eps outside the sqrt: x / (sqrt(mean(x²)) + eps) instead of x / sqrt(mean(x²) + eps)":
            lambda: weight * (x32 / (x32.pow(2).mean(-1, keepdim=True).sqrt() + eps)).to(dtype),
        "mean over the wrong axis: the statistic must be taken over the features (dim=-1), per token":
            lambda: weight * (x32 * torch.rsqrt(x32.pow(2).mean(0, keepdim=True) + eps)).to(dtype),
        "mean over the wrong axis (dim=1): the statistic must be taken over the features (dim=-1), per token":
            lambda: weight * (x32 * torch.rsqrt(x32.pow(2).mean(1, keepdim=True) + eps)).to(dtype),
        "mean over every axis: one statistic for the whole tensor instead of one per token (dim=-1)":
            lambda: weight * (x32 * torch.rsqrt(x32.pow(2).mean() + eps)).to(dtype),
        "missing gain: the result is never multiplied by weight":
            lambda: (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(dtype),
        "no float32 upcast: x² overflows float16 (max 65504, so |x| > 256 gives inf); compute the statistic "
        "on x.float() and cast the result back to x.dtype":
            lambda: weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)),
        "mean subtracted: that is LayerNorm; RMSNorm divides by the root mean square of x itself":
            lambda: weight * F.layer_norm(x32, (x.shape[-1],), eps=eps).to(dtype),
        "divided by mean(x²) instead of its square root":
            lambda: weight * (x32 / (x32.pow(2).mean(-1, keepdim=True) + eps)).to(dtype),
        "sum instead of mean of x²":
            lambda: weight * (x32 * torch.rsqrt(x32.pow(2).sum(-1, keepdim=True) + eps)).to(dtype),
        "result left in float32: cast it back to x.dtype":
            lambda: weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)),
    }


def rms_norm_cases(seed: int, shape: tuple, dtype):
    """(label, x, weight, eps): ordinary values, tiny values where eps
    matters, and half precision with |x| large enough to overflow x²."""
    d = shape[-1]
    weight = (1 + 0.5 * randn(d, seed=seed + 1)).to(dtype)  # a gain far from 1, so a missing gain shows
    x = randn(*shape, seed=seed, dtype=dtype)
    yield f"{dtype} {tuple(shape)}", x, weight, 1e-6
    yield "tiny inputs, eps=1e-2", x * 1e-2, weight, 1e-2
    yield "float16, |x| ~ 300 (x² overflows)", (x.double() * 300).half(), weight.half(), 1e-6


def check_rms_norm(rms_norm, *, seed: int = 0, shape: tuple = (2, 3, 5, 8), dtype=torch.float32) -> None:
    """rms_norm(x, weight, eps) against torch.nn.functional.rms_norm."""
    __tracebackhide__ = True
    chk = Check("rms_norm", expects="a tensor with x's shape and dtype")
    for label, x, weight, eps in rms_norm_cases(seed, shape, dtype):
        got = chk.call(rms_norm, x, weight, eps)
        chk.compare(label, got, _ref_rms_norm(x, weight, eps), variants=_rms_variants(x, weight, eps))
    chk.finish()


def check_layer_norm(layer_norm, *, seed: int = 4, shape: tuple = (3, 4, 10), dtype=torch.float32) -> None:
    """layer_norm(x, weight, bias, eps) against torch.nn.functional.layer_norm."""
    __tracebackhide__ = True
    chk = Check("layer_norm", expects="a tensor with x's shape")
    d = shape[-1]
    x = randn(*shape, seed=seed, dtype=dtype) * 2 + 3  # a mean far from zero, so forgetting it shows
    weight, bias = 1 + 0.5 * randn(d, seed=seed + 1, dtype=dtype), randn(d, seed=seed + 2, dtype=dtype)
    eps = 1e-5
    for label, x in ((f"{dtype} {tuple(shape)}, mean 3", x), ("x + 300 (large mean)", x + 300)):
        _layer_norm_case(chk, layer_norm, label, x, weight, bias, eps)
    chk.finish()


def _layer_norm_case(chk, layer_norm, label, x, weight, bias, eps):
    __tracebackhide__ = True
    d = x.shape[-1]
    got = chk.call(layer_norm, x, weight, bias, eps)
    mu = x.mean(-1, keepdim=True)
    chk.compare(label, got, F.layer_norm(x, (d,), weight, bias, eps), variants={
        "variance as mean(x²) - mean(x)²: the two large terms cancel when the mean is large (catastrophic "
        "cancellation); centre first, then average the squares": lambda: weight * (x - mu) * torch.rsqrt(
            (x.pow(2).mean(-1, keepdim=True) - mu.pow(2)) + eps) + bias,
        "unbiased variance: torch.var defaults to correction=1 (divide by n-1); LayerNorm divides by n "
        "(use unbiased=False or correction=0)":
            lambda: weight * (x - mu) / torch.sqrt(x.var(-1, keepdim=True, unbiased=True) + eps) + bias,
        "mean not subtracted: that is RMSNorm; LayerNorm centres each vector first":
            lambda: weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) + bias,
        "bias missing": lambda: F.layer_norm(x, (d,), weight, None, eps),
        "statistics over the wrong axis (dim=0)": lambda: weight * (x - x.mean(0, keepdim=True)) / torch.sqrt(
            x.var(0, keepdim=True, unbiased=False) + eps) + bias,
    })


def check_rms_norm_module(RMSNorm, *, dim: int = 12, seed: int = 5) -> None:
    """RMSNorm(dim, eps) module: one gain Parameter of ones, forward = rms_norm."""
    __tracebackhide__ = True
    chk = Check("RMSNorm", expects="an nn.Module")
    eps = 1e-3
    module = chk.call(RMSNorm, dim, eps)
    chk.require("is an nn.Module", isinstance(module, nn.Module), f"RMSNorm(dim, eps) built {type(module).__name__}")
    params = dict(module.named_parameters()) if isinstance(module, nn.Module) else {}
    w = params.get("weight")
    chk.require("one Parameter named weight", list(params) == ["weight"],
                f"parameters are {list(params)}; expected exactly ['weight'] (RMSNorm has no bias)")
    chk.require("weight starts as ones(dim)", isinstance(w, torch.Tensor) and tuple(w.shape) == (dim,)
                and bool(torch.all(w == 1)), "the gain must start at 1 so a fresh norm only rescales",
                diagnosis="gain initialised wrongly: torch.ones(dim), not zeros or random")
    if isinstance(w, torch.Tensor) and tuple(w.shape) == (dim,):
        with torch.no_grad():
            w.copy_(1 + 0.5 * randn(dim, seed=seed + 1))  # a trained-looking gain
        x = randn(2, 3, dim, seed=seed)
        got = chk.call(module, x)
        chk.compare("forward, trained gain", got, _ref_rms_norm(x, w.detach(), eps),
                    variants=_rms_variants(x, w.detach(), eps) | {
                        "eps ignored: the module must pass its own eps to the norm":
                            lambda: _ref_rms_norm(x, w.detach(), 1e-6)})
    chk.finish()
