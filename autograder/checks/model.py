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

import contextlib
import dataclasses
import io
import re
import sys

import torch
import torch.nn.functional as F
from torch import nn

import tinylm

from . import trace
from .contracts import apply_outcome, defaults, noncontiguous, remembered
from ..learner_values import describe, known_sizes, shown_shape
from .core import Check, globals_of, guarded_call, parameter_dtypes, reached_by_gradient, randn
from .kv_cache import TILED
from .learner_code import is_learners_file
from .spies import attention_heads, unrepeated_bug


# -- an independent reference, from a state dict ------------------------------
def _ref_rope_tables(head_dim: int, n_pos: int, theta: float):
    """cos, sin (n_pos, head_dim): feature i and i + hd/2 turn by pos · theta^(-2i/hd)."""
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    angles = torch.arange(n_pos, dtype=torch.float64)[:, None] * theta ** (-2 * i / head_dim)  # (T, hd/2)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().float(), angles.sin().float()


def _ref_rotate(x, cos, sin):
    """(B, H, T, hd), halves paired: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def _ref_rms(x, weight, eps):
    return weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _ref_attention(state: dict, prefix: str, x, config, cos, sin, tile=False, explicit=False, unmerged=False):
    """tile=True: the kv heads repeated by x.repeat (query head h reads kv head h % n_kv), a known bug;
    unmerged=True: the heads merged by a reshape without the transpose (positions and heads mixed), another.
    explicit=True: attention written out step by step (scores, mask, softmax), for the tracer's reference."""
    B, T, _ = x.shape
    H, K, hd = config.n_heads, config.n_kv_heads, config.head_dim

    def heads(name, n):
        return F.linear(x, state[f"{prefix}{name}.weight"]).view(B, T, n, hd).transpose(1, 2)  # (B, n, T, hd)

    q = _ref_rotate(heads("q_proj", H), cos[:T], sin[:T])
    k = _ref_rotate(heads("k_proj", K), cos[:T], sin[:T])
    v = heads("v_proj", K)
    if tile:
        k, v = k.repeat(1, H // K, 1, 1), v.repeat(1, H // K, 1, 1)
    else:
        k, v = k.repeat_interleave(H // K, dim=1), v.repeat_interleave(H // K, dim=1)  # (B, H, T, hd)
    if explicit:
        from .attention import attention_steps
        y = attention_steps(q, k, v)
    else:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)                  # (B, H, T, hd)
    merged = y.reshape(B, T, H * hd) if unmerged else y.transpose(1, 2).reshape(B, T, H * hd)
    return F.linear(merged, state[f"{prefix}o_proj.weight"])


def _ref_kv(state, prefix, h, config, start: int):
    """Keys (rotated) and values (B, n_kv, T, hd) of the attention input h at positions start .. start + T - 1."""
    B, T, _ = h.shape
    K, hd = config.n_kv_heads, config.head_dim
    cos, sin = _ref_rope_tables(hd, start + T, config.rope_theta)
    k = F.linear(h, state[f"{prefix}k_proj.weight"]).view(B, T, K, hd).transpose(1, 2)
    v = F.linear(h, state[f"{prefix}v_proj.weight"]).view(B, T, K, hd).transpose(1, 2)
    return _ref_rotate(k, cos[start:], sin[start:]), v


def _ref_step(state, prefix, h, config, start: int, past_k, past_v, *, q_from_zero=False, k_from_zero=False,
              top_left=False):
    """One cached attention step: new inputs h (B, n, d) at positions start.., the past keys and values given.
    The switches are the known ways of getting the cached path wrong: q or the new k rotated as if they
    began at position 0 (start_pos ignored), the causal triangle aligned top-left (is_causal=True)."""
    B, n, _ = h.shape
    H, K, hd = config.n_heads, config.n_kv_heads, config.head_dim
    cos, sin = _ref_rope_tables(hd, start + n, config.rope_theta)
    q_at = 0 if q_from_zero else start
    q = F.linear(h, state[f"{prefix}q_proj.weight"]).view(B, n, H, hd).transpose(1, 2)
    q = _ref_rotate(q, cos[q_at:q_at + n], sin[q_at:q_at + n])                  # (B, H, n, hd)
    k, v = _ref_kv(state, prefix, h, config, 0 if k_from_zero else start)       # (B, K, n, hd)
    k_all = torch.cat((past_k, k), dim=2).repeat_interleave(H // K, dim=1)      # (B, H, start + n, hd)
    v_all = torch.cat((past_v, v), dim=2).repeat_interleave(H // K, dim=1)
    mask = torch.ones(n, start + n, dtype=torch.bool).tril(diagonal=0 if top_left else start)
    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)         # (B, H, n, hd)
    return F.linear(y.transpose(1, 2).reshape(B, n, H * hd), state[f"{prefix}o_proj.weight"])


def _ref_mlp(state, prefix, x):
    w = lambda name: state[f"{prefix}{name}.weight"]  # noqa: E731
    return F.linear(F.silu(F.linear(x, w("gate_proj"))) * F.linear(x, w("up_proj")), w("down_proj"))


def _ref_block(state, prefix, x, config, cos, sin, *, post_norm=False, residual=True,
               norms=("attn_norm", "mlp_norm"), attention=None, explicit=False):
    """The pre-norm block; the keyword arguments give the known wrong variants
    (attention: a stand-in for the attention branch, e.g. a cached one)."""
    norm1, norm2 = (f"{prefix}{n}.weight" for n in norms)
    eps = config.norm_eps
    attend = attention or (lambda h: _ref_attention(state, f"{prefix}attn.", h, config, cos, sin, explicit=explicit))
    if post_norm:
        h = _ref_rms(x + attend(x), state[norm1], eps)
        return _ref_rms(h + _ref_mlp(state, f"{prefix}mlp.", h), state[norm2], eps)
    h = (x if residual else 0) + attend(_ref_rms(x, state[norm1], eps))
    return h + _ref_mlp(state, f"{prefix}mlp.", _ref_rms(h, state[norm2], eps))


def _ref_stages(state, idx, config, explicit=False) -> list[tuple[str, torch.Tensor]]:
    """[(stage, residual stream after it)] for the whole decoder."""
    cos, sin = _ref_rope_tables(config.head_dim, idx.shape[1], config.rope_theta)
    x = F.embedding(idx, state["tok_emb.weight"])
    stages = [("embedding", x)]
    for i in range(config.n_layers):
        x = _ref_block(state, f"blocks.{i}.", x, config, cos, sin, explicit=explicit)
        stages.append((f"block {i}", x))
    x = _ref_rms(x, state["norm.weight"], config.norm_eps)
    stages.append(("final norm", x))
    stages.append(("logits", x @ state["lm_head.weight"].T))
    return stages


# -- shared steps ---------------------------------------------------------------
def _config(d_model, n_heads, n_layers, seq, n_kv_heads=None, head_dim=None) -> tinylm.ModelConfig:
    return tinylm.ModelConfig(d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, n_layers=n_layers,
                              max_seq_len=seq + 3, head_dim=head_dim)


def head_dim_apart(config) -> bool:
    """True when config.head_dim is set apart from d_model // n_heads (as Gemma and Mistral NeMo set it)."""
    return config.head_dim != config.d_model // config.n_heads


def _quotient_shapes(reference: nn.Module, config) -> dict[str, tuple]:
    """The parameter shapes of the reference module built for `config` with head_dim = d_model // n_heads
    (on the meta device: shapes only)."""
    with torch.device("meta"):
        module = type(reference)(dataclasses.replace(config, head_dim=None))
    return {n: tuple(p.shape) for n, p in module.state_dict().items()}


def _sized_by_the_quotient(wrong: list[str], got: dict, want: dict, reference: nn.Module, config) -> str | None:
    """When head_dim is set apart and every parameter of a wrong shape has exactly the shape it would have with
    head_dim = d_model // n_heads (measured), that cause, with one of them."""
    if not wrong or not head_dim_apart(config):
        return None
    quotient = _quotient_shapes(reference, config)
    if any(quotient.get(n) != got[n] for n in wrong):
        return None
    n = wrong[0]
    return (f"head_dim taken as d_model // n_heads: this config sets head_dim = {config.head_dim}, apart from "
            f"d_model // n_heads = {config.d_model // config.n_heads} (as Gemma and Mistral NeMo do), and your "
            f"{', '.join(wrong[:4])} {'has' if len(wrong) == 1 else 'have'} the shape{'s' if len(wrong) > 1 else ''} "
            f"of head_dim = d_model // n_heads (measured: {n} is {list(got[n])}, tinylm's is {list(want[n])}); size "
            "the projections with config.head_dim: q_proj d_model -> n_heads · head_dim, k_proj and v_proj d_model "
            "-> n_kv_heads · head_dim, o_proj n_heads · head_dim -> d_model")


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


def _list_lengths(want: dict, got: dict, config) -> str | None:
    """When a list of modules (blocks.0, blocks.1, ...) holds another number
    of entries than tinylm's, that measured count, with the config fields
    equal to each count (the one the loop should read, and the one it read)."""
    def lengths(names) -> dict:
        found: dict[str, set] = {}
        for name in names:
            m = re.match(r"^(.*?)\.(\d+)\.", name)
            if m:
                found.setdefault(m.group(1), set()).add(int(m.group(2)))
        return {prefix: max(ids) + 1 for prefix, ids in found.items()}
    theirs, yours = lengths(want), lengths(got)
    for prefix, n in theirs.items():
        mine = yours.get(prefix)
        if mine is None or mine == n:
            continue
        fields = {f: getattr(config, f) for f in vars(config) if isinstance(getattr(config, f), int)
                  and not isinstance(getattr(config, f), bool)}
        named = lambda count: ", ".join(f"config.{f} = {v}" for f, v in fields.items() if v == count)  # noqa: E731
        return (f"you built {mine} entries in `{prefix}` ({prefix}.0 to {prefix}.{mine - 1}), tinylm builds {n} for "
                f"this config ({named(n) or 'no config field has that value'}); "
                f"{'the count you built equals ' + named(mine) if named(mine) else 'no config field equals your count'}")
    return None


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
    hidden = (_modules_out_of_sight(module, missing) or _list_lengths(want, got, config)
              or saved_buffers(chk, cls, (config,), module, extra) or _unwrapped(plain, missing))
    if not chk.require("parameters named as tinylm's", not missing and not extra,
                       f"missing {missing[:4]}, unexpected {extra[:4]}",
                       diagnosis=hidden or f"parameter names differ from tinylm's: missing {missing[:4]}, unexpected "
                                           f"{extra[:4]}; use exactly the attribute names of the table above "
                                           "(nn.Linear(..., bias=False))"):
        return None
    registered_elsewhere(chk, cls, (config,))
    if not chk.require("parameter shapes", not wrong, f"{[(n, got[n], want[n]) for n in wrong[:3]]} (got, want)",
                       diagnosis=_sized_by_the_quotient(wrong, got, want, reference, config)
                       or "a projection has the wrong shape: nn.Linear(in_features, out_features) stores "
                          "weight as [out, in]; k_proj and v_proj have n_kv_heads · head_dim outputs"):
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
            "place (nn.ModuleList(Block(config) for _ in range(n_layers)) builds n_layers different blocks)")


def plain_tensors(module: nn.Module, names: list[str]) -> list[str]:
    """The names in `names` that the module holds as plain tensor attributes (not Parameters, not buffers)."""
    def plain(name):
        owner, _, attribute = name.rpartition(".")
        try:
            value = vars(module.get_submodule(owner)).get(attribute)
        except AttributeError:
            return False
        return isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter)
    return [name for name in names if plain(name)]


def _unwrapped(plain: list[str], missing: list[str]) -> str | None:
    """When every missing parameter is a plain tensor attribute of that name (built the same on every device)."""
    if not plain or plain != missing:
        return None
    more = f" ({len(plain) - 1} more alike)" if len(plain) > 1 else ""
    return (f"`{plain[0]}`{more} is a plain tensor attribute, not an nn.Parameter (measured on the module you built), "
            "so it is not among parameters() or the state_dict and no optimizer trains it; wrap it: "
            "nn.Parameter(...)")


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


def saved_buffers(chk: Check, cls, args: tuple, module: nn.Module, extra: list[str]) -> str | None:
    """When keys the learner's state_dict has beyond the reference's are
    buffers their module registers: what that costs a checkpoint, and the fix
    (the line that registers one is located by building the module again)."""
    buffers = {name for name, _ in module.named_buffers()}
    saved = [name for name in extra if name in buffers]
    if not saved:
        return None
    chk.locate_with(lambda: registering_line(cls, args, {name.split(".")[-1] for name in saved}))
    keys = ", ".join(f"'{name}'" for name in saved[:4]) + (", ..." if len(saved) > 4 else "")
    what = chk.fn_name
    return (f"your {what}'s state_dict has {keys}, which tinylm's {what} (and Hugging Face's) does not have (measured: "
            f"{'a buffer' if len(saved) == 1 else 'buffers'} your module registers): register_buffer saves a tensor "
            f"with the weights, so a checkpoint of tinylm's or Hugging Face's model no longer loads into yours with "
            f"load_state_dict(strict=True) (missing key {keys}), nor a checkpoint of yours into theirs (unexpected key "
            f"{keys}); keep a number as a plain attribute (self.eps = eps), and register a tensor that must not be "
            "saved with register_buffer(name, tensor, persistent=False)")


def registering_line(cls, args: tuple, names: set) -> trace.Located | None:
    """The learner's line that registers a saved buffer named in `names`,
    seen by building cls(*args) again with nn.Module.register_buffer watched."""
    found = []
    register = nn.Module.register_buffer

    def watched(self, name, tensor, persistent=True):
        caller = sys._getframe(1)
        if name in names and persistent and not found and is_learners_file(caller.f_code.co_filename):
            code = caller.f_code
            found.append(trace.Located(code.co_filename, caller.f_lineno, getattr(code, "co_qualname", code.co_name),
                                       trace.source_line(code.co_filename, caller.f_lineno),
                                       [f"the buffer `{name}`"], kind="saved"))
        return register(self, name, tensor, persistent)
    nn.Module.register_buffer = watched
    try:
        with torch.random.fork_rng():
            guarded_call(cls, args)
    except Exception:  # noqa: BLE001: a module that cannot be built again has no line to show
        pass
    finally:
        nn.Module.register_buffer = register
    return found[0] if found else None


# A GPU the check may not have: the meta device stands in for it (.to() and device= behave as on any other device).
ELSEWHERE = torch.device("meta")
ELSEWHERE_ROW = "the same parameters whatever device DEVICE names"


def _device_globals(cls) -> list[tuple[dict, str]]:
    """(namespace, name) of every torch.device the learner's class reads from its globals (the notebook's DEVICE)."""
    return [(g, name) for g in globals_of(cls) for name, value in list(g.items()) if isinstance(value, torch.device)]


def _built_with_device(cls, args: tuple, device: torch.device, watch=None) -> nn.Module | None:
    """cls(*args) built again while the learner's device globals name `device` (given back afterwards); None when
    the build raises. watch: an nn.Module.__setattr__ to run the build under."""
    saved = [(g, name, g[name]) for g, name in _device_globals(cls)]
    setattr_ = nn.Module.__setattr__
    try:
        for g, name, _ in saved:
            g[name] = device
        if watch is not None:
            nn.Module.__setattr__ = watch
        with torch.random.fork_rng(), contextlib.redirect_stdout(io.StringIO()):
            return guarded_call(cls, args)
    except Exception:  # noqa: BLE001: a build that needs real values (a meta tensor has none) measures nothing
        return None
    finally:
        nn.Module.__setattr__ = setattr_
        for g, name, value in saved:
            g[name] = value


def _registered(module: nn.Module) -> dict[str, str]:
    return {**{n: "parameter" for n, _ in module.named_parameters()}, **{n: "buffer" for n, _ in module.named_buffers()}}


def registered_elsewhere(chk: Check, cls, args: tuple) -> bool:
    """The row ELSEWHERE_ROW: cls(*args) built with the notebook's DEVICE naming the CPU and another device registers
    the same parameters and buffers (a Parameter moved with .to(DEVICE) is a plain tensor once the device differs).
    Measured only where the learner's code reads a torch.device from its globals and both builds run. False when
    the row fails (now or before)."""
    if any(r.name == ELSEWHERE_ROW for r in chk.rows) or not _device_globals(cls):
        return all(r.ok for r in chk.rows if r.name == ELSEWHERE_ROW)
    here, there = _built_with_device(cls, args, torch.device("cpu")), _built_with_device(cls, args, ELSEWHERE)
    if here is None or there is None:
        return True
    mine, theirs = _registered(here), _registered(there)
    lost = [n for n in mine if theirs.get(n) != mine[n]]
    gained = [n for n in theirs if n not in mine]
    if chk.require(ELSEWHERE_ROW, not lost and not gained, f"lost {lost[:3]}, gained {gained[:3]}"):
        return True
    names = " and ".join(f"`{name}`" for _, name in _device_globals(cls))
    built = (f"built with {names} naming another device than the CPU (the meta device, as a GPU would be), your "
             f"{chk.fn_name} registers")
    if not lost:
        chk.diagnose(f"{built} {gained[:3]}, which it does not register on the CPU: what a module registers must not "
                     "depend on the device it is built for")
        return False
    name, more = lost[0], f"; {len(lost) - 1} more names differ alike" if len(lost) > 1 else ""
    plain = bool(plain_tensors(there, [name]))
    missing = (f"{built} no {mine[name]} `{name}` (measured: built with {names} = cpu it does{more}): on a GPU it "
               f"would be absent from {mine[name]}s() and the state_dict, never trained, saved or loaded")
    chk.diagnose(missing + ("; there it is a plain tensor attribute: .to(DEVICE) (or .cuda()) of a Parameter returns a "
                            "plain tensor when the device differs; create the tensor on the device, "
                            "nn.Parameter(torch.ones(dim, device=DEVICE)), or make it on the CPU and let "
                            "model.to(DEVICE) move the whole model" if plain else
                            "; what a module registers must not depend on the device it is built for"))
    chk.locate_with(lambda: unregistering_line(cls, args, {n.rpartition(".")[2] for n in lost}))
    return False


def unregistering_line(cls, args: tuple, names: set) -> trace.Located | None:
    """The learner's line that stores a plain tensor as an attribute in `names` while DEVICE names another device."""
    found = []
    setattr_ = nn.Module.__setattr__

    def watched(self, name, value):
        caller = sys._getframe(1)
        if (name in names and isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter) and not found
                and is_learners_file(caller.f_code.co_filename)):
            code = caller.f_code
            found.append(trace.Located(code.co_filename, caller.f_lineno, getattr(code, "co_qualname", code.co_name),
                                       trace.source_line(code.co_filename, caller.f_lineno),
                                       [f"`{name}` is a plain tensor there, not a Parameter"],
                                       kind="unregistered"))
        setattr_(self, name, value)
    _built_with_device(cls, args, ELSEWHERE, watch=watched)
    return found[0] if found else None


def _prepare(chk: Check, cls, reference_cls, seed: int, d_model: int, n_heads: int, n_layers: int, seq: int,
             n_kv_heads=None, on_error=None, head_dim=None):
    """(config, the learner's module with the reference weights or None, those weights as a state dict)."""
    __tracebackhide__ = True
    config = _config(d_model, n_heads, n_layers, seq, n_kv_heads, head_dim)
    reference = _reference(reference_cls, config, seed)
    state = {n: p.detach() for n, p in reference.state_dict().items()}
    return config, _build(chk, cls, config, reference, on_error), state


def _reference(cls, config, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    module = cls(config).eval()
    with torch.no_grad():  # RMSNorm gains away from 1, so a missing or misplaced gain shows
        for name, p in module.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.5 * randn(*p.shape, seed=seed + len(name)))
    return module


def _grouped_hint(config):
    """on_error for the grouped regime: what differs from the regime that passed."""
    return lambda err: (f"it fails only with n_kv_heads={config.n_kv_heads} < n_heads={config.n_heads} (notebook 07's "
                        "grouped-query attention): k_proj and v_proj give n_kv_heads · head_dim features, so view k and "
                        "v with self.n_kv_heads heads; causal_attention repeats them to the query heads")


def _cached_hint(err):
    return ("it fails only with a cache (notebook 06: a prefill, then new tokens at start_pos = cache.length > 0): "
            "k, v = cache.update(layer_idx, k, v) returns every key and value so far, so there are fewer queries than "
            "keys; causal_attention aligns its mask for that")


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
    full_k, full_v = _ref_kv(state, prefix, attn_input(inputs), config, 0)  # (B, n_kv, T, hd)
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
            return lambda new=xs: wrap(new, lambda h: _ref_step(state, prefix, h, config, start, *past, **wrong), start)
        variants = {CACHED_BUGS[name]: step(**kw) for name, kw in WRONG_STEP.items()} if start else {}
        if start:
            variants[f"the cache's layer 0 is read instead of layer {layer_idx}: pass layer_idx on to the attention, "
                     "self.attn(..., cache, layer_idx)"] = step(past=(other_k, other_v))
        what = f"prefill {end} tokens" if start == 0 else f"{end - start} new at start_pos={start}"
        if not chk.compare(f"{label}: {what}", got, step()(), variants=variants) and uncached_right:
            uncached_right = not _future_through_cache(chk, module, cached, step(), xs, start, lambda t: t + 1.0)


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
    if on_error is not None:  # measured first: which of k and v reaches attention unrepeated
        hint = on_error
        on_error = lambda err: unrepeated_bug(attention_heads(module, lambda: module(x, cos, sin))) or hint(err)  # noqa: E731
    with torch.no_grad():
        got = chk.call(module, x, cos, sin, on_error=on_error)
    ref_cos, ref_sin = _ref_rope_tables(config.head_dim, seq, config.rope_theta)
    no_rope = dict(cos=torch.ones_like(ref_cos), sin=torch.zeros_like(ref_sin))
    variants = {"RoPE missing: rotate q and k with apply_rope before attention":
                lambda: _ref_attention(state, "", x, config, **no_rope)}
    if config.n_kv_heads < config.n_heads:
        variants[TILED] = lambda: _ref_attention(state, "", x, config, ref_cos, ref_sin, tile=True)
    if config.n_kv_heads == config.n_heads:
        variants["heads split wrongly: view(B, T, n_heads, head_dim).transpose(1, 2), not view(B, n_heads, T, "
                 "head_dim)"] = lambda: _split_wrong(state, x, config, ref_cos, ref_sin)
    variants[UNMERGED] = lambda: _ref_attention(state, "", x, config, ref_cos, ref_sin, unmerged=True)
    chk.compare(f"{label}: forward {tuple(x.shape)}", got, _ref_attention(state, "", x, config, ref_cos, ref_sin),
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
    chk.measured(f"changing the last token changes the output of {what} at {where}; candidates: a mask that lets "
                 "queries see later tokens (missing, transposed, or off by one), or values of different positions "
                 "mixed after attention (heads merged without the transpose, a reshape or view that mixes the T "
                 "axis with another)")


# -- the checks -------------------------------------------------------------------
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

    from .core import CheckFailed
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
    y = F.scaled_dot_product_attention(_ref_rotate(q, cos, sin), _ref_rotate(k, cos, sin), v, is_causal=True)
    return F.linear(y.transpose(1, 2).reshape(B, T, H * hd), state["o_proj.weight"])


def check_block(Block, *, seed: int = 94, d_model: int = 32, n_heads: int = 4, seq: int = 5, batch: int = 2) -> None:
    """Block(config): attn_norm, attn, mlp_norm, mlp named as tinylm's; forward(x, cos, sin) is the pre-norm block;
    with a cache, forward(x, cos, sin, cache, layer_idx) passes both on to its attention."""
    __tracebackhide__ = True
    chk = Check("Block", expects="an nn.Module whose forward(x, cos, sin, cache, layer_idx) returns (B, T, d_model)")
    config, module, state = _prepare(chk, Block, tinylm.Block, seed, d_model, n_heads, 2, seq)
    if module is not None:
        cos, sin = tinylm.rope_cache(config.head_dim, config.max_seq_len, config.rope_theta)
        ref_cos, ref_sin = _ref_rope_tables(config.head_dim, seq, config.rope_theta)
        x = randn(batch, seq, d_model, seed=seed) * 3  # a residual stream far from unit RMS
        with torch.no_grad():
            got = chk.call(module, x, cos, sin)

        def variant(**kw):
            return lambda: _ref_block(state, "", x, config, ref_cos, ref_sin, **kw)
        chk.compare(f"forward {tuple(x.shape)}", got, _ref_block(state, "", x, config, ref_cos, ref_sin), variants={
            "post-norm: normalise each branch's input (x + attn(attn_norm(x))), not the sum": variant(post_norm=True),
            "missing residual: x = x + attn(...), not x = attn(...)": variant(residual=False),
            "norms swapped: attn_norm goes before attention, mlp_norm before the MLP":
                variant(norms=("mlp_norm", "attn_norm")),
            "attn_norm used for both branches: the MLP reads mlp_norm(x)": variant(norms=("attn_norm", "attn_norm")),
        })
        if chk.passed:
            _attention_steps(chk, module, state, "attn.", x, config, seed, layer_idx=1, label="cached",
                             call=lambda xs: _ref_rms(xs, state["attn_norm.weight"], config.norm_eps),
                             wrap=lambda xs, attend, start: _ref_block(state, "", xs, config, None, None,
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
    if module is not None:
        head, emb = module.get_submodule("lm_head").weight, module.get_submodule("tok_emb").weight
        chk.require("lm_head tied to tok_emb", head is emb, "two separate matrices",
                    diagnosis="the head is not tied: set self.lm_head.weight = self.tok_emb.weight (one Parameter)")
        idx = torch.randint(config.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(seed))
        seen, hooks = _record_stages(module, config)
        try:
            with torch.no_grad():
                got = chk.call(module, idx)
        finally:
            for h in hooks:
                h.remove()
        seen["logits"] = got
        _compare_stages(chk, seen, _ref_stages(state, idx, config), module, config)
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
    module_contract(chk, Transformer, "Transformer")
    chk.finish()


def _decode_steps(chk: Check, module, state, idx, config, label, on_error=None) -> None:
    """Each decode chunk's logits, from a cache prefilled with the reference's
    keys and values of every layer, against the full recompute."""
    __tracebackhide__ = True
    stages = _ref_stages(state, idx, config)
    full_logits = stages[-1][1]
    streams = [x for _, x in stages[:config.n_layers]]          # the input of block i
    kv = [_ref_kv(state, f"blocks.{i}.attn.", _ref_rms(streams[i], state[f"blocks.{i}.attn_norm.weight"],
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
            "cache, i)": lambda: _ref_stages(state, chunk, config)[-1][1],
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
            and before.dim() > 1 and before.shape[1] == n) or _near(before[:, :-1], after[:, :-1]):
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
        x = _ref_block(state, prefix, x, config, None, None, attention=lambda h, p=prefix, past=pasts[i]: _ref_step(
            state, f"{p}attn.", h, config, start, *past))
    return _ref_rms(x, state["norm.weight"], config.norm_eps) @ state["lm_head.weight"].T


def _record_stages(module, config):
    """Forward hooks that keep the residual stream: each block's input (and
    the other arguments it was called with) and output, the final norm's
    input and output; "embedding" is block 0's input. In the grader's
    recheck the module is a stand-in whose parts never run: nothing is seen."""
    seen: dict = {}

    def keep(name):
        return lambda mod, args, out: seen.__setitem__(name, out)

    def keep_input(name):
        def hook(mod, args, kwargs):
            seen[f"{name} input"] = args[0] if args else next(iter(kwargs.values()), None)
            seen[f"{name} arguments"] = (args, kwargs)
        return hook
    hooks = [module.get_submodule("blocks.0").register_forward_pre_hook(
        lambda mod, args: seen.__setitem__("embedding", args[0] if args else None))]
    for i in range(config.n_layers):
        block = module.get_submodule(f"blocks.{i}")
        hooks.append(block.register_forward_pre_hook(keep_input(f"block {i}"), with_kwargs=True))
        hooks.append(block.register_forward_hook(keep(f"block {i}")))
    norm = module.get_submodule("norm")
    hooks.append(norm.register_forward_pre_hook(keep_input("final norm"), with_kwargs=True))
    hooks.append(norm.register_forward_hook(keep("final norm")))
    return seen, hooks


def _compare_stages(chk: Check, seen: dict, stages: list, module=None, config=None) -> None:
    """One row per stage the hooks saw; the first one that differs is
    explained by measurement (_explain_stages). A stage whose module never
    ran (e.g. the norm computed without self.norm) gets no row: only the
    logits decide."""
    __tracebackhide__ = True
    for name, want in stages:
        if name in seen:
            chk.compare(name, seen[name], want)
    if not chk.passed and "embedding" in seen:  # False in the grader's recheck, where the parts never run here
        _explain_stages(chk, seen, stages, module, config)


def _near(a, b) -> bool:
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and torch.allclose(a.detach().double(), b.detach().double(), atol=1e-4, rtol=1e-3))


def _explain_stages(chk: Check, seen: dict, stages: list, module, config) -> None:
    """Where the learner's stream first leaves the reference's, measured at
    the hooks: a stage that never ran, a stage whose input is not its
    predecessor's output (and what it is instead), or a stage whose output
    differs although its input matched (and whether the block itself is
    wrong or is called with other arguments)."""
    ref = dict(stages)
    n_layers = sum(1 for name, _ in stages if name.startswith("block "))
    if not _near(seen.get("embedding"), ref["embedding"]):
        chk.diagnose("the stream entering block 0 differs from the embedding of the ids (measured at block 0's "
                     "input): x = embed(idx, self.tok_emb.weight) goes into the first block unchanged")
        return
    previous = ("the embedding", ref["embedding"], None)  # (what, its right output, its input)
    for i in range(n_layers):
        got_in = seen.get(f"block {i} input")
        if got_in is None:
            chk.diagnose(f"block {i} never ran (measured: its forward was not called, of {n_layers} blocks): every "
                         "block in self.blocks runs, in order: for i, block in enumerate(self.blocks)")
            return
        if not _near(got_in, previous[1]):
            chk.diagnose(_wiring(f"block {i}", got_in, previous, seen))
            return
        got_out, want_out = seen.get(f"block {i}"), ref[f"block {i}"]
        if not _near(got_out, want_out):
            chk.diagnose(_block_alone(module, config, i, got_in, want_out, seen.get(f"block {i} arguments")))
            return
        previous = (f"block {i}", want_out, got_in)
    norm_in = seen.get("final norm input")
    if norm_in is None:
        chk.diagnose("self.norm never ran (measured: the final norm's forward was not called): the logits are "
                     "computed from self.norm(x), the last block's output normalised, never from the stream itself")
    elif not _near(norm_in, previous[1]):
        chk.diagnose(_wiring("the final norm", norm_in, previous, seen))
    elif not _near(seen.get("final norm"), ref["final norm"]):
        chk.diagnose("self.norm's output differs while its input (the last block's output) matched (measured): "
                     "the final norm is an RMSNorm(config.d_model, config.norm_eps) applied to the whole stream")
    else:
        chk.diagnose("the logits differ while the final norm's output matched (measured): the head is "
                     "tied_logits(self.norm(x), self.lm_head.weight), the normalised stream times the tied embedding")


def _wiring(stage: str, got_in, previous, seen: dict) -> str:
    """What a stage received instead of its predecessor's output."""
    what, right_out, right_in = previous
    heard = f"{stage} does not receive {what}'s output (measured at its input)"
    if right_in is not None and _near(got_in, right_in + right_out):
        return (f"{heard}: it receives {what}'s input plus its output, x + block(x), so the residual is added a "
                f"second time; a Block already returns x plus its branches: x = block(x, ...)")
    if right_in is not None and _near(got_in, right_in):
        return f"{heard}: it receives {what}'s input, so {what}'s output is dropped: x = block(x, ...)"
    return f"{heard}: the stream is changed between them"


def _block_alone(module, config, i: int, x, want, arguments) -> str:
    """A block whose output differs although its input matched: is the
    block itself wrong, or is it called with other arguments? Measured by
    running the learner's own block i on the same input with the reference's
    rope tables, no cache and its index."""
    differs = f"block {i}'s output differs while its input matched (measured)"
    if module is None or config is None:
        return f"{differs}: run check_block"
    cos, sin = tinylm.rope_cache(config.head_dim, config.max_seq_len, config.rope_theta)
    try:
        with torch.no_grad():
            alone = guarded_call(module.get_submodule(f"blocks.{i}"), (x, cos, sin, None, i))
    except Exception:  # noqa: BLE001: a block that cannot run on its own says no more than the row
        return f"{differs}: run check_block"
    if not _near(alone, want):
        return f"{differs}, and your Block gives that output on its own too: the Block is wrong; run check_block"
    args, kwargs = arguments or ((), {})
    given = list(args) + list(kwargs.values())
    other = []
    for k, (name, right) in enumerate((("x", x), ("cos", cos), ("sin", sin), ("cache", None), ("the layer index", i))):
        if k >= len(given):
            continue
        value = given[k]
        if isinstance(right, torch.Tensor):
            if not (isinstance(value, torch.Tensor) and value.shape[-1] == right.shape[-1]
                    and _near(value[:x.shape[1]], right[:x.shape[1]])):
                other.append(name)
        elif name == "the layer index" and value != right:
            other.append(f"{name} (not {i})")
    shown = ", ".join(other) if other else "its arguments or what is done with its output"
    return (f"{differs}, yet your Block alone, given the same input with the rope tables, no cache and index {i}, "
            f"gives the right output: the Transformer's call of block {i} differs in {shown}")


# -- the regimes every module promises, on the visible check's own inputs ----------------------
# Each config field the exercise text names, at a non-default value one at a time (Attention reads
# only the head counts, which the grouped regime varies already).
CONFIG_FIELDS = {
    "Attention": (),
    "Block": (("norm_eps", 0.25), ("d_ff", 40)),
    "Transformer": (("norm_eps", 0.25), ("d_ff", 40), ("vocab_size", 97)),
}


class _Visible:
    """One module exercise at its visible check's parameters, for a config:
    the reference weights, the input, and the reference output."""

    def __init__(self, kind: str, **overrides):
        check = {"Attention": check_attention_module, "Block": check_block, "Transformer": check_decoder}[kind]
        p = defaults(check)
        self.kind, self.seed, self.batch, self.seq = kind, p["seed"], p["batch"], p["seq"]
        self.config = tinylm.ModelConfig(**{"d_model": p["d_model"], "n_heads": p["n_heads"],
                                            "n_layers": p.get("n_layers", 2), "max_seq_len": p["seq"] + 3, **overrides})
        ref_cls = {"Attention": tinylm.Attention, "Block": tinylm.Block, "Transformer": tinylm.Transformer}[kind]
        self.reference = _reference(ref_cls, self.config, self.seed)
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
            return _ref_stages(self.state, inp, c, explicit=explicit)[-1][1]
        cos, sin = _ref_rope_tables(c.head_dim, inp.shape[1], c.rope_theta)
        if self.kind == "Block":
            return _ref_block(self.state, "", inp, c, cos, sin, explicit=explicit)
        return _ref_attention(self.state, "", inp, c, cos, sin, explicit=explicit)


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
    """'`blocks.0.attn_norm` uses eps 1e-06' for each watched norm whose
    effective eps, fitted from y = w · x / sqrt(mean(x²) + eps), is not eps."""
    facts = []
    for name, (x, y, w) in norms.items():
        x, y, w = x.detach().double(), y.detach().double(), w.detach().double()
        ok = (y.abs() > 1e-8) & (w.abs() > 1e-8)
        if not ok.any() or x.shape != y.shape:
            continue
        r = (w * x / y)[ok]                                   # sqrt(mean(x²) + eps) where it can be read
        mean_square = x.pow(2).mean(-1, keepdim=True).expand_as(x)[ok]
        used = float((r.pow(2) - mean_square).median())
        if abs(used - eps) > 0.1 * eps:
            facts.append(f"your `{name}` uses eps {used:.2g}, not config.norm_eps = {eps:g}")
    return facts[:3]


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
