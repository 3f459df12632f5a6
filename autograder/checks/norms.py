"""Checks for notebook 02: RMSNorm (function and module) and LayerNorm."""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

import tinylm

from ..diagnosis_record import candidates
from .contracts import Contract, call_keeping_inputs, defaults, locate_call, run_contract
from .framework.calling import guarded_call, quiet_call
from .framework.check import CandidatesVariant, Check
from ..learner_values import describe
from .framework.measure import close_to, gradient_reaches, parameter_dtypes, parameter_problems, randn, tol_for
from .references.modules import plain_tensors, registered_elsewhere, saved_buffers


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
        "eps added after the reciprocal square root: x · (1/sqrt(mean(x²)) + eps) instead of x / sqrt(mean(x²) + "
        "eps); eps goes under the root, where it keeps a row of tiny values from dividing by nearly zero":
            lambda: weight * (x32 * (torch.rsqrt(x32.pow(2).mean(-1, keepdim=True)) + eps)).to(dtype),
        "eps used as a floor, x / sqrt(max(mean(x²), eps)), instead of added, x / sqrt(mean(x²) + eps): the two "
        "agree only where mean(x²) is far above eps":
            lambda: weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True).clamp(min=eps))).to(dtype),
        "mean over the wrong axis: the statistic must be taken over the features (dim=-1), per token":
            lambda: weight * (x32 * torch.rsqrt(x32.pow(2).mean(0, keepdim=True) + eps)).to(dtype),
        "mean over the wrong axis (dim=1): the statistic must be taken over the features (dim=-1), per token":
            lambda: weight * (x32 * torch.rsqrt(x32.pow(2).mean(1, keepdim=True) + eps)).to(dtype),
        "mean over every axis: one statistic for the whole tensor instead of one per token (dim=-1)":
            lambda: weight * (x32 * torch.rsqrt(x32.pow(2).mean() + eps)).to(dtype),
        "missing gain: the result is never multiplied by weight":
            lambda: (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(dtype),
        "x² taken in float16 (the square reads x, not its float32 upcast): it overflows (max 65504, so |x| > 256 gives "
        "inf); square x.float(), computing the whole statistic in float32, and cast the result back to x.dtype":
            lambda: weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)),
        "mean subtracted: that is LayerNorm; RMSNorm divides by the root mean square of x itself":
            lambda: weight * F.layer_norm(x32, (x.shape[-1],), eps=eps).to(dtype),
        "divided by mean(x²) instead of its square root":
            lambda: weight * (x32 / (x32.pow(2).mean(-1, keepdim=True) + eps)).to(dtype),
        "sum instead of mean of x²":
            lambda: weight * (x32 * torch.rsqrt(x32.pow(2).sum(-1, keepdim=True) + eps)).to(dtype),
        "result left in float32: cast it back to x.dtype":
            lambda: weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)),
        "gain added instead of multiplied: weight * normalised, not weight + normalised":
            lambda: weight + (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(dtype),
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


KEEPDIM = ("the per-token statistic does not broadcast against x: it must have shape (..., 1); reduce with "
           "keepdim=True (mean(dim=-1) alone gives shape (...,), which lines up with the wrong axis)")


def _keepdim_hint(chk: Check, x: torch.Tensor):
    """on_error for a size mismatch: the statistic reduced without keepdim is named only when the tracer found
    the value that raised to hold the reference's per-token numbers in shape (...,) where the reference has
    (..., 1); a gain reshaped against x raises alike, so otherwise both are candidates."""
    def hint(err: Exception):
        if "must match the size" not in str(err) and "broadcast" not in str(err):
            return None
        facts = " ".join(chk.located.facts) if chk.located is not None and chk.located.kind == "shape" else ""
        if f"gives shape {tuple(x.shape[:-1])}" in facts and f"in shape {tuple(x.shape[:-1]) + (1,)}" in facts:
            return KEEPDIM
        return candidates("a value does not broadcast against x (measured: the call raised on sizes that do not "
                          "line up); candidates: (1) the per-token statistic reduced without keepdim=True, shape "
                          "(...,) where (..., 1) is needed; (2) the gain reshaped or indexed so that it no longer "
                          "lines up with x's last axis (weight is (d,) and broadcasts as it is)")
    return hint


# What a wrong divisor of x is, per token, in terms of x's own statistics.
_DIVISORS = {
    "mean |x| (the mean absolute value); RMSNorm divides by sqrt(mean(x²))": lambda x: x.abs().mean(-1),
    "sqrt(mean |x|): the mean of |x| where RMSNorm averages the squares, sqrt(mean(x²))":
        lambda x: x.abs().mean(-1).sqrt(),
    "|mean(x)| = sqrt((mean x)²): square each x before averaging, x.pow(2).mean(-1), not x.mean(-1).pow(2)":
        lambda x: x.mean(-1).abs(),
    "mean(x²), without the square root": lambda x: x.pow(2).mean(-1),
    "1/sqrt(mean(x²)): the output is multiplied by the RMS instead of divided by it (rsqrt, not sqrt)":
        lambda x: x.pow(2).mean(-1).rsqrt(),
    "sqrt(sum(x²)) = the L2 norm of x: use the mean of x², not the sum (that is d times larger)":
        lambda x: x.pow(2).sum(-1).sqrt(),
    "the standard deviation of x: RMSNorm does not centre, it divides by sqrt(mean(x²))":
        lambda x: x.std(-1, unbiased=False),
}


def explain_rms_norm(chk: Check, rms_norm, d: int = 16, seed: int = 3) -> None:
    """Measure a wrong rms_norm with unit gain: what it divides x by, its
    output RMS, scale invariance f(c·x) = f(x), and the eps it really uses."""
    x = randn(6, d, seed=seed)
    ones = torch.ones(d)
    y = chk.probe(rms_norm, x, ones, 1e-6)
    if not (isinstance(y, torch.Tensor) and y.shape == x.shape and torch.isfinite(y).all()):
        return
    y = y.double()
    x64 = x.double()
    ratio = x64 / y                                    # per-token divisor, if y = x / divisor
    per_token = bool(torch.allclose(ratio, ratio[:, :1], rtol=1e-3))
    rms = y.pow(2).mean(-1).sqrt()
    off_scale = per_token and not torch.allclose(rms, torch.ones(()).double(), rtol=1e-3)
    if off_scale and _gain_plus_one(chk, rms_norm, x, d):
        return
    if off_scale:
        divisor = ratio[:, 0]
        named = next((what for what, f in _DIVISORS.items() if torch.allclose(divisor, f(x64), rtol=1e-3)), None)
        spread = f"{float(rms.min()):.3g}" + ("" if float(rms.max() - rms.min()) < 1e-3 else f" to {float(rms.max()):.3g}")
        # The probe's d is its own (not the failing rows'): a number that depends on d is said with its shape.
        text = f"with unit gain your output's RMS per token on a {tuple(x.shape)} probe is {spread}, not 1: "
        if named:
            chk.diagnose(text + "your code divides x by " + named)
        else:
            chk.measured(text + "your output is x divided by a per-token number that is not sqrt(mean(x²) + eps)")
    scaled = chk.probe(rms_norm, x * 10, ones, 1e-6)
    if isinstance(scaled, torch.Tensor) and scaled.shape == x.shape and not torch.allclose(scaled.double(), y, rtol=1e-3, atol=1e-5):
        chk.measured("RMSNorm is scale invariant, f(10·x) = f(x), but yours changes when x is scaled by 10")
    if not off_scale:  # an eps fitted to an output of the wrong scale measures the scale, not the eps
        _explain_eps(chk, rms_norm, x * 1e-2, ones)


def _gain_plus_one(chk: Check, rms_norm, x: torch.Tensor, d: int) -> bool:
    """Whether the gain acts as (1 + weight): with weight 0 the output is the normalised x, and with a random
    weight w it is (1 + w) times that. Said as confirmed only when both hold on the learner's function."""
    normalised = x.double() * x.double().pow(2).mean(-1, keepdim=True).add(1e-6).rsqrt()
    gain = randn(d, seed=11)
    at_zero = chk.probe(rms_norm, x, torch.zeros(d), 1e-6)
    at_gain = chk.probe(rms_norm, x, gain, 1e-6)
    if not all(isinstance(t, torch.Tensor) and t.shape == x.shape for t in (at_zero, at_gain)):
        return False
    if not (torch.allclose(at_zero.double(), normalised, rtol=1e-4, atol=1e-6)
            and torch.allclose(at_gain.double(), (1 + gain.double()) * normalised, rtol=1e-4, atol=1e-6)):
        return False
    chk.diagnose("the gain acts as (1 + weight), the zero-centred convention (measured: with weight 0 your output "
                 "is the normalised x, and with a weight w it is (1 + w) times that): multiply by weight itself, "
                 "whose fresh value is ones")
    return True


def _explain_eps(chk: Check, rms_norm, tiny: torch.Tensor, ones: torch.Tensor) -> None:
    """On inputs of size ~1e-2 (mean(x²) ~ 1e-4), eps = 1e-2 dominates: fit
    the eps the learner's code adds, from y = x / sqrt(mean(x²) + eps)."""
    big, small = chk.probe(rms_norm, tiny, ones, 1e-2), chk.probe(rms_norm, tiny, ones, 1e-6)
    if not all(isinstance(t, torch.Tensor) and t.shape == tiny.shape for t in (big, small)):
        return
    if torch.allclose(big, small, rtol=1e-4, atol=1e-7):
        chk.diagnose("eps is ignored: eps=1e-2 and eps=1e-6 give the same output on inputs of size 1e-2, so the "
                     "eps argument never reaches the statistic; add that argument, not a number of its own, inside "
                     "the square root, sqrt(mean(x²) + eps)")
        return
    x64, y = tiny.double(), big.double()
    ratio = x64 / y
    if not torch.allclose(ratio, ratio[:, :1], rtol=1e-3):
        return
    eps_eff = float((ratio[:, 0].pow(2) - x64.pow(2).mean(-1)).median())
    if abs(eps_eff - 1e-2) > 1e-4 and abs(eps_eff) > 1e-7:
        if abs(eps_eff / 1e-4 - 1) < 0.05:
            chk.diagnose("your effective eps is 1e-4 = eps² for eps=1e-2: add eps itself, sqrt(mean(x²) + eps)")
        else:
            chk.measured(f"with eps=1e-2 your effective eps on a {tuple(tiny.shape)} probe (fitted from "
                         f"y = x / sqrt(mean(x²) + eps)) is {eps_eff:.3g}")


def rms_norm_steps(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm written out step by step (Llama's order: statistic in float32,
    cast back, then the gain): the intermediate values a right answer has."""
    x32 = x.float()
    mean_square = x32.pow(2).mean(dim=-1, keepdim=True)   # (..., 1)
    inv_rms = torch.rsqrt(mean_square + eps)
    return weight * (x32 * inv_rms).to(x.dtype)


RMS_NORM = Contract(
    "rms_norm", rms_norm_steps,
    lambda: [(label, (x, w, eps), {}) for label, x, w, eps in rms_norm_cases(0, (2, 3, 5, 8), torch.float32)],
    names=("x", "weight", "eps"), batch=("x",), leading=("x",), views=("x",), grad=("x", "weight"),
    params=(("eps", 0.25),))  # an eps near the mean square: a hard-coded one shows


def check_rms_norm(rms_norm, *, seed: int = 0, shape: tuple = (2, 3, 5, 8), dtype=torch.float32) -> None:
    """rms_norm(x, weight, eps) against torch.nn.functional.rms_norm."""
    __tracebackhide__ = True
    chk = Check("rms_norm", expects="a tensor with x's shape and dtype")
    for label, x, weight, eps in rms_norm_cases(seed, shape, dtype):
        got = call_keeping_inputs(chk, rms_norm, x, weight, eps, on_error=_keepdim_hint(chk, x))
        chk.compare(label, got, _ref_rms_norm(x, weight, eps), variants=_rms_variants(x, weight, eps))
    if not chk.passed and not chk.named_variants():
        explain_rms_norm(chk, rms_norm)
    run_contract(chk, rms_norm, RMS_NORM)
    if chk.passed:
        _rounded_in_the_exercise_order(chk, rms_norm, seed)
    if chk.passed:
        _default_eps_of_the_function(chk, rms_norm, seed)
    if not chk.passed and not any(d.startswith("eps is ignored") for d in chk.diagnoses):  # said once is enough
        measure_eps(chk, lambda x, eps: rms_norm(x, torch.ones_like(x[0]), eps), centred=False)
    chk.finish()


# The share of a bfloat16 result's values allowed to differ from the exercise's order's: an answer that keeps the
# order differs only where its float32 value lies within a float32 step of a bfloat16 rounding boundary.
ROUNDING_FLIPS = 0.02


def _rounded_in_the_exercise_order(chk: Check, rms_norm, seed: int) -> None:
    """In bfloat16 the exercise's order (the statistic and the product in
    float32, one cast back to x.dtype, then the gain, as Llama's reference
    code) fixes every rounding, and with a float32 gain the product promotes
    to float32. A reordering passes the tolerance of the dtype rows; here it
    is measured against that order value by value, and the order the
    learner's result equals bit for bit is named."""
    half, eps = torch.bfloat16, 1e-6
    x = (randn(6, 64, seed=seed + 21) * 3).to(half)
    for gain in (half, torch.float32):
        weight = (1 + 0.3 * randn(64, seed=seed + 22)).to(gain)
        label = f"bfloat16 x, {str(gain).removeprefix('torch.')} gain: rounded in the exercise's order"
        got = chk.call(rms_norm, x, weight, eps, row_label=label)
        want = rms_norm_steps(x, weight, eps)
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            chk.require(label, False, f"returned {describe(got)}")
            return
        flips = float((got.float() != want.float()).float().mean()) if got.dtype == want.dtype else 1.0
        if chk.require(label, got.dtype == want.dtype and flips <= ROUNDING_FLIPS,
                       f"{got.dtype} where {want.dtype} is expected" if got.dtype != want.dtype else
                       f"{flips:.0%} of the values differ from that order's"):
            continue
        gain_said = str(gain).removeprefix('torch.')
        chk.measured(f"for bfloat16 x and a {gain_said} gain, " + (
            f"your result is {str(got.dtype).removeprefix('torch.')}, where weight * normalised.to(x.dtype) promotes "
            f"to {str(want.dtype).removeprefix('torch.')}" if got.dtype != want.dtype else
            f"{flips:.0%} of your result's values differ from what the exercise's order gives")
            + " (float32 statistic and product, one cast back to x.dtype, then the gain)")
        x32 = x.float()
        inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
        orders = {
            "the gain multiplied in before the cast back, (weight * x32 * inv_rms).to(x.dtype): one rounding at the "
            "end where the exercise rounds the normalised value, then applies the gain in the gain's dtype":
                (weight * x32 * inv_rms).to(x.dtype),
            "1/rms rounded to x.dtype before the product, so every normalised value carries the statistic's "
            "half-precision rounding: keep inv_rms in float32 and cast once, after x32 * inv_rms":
                weight * (x32 * inv_rms.to(x.dtype)).to(x.dtype),
            "the normalisation computed in x.dtype, not float32: cast x to float32 first, x.float()":
                weight * (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)),
            "1/rms rounded to x.dtype and multiplied into x itself, weight * x * inv_rms.to(x.dtype): the statistic "
            "and the product each rounded where the exercise rounds once; multiply in float32, x32 * inv_rms, and "
            "cast that once": weight * x * inv_rms.to(x.dtype),
        }
        for cause, theirs in orders.items():
            if theirs.dtype == got.dtype and torch.equal(theirs, got):
                chk.diagnose(f"{cause} (measured: your result equals that order's bit for bit)")
                break
        return


UNBIASED = ("unbiased variance (divided by n-1, the default correction=1 of var and std); LayerNorm divides by n "
            "(with var or std, correction=0)")


def check_layer_norm(layer_norm, *, seed: int = 4, shape: tuple = (3, 4, 10), dtype=torch.float32) -> None:
    """layer_norm(x, weight, bias, eps) against torch.nn.functional.layer_norm."""
    __tracebackhide__ = True
    chk = Check("layer_norm", expects="a tensor with x's shape")
    d = shape[-1]
    x = randn(*shape, seed=seed, dtype=dtype) * 2 + 3  # a mean far from zero, so forgetting it shows
    weight, bias = 1 + 0.5 * randn(d, seed=seed + 1, dtype=dtype), randn(d, seed=seed + 2, dtype=dtype)
    eps = 1e-5
    for label, xs in ((f"{dtype} {tuple(shape)}, mean 3", x), ("x + 300 (large mean)", x + 300)):
        _layer_norm_case(chk, layer_norm, label, xs, weight, bias, eps)
    # The dtype is kept: half-precision inputs give a half-precision result (the reference runs in float32).
    half = torch.bfloat16
    x_h, w_h, b_h = x.to(half), weight.to(half), bias.to(half)
    got = call_keeping_inputs(chk, layer_norm, x_h, w_h, b_h, eps)
    want = F.layer_norm(x_h.float(), (d,), w_h.float(), b_h.float(), eps).to(half)
    chk.compare(f"{half} input: its values, in its dtype", got, want, atol=0.1, rtol=0.05)
    run_contract(chk, layer_norm, LAYER_NORM)
    if not chk.passed:
        unit = lambda x, eps: layer_norm(x, torch.ones_like(x[0]), torch.zeros_like(x[0]), eps)  # noqa: E731
        measure_eps(chk, unit, centred=True)
        if not chk.diagnoses:
            measure_power(chk, unit)
        if not chk.diagnoses:
            measure_centring_order(chk, unit)
    chk.finish()


def measure_eps(chk: Check, normalise, centred: bool, eps: float = 0.25) -> None:
    """The eps a normalisation actually adds to the variance (centred: LayerNorm) or the mean square (RMSNorm),
    read off its output with a unit gain and no bias: y = x' / sqrt(s + eps'), so eps' = (x' / y)² - s, x' the
    centred x or x itself and s its variance or mean square. Said when eps' is a clean multiple of the eps passed.
    A LayerNorm's s is read as the biased variance (divided by n) or, where that fits no eps, the unbiased one
    (divided by n - 1, torch.var's and torch.std's default): x - mean over torch.std fits it with eps' = 0."""
    x = randn(4, 16, seed=11, dtype=torch.float64) * 0.5       # a variance near eps, so eps shapes every value
    try:
        y = guarded_call(normalise, (x.clone(), eps))
    except Exception:  # noqa: BLE001: a call that raises measures nothing; the rows said why
        return
    if not isinstance(y, torch.Tensor) or y.shape != x.shape or not y.is_floating_point():
        return
    xc = x - x.mean(-1, keepdim=True) if centred else x
    big = y.detach().double().abs() > 0.2
    if not bool(big.any()):
        return
    for correction in ((0, 1) if centred else (0,)):
        s = xc.pow(2).sum(-1, keepdim=True) / (x.shape[-1] - correction)
        implied = ((xc / y.detach().double()).pow(2) - s)[big]
        if bool(torch.allclose(implied, implied.median(), rtol=1e-3, atol=1e-6)):
            break
    else:
        _eps_outside_the_root(chk, xc, y.detach().double(), eps, centred)
        return
    factor = float(implied.median()) / eps
    if abs(factor - 1) < 1e-3:
        return  # the eps passed, once: a right eps (an unbiased variance with it is the variant's to say)
    k = next((k for k in (0, 0.5, 2, 3, 4) if abs(factor - k) < 1e-3), None)
    squared = k is None and abs(factor - eps) < 1e-3 * eps
    said = "eps²" if squared else f"{factor if k is None else k:.4g}·eps"
    what = ("the unbiased variance" if correction else "variance") if centred else "mean of x²"
    fact = (f"your normalisation divides by sqrt({what} + {said}) (measured: with eps = {eps:g} and a unit "
            f"gain, (x{' - mean' if centred else ''})² / y² - {what} is {factor * eps:.4g} for every value"
            + (", the unbiased variance being the sum of squares over n - 1" if correction else "") + ")")
    how = "eps is squared" if squared else {0: "eps is not added", 2: "eps is added twice",
                                             3: "eps is added three times"}.get(k)
    if how is None:  # another weight: the number is measured, the code that gives it is not known
        chk.measured(fact)
        return
    if correction:
        flat = _constant_row_output(normalise, eps) if k == 0 else None
        chk.diagnose(f"{fact}{flat or ''}: {how}, and the variance is divided by n - 1 (the default correction=1 "
                     "of std and of Tensor.var; correction=0 divides by n); LayerNorm divides by sqrt(var + eps) with "
                     "the variance divided by n: (x - mean) * torch.rsqrt((x - mean).pow(2).mean(-1, keepdim=True) + eps)",
                     states=(UNBIASED,))
        return
    chk.diagnose(f"{fact}: {how}; add it exactly once, under the square root, sqrt({what} + eps)")


def _eps_outside_the_root(chk: Check, xc: torch.Tensor, y: torch.Tensor, eps: float, centred: bool) -> None:
    """An output that no eps under the root gives, where eps sits outside it instead: x'·(1/sqrt(s) + eps),
    x' / (sqrt(s) + eps) or x' / sqrt(s) + eps, s the biased variance (centred) or the mean of x². Said when one
    of them holds for every value, with eps itself as the constant measured."""
    if chk.diagnoses or chk.named_variants():
        return  # a cause is said already (a variant that reproduces the rows): this would say it again
    what = "variance" if centred else "mean of x²"
    x_ = "(x - mean)" if centred else "x"
    root = xc.pow(2).mean(-1, keepdim=True).sqrt()
    forms = ((f"{x_} · (1/sqrt({what}) + eps)", "y / x' - 1/sqrt(s)", y / xc - 1 / root, "after the reciprocal root"),
             (f"{x_} / (sqrt({what}) + eps)", "x' / y - sqrt(s)", xc / y - root, "to the root, not under it"),
             (f"{x_} / sqrt({what}) + eps", "y - x' / sqrt(s)", y - xc / root, "to the output"))
    keep = xc.abs() > 0.05  # where x' is near 0 the ratios carry no measurement
    for form, reading, constant, where in forms:
        values = constant[keep.expand_as(constant)]
        if values.numel() and bool(torch.allclose(values, torch.full_like(values, eps), rtol=1e-6, atol=1e-9)):
            chk.diagnose(f"your normalisation computes {form} (measured: with eps = {eps:g} and a unit gain, "
                         f"{reading} is {eps:g} for every value, x' = {x_}, s = its {what}): eps is added {where}; add "
                         f"it under the square root, {x_} / sqrt({what} + eps)")
            return


def _constant_row_output(normalise, eps: float) -> str | None:
    """'; a constant row gives nan', measured on one row of equal values (variance 0: without eps, 0 / 0), or None."""
    try:
        y = guarded_call(normalise, (torch.full((1, 16), 2.0, dtype=torch.float64), eps))
    except Exception:  # noqa: BLE001: a call that raises measures nothing here
        return None
    if not isinstance(y, torch.Tensor) or not y.is_floating_point() or bool(torch.isfinite(y).all()):
        return None
    bad = "nan" if bool(y.isnan().any()) else "inf"
    return f"; a row of 16 equal values (variance 0) gives {bad} (measured), where LayerNorm gives 0 there"


def measure_power(chk: Check, normalise, eps: float = 0.25) -> None:
    """The power of (var + eps) a LayerNorm scales the centred x by, read off its output with a unit gain and no
    bias on rows of very different variances: y = (x - mean) · (var + eps)^p holds for one p on every value, or
    nothing is said. p = -1/2 is LayerNorm; another p is the learner's output recomputed exactly, so it is named."""
    x, y = _on_spread_rows(normalise, eps, seed=12, mean=1)
    if y is None:
        return
    xc = x - x.mean(-1, keepdim=True)
    s = xc.pow(2).mean(-1, keepdim=True) + eps
    ratio = y.detach().double() / xc
    if not bool(torch.isfinite(ratio).all()) or bool((ratio <= 0).any()):
        return
    p = float((ratio.log() * s.log()).sum() / (s.log().pow(2) * x.shape[-1]).sum())
    if abs(p + 0.5) < 1e-3 or not bool(torch.allclose(ratio, s.pow(p), rtol=1e-6, atol=0)):
        return
    k = next((k for k in (-2, -1, -1.5, 0.5, 1, 0) if abs(p - k) < 1e-6), None)
    said = f"{p:.4g}" if k is None else f"{k:g}"
    var = s - eps
    fact = (f"with eps = {eps:g}, a unit gain and no bias, your output is (x - mean) · (var + eps)^{said} on every "
            f"value, on rows of variances from {float(var.min()):.2g} to {float(var.max()):.2g}")
    how = {-2: "divided by (var + eps)², where sqrt(var + eps) belongs", -1: "divided by var + eps, without the root",
           0.5: "multiplied by sqrt(var + eps) instead of divided by it", -1.5: "divided by (var + eps)^1.5",
           1: "multiplied by var + eps", 0: "divided by nothing"}.get(k)
    if how is None:
        chk.measured(fact)
        return
    chk.diagnose(f"x - mean is {how} (measured: {fact}): LayerNorm divides it by sqrt(var + eps), "
                 "(x - mean) * torch.rsqrt(var + eps)")


def _on_spread_rows(normalise, eps: float, seed: int, mean: float):
    """(x, the learner's normalisation of it) for six float64 rows of 16 values around `mean` with standard
    deviations from 0.3 to 9, or (x, None) when the call raises or returns no floating tensor of x's shape."""
    x = randn(6, 16, seed=seed, dtype=torch.float64) * torch.tensor([0.3, 0.7, 1.0, 2.0, 4.0, 9.0],
                                                                     dtype=torch.float64)[:, None] + mean
    try:
        y = guarded_call(normalise, (x.clone(), eps))
    except Exception:  # noqa: BLE001: a call that raises measures nothing; the rows said why
        return x, None
    ok = isinstance(y, torch.Tensor) and y.shape == x.shape and y.is_floating_point()
    return x, (y if ok else None)


def measure_centring_order(chk: Check, normalise, eps: float = 0.25) -> None:
    """The mean subtracted after the division: with a unit gain and no bias, on rows of means far from zero and of
    different variances, the output is x / sqrt(var + eps) - mean on every value (LayerNorm's is
    (x - mean) / sqrt(var + eps)); the learner's own output recomputed exactly, so it is named."""
    x, y = _on_spread_rows(normalise, eps, seed=13, mean=3)
    if y is None:
        return
    mean = x.mean(-1, keepdim=True)
    scaled = x * torch.rsqrt((x - mean).pow(2).mean(-1, keepdim=True) + eps)
    if not bool(torch.allclose(y.detach().double(), scaled - mean, rtol=1e-6, atol=1e-9)):
        return
    chk.diagnose("the mean is subtracted after the division, x / sqrt(var + eps) - mean, not before it (measured: "
                 f"with eps = {eps:g}, a unit gain and no bias, your output is x / sqrt(var + eps) - mean on every "
                 f"value, on rows of means {float(mean.min()):.2g} to {float(mean.max()):.2g}): LayerNorm centres "
                 "first, (x - mean) * torch.rsqrt(var + eps)")


def _layer_norm_case(chk, layer_norm, label, x, weight, bias, eps):
    __tracebackhide__ = True
    d = x.shape[-1]
    got = call_keeping_inputs(chk, layer_norm, x, weight, bias, eps)
    mu = x.mean(-1, keepdim=True)
    chk.compare(label, got, F.layer_norm(x, (d,), weight, bias, eps), variants={
        "variance as mean(x²) - mean(x)²: the two large terms cancel when the mean is large (catastrophic "
        "cancellation); centre first, then average the squares": lambda: weight * (x - mu) * torch.rsqrt(
            (x.pow(2).mean(-1, keepdim=True) - mu.pow(2)) + eps) + bias,
        UNBIASED:
            lambda: weight * (x - mu) / torch.sqrt(x.var(-1, keepdim=True, unbiased=True) + eps) + bias,
        "mean not subtracted: that is RMSNorm; LayerNorm centres each vector first":
            lambda: weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) + bias,
        "the output scales x itself, not x - mean: the variance is taken about the mean, but the mean is never "
        "subtracted from the x that is divided by its root; LayerNorm divides x - mean":
            lambda: weight * x * torch.rsqrt(x.var(-1, keepdim=True, unbiased=False) + eps) + bias,
        "eps added to 1/sqrt(var) instead of to the variance: (x - mean) * (1/sqrt(var) + eps) leaves a token of tiny "
        "variance divided by nearly zero; add eps under the root, (x - mean) / sqrt(var + eps)":
            lambda: weight * (x - mu) * (torch.rsqrt(x.var(-1, keepdim=True, unbiased=False)) + eps) + bias,
        "bias missing": lambda: F.layer_norm(x, (d,), weight, None, eps),
        "weight and bias not applied: the result is only normalised; multiply by weight and add bias (e.g. a new "
        "nn.LayerNorm(d) called on x uses a gain and a bias of its own, ones and zeros, not the ones passed in)":
            lambda: F.layer_norm(x, (d,), None, None, eps),
        "eps outside the sqrt: (x - mean) / (sqrt(var) + eps) instead of / sqrt(var + eps)":
            lambda: weight * (x - mu) / (x.var(-1, keepdim=True, unbiased=False).sqrt() + eps) + bias,
        "bias multiplied by the gain: weight * normalised + bias, not (normalised + bias) * weight":
            lambda: (F.layer_norm(x, (d,), None, None, eps) + bias) * weight,
        "standard deviation used as the variance: std is already the square root; divide by sqrt(var + eps)":
            lambda: weight * (x - mu) * torch.rsqrt(x.std(-1, keepdim=True) + eps) + bias,
        "one mean for the whole tensor: x.mean() without dim; each token is centred by its own mean (dim=-1)":
            lambda: weight * (x - x.mean()) * torch.rsqrt((x - x.mean()).pow(2).mean(-1, keepdim=True) + eps) + bias,
        "statistics over the wrong axis (dim=0)": lambda: weight * (x - x.mean(0, keepdim=True)) / torch.sqrt(
            x.var(0, keepdim=True, unbiased=False) + eps) + bias,
    })


def _gain_name(others: list[str], params: dict, gain, module) -> str | None:
    """Why the one Parameter is not registered as `weight` alone, when a single other name holds it."""
    if len(others) != 1:
        return None
    if gain is params[others[0]]:  # named_parameters() lists a Parameter once, under the name it got first
        saved = set(module.state_dict()) >= {others[0], "weight"}
        return (f"the gain is registered under two names, `{others[0]}` and `weight` (measured: module.weight is "
                f"module.{others[0]}{', and the state dict saves both' if saved else ''}): register it once: name it "
                f"`weight` and drop `{others[0]}`; state dicts and the course's model load it by that name")
    return (f"the gain is registered as `{others[0]}`; name it `weight` (self.weight = nn.Parameter(...)): "
            "state dicts and the course's model load it by that name")


def _values_words(values: torch.Tensor) -> str:
    """'values from a to b' of the finite entries, with how many are nan or inf (an uninitialised tensor holds any)."""
    finite = values[torch.isfinite(values)]
    spoiled = values.numel() - finite.numel()
    span = f"values from {float(finite.min()):.2g} to {float(finite.max()):.2g}" if finite.numel() else ""
    odd = f"{spoiled} nan or inf value{'s' if spoiled > 1 else ''}" if spoiled else ""
    return ", and ".join(part for part in (span, odd) if part)


def check_rms_norm_module(RMSNorm, *, dim: int = 12, seed: int = 5) -> None:
    """RMSNorm(dim, eps) module: one gain Parameter of ones, forward = rms_norm,
    a gradient reaching the gain, and the module's own eps used."""
    __tracebackhide__ = True
    chk = Check("RMSNorm", expects="an nn.Module")
    eps = 1e-3
    module = chk.call(RMSNorm, dim, eps)
    chk.require("is an nn.Module", isinstance(module, nn.Module), f"RMSNorm(dim, eps) built {type(module).__name__}")
    params = dict(module.named_parameters()) if isinstance(module, nn.Module) else {}
    gain = getattr(module, "weight", None)
    problem = parameter_problems(module, "weight") if isinstance(module, nn.Module) else None
    if problem and plain_tensors(module, ["weight"]) and not registered_elsewhere(chk, RMSNorm, (dim, eps)):
        return chk.finish()  # on a GPU, a gain moved with .to(DEVICE): the builds on two devices said why and where
    others = [n for n in params if n != "weight"]
    chk.require("one Parameter named weight", list(params) == ["weight"] and problem is None,
                f"parameters are {list(params)}; expected exactly ['weight'] (RMSNorm has no bias)",
                diagnosis=problem if problem and gain is not None else _gain_name(others, params, gain, module))
    if isinstance(module, nn.Module):  # a checkpoint of tinylm's RMSNorm (or Hugging Face's) loads both ways
        want, got = set(tinylm.RMSNorm(dim, eps).state_dict()), set(module.state_dict())
        extra = sorted(got - want)
        chk.require("state_dict keys as tinylm's", got == want,
                    f"unexpected {extra}, missing {sorted(want - got)}",
                    diagnosis=saved_buffers(chk, RMSNorm, (dim, eps), module, extra))
        registered_elsewhere(chk, RMSNorm, (dim, eps))
    if isinstance(gain, torch.Tensor):
        stored = parameter_dtypes(module)
        chk.require("weight in the default dtype", stored is None, stored or "", diagnosis=stored)
        ones = tuple(gain.shape) == (dim,) and bool(torch.all(gain.detach() == 1))
        start = ("all zeros" if bool(torch.all(gain.detach() == 0)) else f"shape {tuple(gain.shape)}"
                 if tuple(gain.shape) != (dim,) else
                 _values_words(gain.detach()))
        chk.require("weight starts as ones(dim)", ones, "the gain must start at 1 so a fresh norm only rescales",
                    diagnosis=None if ones else _offset_gain(chk, module, dim, eps, seed) or
                    f"gain initialised wrongly: it starts as {start}; use torch.ones(dim)")
    if isinstance(gain, torch.Tensor) and tuple(gain.shape) == (dim,):
        with torch.no_grad():
            gain.copy_(1 + 0.5 * randn(dim, seed=seed + 1))  # a trained-looking gain
        w = gain.detach().clone()
        x = randn(2, 3, dim, seed=seed)
        chk.expects = "a tensor shaped like its input x"  # what a call of the module (its forward) returns
        for label, inputs in (("forward, trained gain", x), ("tiny inputs (eps matters)", x * 1e-2)):
            got = chk.call(module, inputs)
            chk.compare(label, got, _ref_rms_norm(inputs, w, eps), variants=_rms_variants(inputs, w, eps) | {
                _eps_not_used(module, eps): lambda: _ref_rms_norm(inputs, w, 1e-6),
                _MACHINE_EPS: lambda: _ref_rms_norm(inputs, w, torch.finfo(inputs.dtype).eps),
                _GAIN_AND_EPS_EXCHANGED: lambda: eps * (inputs.float() * torch.rsqrt(
                    inputs.float().pow(2).mean(-1, keepdim=True) + w.float())).to(inputs.dtype)})
        # A half-precision model (module.to(bfloat16)) must stay in that dtype: the residual stream it feeds is bf16.
        # module.to moves only what the module registers: an unregistered gain is named above, not as a dtype slip.
        if isinstance(gain, nn.Parameter):
            half = copy.deepcopy(module).to(torch.bfloat16)
            x_half = x.to(torch.bfloat16)
            chk.compare("bfloat16 module and input: dtype kept", chk.call(half, x_half),
                        _ref_rms_norm(x_half, w.to(torch.bfloat16), eps))
            # float16's range ends at 65504: entries near 300 square past it unless the statistic is float32
            x16, w16 = (x.double() * 300).half(), w.half()
            chk.compare("float16 module and input, |x| ~ 300 (x² overflows float16)",
                        chk.call(copy.deepcopy(module).to(torch.float16), x16), _ref_rms_norm(x16, w16, eps),
                        variants=_rms_variants(x16, w16, eps))
        if isinstance(gain, nn.Parameter):
            _gain_kept_by_a_call(chk, module, gain, w, x)
        _default_eps(chk, RMSNorm, dim, seed)
        chk.upstream(module.forward, {"rms_norm": _ref_rms_norm},
                     rerun=lambda: close_to(module(x), _ref_rms_norm(x, w, eps), 1e-5, 1e-4),
                     labels={"rms_norm": "exercise 1"})
        if isinstance(gain, nn.Parameter) and gain.requires_grad:
            gain.grad = None
            out = chk.call(module, x)
            chk.require("gradient reaches weight", gradient_reaches(out, gain),
                        "a backward pass leaves weight.grad empty: the gain would never train",
                        diagnosis="no gradient reaches self.weight: forward uses it through .data or .detach() (or "
                                  "not at all), so training would never change the gain; use self.weight itself")
        _input_gradient(chk, module, x, w, eps, seed)
    chk.locate_with(lambda: _locate_rms_module(RMSNorm))
    chk.finish()


def _gain_kept_by_a_call(chk: Check, module, gain: nn.Parameter, w: torch.Tensor, x: torch.Tensor) -> None:
    """A forward pass changes no parameter: the module's own gain, its dtype and values, after a call on a float16
    input (a call that raises is left to the rows that call it so)."""
    try:
        with torch.no_grad():
            guarded_call(module, (x.half(),))
    except Exception:  # noqa: BLE001
        pass
    now = module._parameters.get("weight")
    kept = now is gain and now.dtype == w.dtype and torch.equal(now.detach(), w)
    chk.require("a float16 input leaves the gain as it was (a forward pass changes no parameter)", kept,
                "the gain differs after the call",
                diagnosis=None if kept else _gain_changed_words(now, gain, w))


def _gain_changed_words(now, gain: nn.Parameter, w: torch.Tensor) -> str:
    what = ("self.weight is another object" if now is not gain else
            f"self.weight is now {str(now.dtype).removeprefix('torch.')}, where it was "
            f"{str(w.dtype).removeprefix('torch.')}" if now.dtype != w.dtype else "self.weight holds other values")
    return (f"a forward pass on a float16 input changed the module's gain (measured: after the call {what}): every "
            "later call, in any precision, then uses that gain, and training updates it; compute with the gain in the "
            "input's dtype as a new tensor (self.weight.to(x.dtype)) and never assign to self.weight or its .data "
            "in forward")


def _default_eps(chk: Check, RMSNorm, dim: int, seed: int) -> None:
    """RMSNorm(dim), built without an eps, gives what the learner's own RMSNorm(dim, 1e-6) gives with the same gain
    (the exercise's default, tinylm's and Hugging Face's LlamaRMSNorm's), on tokens whose mean square is near it:
    the default alone is measured, whatever else the module does."""
    module = chk.call(RMSNorm, dim)
    if not isinstance(module, nn.Module):
        return
    tiny = randn(2, 3, dim, seed=seed + 2) * 1e-3  # mean square about 1e-6: eps weighs as much as the token

    def given(eps):  # the learner's module built with this eps, holding the default-built one's parameters
        other = RMSNorm(dim, eps)
        other.load_state_dict(module.state_dict())
        with torch.no_grad():
            return guarded_call(other, (tiny,))
    try:
        want, other = given(1e-6), given(1e-5)
    except Exception:  # noqa: BLE001: a module that cannot be built or loaded so is measured by the rows above
        return
    if not isinstance(want, torch.Tensor):
        return
    chk.compare("RMSNorm(dim) gives what your RMSNorm(dim, 1e-6) gives (tiny inputs)", chk.call(module, tiny), want,
                variants={_LAYER_NORM_DEFAULT: other})


# The default eps of LayerNorm, said where a norm's default acts as it (measured against the learner's own code).
_LAYER_NORM_DEFAULT = ("the default eps is 1e-5, LayerNorm's (nn.LayerNorm and layer_norm default to it); RMSNorm's "
                       "default is 1e-6, as in tinylm and Hugging Face's LlamaRMSNorm")


def _default_eps_of_the_function(chk: Check, rms_norm, seed: int) -> None:
    """rms_norm(x, weight), called without an eps, gives what the learner's own rms_norm(x, weight, 1e-6) gives (the
    exercise's default), on tokens whose mean square is near it: the default alone is measured."""
    tiny = randn(2, 3, 8, seed=seed + 2) * 1e-3  # mean square about 1e-6: eps weighs as much as the token
    gain = 1 + 0.5 * randn(8, seed=seed + 3)
    want, other = (quiet_call(rms_norm, tiny.clone(), gain.clone(), eps) for eps in (1e-6, 1e-5))
    if isinstance(want, torch.Tensor):
        chk.compare("rms_norm(x, weight) gives what your rms_norm(x, weight, 1e-6) gives (tiny inputs)",
                    chk.call(rms_norm, tiny, gain), want, variants={_LAYER_NORM_DEFAULT: other})


# F.rms_norm's eps=None, and nn.RMSNorm's: the machine epsilon of the input's dtype.
_MACHINE_EPS = ("eps is the machine epsilon of the input's dtype (torch.finfo(x.dtype).eps, 1.2e-07 in float32; "
                "measured: your output is the norm with that eps), the default of F.rms_norm and nn.RMSNorm when no "
                "eps is given, where the module was given its own: pass it, F.rms_norm(x, (d,), self.weight, "
                "self.eps)")


_GAIN_AND_EPS_EXCHANGED = ("the gain and eps exchanged in the call of the norm (measured: your output is eps · x / "
                           "sqrt(mean(x²) + weight), the gain under the root and eps multiplying): pass them in the "
                           "function's order, rms_norm(x, self.weight, self.eps)")


def _eps_not_used(module, eps: float) -> str:
    """The cause of a norm computed with eps = 1e-6 (the default) where the
    module was given `eps`, told apart by what the module holds as self.eps
    (measured after construction; its value is not said)."""
    # In the grader's recheck the module lives in the sandbox and its attributes cannot be read: candidates there.
    kept = getattr(module, "eps", None) if getattr(module, "recheck_trace", None) is None else None
    if isinstance(kept, (int, float)) and not isinstance(kept, bool):
        if kept == eps:
            return ("eps ignored: the module holds the eps it was given (self.eps, measured) but its forward "
                    "normalises with 1e-6, the default: pass self.eps to the norm")
        return ("eps ignored: the module was given eps = {eps} and holds another in self.eps (measured after "
                "construction): __init__ must keep the eps it is given, self.eps = eps").replace("{eps}", f"{eps:g}")
    return CandidatesVariant("eps ignored: the output is the norm with eps = 1e-6, the default, where the module "
                             f"was given {eps:g}; candidates: __init__ does not keep the eps it is given, or the "
                             "forward does not pass it (self.eps) to the norm")


def _input_gradient(chk: Check, module, x: torch.Tensor, w: torch.Tensor, eps: float, seed: int) -> None:
    """The gradient a backward pass sends through the norm into its input,
    against autograd of the reference: the gain's own gradient can be right
    while the input's is cut, and then every layer before the norm stops
    learning. The output is weighted at random so no term cancels. In the
    grader's recheck the output carries no graph and the reach it comes with
    says whether x was reached, not the gradient: the reach is measured there, the values here."""
    xin = x.clone().requires_grad_(True)
    out = chk.call(module, xin)
    if not isinstance(out, torch.Tensor) or out.shape != x.shape or not out.is_floating_point():
        return
    remote = getattr(out, "recheck_gradient_reaches", None) is not None
    probe = randn(*x.shape, seed=seed + 2)
    got = None
    if not remote and out.requires_grad:
        got = torch.autograd.grad((out * probe).sum(), xin, allow_unused=True)[0]
    if not (gradient_reaches(out, xin) if remote else got is not None):
        chk.require("gradient reaches the input x", False, "the output does not depend on x through autograd")
        chk.candidates("no gradient flows back through your RMSNorm into its input (measured: a backward pass from "
                       "the output gives x no gradient), so in a model every layer before the norm "
                       "would stop learning; candidates: x used through .detach() or .data, or the token rebuilt "
                       "from x's values as a new tensor; normalise x itself")
        return
    if not remote:
        ref_x = x.clone().requires_grad_(True)
        want = torch.autograd.grad((_ref_rms_norm(ref_x, w, eps) * probe).sum(), ref_x)[0]
        chk.compare("gradient into the input x (backward)", got, want)


def _offset_gain(chk: Check, module, dim: int, eps: float, seed: int) -> str | None:
    """The gain stored as an offset from 1 (Gemma's convention): zeros at the start, yet the fresh module gives what
    a gain of ones gives, so its forward adds 1. Measured on the fresh module, before the check sets a gain."""
    gain = getattr(module, "weight", None)
    if not isinstance(module, nn.Module) or not isinstance(gain, torch.Tensor) or tuple(gain.shape) != (dim,) \
            or not bool(torch.all(gain.detach() == 0)):
        return None
    x = randn(2, 3, dim, seed=seed)
    try:
        fresh = module(x)
    except Exception:  # noqa: BLE001: the forward's own failure is reported by the rows below
        return None
    if not (isinstance(fresh, torch.Tensor) and close_to(fresh, _ref_rms_norm(x, torch.ones(dim), eps), 1e-5, 1e-4)):
        return None
    return ("gain stored as an offset from 1 (Gemma's convention): it starts as all zeros, yet the fresh module "
            "gives what a gain of ones gives (measured), so the forward adds 1 to it; tinylm's and Hugging Face "
            "Llama's checkpoints store the gain itself, so a loaded gain is off by one: start it at torch.ones(dim) "
            "and use self.weight as it is")


def _locate_rms_module(RMSNorm):
    """The learner's first wrong line in RMSNorm's forward, on the visible
    check's module size and seed, with inputs small enough that eps matters."""
    p = defaults(check_rms_norm_module)
    eps = 1e-3
    module = RMSNorm(p["dim"], eps)
    gain = getattr(module, "weight", None)
    if not isinstance(gain, torch.Tensor) or tuple(gain.shape) != (p["dim"],):
        return None
    with torch.no_grad():
        gain.copy_(1 + 0.5 * randn(p["dim"], seed=p["seed"] + 1))
    w = gain.detach().clone()
    x = randn(2, 3, p["dim"], seed=p["seed"]) * 1e-2
    return locate_call(module, lambda inp: rms_norm_steps(inp, w, eps), (x,), exercise="RMSNorm")


def layer_norm_steps(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm written out in the exercise's order: centre, biased variance, gain, normalise, bias."""
    mean = x.mean(dim=-1, keepdim=True)
    centred = x - mean
    var = centred.pow(2).mean(dim=-1, keepdim=True)
    return weight * centred * torch.rsqrt(var + eps) + bias


def _layer_norm_cases():
    p = defaults(check_layer_norm)
    d = p["shape"][-1]
    x = randn(*p["shape"], seed=p["seed"], dtype=p["dtype"]) * 2 + 3
    weight, bias = 1 + 0.5 * randn(d, seed=p["seed"] + 1, dtype=p["dtype"]), randn(d, seed=p["seed"] + 2, dtype=p["dtype"])
    return [("mean 3", (x, weight, bias, 1e-5), {})]


LAYER_NORM = Contract("layer_norm", layer_norm_steps, _layer_norm_cases, names=("x", "weight", "bias", "eps"),
                      batch=("x",), leading=("x",), views=("x",), grad=("x", "weight", "bias"), params=(("eps", 0.25),),
                      tolerance=lambda dtype: (0.1, 0.05) if dtype in (torch.bfloat16, torch.float16) else tol_for(dtype))
