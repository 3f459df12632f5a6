"""Measurements of the learner's output in words and numbers: seeded inputs,
tolerances per dtype, closeness, a fitted scale factor and the constants a
factor is mixed up with, an identified activation, parameter dtypes and
modes, whether a gradient reaches a parameter, and which known wrong
variants reproduce a result."""
from __future__ import annotations

import itertools
import math
import re
from typing import Any, Callable, Mapping

import torch

from ...learner_values import describe


# Tolerances per dtype of the learner's output: half precision keeps ~3
# significant digits, so its differences are judged relative to that.
TOLERANCES = {
    torch.float64: (1e-8, 1e-6),
    torch.float32: (1e-5, 1e-4),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (2e-3, 5e-3),
}


def variant_tolerance(atol: float, rtol: float, want: torch.Tensor) -> tuple[float, float]:
    """(atol, rtol) a known variant is matched at: a little looser than the
    row's own (a variant computed another way rounds differently), but the
    absolute floor scales with the row's values, so a variant is never
    matched by a difference as large as the row's small numbers (a rate of
    9e-7 where the variant has 0 among rates of 3e-3)."""
    w = want.detach().double().cpu()
    finite = w[torch.isfinite(w)].abs()
    scale = float(finite.max()) if finite.numel() else 0.0
    return max(atol, 1e-6 * (min(1.0, scale) if scale > 0 else 1.0)), max(rtol, 1e-5)


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed: int, dtype=torch.float32) -> torch.Tensor:
    """Seeded normal noise, created on CPU in float64 then cast, so the same
    seed gives the same values on every platform and for every dtype."""
    return torch.randn(*shape, generator=seeded(seed), dtype=torch.float64).to(dtype)


def axis_groups(fine: tuple, coarse: tuple) -> list[list[int]] | None:
    """For each axis of `coarse`, the adjacent axes of `fine` it merges (in
    order), or None when `coarse` is no such merging of `fine`."""
    groups, i = [], 0
    for size in coarse:
        group, product = [], 1
        while i < len(fine) and (product < size or not group) and product * fine[i] <= size:
            group.append(i)
            product *= fine[i]
            i += 1
        if product != size or not group:
            return None
        groups.append(group)
    return groups if i == len(fine) else None


def tol_for(dtype: torch.dtype) -> tuple[float, float]:
    return TOLERANCES.get(dtype, TOLERANCES[torch.float32])


def shorten(text: str, width: int = 80) -> str:
    """text on one line, cut at the last word or punctuation boundary that
    fits in `width` characters, with an ellipsis when something was cut."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    boundary = max(cut.rfind(c) for c in " ,;:(")
    return (cut[:boundary] if boundary > width // 2 else cut).rstrip(" ,;:(") + "…"


def _max_abs_diff(got: torch.Tensor, want: torch.Tensor) -> float | None:
    """Largest |got - want| over the entries where both are finite, when
    both have the same ±inf pattern (masked logits are -inf on purpose);
    None when the inf/nan patterns differ (no single number describes that)."""
    if got.numel() == 0:
        return 0.0
    g, w = got.detach().double().cpu(), want.detach().double().cpu()
    finite = torch.isfinite(g) & torch.isfinite(w)
    same_pattern = bool(torch.equal(torch.isinf(g), torch.isinf(w)) and torch.equal(g[torch.isinf(g)], w[torch.isinf(w)])
                        and torch.equal(torch.isnan(g), torch.isnan(w)))
    if not same_pattern:
        return None
    return float((g[finite] - w[finite]).abs().max()) if finite.any() else 0.0


def format_diff(got: torch.Tensor, want: torch.Tensor) -> str:
    diff = _max_abs_diff(got, want)
    if diff is not None:
        return f"{diff:.2e}"
    n_nan = int(torch.isnan(got.detach().double().cpu()).sum())
    return f"{n_nan} nan" if n_nan else "inf differ"


def close_to(got: Any, want: torch.Tensor, atol: float, rtol: float, equal_nan: bool = False) -> bool:
    """Same shape and allclose in float64 (NaN never equals anything)."""
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
        return False
    g, w = got.detach().double().cpu(), want.detach().double().cpu()
    # Both infinite with the same sign counts as equal: a variant that
    # overflows matches a learner output that overflows the same way.
    return bool(torch.allclose(g, w, atol=atol, rtol=rtol, equal_nan=equal_nan))


def sums_to_one_axes(weights: torch.Tensor, atol: float = 1e-4) -> list[int]:
    """The axes (non-negative indices) over which `weights` sums to 1 everywhere."""
    w = weights.detach().double()
    return [a for a in range(w.dim()) if w.shape[a] > 1 and bool(torch.allclose(w.sum(a), torch.ones(()).double(), atol=atol))]


def elements_asked(error_text: str) -> str | None:
    """For a view or reshape that asked for another number of elements than its input holds (a whole multiple of
    it), by how much, read off the error's text; None otherwise."""
    asked = re.search(r"shape '\[([\d, ]+)\]' is invalid for input of size (\d+)", error_text)
    if asked is None:
        return None
    wanted, held = math.prod(int(n) for n in asked.group(1).split(",")), int(asked.group(2))
    ratio = max(held, wanted) / max(min(held, wanted), 1)
    if ratio != int(ratio) or ratio <= 1:
        return None
    return (f"the shape asked for holds {wanted} elements, {int(ratio)} times {'fewer' if held > wanted else 'more'} "
            f"than the {held} of the tensor reshaped")


def fit_scale(got: torch.Tensor, want: torch.Tensor) -> tuple[float, float] | None:
    """Least-squares c with got ≈ c · want, and the relative residual
    |got - c·want| / |got|. None when either side is zero or not finite."""
    g, w = got.detach().double().flatten(), want.detach().double().flatten()
    if g.shape != w.shape or not (torch.isfinite(g).all() and torch.isfinite(w).all()):
        return None
    ww = float(w @ w)
    if ww == 0 or float(g @ g) == 0:
        return None
    c = float(g @ w) / ww
    return c, float((g - c * w).norm() / g.norm())


def describe_factor(c: float, named: Mapping[str, float] | None = None, rel: float = 0.02) -> str:
    """'1/6.93 = 1/sqrt(48)' style text for a fitted factor, naming the
    closest of `named` (label -> value) when within `rel`."""
    text = f"{c:.3g}" if abs(c) >= 1 else f"1/{1 / c:.3g}" if c else "0"
    for label, value in (named or {}).items():
        if value and abs(c / value - 1) < rel:
            return f"{text} = {label}"
    return text


def identify_activation(act: Callable[[torch.Tensor], torch.Tensor], probe: torch.Tensor | None = None,
                        atol: float = 1e-4) -> str | None:
    """The name of the elementwise function `act` computes on a probe grid
    (None when it is none of ACTIVATIONS)."""
    x = torch.linspace(-4, 4, 81, dtype=torch.float64) if probe is None else probe.double()
    try:
        y = act(x)
    except Exception:
        return None
    if not isinstance(y, torch.Tensor) or y.shape != x.shape:
        return None
    for name, f in ACTIVATIONS.items():
        if torch.allclose(y.double(), f(x), atol=atol):
            return name
    return None


def permutation_of(got: torch.Tensor, want: torch.Tensor, dim: int = -1) -> bool:
    """True when got holds the same values as want along `dim` (each slice
    the same multiset) but not in the same order."""
    if got.shape != want.shape or torch.equal(got, want):
        return False
    g, w = got.detach().double(), want.detach().double()
    return bool(torch.allclose(g.sort(dim).values, w.sort(dim).values, atol=1e-6, equal_nan=True))


def python_number_problem(value: Any, kind: type) -> str | None:
    """None when `value` is a plain Python `kind` (float or int); otherwise
    what it is, e.g. 'a 0-dim torch.float32 tensor (call .item())'."""
    if kind is float and isinstance(value, float):
        return None
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return None
    if isinstance(value, torch.Tensor):
        hint = " (call .item() to get a Python number)" if value.numel() == 1 else ""
        return f"{describe(value)}{hint}"
    return describe(value)


def parameter_problems(module: torch.nn.Module, name: str) -> str | None:
    """None when module.<name> is a registered nn.Parameter that requires
    grad; otherwise what is wrong with it."""
    value = getattr(module, name, None)
    if value is None:
        return f"the module has no attribute `{name}`"
    if not isinstance(value, torch.nn.Parameter):
        return (f"`self.{name}` is {describe(value)}, not an nn.Parameter, so it is not among the module's "
                f"parameters() and no optimizer would train it; wrap it: self.{name} = nn.Parameter(...)")
    if not value.requires_grad:
        return f"`self.{name}` has requires_grad=False, so it can never be trained"
    return None


def few(t: torch.Tensor) -> str:
    return ", ".join(f"{float(v):.4g}" for v in t.flatten()[:3]) + (", ..." if t.numel() > 3 else "")


def mode_split(model: torch.nn.Module) -> str | None:
    """None when every module of `model` is in the mode `model.training`
    says; otherwise what differs (the top flag was set alone)."""
    others = [name for name, m in model.named_modules() if name and m.training != model.training]
    if not others:
        return None
    mode = "train" if model.training else "eval"
    return (f"the model's own flag says {mode} mode, but {len(others)} of its submodules ({', '.join(others[:3])}"
            f"{', ...' if len(others) > 3 else ''}) are not (measured on every module): assigning model.training sets "
            "one flag only; model.train(was_training) sets the mode of every submodule, dropout among them")


def parameter_dtypes(module: torch.nn.Module, want: Mapping[str, torch.dtype] | None = None) -> str | None:
    """None when every floating parameter of a freshly built module has the
    dtype `want` gives it (by state_dict name; default: the default dtype);
    otherwise which one differs and what that costs."""
    for name, value in module.state_dict().items():
        if not value.is_floating_point():
            continue
        expected = (want or {}).get(name, torch.get_default_dtype())
        if value.dtype != expected:
            short = lambda d: str(d).removeprefix("torch.")  # noqa: E731
            return (f"`{name}` is stored in {short(value.dtype)}, where a fresh module's parameters are "
                    f"{short(expected)}: a trained or loaded value is rounded to {short(value.dtype)} (and trains in it); "
                    "leave dtype= out when you make it (module.to(dtype) casts a whole model when that is wanted)")
    return None


def gradient_reaches(output: Any, param: torch.Tensor) -> bool:
    """True when a backward pass from `output` gives `param` a nonzero .grad.
    In the grader's recheck the output arrives as plain data; the jailed
    child, where the learner's graph exists, has answered for it with
    reached_by_gradient."""
    remote = getattr(output, "recheck_gradient_reaches", None)
    if remote is not None:
        return any(t is param for t in remote)
    return bool(reached_by_gradient(output, [(0, param)]))


def reached_by_gradient(output: Any, candidates) -> list:
    """The keys of the (key, tensor) candidates to which a backward pass from
    `output` gives a nonzero gradient (output summed in float64)."""
    if not isinstance(output, torch.Tensor) or not output.requires_grad:
        return []
    pairs = [(key, t) for key, t in candidates if isinstance(t, torch.Tensor) and t.requires_grad]
    if not pairs:
        return []
    total = output.sum() if output.dtype == torch.float64 else output.double().sum()
    grads = torch.autograd.grad(total, [t for _, t in pairs], allow_unused=True)
    return [key for (key, _), g in zip(pairs, grads) if g is not None and bool(g.abs().sum() > 0)]


# The six factors between logarithms in bases e, 2 and 10 (log_a(x) / log_b(x) = ln b / ln a), named as a
# learner writes them.
LOG_BASE_CONSTANTS = {"ln 2": math.log(2), "ln 10": math.log(10), "log10(2)": math.log10(2), "log2(10)": math.log2(10),
                      "log2(e)": math.log2(math.e), "log10(e)": math.log10(math.e)}


def _log_base_factors() -> list[tuple[float, str, str]]:
    """(factor, its name, how code makes it) for every change of logarithm
    base among e, 2 and 10: log_a(x) / log_b(x) = ln b / ln a, and the same
    swap in a divisor gives the inverse."""
    # named as the logarithm, not as one library's function: math.log10, torch.log10 and a tensor's .log10() alike
    bases = (("e", "log (the natural log)"), ("2", "log2"), ("10", "log10"))
    names = {("e", "2"): "ln 2", ("2", "e"): "log2(e)", ("e", "10"): "ln 10", ("10", "e"): "log10(e)",
             ("2", "10"): "log2(10)", ("10", "2"): "log10(2)"}
    inverse = {"log2(e)": " = 1/ln 2", "log10(e)": " = 1/ln 10"}
    nats_to_bits = {"2": " (nats where bits are meant: the division by ln 2 is missing)",
                    "10": " (log10(2) for ln 2, the divisor that turns nats into bits)"}
    found = []
    for (a, log_a), (b, log_b) in itertools.permutations(bases, 2):
        name = names[(a, b)]
        found.append((LOG_BASE_CONSTANTS[name], name + inverse.get(name, ""),
                      f"a change of logarithm base (log_b(x) = ln(x) / ln(b)): {log_a} where {log_b} is meant, or "
                      f"{log_b} where {log_a} is meant in a divisor"
                      + (nats_to_bits[b] if a == "e" else "")))
    return found


# Constants a formula's factor is mixed up with, as (factor, its name, how code makes it); sizes of the call come first.
KNOWN_FACTORS = _log_base_factors() + [
    (2.0, "2", "a term counted twice, or a factor 2 the formula does not have"),
    (0.5, "1/2", "a term counted half, or a division by 2 the formula does not have"),
    (math.pi, "π", "a factor π too many (math.pi where the formula has none)"),
    (1 / math.pi, "1/π", "a division by π the formula does not have"),
    (2 * math.pi, "2π", "a factor 2π: radians where turns are meant (or a 2π missing from the other side)"),
    (1 / (2 * math.pi), "1/(2π)", "a division by 2π: turns where radians are meant (or a 2π missing)"),
    (180 / math.pi, "180/π", "degrees where radians are meant: math.degrees where the formula works in radians"),
    (math.pi / 180, "π/180", "radians where degrees are meant, or math.radians applied to radians"),
    (math.e, "e", "an exp of a value 1 too large (exp(x + 1) = e · exp(x)), or a factor e"),
    (1 / math.e, "1/e", "an exp of a value 1 too small (exp(x - 1) = exp(x) / e), or a division by e"),
]


def matching_variants(got: torch.Tensor, variants: Mapping[str, Any], atol: float, rtol: float,
                      want: torch.Tensor | None = None) -> list[str]:
    """The descriptions of the wrong variants that reproduce `got`. With
    `want`, a variant counts only when it is much nearer to `got` than the
    right result is (an output that is almost right is not explained by a
    variant that is almost right too)."""
    found = []
    off = _max_abs_diff(got, want) if isinstance(want, torch.Tensor) and tuple(want.shape) == tuple(got.shape) else None
    for description, wrong in variants.items():
        try:
            value = wrong() if callable(wrong) else wrong
        except Exception:  # a variant that cannot even run on these inputs
            continue
        # A variant only explains the output if it yields the same dtype too.
        if isinstance(value, torch.Tensor) and value.dtype == got.dtype and close_to(got, value, atol, rtol, equal_nan=True):
            near = _max_abs_diff(got, value) if off else None
            if near is None or near <= 0.25 * off:
                found.append(description)
    return found


ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "SiLU (x·sigmoid(x))": lambda a: a * torch.sigmoid(a),
    "ReLU": torch.relu,
    "GELU": torch.nn.functional.gelu,
    "GELU (tanh approximation)": lambda a: torch.nn.functional.gelu(a, approximate="tanh"),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "softplus": torch.nn.functional.softplus,
    "leaky ReLU": torch.nn.functional.leaky_relu,
    "identity (no activation)": lambda a: a,
}
