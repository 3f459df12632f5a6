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

import torch
import torch.nn.functional as F
from torch import nn

import tinylm

from .core import Check, randn


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


def _ref_attention(state: dict, prefix: str, x, config, cos, sin):
    B, T, _ = x.shape
    H, K, hd = config.n_heads, config.n_kv_heads, config.head_dim

    def heads(name, n):
        return F.linear(x, state[f"{prefix}{name}.weight"]).view(B, T, n, hd).transpose(1, 2)  # (B, n, T, hd)

    q = _ref_rotate(heads("q_proj", H), cos[:T], sin[:T])
    k = _ref_rotate(heads("k_proj", K), cos[:T], sin[:T])
    v = heads("v_proj", K)
    k, v = k.repeat_interleave(H // K, dim=1), v.repeat_interleave(H // K, dim=1)  # (B, H, T, hd)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)                      # (B, H, T, hd)
    return F.linear(y.transpose(1, 2).reshape(B, T, H * hd), state[f"{prefix}o_proj.weight"])


def _ref_mlp(state, prefix, x):
    w = lambda name: state[f"{prefix}{name}.weight"]  # noqa: E731
    return F.linear(F.silu(F.linear(x, w("gate_proj"))) * F.linear(x, w("up_proj")), w("down_proj"))


def _ref_block(state, prefix, x, config, cos, sin, *, post_norm=False, residual=True,
               norms=("attn_norm", "mlp_norm")):
    """The pre-norm block; the keyword arguments give the known wrong variants."""
    norm1, norm2 = (f"{prefix}{n}.weight" for n in norms)
    eps = config.norm_eps
    if post_norm:
        h = _ref_rms(x + _ref_attention(state, f"{prefix}attn.", x, config, cos, sin), state[norm1], eps)
        return _ref_rms(h + _ref_mlp(state, f"{prefix}mlp.", h), state[norm2], eps)
    h = (x if residual else 0) + _ref_attention(state, f"{prefix}attn.", _ref_rms(x, state[norm1], eps), config, cos, sin)
    return h + _ref_mlp(state, f"{prefix}mlp.", _ref_rms(h, state[norm2], eps))


def _ref_stages(state, idx, config) -> list[tuple[str, torch.Tensor]]:
    """[(stage, residual stream after it)] for the whole decoder."""
    cos, sin = _ref_rope_tables(config.head_dim, idx.shape[1], config.rope_theta)
    x = F.embedding(idx, state["tok_emb.weight"])
    stages = [("embedding", x)]
    for i in range(config.n_layers):
        x = _ref_block(state, f"blocks.{i}.", x, config, cos, sin)
        stages.append((f"block {i}", x))
    x = _ref_rms(x, state["norm.weight"], config.norm_eps)
    stages.append(("final norm", x))
    stages.append(("logits", x @ state["lm_head.weight"].T))
    return stages


# -- shared steps ---------------------------------------------------------------
def _config(d_model, n_heads, n_layers, seq, n_kv_heads=None) -> tinylm.ModelConfig:
    return tinylm.ModelConfig(d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, n_layers=n_layers,
                              max_seq_len=seq + 3)


def _build(chk: Check, cls, config, reference: nn.Module) -> nn.Module | None:
    """The learner's module with the reference's weights, after the rows that
    require tinylm's parameter names and shapes; None when they differ."""
    __tracebackhide__ = True
    module = chk.call(cls, config)
    if not chk.require("is an nn.Module", isinstance(module, nn.Module),
                       f"{chk.fn_name}(config) built {type(module).__name__}",
                       diagnosis=f"{chk.fn_name} must subclass nn.Module and call super().__init__() first"):
        return None
    want = {n: tuple(p.shape) for n, p in reference.state_dict().items()}
    got = {n: tuple(p.shape) for n, p in module.state_dict().items()}
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    wrong = sorted(n for n in set(want) & set(got) if want[n] != got[n])
    if not chk.require("parameters named as tinylm's", not missing and not extra,
                       f"missing {missing[:4]}, unexpected {extra[:4]}",
                       diagnosis=f"parameter names differ from tinylm's: missing {missing[:4]}, unexpected {extra[:4]}; "
                                 "use exactly the attribute names of the table above (nn.Linear(..., bias=False))"):
        return None
    if not chk.require("parameter shapes", not wrong, f"{[(n, got[n], want[n]) for n in wrong[:3]]} (got, want)",
                       diagnosis="a projection has the wrong shape: nn.Linear(in_features, out_features) stores "
                                 "weight as [out, in]; k_proj and v_proj have n_kv_heads · head_dim outputs"):
        return None
    module.load_state_dict(reference.state_dict())
    return module.eval()


def _prepare(chk: Check, cls, reference_cls, seed: int, d_model: int, n_heads: int, n_layers: int, seq: int):
    """(config, the learner's module with the reference weights or None, those weights as a state dict)."""
    __tracebackhide__ = True
    config = _config(d_model, n_heads, n_layers, seq)
    reference = _reference(reference_cls, config, seed)
    state = {n: p.detach() for n, p in reference.state_dict().items()}
    return config, _build(chk, cls, config, reference), state


def _reference(cls, config, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    module = cls(config).eval()
    with torch.no_grad():  # RMSNorm gains away from 1, so a missing or misplaced gain shows
        for name, p in module.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.5 * randn(*p.shape, seed=seed + len(name)))
    return module


# -- the checks -------------------------------------------------------------------
def check_attention_module(Attention, *, seed: int = 93, d_model: int = 32, n_heads: int = 4, seq: int = 6,
                           batch: int = 2) -> None:
    """Attention(config): q/k/v/o projections named as tinylm's; forward(x, cos, sin) equals
    projections -> RoPE on q and k -> causal attention -> merged heads -> o_proj."""
    __tracebackhide__ = True
    chk = Check("Attention", expects="an nn.Module whose forward(x, cos, sin) returns (B, T, d_model)")
    config, module, state = _prepare(chk, Attention, tinylm.Attention, seed, d_model, n_heads, 1, seq)
    if module is not None:
        cos, sin = tinylm.rope_cache(config.head_dim, config.max_seq_len, config.rope_theta)
        x = randn(batch, seq, d_model, seed=seed)
        with torch.no_grad():
            got = chk.call(module, x, cos, sin)
        ref_cos, ref_sin = _ref_rope_tables(config.head_dim, seq, config.rope_theta)
        no_rope = dict(cos=torch.ones_like(ref_cos), sin=torch.zeros_like(ref_sin))
        chk.compare(f"forward {tuple(x.shape)}", got, _ref_attention(state, "", x, config, ref_cos, ref_sin), variants={
            "RoPE missing: rotate q and k with apply_rope before attention":
                lambda: _ref_attention(state, "", x, config, **no_rope),
            "heads split wrongly: view(B, T, n_heads, head_dim).transpose(1, 2), not view(B, n_heads, T, head_dim)":
                lambda: _split_wrong(state, x, config, ref_cos, ref_sin),
        })
        with torch.no_grad():
            changed = x.clone()
            changed[:, -1] += 1.0
            later = chk.call(module, changed, cos, sin)
        chk.require("causal: the last token does not change earlier outputs",
                    isinstance(later, torch.Tensor) and isinstance(got, torch.Tensor) and later.shape == got.shape
                    and torch.allclose(later[:, :-1], got[:, :-1], atol=1e-5),
                    "earlier positions changed", diagnosis="attention sees the future: use causal_attention")
    chk.finish()


def _split_wrong(state, x, config, cos, sin):
    """The heads split by view(B, n, T, hd) (mixes positions and heads)."""
    B, T, _ = x.shape
    H, hd = config.n_heads, config.head_dim
    q, k, v = (F.linear(x, state[f"{n}_proj.weight"]).view(B, H, T, hd) for n in "qkv")
    y = F.scaled_dot_product_attention(_ref_rotate(q, cos, sin), _ref_rotate(k, cos, sin), v, is_causal=True)
    return F.linear(y.transpose(1, 2).reshape(B, T, H * hd), state["o_proj.weight"])


def check_block(Block, *, seed: int = 94, d_model: int = 32, n_heads: int = 4, seq: int = 5, batch: int = 2) -> None:
    """Block(config): attn_norm, attn, mlp_norm, mlp named as tinylm's; forward(x, cos, sin) is the pre-norm block."""
    __tracebackhide__ = True
    chk = Check("Block", expects="an nn.Module whose forward(x, cos, sin) returns (B, T, d_model)")
    config, module, state = _prepare(chk, Block, tinylm.Block, seed, d_model, n_heads, 1, seq)
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
        if not chk.passed and not chk.votes:  # no known block bug explains it: suspect the parts
            chk.diagnose("Block calls your Attention and your swiglu: if check_attention_module or check_swiglu "
                         "fails, fix that first")
    chk.finish()


def check_decoder(Transformer, *, seed: int = 95, d_model: int = 32, n_layers: int = 2, n_heads: int = 4,
                  seq: int = 7, batch: int = 2) -> None:
    """Transformer(config): tinylm.Transformer's parameter names with the head tied to the embedding; logits
    equal to the reference stage by stage; causal."""
    __tracebackhide__ = True
    chk = Check("Transformer", expects="an nn.Module whose forward(idx) returns logits (B, T, vocab_size)")
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
        _compare_stages(chk, seen, _ref_stages(state, idx, config))
        with torch.no_grad():
            changed = idx.clone()
            changed[:, -1] = (changed[:, -1] + 1) % config.vocab_size
            later = chk.call(module, changed)
        chk.require("causal: the last token does not change earlier logits",
                    isinstance(later, torch.Tensor) and isinstance(got, torch.Tensor) and later.shape == got.shape
                    and torch.allclose(later[:, :-1], got[:, :-1], atol=1e-5),
                    "earlier positions changed", diagnosis="the model sees the future: every block needs the causal mask")
    chk.finish()


def _record_stages(module, config):
    """Forward hooks that keep the residual stream: the input of block 0 (the
    embedding), each block's output, the final norm's output. In the grader's
    recheck the module is a stand-in whose parts never run: nothing is seen."""
    seen: dict[str, torch.Tensor] = {}

    def keep(name):
        return lambda mod, args, out: seen.__setitem__(name, out)
    hooks = [module.get_submodule("blocks.0").register_forward_pre_hook(
        lambda mod, args: seen.__setitem__("embedding", args[0] if args else None))]
    hooks += [module.get_submodule(f"blocks.{i}").register_forward_hook(keep(f"block {i}")) for i in range(config.n_layers)]
    hooks.append(module.get_submodule("norm").register_forward_hook(keep("final norm")))
    return seen, hooks


STAGE_HINTS = {
    "embedding": "the embedding: embed(idx, self.tok_emb.weight), before the first block",
    "block": "this block's output differs while its input matched: run check_block, and pass cos, sin, cache and "
             "the layer index to every block",
    "final norm": "the final norm: self.norm on the last block's output, before the head",
    "logits": "the head: tied_logits(self.norm(x), self.lm_head.weight)",
}


def _compare_stages(chk: Check, seen: dict, stages: list) -> None:
    """One row per stage the hooks saw; the first failing one is named. A
    stage whose module never ran (e.g. the norm computed without self.norm)
    gets no row: only the logits decide, and it is named if they differ."""
    __tracebackhide__ = True
    first_bad = None
    hooks_ran = "embedding" in seen  # False in the grader's recheck, where the parts never run here
    for name, want in stages:
        if name not in seen:
            first_bad = first_bad or (f"{name} (it never ran)" if hooks_ran else None)
            continue
        if not chk.compare(name, seen[name], want) and first_bad is None:
            first_bad = name
    if first_bad is not None and not chk.passed:
        stage = first_bad.split(" (")[0]
        chk.diagnose(f"the first stage that differs is {first_bad}: {STAGE_HINTS.get(stage, STAGE_HINTS['block'])}")
