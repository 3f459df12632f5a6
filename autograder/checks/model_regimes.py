"""The regimes every notebook-05 module promises, on the visible check's own
inputs (module_contract): a batch of one, float64, non-contiguous inputs,
gradients reaching every parameter, the mode and norms' eps honoured; a
failure names the regime and, where the tracer finds it, the learner's line."""
from __future__ import annotations


import torch
from torch import nn

import tinylm

from . import trace
from .contracts import apply_outcome, defaults, noncontiguous, remembered
from ..learner_values import describe, known_sizes, shown_shape
from .framework.calling import guarded_call
from .framework.check import Check
from .framework.measure import randn, reached_by_gradient
from .model_reference import state_attention, state_block, state_rope_tables, state_stages
from .model_reference import reference_module


# -- the regimes every module promises, on the visible check's own inputs ----------------------
# Each config field the exercise text names, at a non-default value one at a time (Attention reads
# only the head counts, which the grouped regime varies already).
CONFIG_FIELDS = {
    "Attention": (),
    "Block": (("norm_eps", 0.25), ("d_ff", 40)),
    "Transformer": (("norm_eps", 0.25), ("d_ff", 40), ("vocab_size", 97)),
}

# The check of each module kind, whose defaults are the visible parameters: model.py fills it in (its checks call
# module_contract, so this module cannot import them).
VISIBLE_CHECKS: dict = {}


class _Visible:
    """One module exercise at its visible check's parameters, for a config:
    the reference weights, the input, and the reference output."""

    def __init__(self, kind: str, **overrides):
        check = VISIBLE_CHECKS[kind]
        p = defaults(check)
        self.kind, self.seed, self.batch, self.seq = kind, p["seed"], p["batch"], p["seq"]
        self.config = tinylm.ModelConfig(**{"d_model": p["d_model"], "n_heads": p["n_heads"],
                                            "n_layers": p.get("n_layers", 2), "max_seq_len": p["seq"] + 3, **overrides})
        ref_cls = {"Attention": tinylm.Attention, "Block": tinylm.Block, "Transformer": tinylm.Transformer}[kind]
        self.reference = reference_module(ref_cls, self.config, self.seed)
        self.state = {n: t.detach() for n, t in self.reference.state_dict().items()}
        if kind == "Transformer":
            self.input = torch.randint(self.config.vocab_size, (self.batch, self.seq),
                                       generator=torch.Generator().manual_seed(self.seed))
        else:
            self.input = randn(self.batch, self.seq, self.config.d_model, seed=self.seed) * (3 if kind == "Block" else 1)
        c = self.config
        self.cos, self.sin = tinylm.rope_cache(c.head_dim, c.max_seq_len, c.rope_theta)

    def args(self, inp) -> tuple:
        return (inp,) if self.kind == "Transformer" else (inp, self.cos, self.sin)

    def call(self, module, inp):
        return module(*self.args(inp))

    def expected(self, inp, explicit: bool = False):
        c = self.config
        if self.kind == "Transformer":
            return state_stages(self.state, inp, c, explicit=explicit)[-1][1]
        cos, sin = state_rope_tables(c.head_dim, inp.shape[1], c.rope_theta)
        if self.kind == "Block":
            return state_block(self.state, "", inp, c, cos, sin, explicit=explicit)
        return state_attention(self.state, "", inp, c, cos, sin, explicit=explicit)


def _built(cls, visible: "_Visible"):
    """(the learner's module with the reference weights, None) or (None, what went wrong)."""
    try:
        with torch.random.fork_rng():
            module = guarded_call(cls, (visible.config,))
    except Exception as err:  # noqa: BLE001: a regime that cannot even build the module is a finding
        return None, f"{cls.__name__}(config) raised {type(err).__name__}"
    if not isinstance(module, nn.Module):
        return None, f"{cls.__name__}(config) is not an nn.Module"
    want = {n: tuple(t.shape) for n, t in visible.state.items()}
    got = {n: tuple(t.shape) for n, t in module.state_dict().items()}
    wrong = sorted(n for n in want if n in got and got[n] != want[n])
    if set(want) != set(got) or wrong:
        shown = ", ".join(f"{n} {shown_shape(got[n], known_sizes(want[n]))} (expected {want[n]})" for n in wrong[:2])
        return None, f"its parameters have other names or shapes: {shown or 'names differ'}"
    module.load_state_dict(visible.state)
    return module.eval(), None


def _module_outcome(cls, kind: str) -> dict:
    """{"rows": [...], "failed": {...} or None}: batch of one, a non-contiguous
    input, gradients to every parameter, then each config field changed."""
    base = _Visible(kind)
    module, problem = _built(cls, base)
    if module is None:
        return {"rows": []}
    rows: list[dict] = []
    inp = base.input
    grid = [("batch of 1", f"for batch {base.batch}", "for batch 1", lambda: (base, inp[:1].clone(), False))]
    if kind != "Transformer":
        grid.append(("non-contiguous x", "for a contiguous x", "for x as a non-contiguous view (what a caller's "
                     "transpose or slice passes; `.view` fails on it where `.reshape` works)",
                     lambda: (base, noncontiguous(inp), False)))
    grid.append(("gradient reaches every parameter", "for the values", "with gradients", lambda: (base, inp, True)))
    for field_name, value in CONFIG_FIELDS[kind]:
        grid.append((f"config.{field_name}={value}", "for the default config", f"for config.{field_name}={value}",
                     lambda f=field_name, v=value: (_Visible(kind, **{f: v}), None, False)))
    for name, passes, fails, make in grid:
        visible, x, grad = make()
        x = visible.input if x is None else x
        mod = module
        if visible is not base:
            mod, problem = _built(cls, visible)
            if mod is None:
                found = {"note": problem, "facts": [f"{fails}: {problem}"],
                         "bugs": [f"`config.{name.split('=')[0].removeprefix('config.')}` is not used where your "
                                  f"{kind} builds its parts: {problem}"]}
                rows.append({"name": f"regime: {name}", "ok": False, "close": "FAIL", "note": problem})
                return {"rows": rows, "failed": {**found, "name": name, "text": f"right {passes}, wrong {fails}"}}
        norms, hooks = _watch_norms(mod) if name.startswith("config.norm_eps") else ({}, [])
        with torch.enable_grad() if grad else torch.no_grad():
            try:
                got, error = guarded_call(visible.call, (mod, x)), None
            except Exception as err:  # noqa: BLE001
                got, error = None, err
            finally:
                for h in hooks:
                    h.remove()
        want = visible.expected(x.detach() if isinstance(x, torch.Tensor) else x)
        found = _judge_module(kind, visible, mod, name, got, want, error, grad, base, module)
        rows.append({"name": f"regime: {name}", "ok": found is None, "close": "ok" if found is None else "FAIL",
                     "note": "" if found is None else found["note"]})
        if found is not None:
            wrong_eps = _norm_eps_facts(norms, visible.config.norm_eps) if norms else []
            if wrong_eps and not found.get("bugs"):
                found["bugs"] = [f"{'; '.join(wrong_eps)} (measured from each norm's input and output): "
                                 "`config.norm_eps` does not reach it; build every RMSNorm with "
                                 "RMSNorm(config.d_model, config.norm_eps)"]
            elif wrong_eps:
                found["facts"] = found.get("facts", []) + wrong_eps
            # A config field is read where the module is built: the forward's values cannot show that line.
            located = None if name.startswith("config.") and error is None else _locate_module(mod, visible, x, error, grad)
            found.update(name=name, text=f"right {passes}, {'raises' if error else 'wrong'} {fails}", located=located)
            return {"rows": rows, "failed": found}
    return {"rows": rows}


def _judge_module(kind, visible, mod, name, got, want, error, grad, base, base_module) -> dict | None:
    if error is not None:
        return {"note": f"raised {type(error).__name__}", "facts": [], "bugs": []}
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
        shape = shown_shape(got.shape, known_sizes(want.shape)) if isinstance(got, torch.Tensor) else None
        note, said = ((f"shape {shape} != {tuple(want.shape)}", f"has shape {shape}") if shape else
                      (f"{describe(got)}, not a tensor", f"is {describe(got)}"))
        return {"note": note, "facts": [f"{name}: your output {said}, expected shape {tuple(want.shape)}"], "bugs": []}
    if grad:
        params = [(n, p) for n, p in mod.named_parameters() if p.requires_grad]
        reached = _reached_params(got, params)
        missed = [n for n, _ in params if n not in reached]
        if missed:
            return {"note": f"no gradient reaches {missed[0]}", "facts": [],
                    "bugs": [f"no gradient reaches {', '.join(missed[:3])}{' ...' if len(missed) > 3 else ''} (measured: "
                             "a backward pass from your output leaves their .grad empty): forward cuts the graph "
                             "(`.detach()`, `.data`, torch.no_grad() inside forward); training would never change them"]}
        got = got.detach()
    if torch.allclose(got.double(), want.double(), atol=1e-4, rtol=1e-3):
        return None
    if name.startswith("config.norm_eps"):
        c = visible.config
        old = tinylm.ModelConfig(**{**{f: getattr(c, f) for f in ("vocab_size", "d_model", "n_layers", "n_heads",
                                                                     "n_kv_heads", "d_ff", "max_seq_len", "rope_theta")}})
        unchanged = _expected_with(visible, old)
        if torch.allclose(got.double(), unchanged.double(), atol=1e-4, rtol=1e-3):
            return {"note": "norm_eps ignored", "facts": [], "bugs": [
                f"`config.norm_eps` has no effect on your {kind} (measured: with norm_eps=0.25 your output equals the "
                "output with the default 1e-6): pass config.norm_eps as the eps of every RMSNorm"]}
    return {"note": "values differ", "facts": [], "bugs": []}


def _watch_norms(module) -> tuple[dict, list]:
    """Forward hooks on every submodule named like a norm (attn_norm,
    mlp_norm, norm) with a `weight` parameter: each one's (input, output).
    In the grader's recheck the parts never run here: nothing is seen."""
    seen: dict[str, tuple] = {}
    hooks = []
    for name, sub in module.named_modules():
        if name.split(".")[-1].endswith("norm") and isinstance(getattr(sub, "_parameters", {}).get("weight"), torch.Tensor):
            hooks.append(sub.register_forward_hook(
                lambda mod, args, out, name=name: seen.__setitem__(name, (args[0], out, mod._parameters["weight"]))
                if args and isinstance(args[0], torch.Tensor) and isinstance(out, torch.Tensor) else None))
    return seen, hooks


def _norm_eps_facts(norms: dict, eps: float) -> list[str]:
    """'`blocks.0.attn_norm` uses an eps 0.001 (to within ...)' for each watched norm whose
    effective eps, fitted from y = w · x / sqrt(mean(x²) + eps), is not eps."""
    facts = []
    for name, (x, y, w) in norms.items():
        step = torch.finfo(y.dtype).eps if y.is_floating_point() else 0.0
        x, y, w = x.detach().double(), y.detach().double(), w.detach().double()
        ok = (y.abs() > 1e-8) & (w.abs() > 1e-8)
        if not ok.any() or x.shape != y.shape:
            continue
        r = (w * x / y)[ok]                                   # sqrt(mean(x²) + eps) where it can be read
        mean_square = x.pow(2).mean(-1, keepdim=True).expand_as(x)[ok]
        used = float((r.pow(2) - mean_square).median())
        # r² carries the outputs' rounding: about 2 · eps(dtype) · mean(x²), a few times that to be safe
        resolution = 4 * step * float(mean_square.median())
        if abs(used - eps) > max(0.1 * eps, resolution):
            facts.append(f"your `{name}` uses an eps {_eps_words(used, resolution)}, not config.norm_eps = {eps:g}")
    return facts[:3]


def _eps_words(used: float, resolution: float) -> str:
    """The eps measured, with what the outputs' rounding lets it tell: below that, only that it is that small."""
    if abs(used) <= resolution:
        return f"too small to read from its outputs (measured {used:.2g}, below the {resolution:.1g} their rounding allows)"
    return f"{used:.2g} (to within {resolution:.1g}, its outputs' rounding)" if resolution else f"{used:.2g}"


def _expected_with(visible: "_Visible", config) -> torch.Tensor:
    """The reference output on the same weights and input under another config."""
    saved = visible.config
    try:
        visible.config = config
        return visible.expected(visible.input)
    finally:
        visible.config = saved


def _reached_params(got, params) -> list[str]:
    remote = getattr(got, "recheck_gradient_reaches", None)
    if remote is not None:
        return [n for n, p in params if any(t is p for t in remote)]
    try:
        return reached_by_gradient(got, params)
    except RuntimeError:
        return []


def _locate_module(module, visible: "_Visible", x, error, grad):
    """The learner's line for a failing module regime (None when it cannot be told)."""
    try:
        if error is not None:
            return trace.locate_error(error)
        with torch.enable_grad() if grad else torch.no_grad():
            mine = trace.record_learner(module, visible.args(x), call=lambda *a: guarded_call(module, a))
            if grad:
                return trace.locate_grad_cut(mine)
            theirs = trace.record(lambda inp: visible.expected(inp, explicit=True), (x,), learner=False)
        return trace.locate(mine, theirs)
    except Exception:  # noqa: BLE001: the tracer's own failure is never the learner's
        return None


def module_contract(chk: Check, cls, kind: str) -> None:
    """The module's regime grid (once its table rows pass) and the locator of
    its first wrong line on the visible inputs (when they fail)."""
    __tracebackhide__ = True

    def locate_visible():
        visible = _Visible(kind)
        module, _ = _built(cls, visible)
        return None if module is None else _locate_module(module, visible, visible.input, None, False)
    chk.locate_with(locate_visible)
    if not chk.passed or not callable(cls):
        return
    def run() -> dict:
        with torch.random.fork_rng():
            return _module_outcome(cls, kind)
    apply_outcome(chk, remembered(cls, kind, run))
