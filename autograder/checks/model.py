"""Checks of notebook 05's modules: the learner's Attention, Block and
Transformer (decoder) classes.

Each builds the learner's module from a ModelConfig, requires tinylm's
parameter names and shapes (so checkpoints load both ways and
tinylm.to_hf_llama converts it), loads the weights of a freshly initialised
tinylm module into it, and compares its output with an independent
reference computed here from those weights with torch built-ins and the
closed-form RoPE rotation. The decoder check compares every stage of the
residual stream (embedding, each block, final norm, logits) and names the
first one that differs.
"""
from __future__ import annotations

import ast
import re

import torch
import torch.nn.functional as F
from torch import nn

import tinylm

from . import trace
from .trace.explain import function_around
from .spies import attention_heads, first_call_arguments, unrepeated_bug
from .framework.calling import guarded_call
from .framework.check import CandidatesVariant, Check
from .model_stages import compare_stages, near, record_stages
from .framework.measure import parameter_dtypes, randn
from .references.heads import TILED
from ..diagnosis_record import candidates, measured
from ..learner_values import count_words
from .references.modules import plain_attributes, plain_tensors, registered_elsewhere, saved_buffers, unmoved_tensors
from .model_reference import (state_attention, state_block, state_kv, state_rms, state_rope_tables, state_rotate,
                              state_stages, state_step)
from .model_regimes import VISIBLE_CHECKS, module_contract
from .model_shapes import head_dim_apart, list_lengths, shape_cause, shapes_read
from .model_reference import reference_module


# -- shared steps ---------------------------------------------------------------
def _config(d_model, n_heads, n_layers, seq, n_kv_heads=None, head_dim=None) -> tinylm.ModelConfig:
    return tinylm.ModelConfig(d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, n_layers=n_layers,
                              max_seq_len=seq + 3, head_dim=head_dim)


def grouped_kv_heads(n_heads: int) -> int:
    """The largest n_kv_heads < n_heads that divides it (1, MQA, for a prime): the grouped regime of notebook 07."""
    return max(d for d in range(1, n_heads) if n_heads % d == 0) if n_heads > 1 else 1


def decode_chunks(seq: int) -> list[tuple[int, int]]:
    """(start, end) of a prefill and the decode steps after it: one new token, then two."""
    p = max(1, seq - 3)
    return [(0, p)] + [(s, e) for s, e in ((p, p + 1), (p + 1, seq)) if e > s]


class PrefilledCache:
    """A KV cache holding the REFERENCE keys and values of the positions
    before a step, so every step is judged on its own (a learner's earlier
    step cannot spoil a later one). Same interface as tinylm.KVCache for a
    model: length, update(layer, k, v), advance(n), reset(). Other layers
    hold different keys, so reading the wrong layer shows in the output. A
    plain object (not tinylm's class): in the grader's recheck it travels to
    the learner's process with the call, like any tensor argument."""

    def __init__(self, k: list, v: list, length: int, max_seq_len: int):
        self.k, self.v, self.length, self.max_seq_len = list(k), list(v), length, max_seq_len
        self.batch_size = k[0].shape[0]
        self.layers_updated: list[int] = []  # stays empty in the grader's recheck, where the call runs elsewhere

    def update(self, layer: int, k, v):
        self.layers_updated.append(layer)
        self.k[layer] = torch.cat((self.k[layer], k), dim=2)  # (B, n_kv, length + T, hd)
        self.v[layer] = torch.cat((self.v[layer], v), dim=2)
        return self.k[layer], self.v[layer]

    def advance(self, n: int) -> None:
        self.length += n

    def reset(self) -> None:
        self.k = [k[:, :, :0] for k in self.k]
        self.v = [v[:, :, :0] for v in self.v]
        self.length = 0


def _other_layer_kv(past_k, past_v, seed: int):
    """Keys and values of the same shape as the right layer's, for the layers a step must not read."""
    return randn(*past_k.shape, seed=seed + 500) * 2, randn(*past_v.shape, seed=seed + 501) * 2


def _build(chk: Check, cls, config, reference: nn.Module, on_error=None) -> nn.Module | None:
    """The learner's module with the reference's weights, after the rows that
    require tinylm's parameter names and shapes; None when they differ."""
    __tracebackhide__ = True
    module = chk.call(cls, config, on_error=on_error)
    if not chk.require("is an nn.Module", isinstance(module, nn.Module),
                       f"{chk.fn_name}(config) built {type(module).__name__}",
                       diagnosis=f"{chk.fn_name} must subclass nn.Module and call super().__init__() first"):
        return None
    want = {n: tuple(p.shape) for n, p in reference.state_dict().items()}
    got = {n: tuple(p.shape) for n, p in module.state_dict().items()}
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    wrong = sorted(n for n in set(want) & set(got) if want[n] != got[n])
    plain = plain_tensors(module, missing)
    # On a GPU, a Parameter moved with .to(DEVICE) is already a plain tensor here: the build on the CPU says why.
    if plain and not registered_elsewhere(chk, cls, (config,)):
        return None
    hidden = (_modules_out_of_sight(module, missing) or list_lengths(want, got, config)
              or saved_buffers(chk, cls, (config,), module, extra) or _unwrapped(plain, missing)
              or _biases_beside(module, want, missing, extra))
    # Names the grader's recheck brought back from the learner's process are free identifiers the learner chose:
    # counted there, never quoted (tinylm's own names, the missing ones, are the grader's words)
    unexpected = str(extra[:4]) if getattr(cls, "recheck_trace", None) is None else \
        f"{count_words(len(extra), 'name')} of your own"
    if not chk.require("state_dict keys as tinylm's", not missing and not extra,
                       f"missing {missing[:4]}, unexpected {unexpected}",
                       diagnosis=hidden or f"parameter names differ from tinylm's: missing {missing[:4]}, unexpected "
                                           f"{unexpected}; use exactly the attribute names of the table above "
                                           "(nn.Linear(..., bias=False))"):
        return None
    registered_elsewhere(chk, cls, (config,))
    cause = shape_cause(wrong, got, want, module, reference, config)
    if not chk.require("parameter shapes", not wrong, f"{[(n, got[n], want[n]) for n in wrong[:3]]} (got, want)",
                       diagnosis=cause):
        if cause is None:
            chk.measured(shapes_read(wrong, got, want, config))
        return None
    dtypes = parameter_dtypes(module, {n: p.dtype for n, p in reference.state_dict().items()})
    if not chk.require("parameter dtypes", dtypes is None, dtypes or "", diagnosis=dtypes):
        return None
    shared = _shared_modules(module, reference)
    if not chk.require("each part has its own parameters", shared is None, shared or "",
                       diagnosis=shared):
        return None
    module.load_state_dict(reference.state_dict())
    return module.eval()


def _sharing(module: nn.Module) -> list[list[str]]:
    """Groups of state_dict names that are one tensor (e.g. a tied head)."""
    groups: dict[tuple, list[str]] = {}
    for name, t in module.state_dict(keep_vars=True).items():
        groups.setdefault((t.data_ptr(), tuple(t.shape)), []).append(name)
    return [g for g in groups.values() if len(g) > 1]


def _shared_modules(module: nn.Module, reference: nn.Module) -> str | None:
    """When two parts of the learner's module are one object (measured: their
    parameters are the same tensors, which the reference's are not), name them."""
    tied = {frozenset(g) for g in _sharing(reference)}
    extra = [g for g in _sharing(module) if frozenset(g) not in tied]
    if not extra:
        return None
    a, b = extra[0][:2]
    parts_a, parts_b = a.split("."), b.split(".")
    while len(parts_a) > 1 and len(parts_b) > 1 and parts_a[-1] == parts_b[-1]:  # drop the common tail
        parts_a, parts_b = parts_a[:-1], parts_b[:-1]
    first, second = ".".join(parts_a), ".".join(parts_b)
    n = len(extra)
    return (f"`{first}` and `{second}` are the same module (measured: {n} parameter tensor{'s' if n > 1 else ''} "
            f"shared under two names, e.g. {a} is {b}): a module listed or assigned twice is one set of weights, so "
            "both places compute the same thing and training moves them together; build a separate module for each "
            "place" + (" (nn.ModuleList(Block(config) for _ in range(n_layers)) builds n_layers different blocks)"
                       if first.split(".")[-1].isdigit() and second.split(".")[-1].isdigit() else
                       f" (a constructor call of its own for `{second}`, not the object `{first}` holds)"))


def _unwrapped(plain: list[str], missing: list[str]) -> str | None:
    """When every missing parameter is a plain tensor attribute of that name (built the same on every device)."""
    if not plain or plain != missing:
        return None
    more = f" ({len(plain) - 1} more alike)" if len(plain) > 1 else ""
    return (f"`{plain[0]}`{more} is a plain tensor attribute, not an nn.Parameter (measured on the module you built), "
            "so it is not among parameters() or the state_dict and no optimizer trains it; wrap it: "
            "nn.Parameter(...)")


def _biases_beside(module, want: dict, missing: list, extra: list) -> str | None:
    """The only unexpected names are biases beside weights tinylm has: which
    kind of module each belongs to, and what tinylm's is."""
    biases = [n for n in extra if n.endswith(".bias") and n[:-len("bias")] + "weight" in want]
    if missing or not biases or len(biases) != len(extra):
        return None
    kinds = {n[:-len(".bias")]: type(module.get_submodule(n[:-len(".bias")])).__name__ for n in biases}
    fixes = (["tinylm's norms are RMSNorm: a gain and no bias, no centring"] if any("Norm" in k for k in kinds.values())
             else []) + (["its projections are nn.Linear(..., bias=False)"] if "Linear" in kinds.values() else [])
    said = ", ".join(f"`{name}` is a {kind}" for name, kind in kinds.items())
    return (f"parameter names differ from tinylm's: unexpected {extra[:4]}, a bias beside each weight tinylm has "
            f"(measured: {said})" + (f"; {' and '.join(fixes)}" if fixes else ""))


def _modules_out_of_sight(module: nn.Module, missing: list[str]) -> str | None:
    """When every missing parameter lives under attributes that hold modules
    in a plain list, tuple or dict (which nn.Module does not register), say so."""
    holders = {}
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, nn.Module):  # torch's own registries, or registered containers
            continue
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
        if any(isinstance(v, nn.Module) for v in items):
            holders[name] = type(value).__name__
    if not missing or not holders or not all(n.split(".")[0] in holders for n in missing):
        return None
    name = next(iter(holders))
    return (f"`self.{name}` is a plain Python {holders[name]} of modules (measured: the missing parameters are all "
            f"under {name}.*): nn.Module registers submodules only as attributes or in nn.ModuleList/nn.ModuleDict, "
            f"so their weights are not parameters() and not in state_dict(); use self.{name} = nn.ModuleList(...)")


def _tie_undone(chk: Check, cls) -> bool:
    """Where the learner's __init__ ties the head (one line assigning tok_emb's weight to lm_head's, or the other way)
    and a later line assigns either weight again: said with both lines, the later one placed. Whether it was said."""
    init = getattr(cls, "__init__", None)
    code = getattr(init, "__code__", None)
    if code is None or getattr(cls, "recheck_trace", None) is not None:
        return False
    body = function_around(code.co_filename, code.co_firstlineno + 1)
    if body is None:
        return False
    ends = lambda node, tail: isinstance(node, ast.Attribute) and ast.unparse(node).endswith(tail)  # noqa: E731
    weights = (".tok_emb.weight", ".lm_head.weight")
    assigns = [(node, target) for node in ast.walk(body) if isinstance(node, ast.Assign) for target in node.targets
               if any(ends(target, w) for w in weights)]
    ties = [node.lineno for node, target in assigns if any(ends(node.value, w) for w in weights)
            and not ends(node.value, "." + ast.unparse(target).split(".", 1)[-1])]
    if len(ties) != 1:
        return False
    later = sorted({node.lineno for node, _ in assigns if node.lineno > ties[0]})
    if len(later) != 1:
        return False
    file, line = code.co_filename, later[0]
    chk.located = trace.Located(file, line, getattr(code, "co_qualname", "__init__"), trace.source_line(file, line),
                                [], kind="untied")
    chk.diagnose(f"the head is not tied after __init__ (measured: lm_head.weight and tok_emb.weight are two "
                 f"Parameters): line {ties[0]} ties them, and line {line}, after it, assigns one of the two weights "
                 "again, which the other does not follow; tie after that line (or change the values in place, under "
                 "torch.no_grad(), which keeps the one Parameter)")
    return True


def _prepare(chk: Check, cls, reference_cls, seed: int, d_model: int, n_heads: int, n_layers: int, seq: int,
             n_kv_heads=None, on_error=None, head_dim=None):
    """(config, the learner's module with the reference weights or None, those weights as a state dict)."""
    __tracebackhide__ = True
    config = _config(d_model, n_heads, n_layers, seq, n_kv_heads, head_dim)
    reference = reference_module(reference_cls, config, seed)
    state = {n: p.detach() for n, p in reference.state_dict().items()}
    return config, _build(chk, cls, config, reference, on_error), state


def _grouped_hint(config):
    """on_error for the grouped regime: what differs from the regime that passed."""
    # Only the regime is measured: a k or v split into n_heads heads and an n_kv_heads written where n_heads
    # belongs (the merge before o_proj) raise alike there, so both are candidates.
    return lambda err: candidates(
        f"it fails only with n_kv_heads={config.n_kv_heads} < n_heads={config.n_heads} (notebook 07's grouped-query "
        "attention); candidates: (1) k or v split into n_heads heads, where k_proj and v_proj give n_kv_heads · "
        "head_dim features: view them with self.n_kv_heads heads (causal_attention repeats them to the query heads); "
        "(2) n_kv_heads where n_heads belongs: q's view and the merge before o_proj have n_heads heads, "
        "n_heads · head_dim features")


# What a cached step raises when its mask or its scores are built for as many keys as queries: torch's texts for
# sizes that do not broadcast or multiply.
_SIZES_DIFFER = re.compile(r"must match the size|shapes cannot be multiplied|size of tensor|expected size|attn_mask")


def _cached_hint(err):
    """The cached path raised where the uncached one passed: that much is measured. Fewer queries than keys is
    the one thing a cached step changes about the sizes, said only when the error is about sizes."""
    fact = "it fails only with a cache (notebook 06: a prefill, then new tokens at start_pos = cache.length > 0)"
    if not _SIZES_DIFFER.search(str(err)):
        return measured(fact + "; without one the same module passes")
    return (fact + ": k, v = cache.update(layer_idx, k, v) returns every key and value so far, so there are fewer "
            "queries than keys; causal_attention aligns its mask for that")


CACHED_BUGS = {
    "start_pos ignored": "your Attention ignores start_pos in cached steps: the new tokens are rotated as if they "
                         "began at position 0; rotate q and k with apply_rope(..., cos, sin, start_pos)",
    "k from zero": "your Attention rotates the new keys from position 0 in cached steps (only q gets start_pos): "
                   "rotate k with apply_rope(k, cos, sin, start_pos) too",
    "q from zero": "your Attention rotates the new queries from position 0 in cached steps (only k gets start_pos): "
                   "rotate q with apply_rope(q, cos, sin, start_pos) too",
    "top-left mask": "the causal mask is aligned top-left in cached steps (F.scaled_dot_product_attention(..., "
                     "is_causal=True) with fewer queries than keys lets new token i see keys 0..i only): call "
                     "causal_attention(q, k, v), whose mask is bottom-right aligned",
}
# A cached step whose output is the new tokens' own, as if no cache were given: positions from 0, no past keys.
_UNCACHED = ("a cached step gives the new tokens' output without the cache, at positions from 0 and seeing only each "
             "other (measured: equal to that call): the cache handed over is not used")
UNCACHED_BLOCK = _UNCACHED + ("; a block hands it on to its attention with its layer index, self.attn(self.attn_norm(x), "
                              "cos, sin, cache, layer_idx)")
UNCACHED_ATTENTION = _UNCACHED + ("; join the cached keys and values, k, v = cache.update(layer_idx, k, v), and rotate "
                                  "q and k from start_pos = cache.length")
WRONG_STEP = {"start_pos ignored": dict(q_from_zero=True, k_from_zero=True), "k from zero": dict(k_from_zero=True),
              "q from zero": dict(q_from_zero=True), "top-left mask": dict(top_left=True)}


def _attention_steps(chk: Check, module, state, prefix, inputs, config, seed, *, layer_idx: int, label: str,
                     call=None, wrap=None) -> None:
    """Feed `inputs` (the attention input, or the block input with `wrap`)
    chunk by chunk through a PrefilledCache and compare each step with the
    full recompute's slice; wrong cached paths are offered as variants.
    wrap(h_step, attention) turns an attention branch into the module's output
    (the block around it); attn_input(x) is what the attention reads."""
    __tracebackhide__ = True
    wrap = wrap or (lambda xs, attend, start: attend(xs))
    attn_input = call or (lambda xs: xs)
    cos, sin = tinylm.rope_cache(config.head_dim, config.max_seq_len, config.rope_theta)
    full_k, full_v = state_kv(state, prefix, attn_input(inputs), config, 0)  # (B, n_kv, T, hd)
    uncached_right = chk.passed
    for start, end in decode_chunks(inputs.shape[1]):
        past_k, past_v = full_k[:, :, :start], full_v[:, :, :start]
        other_k, other_v = _other_layer_kv(past_k, past_v, seed)
        ks = [other_k] * config.n_layers
        vs = [other_v] * config.n_layers
        ks[layer_idx], vs[layer_idx] = past_k, past_v
        xs = inputs[:, start:end]

        def cached(new, ks=ks, vs=vs, start=start):  # a fresh cache each call, so a call can be measured again
            return module(new, cos, sin, PrefilledCache(ks, vs, start, config.max_seq_len), layer_idx)
        with torch.no_grad():
            got = chk.call(cached, xs, on_error=_cached_hint if chk.passed and start else None)

        def step(past=(past_k, past_v), start=start, **wrong):
            return lambda new=xs: wrap(new, lambda h: state_step(state, prefix, h, config, start, *past, **wrong), start)
        variants = {CACHED_BUGS[name]: step(**kw) for name, kw in WRONG_STEP.items()} if start else {}
        if start:
            variants[f"the cache's layer 0 is read instead of layer {layer_idx}: pass layer_idx on to the attention, "
                     "self.attn(..., cache, layer_idx)"] = step(past=(other_k, other_v))
            variants[UNCACHED_BLOCK if prefix else UNCACHED_ATTENTION] = step(past=(past_k[:, :, :0], past_v[:, :, :0]),
                                                                               start=0)
        what = f"prefill {end} tokens" if start == 0 else f"{end - start} new at start_pos={start}"
        if chk.compare(f"{label}: {what}", got, step()(), variants=variants):
            continue
        if uncached_right:
            uncached_right = not _future_through_cache(chk, module, cached, step(), xs, start, lambda t: t + 1.0)
        # the learner's line on the first cached call that differs, traced beside the reference's step
        chk.locate_with(lambda cached=cached, reference=step(), xs=xs: trace.locate(
            trace.record_learner(module, (xs,), call=lambda ids: guarded_call(cached, (ids,))),
            trace.record(reference, (xs,), learner=False)))


def _attention_regimes(chk: Check, Attention, seed, d_model, n_heads, seq, batch, n_kv_heads, label,
                       on_error=None, head_dim=None) -> None:
    """One configuration of the Attention check: full forward, causality, cached steps."""
    __tracebackhide__ = True
    config, module, state = _prepare(chk, Attention, tinylm.Attention, seed, d_model, n_heads, 2, seq, n_kv_heads,
                                     on_error=on_error, head_dim=head_dim)
    if module is None:
        return
    cos, sin = tinylm.rope_cache(config.head_dim, config.max_seq_len, config.rope_theta)
    x = randn(batch, seq, d_model, seed=seed)
    if on_error is not None:  # measured first: which of k and v reaches attention unrepeated, or that all three do
        hint = on_error

        def on_error(err, hint=hint):
            heads = attention_heads(module, lambda: module(x, cos, sin))
            return unrepeated_bug(heads) or _after_attention(heads, config) or hint(err)
    with torch.no_grad():
        got = chk.call(module, x, cos, sin, on_error=on_error)
    ref_cos, ref_sin = state_rope_tables(config.head_dim, seq, config.rope_theta)
    no_rope = dict(cos=torch.ones_like(ref_cos), sin=torch.zeros_like(ref_sin))
    variants = {_without_rotation(module, x, cos, sin, seq): lambda: state_attention(state, "", x, config, **no_rope)}
    if config.n_kv_heads < config.n_heads:
        variants[TILED] = lambda: state_attention(state, "", x, config, ref_cos, ref_sin, tile=True)
    if config.n_kv_heads == config.n_heads:
        variants["heads split wrongly: view(B, T, n_heads, head_dim).transpose(1, 2), not view(B, n_heads, T, "
                 "head_dim)"] = lambda: _split_wrong(state, x, config, ref_cos, ref_sin)
    variants[UNMERGED] = lambda: state_attention(state, "", x, config, ref_cos, ref_sin, unmerged=True)
    chk.compare(f"{label}: forward {tuple(x.shape)}", got, state_attention(state, "", x, config, ref_cos, ref_sin),
                variants=variants)
    with torch.no_grad():
        changed = x.clone()
        changed[:, -1] += 1.0
        later = chk.call(module, changed, cos, sin, on_error=on_error)
    if not chk.require(f"{label}: causal, the last token does not change earlier outputs",
                       isinstance(later, torch.Tensor) and isinstance(got, torch.Tensor) and later.shape == got.shape
                       and torch.allclose(later[:, :-1], got[:, :-1], atol=1e-5), "earlier positions changed"):
        _earlier_positions_changed(chk, got, later, "attention")
    _attention_steps(chk, module, state, "", x, config, seed, layer_idx=1, label=f"{label}, cached")


def _without_rotation(module, x, cos, sin, seq: int) -> str:
    """What an output equal to attention without RoPE says of this module: RoPE missing where its forward makes no
    apply_rope call (measured), else the axis the first call rotates along, when it is not the positions'. Where
    the grader's recheck runs the module in the learner's process, no stand-in sees its calls: candidates."""
    if getattr(module, "recheck_trace", None) is not None:
        return CandidatesVariant(
            "your output equals attention without RoPE (measured); candidates: RoPE missing (no apply_rope call on q and "
            "k), or a rotation along another axis than the positions (q and k rotated before the transpose to (B, "
            "n_heads, T, head_dim))")
    called = first_call_arguments(module, "apply_rope", lambda: module(x, cos, sin))
    if called is None:
        return "RoPE missing: rotate q and k with apply_rope before attention (measured: your forward calls no apply_rope)"
    rotated = next(iter(called.values()), None)
    if isinstance(rotated, torch.Tensor) and rotated.dim() >= 2 and rotated.shape[-2] != seq:
        return (f"RoPE turns along another axis than the positions (measured: the first apply_rope call gets a tensor "
                f"of shape {tuple(rotated.shape)}, whose axis -2, the one apply_rope takes as the positions, has size "
                f"{rotated.shape[-2]}, not T = {seq}): every position of a head then turns by the same angle, which "
                "cancels in q·k; rotate q and k in the (B, n_heads, T, head_dim) layout, after the transpose")
    return CandidatesVariant(
        "your output equals attention without RoPE, though your forward calls apply_rope on a tensor whose axis -2 has "
        f"the T = {seq} positions (measured); candidates: a rotation whose result is not the q or k that attention "
        "reads, or an apply_rope that does not rotate")


UNMERGED = ("heads merged without the transpose: y is (B, n_heads, T, head_dim), and a reshape to (B, T, d_model) "
            "mixes positions and heads; y.transpose(1, 2).reshape(B, T, n_heads * head_dim)")


def _earlier_positions_changed(chk: Check, got, later, what: str) -> None:
    """The causal row failed: which earlier positions the last token reached
    (measured). A cause is said only when nothing else explains it: a known
    bug that reproduces the whole output (a merge that mixes positions)
    already does, and a mask that lets queries see later tokens reaches every
    earlier position, where a layout that mixes positions reaches only some."""
    if not (isinstance(later, torch.Tensor) and isinstance(got, torch.Tensor) and later.shape == got.shape) \
            or chk.named_variants():
        return
    moved = ~torch.isclose(later[:, :-1], got[:, :-1], atol=1e-5).all(-1).all(0)   # (T - 1,)
    n, reached = moved.numel(), [i for i, m in enumerate(moved.tolist()) if m]
    if len(reached) == n and what == "attention":  # one layer: a reshape that mixes positions reaches only some
        chk.diagnose(f"attention sees the future (measured: changing the last token changes the output at every "
                     f"earlier position, all {n} of them): use causal_attention")
        return
    where = f"every earlier position, all {n} of them" if len(reached) == n else \
        f"earlier positions {', '.join(map(str, reached))} of 0..{n - 1}"
    chk.candidates(f"changing the last token changes the output of {what} at {where}; candidates: a mask that lets "
                   "queries see later tokens (missing, transposed, or off by one), or values of different positions "
                   "mixed after attention (heads merged without the transpose, a reshape or view that mixes the T "
                   "axis with another)")


# -- the checks -------------------------------------------------------------------
def _after_attention(heads, config):
    """A grouped call that raised after attention got q with n_heads heads and k, v with n_kv_heads: the
    error is in the steps after it (measured), whatever the raising line's text."""
    if heads != (config.n_heads, config.n_kv_heads, config.n_kv_heads) or config.n_kv_heads == config.n_heads:
        return None
    return measured(f"it fails only with n_kv_heads={config.n_kv_heads} < n_heads={config.n_heads}, after attention "
                    f"(measured: attention got q with {config.n_heads} heads, k and v with {config.n_kv_heads}, as it "
                    f"should): its output has n_heads = {config.n_heads} heads of head_dim = {config.head_dim}, so "
                    f"the heads merge to n_heads · head_dim = {config.n_heads * config.head_dim} features before o_proj")


def _head_dim_hint(config):
    """on_error for the regime with head_dim set apart, run only once the same sizes with head_dim =
    d_model // n_heads passed: the one thing that differs is head_dim."""
    return lambda err: head_dim_cause(config)


def head_dim_cause(config) -> str:
    return (f"head_dim taken as d_model // n_heads (or n_heads · head_dim as d_model) in your Attention (measured: "
            f"it fails only with head_dim = {config.head_dim} set apart from d_model // n_heads = "
            f"{config.d_model // config.n_heads}; the MHA rows, with the same d_model, n_heads, inputs and seed and "
            f"head_dim = d_model // n_heads, pass): split heads with view(B, T, n, self.head_dim) and merge them "
            "to n_heads * self.head_dim features before o_proj, never to d_model or x.shape[-1]")


def check_attention_module(Attention, *, seed: int = 93, d_model: int = 32, n_heads: int = 4, seq: int = 6,
                           batch: int = 2, head_dim: int = 12) -> None:
    """Attention(config): q/k/v/o projections named as tinylm's; forward(x, cos, sin) equals
    projections -> RoPE on q and k -> causal attention -> merged heads -> o_proj. In every regime the later
    notebooks use: without a cache and with one (a prefill, then decode steps at start_pos = cache.length, in
    layer 1 of the cache), with as many kv heads as query heads and with fewer (grouped, notebook 07), and with
    config.head_dim set apart from d_model // n_heads (`head_dim`, as published models set it)."""
    __tracebackhide__ = True
    chk = Check("Attention", expects="an nn.Module whose forward(x, cos, sin, cache, layer_idx) returns (B, T, d_model)")
    _attention_regimes(chk, Attention, seed, d_model, n_heads, seq, batch, None, "MHA")
    if chk.passed:  # the grouped regime only explains something once the plain one is right
        n_kv = grouped_kv_heads(n_heads)
        _attention_regimes(chk, Attention, seed + 1, d_model, n_heads, seq, batch, n_kv, f"GQA {n_heads}/{n_kv}",
                           on_error=_grouped_hint(_config(d_model, n_heads, 2, seq, n_kv)))
    apart = _config(d_model, n_heads, 2, seq, head_dim=head_dim)
    if chk.passed and head_dim_apart(apart):  # the MHA rows are this regime with head_dim = d_model // n_heads
        _attention_regimes(chk, Attention, seed, d_model, n_heads, seq, batch, None, f"head_dim {head_dim}",
                           on_error=_head_dim_hint(apart), head_dim=head_dim)
        if not chk.passed and not chk.likely_bugs():
            chk.diagnose(head_dim_cause(apart))
    module_contract(chk, Attention, "Attention")
    chk.finish()


def _fails_own_check(check, cls) -> bool:
    """True when `check` fails on the learner's class `cls` (its output silenced)."""
    import contextlib
    import io

    from .framework.failure import CheckFailed
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            check(cls)
    except CheckFailed:
        return True
    except Exception:  # noqa: BLE001: a check that cannot run says nothing
        return False
    return False


def _split_wrong(state, x, config, cos, sin):
    """The heads split by view(B, n, T, hd) (mixes positions and heads)."""
    B, T, _ = x.shape
    H, hd = config.n_heads, config.head_dim
    q, k, v = (F.linear(x, state[f"{n}_proj.weight"]).view(B, H, T, hd) for n in "qkv")
    y = F.scaled_dot_product_attention(state_rotate(q, cos, sin), state_rotate(k, cos, sin), v, is_causal=True)
    return F.linear(y.transpose(1, 2).reshape(B, T, H * hd), state["o_proj.weight"])


def _exchanged(state: dict, a: str, b: str) -> dict:
    """A copy of a state dict with the tensors of a and b exchanged."""
    swapped = dict(state)
    swapped[a], swapped[b] = state[b], state[a]
    return swapped


def check_block(Block, *, seed: int = 94, d_model: int = 32, n_heads: int = 4, seq: int = 5, batch: int = 2) -> None:
    """Block(config): attn_norm, attn, mlp_norm, mlp named as tinylm's; forward(x, cos, sin) is the pre-norm block;
    with a cache, forward(x, cos, sin, cache, layer_idx) passes both on to its attention."""
    __tracebackhide__ = True
    chk = Check("Block", expects="an nn.Module whose forward(x, cos, sin, cache, layer_idx) returns (B, T, d_model)")
    config, module, state = _prepare(chk, Block, tinylm.Block, seed, d_model, n_heads, 2, seq)
    if module is not None:
        cos, sin = tinylm.rope_cache(config.head_dim, config.max_seq_len, config.rope_theta)
        ref_cos, ref_sin = state_rope_tables(config.head_dim, seq, config.rope_theta)
        x = randn(batch, seq, d_model, seed=seed) * 3  # a residual stream far from unit RMS
        with torch.no_grad():
            got = chk.call(module, x, cos, sin)

        def variant(**kw):
            return lambda: state_block(state, "", x, config, ref_cos, ref_sin, **kw)
        chk.compare(f"forward {tuple(x.shape)}", got, state_block(state, "", x, config, ref_cos, ref_sin), variants={
            "post-norm: normalise each branch's input (x + attn(attn_norm(x))), not the sum": variant(post_norm=True),
            "post-norm in the attention half: attn_norm(x + attn(x)) normalises the sum; pre-norm normalises "
            "attention's input, x + attn(attn_norm(x))": variant(post_norm="attn"),
            "post-norm in the MLP half: mlp_norm(h + mlp(h)) normalises the sum; pre-norm normalises the MLP's "
            "input, h + mlp(mlp_norm(h))": variant(post_norm="mlp"),
            "missing residual: x = x + attn(...), not x = attn(...)": variant(residual=False),
            "norms swapped: attn_norm goes before attention, mlp_norm before the MLP":
                variant(norms=("mlp_norm", "attn_norm")),
            "attn_norm used for both branches: the MLP reads mlp_norm(x)": variant(norms=("attn_norm", "attn_norm")),
            "branches in parallel: the MLP must read the stream after attention was added to it, not the block's "
            "input (measured: your Block's output is x + attn(attn_norm(x)) + mlp(mlp_norm(x)) of its own weights)":
                variant(parallel=True),
            "the MLP sub-block runs before the attention sub-block: attention comes first, h = x + attn(attn_norm(x)), "
            "then h + mlp(mlp_norm(h)) (measured: your Block's output is h + attn(attn_norm(h)) with h = x + "
            "mlp(mlp_norm(x)), of its own weights)": variant(mlp_first=True),
            "gate and up swapped in the MLP: SiLU goes on gate_proj's output, silu(gate_proj(x)) * up_proj(x) "
            "(measured: your Block's output is the reference's with the two weights exchanged)":
                lambda: state_block(_exchanged(state, "mlp.gate_proj.weight", "mlp.up_proj.weight"), "", x, config,
                                    ref_cos, ref_sin),
        })
        if chk.passed:
            _attention_steps(chk, module, state, "attn.", x, config, seed, layer_idx=1, label="cached",
                             call=lambda xs: state_rms(xs, state["attn_norm.weight"], config.norm_eps),
                             wrap=lambda xs, attend, start: state_block(state, "", xs, config, None, None,
                                                                       attention=attend))
        if not chk.passed and not chk.votes:  # no known block bug explains it: measure the parts
            part = type(getattr(module, "attn", None))
            attention_fails = (issubclass(part, nn.Module) and part not in (nn.Module, tinylm.Attention)
                               and _fails_own_check(check_attention_module, part))
            if attention_fails:
                chk.diagnose("your Attention fails its own check (check_attention_module, run again here on it): "
                             "Block calls it, so fix Attention first")
    module_contract(chk, Block, "Block")
    chk.finish()


def check_decoder(Transformer, *, seed: int = 95, d_model: int = 32, n_layers: int = 2, n_heads: int = 4,
                  seq: int = 7, batch: int = 2) -> None:
    """Transformer(config): tinylm.Transformer's parameter names with the head tied to the embedding; logits
    equal to the reference stage by stage; causal; with a cache, decode steps equal the full recompute, with
    as many kv heads as query heads and with fewer (grouped)."""
    __tracebackhide__ = True
    chk = Check("Transformer", expects="an nn.Module whose forward(idx, cache=None) returns logits (B, T, vocab_size)")
    config, module, state = _prepare(chk, Transformer, tinylm.Transformer, seed, d_model, n_heads, n_layers, seq)
    built = (module, config, module is not None and plain_attributes(module))  # read before any forward pass
    if module is not None:
        head, emb = module.get_submodule("lm_head").weight, module.get_submodule("tok_emb").weight
        chk.require("lm_head tied to tok_emb", head is emb, "two separate matrices",
                    diagnosis=None if head is emb or _tie_undone(chk, Transformer) else
                    "the head is not tied: set self.lm_head.weight = self.tok_emb.weight (one Parameter)")
        idx = torch.randint(config.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(seed))
        seen, hooks = record_stages(module, config)
        try:
            with torch.no_grad():
                got = chk.call(module, idx)
        finally:
            for h in hooks:
                h.remove()
        seen["logits"] = got
        compare_stages(chk, seen, state_stages(state, idx, config), module, config, idx, head=state["lm_head.weight"])
        with torch.no_grad():
            changed = idx.clone()
            changed[:, -1] = (changed[:, -1] + 1) % config.vocab_size
            later = chk.call(module, changed)
        if not chk.require("causal: the last token does not change earlier logits",
                           isinstance(later, torch.Tensor) and isinstance(got, torch.Tensor)
                           and later.shape == got.shape and torch.allclose(later[:, :-1], got[:, :-1], atol=1e-5),
                           "earlier positions changed"):
            _earlier_positions_changed(chk, got, later, "the model")
        if chk.passed:
            _decode_steps(chk, module, state, idx, config, "MHA, cached")
    if chk.passed:
        n_kv = grouped_kv_heads(n_heads)
        config, module, state = _prepare(chk, Transformer, tinylm.Transformer, seed + 1, d_model, n_heads, n_layers, seq,
                                         n_kv, on_error=_grouped_hint(_config(d_model, n_heads, n_layers, seq, n_kv)))
        if module is not None:
            idx = torch.randint(config.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(seed + 1))
            _decode_steps(chk, module, state, idx, config, f"GQA {n_heads}/{n_kv}, cached",
                          on_error=_grouped_hint(config))
    if built[0] is not None:  # last, so that a failure here leaves the rows above as they were
        unmoved_tensors(chk, Transformer, (built[1],), built[0], built[2])
    module_contract(chk, Transformer, "Transformer")
    chk.finish()


def _decode_steps(chk: Check, module, state, idx, config, label, on_error=None) -> None:
    """Each decode chunk's logits, from a cache prefilled with the reference's
    keys and values of every layer, against the full recompute."""
    __tracebackhide__ = True
    stages = state_stages(state, idx, config)
    full_logits = stages[-1][1]
    streams = [x for _, x in stages[:config.n_layers]]          # the input of block i
    kv = [state_kv(state, f"blocks.{i}.attn.", state_rms(streams[i], state[f"blocks.{i}.attn_norm.weight"],
                                                        config.norm_eps), config, 0) for i in range(config.n_layers)]
    uncached_right = chk.passed
    for start, end in decode_chunks(idx.shape[1]):
        pasts = [(k[:, :, :start], v[:, :, :start]) for k, v in kv]
        cache = PrefilledCache([k for k, _ in pasts], [v for _, v in pasts], start, config.max_seq_len)
        with torch.no_grad():
            got = chk.call(module, idx[:, start:end], cache=cache, on_error=on_error or _cached_hint)
        chunk = idx[:, start:end]

        def cached(ids, pasts=pasts, start=start):
            return module(ids, cache=PrefilledCache([k for k, _ in pasts], [v for _, v in pasts], start,
                                                    config.max_seq_len))
        slots = cache.layers_updated
        shared_slots = bool(slots) and slots != list(range(config.n_layers))
        if shared_slots:
            chk.diagnose(f"the blocks write the cache slots {slots}, expected one per layer "
                         f"{list(range(config.n_layers))} (measured: the layer index of each cache.update): layers "
                         "sharing the same cache slot read each other's keys; pass each block its layer index, "
                         "for i, block in enumerate(self.blocks): x = block(x, cos, sin, cache, i), and each block "
                         "passes layer_idx on to self.attn")
        what = f"prefill {end} tokens" if start == 0 else f"{end - start} new at start_pos={start}"
        ok = chk.compare(f"{label}: {what}", got, full_logits[:, start:end], variants={
            "the blocks never get the cache: pass cache and the layer index to every block, block(x, cos, sin, "
            "cache, i)": lambda: state_stages(state, chunk, config)[-1][1],
            "every block reads layer 0 of the cache: pass each block its own index, block(x, cos, sin, cache, i)":
                lambda: _ref_decode(state, chunk, config, start, [pasts[0]] * config.n_layers),
        })
        if not ok and uncached_right:
            uncached_right = not _future_through_cache(
                chk, module, cached, lambda ids, start=start, pasts=pasts: _ref_decode(state, ids, config, start, pasts),
                chunk, start, lambda ids: (ids + 1) % config.vocab_size, shared_slots)


def _future_through_cache(chk: Check, module, cached, reference, new, start: int, change,
                          shared_slots: bool = False) -> bool:
    """For a module right without a cache and wrong with one: whether, in a
    cached call of several new tokens, an earlier token's output changes with
    a later one (`change` applied to the last new token). True when it was
    measured and said; the learner's line is then traced on that cached call
    (cached(new), reference(new): the module's and the reference's). With
    `shared_slots` (blocks measured writing one cache slot), a later layer
    reads an earlier one's new keys through it, so the mask is not blamed:
    the fact is said as measured."""
    n = new.shape[1]
    if n < 2:
        return False
    later = new.clone()
    later[:, -1] = change(later[:, -1])
    try:
        with torch.no_grad():
            before, after = guarded_call(cached, (new.clone(),)), guarded_call(cached, (later,))
    except Exception:  # noqa: BLE001: a call that raises is the table's finding, not this measurement's
        return False
    if not (isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor) and before.shape == after.shape
            and before.dim() > 1 and before.shape[1] == n) or near(before[:, :-1], after[:, :-1]):
        return False
    prompt = f"a {n}-token prompt is prefilled through the cache" if start == 0 else \
        f"{n} new tokens follow {start} cached ones"
    chk.regime = {"name": "several new tokens through the cache", "text": f"right without a cache, wrong when {prompt}"}
    chk.locate_with(lambda: trace.locate(
        trace.record_learner(module, (new,), call=lambda ids: guarded_call(cached, (ids,))),
        trace.record(reference, (new,), learner=False)))
    fact = (f"with a cache, the new tokens see the future (measured: changing the last of the {n} new tokens "
            f"changes the outputs at the {n - 1} earlier position{'s' if n > 2 else ''} of the same cached call)")
    if shared_slots:
        chk.measured(f"{fact}, which blocks sharing a cache slot give: a later block reads the new keys an earlier "
                     "one appended, later positions among them")
        return True
    chk.diagnose(f"{fact}: the causal mask must apply whenever a call has more than one new token, cache or not (a "
                 "prompt is prefilled through the cache); causal_attention(q, k, v) aligns it for the cached keys")
    return True


def _ref_decode(state, chunk, config, start, pasts):
    """Logits of the new tokens `chunk` at positions start.., block i attending over pasts[i] (keys, values)."""
    x = F.embedding(chunk, state["tok_emb.weight"])
    for i in range(config.n_layers):
        prefix = f"blocks.{i}."
        x = state_block(state, prefix, x, config, None, None, attention=lambda h, p=prefix, past=pasts[i]: state_step(
            state, f"{p}attn.", h, config, start, *past))
    return state_rms(x, state["norm.weight"], config.norm_eps) @ state["lm_head.weight"].T


VISIBLE_CHECKS.update({"Attention": check_attention_module, "Block": check_block, "Transformer": check_decoder})
