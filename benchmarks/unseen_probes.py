"""The probes of verify_unseen.py, one per notebook: each runs an answer (the
solution's, or a mutated one) on the situations held-out mistakes are about
and returns what it measured, compared there with the solution's. They read
tinylm, PyTorch built-ins and closed forms only; no check of the course.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import tinylm
from benchmarks.verify_heldout import _attention_steps, _model_agreement, _reference, _config, attempt
from benchmarks.unseen_probes_later import (_accumulated_matches, _converted_attention_matches, _half_rows_match,
                                           _left_padded_rows)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _close(a, b, **tol) -> bool:
    return a.shape == b.shape and torch.allclose(a.float(), b.float(), **tol)


def _counted_flops(run) -> int:
    """FLOPs of run() as torch's FlopCounterMode counts them (matmuls: 2 per multiply-add)."""
    with FlopCounterMode(display=False) as counter:
        run()
    return counter.get_total_flops()


def _meta_model(config: tinylm.ModelConfig) -> tinylm.Transformer:
    """tinylm's Transformer with shapes and no memory: parameter sizes for any config."""
    with torch.device("meta"):
        return tinylm.Transformer(config)


def _kv_cache_nbytes(config: tinylm.ModelConfig, seq_len: int, batch_size: int, dtype: torch.dtype) -> int:
    """Bytes of a tinylm.KVCache that holds exactly seq_len positions, on the meta device."""
    return tinylm.KVCache(replace(config, max_seq_len=seq_len), batch_size, device="meta", dtype=dtype).nbytes()


class Recorder(nn.Module):
    """A bigram-like model, logits (B, T, V) = a row per input id, that
    records the mode and the autograd state of every forward pass."""

    def __init__(self, vocab: int = 16, scale: float = 3.0):
        super().__init__()
        self.emb = nn.Embedding(vocab, vocab)
        with torch.no_grad():
            self.emb.weight.mul_(scale)  # spread-out logits: batches get clearly different losses
        self.training_seen, self.grad_seen = [], []

    def forward(self, idx):
        self.training_seen.append(self.training)
        self.grad_seen.append(torch.is_grad_enabled())
        return self.emb(idx)


def probe_01(ns):
    gen = _gen(5)
    weight, x = torch.randn(10, 4, generator=gen), torch.randn(2, 3, 4, generator=gen)
    ids = torch.tensor([[1, 2, 3], [4, 0, 2]])  # the last id, 9, does not occur
    emb, head = nn.Embedding(10, 4), nn.Linear(4, 10, bias=False)
    emb_values = emb.weight.detach().clone()
    ns["tie_weights"](emb, head)
    # compared now: the calls below hand embed the weight itself, which a lookup that renormalises rows would change
    looked_up = weight.clone()
    rows_kept = attempt(lambda: _close(ns["embed"](ids, looked_up), weight[ids]))
    table_kept = torch.equal(looked_up, weight)

    def embed_gradient_counts():
        """d sum / d row r = how often id r occurs."""
        table = weight.clone().requires_grad_()
        ns["embed"](ids, table).sum().backward()
        return torch.equal(table.grad[:, 0], torch.bincount(ids.flatten(), minlength=10).float())

    def head_gradient_matches():
        """d sum(x Wᵀ) / d W_v = the sum of x over batch and positions, for every row v."""
        shared = weight.clone().requires_grad_()
        ns["tied_logits"](x, shared).sum().backward()
        return torch.allclose(shared.grad, x.sum(dim=(0, 1)).expand_as(weight), atol=1e-5)
    return {"embed == weight[ids]": _close(ns["embed"](ids, weight), weight[ids]),
            "embed, flat ids (T,) == weight[ids]": attempt(lambda: _close(ns["embed"](ids[0], weight), weight[ids[0]])),
            **{f"embed, ids of shape {tuple(few.shape)} == weight[ids]": attempt(lambda few=few: _close(
                ns["embed"](few, weight), weight[few])) for few in (ids[:1], ids[:, :1])},
            "embed gradient per row == id counts": attempt(embed_gradient_counts),
            "embed, non-contiguous ids (ids[:, 1:]) == weight[ids]": attempt(lambda: _close(
                ns["embed"](ids[:, 1:], weight), weight[ids[:, 1:]])),
            "one_hot_embed, flat ids (T,) == weight[ids]": attempt(lambda: _close(ns["one_hot_embed"](ids[0], weight),
                                                                                 weight[ids[0]])),
            "one_hot_embed == weight[ids]": attempt(lambda: _close(ns["one_hot_embed"](ids, weight), weight[ids])),
            "tied_logits == x @ W.T": attempt(lambda: _close(_quiet(ns["tied_logits"], x, weight), x @ weight.T)),
            "tied_logits gradient per row == x summed": attempt(head_gradient_matches),
            "head.weight is emb.weight": head.weight is emb.weight,
            "emb.weight still trainable after tie_weights": emb.weight.requires_grad,
            "embed, bfloat16 weight: output dtype": attempt(lambda: ns["embed"](ids, weight.bfloat16()).dtype),
            "distinct Parameters": len(list(nn.ModuleList([emb, head]).parameters())),
            "tie_weights keeps the embedding's values": torch.equal(emb.weight.detach(), emb_values),
            "embed == rows of the table before the call": rows_kept,
            "embed leaves the caller's table as it was": table_kept,
            "one_hot_embed on the meta device: output device": attempt(
                lambda: str(ns["one_hot_embed"](ids.to("meta"), weight.to("meta")).device)),
            # id 10 of a 10-row table: weight[ids] raises IndexError, as a lookup of a row that does not exist must
            "embed, an id beyond the table: result shape": attempt(
                lambda: tuple(ns["embed"](torch.tensor([[9, 10]]), weight).shape)),
            "one_hot_embed, bfloat16 weight: output dtype": attempt(
                lambda: ns["one_hot_embed"](ids, weight.bfloat16()).dtype)}


def probe_02(ns):
    gen = _gen(6)
    x = torch.randn(2, 3, 8, generator=gen) * torch.tensor([0.1, 1.0, 10.0])[:, None]  # tokens of three scales
    w, b = torch.randn(8, generator=gen), torch.randn(8, generator=gen)
    big = (torch.randn(2, 8, generator=gen) * 400).half()
    small = torch.randn(4, 8, generator=gen) * 0.1
    tiny = torch.randn(4, 8, generator=gen) * 1e-4  # mean square about 1e-8, below the default eps
    square = torch.randn(8, 8, generator=gen) + 3.0  # as many tokens as features, means far from 0
    trained = ns["RMSNorm"](8)

    def with_trained_gain():
        trained.load_state_dict({"weight": w})
        return _close(trained(x), tinylm.rms_norm(x, w), atol=1e-6)

    upstream = torch.randn(x.shape, generator=_gen(60))  # a random d loss / d output

    def input_gradient(norm):
        leaf = x.clone().requires_grad_()
        (norm(leaf, w) * upstream).sum().backward()
        return leaf.grad

    return {"rms_norm == tinylm": _close(ns["rms_norm"](x, w), tinylm.rms_norm(x, w), atol=1e-6),
            "rms_norm fp16 ~400 == tinylm": _close(ns["rms_norm"](big, w), tinylm.rms_norm(big, w), atol=1e-2, rtol=1e-2),
            "rms_norm, mean square below eps == tinylm": _close(ns["rms_norm"](tiny, w), tinylm.rms_norm(tiny, w), atol=1e-6),
            **{f"layer_norm{label} == F.layer_norm": attempt(lambda t=t: _close(
                ns["layer_norm"](t, w, b), F.layer_norm(t, (8,), w, b, eps=1e-5), atol=1e-5))
               for label, t in (("", x), (", 8 tokens of 8 features", square))},
            "layer_norm(eps=0.1) == F.layer_norm": attempt(lambda: _close(
                ns["layer_norm"](small, w, b, eps=0.1), F.layer_norm(small, (8,), w, b, eps=0.1), atol=1e-6)),
            "RMSNorm(eps=0.1) == tinylm": _close(ns["RMSNorm"](8, eps=0.1)(small), tinylm.rms_norm(small, torch.ones(8), 0.1)),
            "RMSNorm with a trained gain == tinylm": attempt(with_trained_gain),
            "rms_norm gradient wrt x == tinylm's": attempt(lambda: _close(
                input_gradient(ns["rms_norm"]), input_gradient(tinylm.rms_norm), atol=1e-5)),
            "RMSNorm's parameters, the notebook's DEVICE not the CPU": attempt(lambda: _parameters_off_cpu(ns, 8)),
            "RMSNorm's parameters on the CPU": attempt(lambda: [name for name, _ in ns["RMSNorm"](8).named_parameters()]),
            # the module keeps its input's dtype: rms_norm of float32 x with a fresh gain is float32
            "RMSNorm output dtype, float32 input": attempt(lambda: str(ns["RMSNorm"](8)(small).dtype)),
            # the exercise: "return a tensor with the shape and dtype of x"; a bfloat16 gain keeps the product bfloat16
            "rms_norm, bfloat16 x and gain: output dtype": attempt(lambda: str(ns["rms_norm"](x.bfloat16(), w.bfloat16()).dtype))}


def _parameters_off_cpu(ns, dim: int) -> list:
    """The names of RMSNorm(dim)'s parameters when the notebook's DEVICE is another device than the CPU (the meta
    device stands in for a GPU): a gain moved there with .to is a plain tensor, not a Parameter."""
    before, ns["DEVICE"] = ns["DEVICE"], torch.device("meta")
    try:
        return [name for name, _ in ns["RMSNorm"](dim).named_parameters()]
    finally:
        ns["DEVICE"] = before


def _bottom_right(q_len: int, kv_len: int) -> torch.Tensor:
    """Query i is position kv_len - q_len + i and sees keys j <= that."""
    return torch.arange(kv_len)[None, :] <= torch.arange(q_len)[:, None] + (kv_len - q_len)


def _heads(x: torch.Tensor, n: int) -> torch.Tensor:
    B, T, d = x.shape
    return x.reshape(B, T, n, d // n).permute(0, 2, 1, 3)


def _attention_layer_flops(batch: int, seq_len: int, d_model: int, n_heads: int) -> dict:
    """FlopCounterMode's count of each matmul of a written-out attention layer, on zero tensors of those sizes."""
    x, w = torch.zeros(batch, seq_len, d_model), torch.zeros(d_model, d_model)
    heads = _heads(x, n_heads)                                # (B, H, T, hd)
    weights = torch.zeros(batch, n_heads, seq_len, seq_len)   # the softmax's output, masked half included
    return {"qkv_proj": _counted_flops(lambda: [F.linear(x, w) for _ in range(3)]),
            "scores": _counted_flops(lambda: heads @ heads.transpose(-2, -1)),
            "mix": _counted_flops(lambda: weights @ heads),
            "out_proj": _counted_flops(lambda: F.linear(x, w))}


def probe_03(ns):
    gen = _gen(7)
    x = torch.randn(2, 5, 12, generator=gen)
    q, k, v = (torch.randn(2, 3, 6, 8, generator=gen) for _ in range(3))
    w_q, w_k, w_v, w_o = (torch.randn(12, 12, generator=gen) / 12 ** 0.5 for _ in range(4))
    heads = F.scaled_dot_product_attention(_heads(x @ w_q.T, 3), _heads(x @ w_k.T, 3), _heads(x @ w_v.T, 3), is_causal=True)
    attended = heads.permute(0, 2, 1, 3).reshape(2, 5, 12) @ w_o.T  # (B, T, d), then the output projection
    # q = 100·1 and k = -100·1: every allowed score is -100² · 8 / sqrt(8), about -2.8e4, far below any finite filler
    far_q = torch.full((1, 2, 4, 8), 100.0)
    far = (far_q, -far_q, v[:1, :2, :4])
    return {"causal_mask(4, 4)": torch.equal(ns["causal_mask"](4, 4), _bottom_right(4, 4)),
            "causal_mask(2, 5)": torch.equal(ns["causal_mask"](2, 5), _bottom_right(2, 5)),
            "split_heads": torch.equal(ns["split_heads"](x, 3), _heads(x, 3)),
            "merge_heads(split) == x": attempt(lambda: torch.equal(ns["merge_heads"](_heads(x, 3)), x)),
            "attention Tq = Tk == SDPA": _close(ns["causal_attention"](q, k, v),
                                                F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5),
            "attention Tq < Tk == SDPA": _close(ns["causal_attention"](q[:, :, :2], k, v), F.scaled_dot_product_attention(
                q[:, :, :2], k, v, attn_mask=_bottom_right(2, 6)), atol=1e-5),
            "self_attention == reference": attempt(lambda: _close(ns["self_attention"](x, w_q, w_k, w_v, w_o, 3), attended,
                                                                  atol=1e-5)),
            "attention bfloat16 out": attempt(lambda: ns["causal_attention"](q.bfloat16(), k.bfloat16(), v.bfloat16()).dtype),
            "attention, scores near -2.8e4 == SDPA": attempt(lambda: _close(
                ns["causal_attention"](*far), F.scaled_dot_product_attention(*far, is_causal=True), atol=1e-5)),
            "attention on the meta device: output device": attempt(
                lambda: str(ns["causal_attention"](*(t.to("meta") for t in (q, k, v))).device)),
            **{f"attention_flops(batch={b}) == FlopCounterMode": attempt(
                lambda b=b: ns["attention_flops"](b, 7, 12, 3) == _attention_layer_flops(b, 7, 12, 3)) for b in (1, 3)}}


def probe_04(ns):
    cos, sin = tinylm.rope_cache(8, 16)
    gen = _gen(8)
    x = torch.randn(2, 2, 5, 8, generator=gen)
    q, k, v = (torch.randn(1, 2, 5, 8, generator=gen) for _ in range(3))
    mine, theirs = ns["rope_cache"](8, 16), (cos, sin)
    mine_500, theirs_500 = ns["rope_cache"](8, 16, 500.0), tinylm.rope_cache(8, 16, 500.0)
    rotated = {p: tinylm.causal_attention(tinylm.apply_rope(q, cos, sin, p), tinylm.apply_rope(k, cos, sin, p), v)
               for p in (0, 4)}
    even = torch.randn(1, 2, 4, 8, generator=gen)  # 4 positions: a split on the wrong axis keeps the shape

    def rotates_halves(t):
        return torch.equal(ns["rotate_half"](t), torch.cat((-t[..., 4:], t[..., :4]), dim=-1))

    return {"rotate_half, 4 positions == (-x2, x1)": attempt(lambda: rotates_halves(even)),
            "rotate_half of one head (T, hd) == (-x2, x1)": attempt(lambda: rotates_halves(even[0, 0])),
            "rope_cache == tinylm": all(_close(a, b, atol=1e-6) for a, b in zip(mine, theirs)),
            "rope_cache(theta=500) == tinylm": all(_close(a, b, atol=1e-6) for a, b in zip(mine_500, theirs_500)),
            "rope_cache, 1024 positions == tinylm": all(_close(a, b, atol=1e-5) for a, b in zip(
                ns["rope_cache"](8, 1024), tinylm.rope_cache(8, 1024))),
            "apply_rope(start_pos=3) == tinylm": attempt(lambda: _close(ns["apply_rope"](x, cos, sin, 3),
                                                                        tinylm.apply_rope(x, cos, sin, 3), atol=1e-6)),
            **{f"rotary_attention(start_pos={p}) == tinylm": attempt(lambda p=p: _close(
                ns["rotary_attention"](q, k, v, cos, sin, p), rotated[p], atol=1e-5)) for p in (0, 4)},
            "rotary_attention bfloat16: output dtype": attempt(lambda: ns["rotary_attention"](
                q.bfloat16(), k.bfloat16(), v.bfloat16(), cos, sin, 0).dtype),
            "rope_cache dtype": str(mine[0].dtype),
            # autograd: d sum(output) / d q, through the rotation, as tinylm's RoPE and attention give it
            "rotary_attention(start_pos=4) gradient wrt q == tinylm's": attempt(lambda: _close(
                _rotary_q_gradient(ns["rotary_attention"], q, k, v, cos, sin),
                _rotary_q_gradient(_tinylm_rotary, q, k, v, cos, sin), atol=1e-5)),
            **{f"interleaved_to_half, {n} head(s) of {hd} == each head's evens then odds": attempt(
                lambda n=n, hd=hd: _half_rows_match(ns["interleaved_to_half"], n, hd)) for n, hd in ((1, 8), (2, 8), (3, 6))},
            **{f"meta_to_hf_attention, {nh} heads / {nkv} kv heads of {hd}: attention == Meta's": attempt(
                lambda nh=nh, nkv=nkv, hd=hd: _converted_attention_matches(ns["meta_to_hf_attention"], nh, nkv, hd))
               for nh, nkv, hd in ((4, 4, 8), (4, 2, 8), (3, 1, 6))}}


def _tinylm_rotary(q, k, v, cos, sin, start_pos=0):
    return tinylm.causal_attention(tinylm.apply_rope(q, cos, sin, start_pos), tinylm.apply_rope(k, cos, sin, start_pos), v)


def _rotary_q_gradient(rotary, q, k, v, cos, sin):
    """The gradient of sum(rotary(q, k, v) * w) with respect to q, w a fixed random weighting, start_pos 4."""
    leaf = q.clone().requires_grad_()
    weights = torch.randn(q.shape, generator=_gen(80))
    (rotary(leaf, k, v, cos, sin, 4) * weights).sum().backward()
    return leaf.grad


def _component_numel(config: tinylm.ModelConfig) -> dict:
    """tinylm's parameters (on the meta device) summed by component; a tied head owns none."""
    counts = dict.fromkeys(("embedding", "attention", "mlp", "norms", "lm_head"), 0)
    for name, p in _meta_model(config).named_parameters():  # a shared Parameter is listed once
        part = ("embedding" if name.startswith("tok_emb.") else "lm_head" if name.startswith("lm_head.")
                else "norms" if name.endswith("norm.weight") else "attention" if ".attn." in name else "mlp")
        counts[part] += p.numel()
    return counts


def probe_05(ns):
    gen = _gen(9)
    x = torch.randn(2, 3, 8, generator=gen)
    w_gate, w_up, w_down = torch.randn(16, 8, generator=gen), torch.randn(16, 8, generator=gen), torch.randn(8, 16, generator=gen)

    def attn_norm(t):
        return t * 2.0

    def mlp_norm(t):  # a different gain than attn_norm's
        return t * 0.5 + 1.0

    h = x + torch.tanh(attn_norm(x))
    block = h + torch.sigmoid(mlp_norm(h))
    sizes = [(64, 32), (96, 32), (128, 32), (4096, 256)]
    weights = (w_gate, w_up, w_down)
    configs = {"MHA, d_ff by the 8/3 rule, tied": _config(4, d_ff=None),
               "GQA, d_ff=100, untied": _config(2, n_layers=3, d_ff=100, tie_embeddings=False)}
    return {"swiglu == tinylm": attempt(lambda: _close(ns["swiglu"](x, *weights), tinylm.swiglu(x, *weights), atol=1e-5)),
            "swiglu at x * 100 == tinylm": attempt(lambda: _close(
                ns["swiglu"](x * 100, *weights), tinylm.swiglu(x * 100, *weights), rtol=1e-4)),
            **{f"param_counts == tinylm's parameters, {label}": attempt(
                lambda c=c: ns["param_counts"](c) == _component_numel(c)) for label, c in configs.items()},
            "swiglu_hidden == 8/3 rule": [ns["swiglu_hidden"](*s) for s in sizes] == [tinylm.default_d_ff(*s) for s in sizes],
            "pre_norm_block == formula": _close(ns["pre_norm_block"](x, torch.tanh, torch.sigmoid, attn_norm, mlp_norm), block,
                                                atol=1e-6),
            # 8/3 · 12 = 32 and 8/3 · 36 = 96 already are multiples of 32: rounding up keeps them
            "swiglu_hidden, 8/3 · d_model already a multiple == 8/3 rule": [
                ns["swiglu_hidden"](*s) for s in ((12, 32), (36, 32))] == [tinylm.default_d_ff(*s) for s in ((12, 32), (36, 32))],
            "model": attempt(lambda: _model_agreement(ns, 4)),
            "model, norm_eps=1e-2": attempt(lambda: _model_agreement(ns, 4, norm_eps=1e-2)),
            # 4 heads of 12 features on a 32-wide stream: 32 // 4 = 8 is not the head size
            **{f"model, head_dim 12, {n} kv heads": attempt(lambda n=n: _model_agreement(ns, n, head_dim=12)) for n in (4, 2)},
            "swiglu bfloat16: output dtype": attempt(lambda: ns["swiglu"](x.bfloat16(), *(w.bfloat16() for w in weights)).dtype),
            # 8/3 · 64 = 170.67 and 8/3 · 1 = 2.67: with a multiple of 1 or 2 the fraction itself must round up
            "swiglu_hidden, multiples 1 and 2 == 8/3 rule": [ns["swiglu_hidden"](*s) for s in ((64, 1), (100, 1), (1, 2))]
                                                            == [tinylm.default_d_ff(*s) for s in ((64, 1), (100, 1), (1, 2))]}


def probe_06(ns):
    gen = _gen(10)
    past_k, past_v, k, v = (torch.randn(2, 2, n, 4, generator=gen) for n in (3, 3, 2, 2))
    k_all, v_all = ns["cache_update"](past_k, past_v, k, v)
    model = _reference(_config(4))
    prompt = torch.randint(0, 256, (2, 5), generator=_gen(2))

    def greedy_matches(batch: int) -> bool:
        greedy = ns["generate_greedy"](model, prompt[:batch], 4, tinylm.KVCache(model.config, batch))
        return torch.equal(greedy, tinylm.generate(model, prompt[:batch], 4, temperature=0))

    sized = _config(2, n_layers=3)
    return {**{f"kv_cache_bytes({dtype}) == KVCache nbytes": attempt(lambda dtype=dtype: ns["kv_cache_bytes"](
                sized, 40, 2, dtype) == _kv_cache_nbytes(sized, 40, 2, dtype)) for dtype in (torch.float32, torch.bfloat16)},
            "cache_update keys == cat": torch.equal(k_all, torch.cat((past_k, k), 2)),
            "cache_update values == cat": torch.equal(v_all, torch.cat((past_v, v), 2)),
            "prefill == full": attempt(lambda: _attention_steps(ns["attention_step"], 4, chunks=(6,))),
            "prefill, then steps == full": attempt(lambda: _attention_steps(ns["attention_step"], 4, chunks=(4, 2, 1))),
            **{f"greedy, batch of {b} == tinylm": attempt(lambda b=b: greedy_matches(b)) for b in (2, 1)},
            "greedy, bfloat16 model and cache: output shape": attempt(lambda: _greedy_bfloat16_shape(ns, prompt)),
            "greedy of two prompts with one cache, second == tinylm": attempt(lambda: _greedy_twice(ns, model)),
            "kv_cache_bytes(int8) == KVCache nbytes": attempt(lambda: ns["kv_cache_bytes"](
                sized, 40, 2, torch.int8) == _kv_cache_nbytes(sized, 40, 2, torch.int8)),
            # prompt 5 + 28 new = max_seq_len 32 + 1: the last new token is never fed back, so the cache holds 32
            "greedy, prompt + new tokens = max_seq_len + 1: shape, first 32 == tinylm": attempt(
                lambda: _greedy_to_the_end(ns, model, prompt)),
            **{f"left-padded batch of {lengths}, each row == its prompt decoded alone": attempt(
                lambda lengths=lengths: _left_padded_rows(ns, model, lengths)) for lengths in ((3, 7, 5), (4, 4))}}


def _greedy_to_the_end(ns, model, prompt: torch.Tensor) -> tuple:
    """generate_greedy of 28 new tokens after a 5-token prompt, max_seq_len 32: the cache receives the prompt and the
    first 27 new tokens (32 positions), the 28th is only appended. Its shape, and whether its first 32 ids are
    tinylm's greedy continuation (tinylm.generate stops at max_seq_len ids)."""
    ids = ns["generate_greedy"](model, prompt, 28, tinylm.KVCache(model.config, prompt.shape[0]))
    return tuple(ids.shape), torch.equal(ids[:, :32], tinylm.generate(model, prompt, 27, temperature=0))


def _greedy_twice(ns, model) -> bool:
    """Two generations, of two prompts, with one KVCache: the second starts from an empty cache, so it is tinylm's
    greedy continuation of its own prompt (a cache still holding the first prompt's 18 positions changes it)."""
    gen = _gen(3)
    first, second = torch.randint(0, 256, (2, 12), generator=gen), torch.randint(0, 256, (2, 3), generator=gen)
    cache = tinylm.KVCache(model.config, 2)
    ns["generate_greedy"](model, first, 6, cache)
    return torch.equal(ns["generate_greedy"](model, second, 6, cache), tinylm.generate(model, second, 6, temperature=0))


def _greedy_bfloat16_shape(ns, prompt: torch.Tensor) -> tuple:
    """generate_greedy with a bfloat16 model and a bfloat16 KVCache: it runs, (B, T + 4) ids."""
    model = _reference(_config(4)).to(torch.bfloat16)
    cache = tinylm.KVCache(model.config, prompt.shape[0], dtype=torch.bfloat16)
    return tuple(ns["generate_greedy"](model, prompt, 4, cache).shape)


def _decode_reads(config: tinylm.ModelConfig, context_len: int, dtype: torch.dtype) -> dict:
    """nbytes of tinylm's parameters in dtype (a tied head once) and of a cache of context_len positions."""
    weights = sum(p.nbytes for p in _meta_model(config).to(dtype).parameters())
    return {"weights": weights, "kv_cache": _kv_cache_nbytes(config, context_len, 1, dtype)}


def probe_07(ns):
    gen = _gen(11)
    kv = torch.randn(2, 2, 4, 8, generator=gen)
    q, k, v = torch.randn(2, 4, 5, 8, generator=gen), torch.randn(2, 2, 5, 8, generator=gen), torch.randn(2, 2, 5, 8, generator=gen)
    return {**{f"repeat_kv, {n} kv head(s) == repeat_interleave": attempt(lambda n=n: torch.equal(
                ns["repeat_kv"](kv[:, :n], 3), kv[:, :n].repeat_interleave(3, dim=1))) for n in (2, 1)},
            **{f"gqa_attention, {n} kv head(s) for 4 == SDPA enable_gqa": attempt(lambda n=n: _close(
                ns["gqa_attention"](q, k[:, :n], v[:, :n]), F.scaled_dot_product_attention(
                    q, k[:, :n], v[:, :n], is_causal=True, enable_gqa=True), atol=1e-5)) for n in (2, 1)},
            "GQA prefill == full": attempt(lambda: _attention_steps(ns["gqa_step"], 2, chunks=(6,))),
            "GQA prefill, then steps == full": attempt(lambda: _attention_steps(ns["gqa_step"], 2, chunks=(4, 2, 1))),
            "MHA (4 kv heads) prefill, then steps == full": attempt(lambda: _attention_steps(ns["gqa_step"], 4, chunks=(4, 2, 1))),
            "repeat_kv bfloat16: output dtype": attempt(lambda: ns["repeat_kv"](kv.bfloat16(), 3).dtype),
            **{f"decode_bytes_per_token, {label} == tinylm": attempt(lambda c=c: ns["decode_bytes_per_token"](
                c, 24, torch.bfloat16) == _decode_reads(c, 24, torch.bfloat16))
               for label, c in (("GQA, tied", _config(2)), ("MHA, untied", _config(4, tie_embeddings=False)))},
            # closed form: one byte a number, half of bfloat16's two (nn.Module.to refuses an integer dtype)
            "decode_bytes_per_token, int8 == half of tinylm's bfloat16": attempt(lambda: ns["decode_bytes_per_token"](
                _config(2), 24, torch.int8) == {k: n // 2 for k, n in _decode_reads(_config(2), 24, torch.bfloat16).items()})}


class Interrupted(Recorder):
    """A Recorder whose second forward pass raises, as an interrupt in the middle of generation would."""

    def forward(self, idx):
        if len(self.training_seen) >= 1:
            raise RuntimeError("interrupted")
        return super().forward(idx)


def _mode_after_interruption(generate) -> bool:
    """model.training after generate, called in train mode, failed at its second step."""
    model = Interrupted().train()
    try:
        generate(model, torch.zeros(1, 2, dtype=torch.long), 3, generator=_gen(0))
    except RuntimeError:
        pass
    return model.training


def _drawn(ns, logits_row: list[float], rows: int, temperature: float, top_k=None, top_p=None) -> torch.Tensor:
    """`rows` draws of sample_next from one distribution, the row repeated as a batch."""
    batch = torch.tensor([logits_row]).expand(rows, len(logits_row)).contiguous()
    return ns["sample_next"](batch, temperature, top_k, top_p, _gen(16))


def probe_08(ns):
    try:
        return _probe_08(ns)
    finally:
        torch.set_grad_enabled(True)  # a generate that switched autograd off for the process must not leak into later probes


def _probe_08(ns):
    gen = _gen(12)
    logits, flat = torch.randn(3, 12, generator=gen), torch.zeros(8, 50)

    def seeded_draw(global_seed: int):
        torch.manual_seed(global_seed)  # a sampler that honours the generator ignores this
        return ns["sample_next"](flat, 1.0, None, None, _gen(0))

    model = Recorder().train()
    ns["generate"](model, torch.zeros(3, 2, dtype=torch.long), 3, generator=_gen(0))
    grad_after_generate = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    bigram, prompt = Recorder().eval(), torch.randint(0, 16, (3, 2), generator=gen)
    greedy = prompt
    with torch.no_grad():  # top_k=1 leaves the argmax only: sampling must reproduce greedy decoding
        for _ in range(4):
            greedy = torch.cat((greedy, bigram(greedy)[:, -1].argmax(dim=-1, keepdim=True)), dim=1)
    apart = torch.tensor([[1000.0, 999.0, 0.0], [0.0, 1.0, 2.0]])  # the second row sits 1000 below the first's max
    even = torch.tensor([[0.0, 0.0, -1.0]])  # two tokens of exactly equal mass: the first alone reaches a mass above 0.4
    tied = torch.tensor([[3.0, 2.0, 2.0, 1.0, 0.0]])  # the 2nd and 3rd largest are equal: top-2 keeps three

    def generated_ids_train():
        """A training step on generated text: embedding the ids must be something autograd can differentiate."""
        ids = ns["generate"](Recorder(), torch.zeros(2, 2, dtype=torch.long), 2, generator=_gen(0))
        table = torch.randn(16, 4, requires_grad=True)
        F.embedding(ids, table).sum().backward()
        return tuple(table.grad.shape)
    return {**{f"top_k(4), {rows} row(s) == tinylm": attempt(lambda rows=rows: torch.equal(
                ns["top_k_filter"](logits[:rows], 4), tinylm.top_k_filter(logits[:rows], 4))) for rows in (3, 1)},
            "top_k(2), a tie at the 2nd largest == tinylm": attempt(lambda: torch.equal(
                ns["top_k_filter"](tied, 2), tinylm.top_k_filter(tied, 2))),
            "train mode restored after an interrupted generate": attempt(lambda: _mode_after_interruption(ns["generate"])),
            "top_k(4) on (B, T, V) logits == tinylm": attempt(lambda: torch.equal(
                ns["top_k_filter"](logits.view(1, 3, 12), 4), tinylm.top_k_filter(logits.view(1, 3, 12), 4))),
            "rows 1000 apart: first row draws token 0 or 1": attempt(
                lambda: int(ns["sample_next"](apart, 1.0, None, None, _gen(0))[0]) in (0, 1)),
            "generate(top_k=1) == greedy continuation": attempt(
                lambda: torch.equal(ns["generate"](bigram, prompt, 4, top_k=1, generator=_gen(0)), greedy)),
            "generate(temperature=0) == greedy continuation": attempt(
                lambda: torch.equal(ns["generate"](bigram, prompt, 4, temperature=0.0, generator=_gen(0)), greedy)),
            "top_p(0.7) == tinylm": torch.equal(ns["top_p_filter"](logits, 0.7), tinylm.top_p_filter(logits, 0.7)),
            # softmax is shift-invariant: logits + 100 keep the same nucleus
            "top_p(0.7), logits + 100 == tinylm": attempt(lambda: torch.equal(
                ns["top_p_filter"](logits + 100, 0.7), tinylm.top_p_filter(logits + 100, 0.7))),
            "autograd enabled after generate": grad_after_generate,
            **{f"sample_next shape, batch of {b}, T={t}": tuple(ns["sample_next"](logits[:b], t, None, None, _gen(0)).shape)
               for b in (3, 1) for t in (1.0, 0)},
            # closed form: softmax(0, 0, -1) gives the first two tokens equal mass; the second's mass_before equals its own
            **{f"top_p({p}) on two equal logits == tinylm": torch.equal(ns["top_p_filter"](even, p),
                                                                       tinylm.top_p_filter(even, p))
               for p in (float(even.softmax(-1)[0, 0]), 0.9)},
            "generated ids usable in a training step": attempt(generated_ids_train),
            "sample_next(temperature=0.0) == argmax": attempt(lambda: torch.equal(
                ns["sample_next"](logits, 0.0, None, None, _gen(0)), logits.argmax(dim=-1))),
            "same generator seed, same draw": torch.equal(seeded_draw(1), seeded_draw(2)),
            "one generator, two calls on 8 rows of 50 equal logits: the draws differ": attempt(
                lambda: _two_draws_differ(ns, flat)),
            "train mode seen while generating": any(model.training_seen),
            "every submodule back in train mode after generate": all(m.training for m in model.modules()),
            # closed forms: logits (1000, 999, 0) give token 2 no mass; (1, 0) at T = 2 give token 0 sigmoid(1/2);
            # probabilities (.4, .3, .2, .1) keep (.4, .3) after top-k 2, renormalised (.57, .43): top-p .5 keeps token 0
            "logits near 1000: draws only tokens 0, 1": attempt(
                lambda: set(_drawn(ns, [1000.0, 999.0, 0.0], 200, 1.0).tolist()) <= {0, 1}),
            "T=2: share of token 0 == sigmoid(1/2) +- 0.03": attempt(
                lambda: abs(float((_drawn(ns, [1.0, 0.0], 4000, 2.0) == 0).float().mean()) - 1 / (1 + math.exp(-0.5))) < 0.03),
            "top_k=2 then top_p=0.5: draws only token 0": attempt(
                lambda: set(_drawn(ns, [math.log(p) for p in (0.4, 0.3, 0.2, 0.1)], 400, 1.0, 2, 0.5).tolist()) == {0}),
            # closed form: logits (2, 1, 0) at T = 0.5 give token 0 the mass e^4 / (e^4 + e^2 + 1) = 0.87 > 0.8, so
            # top-p 0.8 keeps it alone; untempered it has 0.67 and token 1 would be kept too
            "T=0.5, top_p=0.8, logits (2, 1, 0): draws only token 0": attempt(
                lambda: set(_drawn(ns, [2.0, 1.0, 0.0], 400, 0.5, None, 0.8).tolist()) == {0}),
            "top_k keeps the caller's logits": attempt(lambda: _filter_keeps_input(
                ns["top_k_filter"], torch.randn(2, 12, generator=_gen(73)), 4)),
            "a model in eval mode is back in eval mode after generate": attempt(lambda: _eval_mode_kept(ns["generate"])),
            "generate without filters, uniform logits: more than one token id drawn": attempt(
                lambda: _distinct_uniform_draws(ns) > 1),
            # closed form: logits (3, 0, ..., 0) over 16 tokens give token 0 the probability e^3 / (e^3 + 15)
            "generate, logits (3, 0, ..., 0): share of token 0 == softmax +- 0.04": attempt(
                lambda: abs(share_of_token_0(ns) - math.exp(3) / (math.exp(3) + 15)) < 0.04)}


def _two_draws_differ(ns, flat: torch.Tensor) -> bool:
    """Two calls of sample_next with one generator continue its stream: 8 uniform draws over 50 tokens repeat with
    probability 50^-8."""
    gen = _gen(4)
    return not torch.equal(ns["sample_next"](flat, 1.0, None, None, gen), ns["sample_next"](flat, 1.0, None, None, gen))


def _filter_keeps_input(filter_fn, logits: torch.Tensor, *args) -> bool:
    kept = logits.clone()
    filter_fn(logits, *args)
    return torch.equal(logits, kept)


def _eval_mode_kept(generate) -> bool:
    model = Recorder().eval()
    generate(model, torch.zeros(2, 2, dtype=torch.long), 2, generator=_gen(0))
    return not model.training


def share_of_token_0(ns, temperature: float | None = None, seed: int = 3) -> float:
    """The share of token 0 among 4 x 100 ids that generate samples (no filter, at `temperature`, generate's default
    where None, a generator seeded with `seed`) from a model whose logits are 3 for token 0 and 0 for the 15 others,
    whatever the input."""
    peaked = Recorder()
    with torch.no_grad():
        peaked.emb.weight.zero_()
        peaked.emb.weight[:, 0] = 3.0
    asked = {} if temperature is None else {"temperature": temperature}
    ids = ns["generate"](peaked, torch.zeros(4, 1, dtype=torch.long), 100, **asked, generator=_gen(seed))
    return float((ids[:, 1:] == 0).float().mean())


def _distinct_uniform_draws(ns) -> int:
    """How many distinct ids generate samples from a model whose logits are all 0 (greedy would give token 0 only):
    3 prompts, 4 new tokens each, temperature 1, no filter."""
    uniform = Recorder()
    with torch.no_grad():
        uniform.emb.weight.zero_()
    ids = ns["generate"](uniform, torch.zeros(3, 2, dtype=torch.long), 4, generator=_gen(0))
    return len(set(ids[:, 2:].flatten().tolist()))


class TwoTables(nn.Module):
    """Logits (B, T, 10) from two embedding tables, scaled so both gradients exceed a clip norm of 1."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Embedding(10, 10), nn.Embedding(10, 10)

    def forward(self, idx):
        return (self.a(idx) + self.b(idx)) * 100


def _training_costs(config: tinylm.ModelConfig, batch_size: int, seq_len: int) -> dict:
    """One step of tinylm's model: forward and backward FLOPs as FlopCounterMode counts them (attention written
    out), and the bytes of the parameters, gradients and AdamW moments that exist after the step."""
    torch.manual_seed(0)
    model = tinylm.Transformer(replace(config, attn_impl="reference"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx = torch.randint(0, config.vocab_size, (batch_size, seq_len), generator=_gen(17))
    flops = _counted_flops(lambda: F.cross_entropy(model(idx).flatten(0, 1), idx.flatten()).backward())
    optimizer.step()
    params = list(model.parameters())
    return {"flops": flops, "weights": sum(p.nbytes for p in params), "grads": sum(p.grad.nbytes for p in params),
            "adam_moments": sum(state[m].nbytes for state in optimizer.state.values() for m in ("exp_avg", "exp_avg_sq"))}


def _clipped_update_norm(ns, targets) -> bool:
    """The global norm of one train_step's SGD (lr 1) update on TwoTables, clipped to 1, is 1."""
    tables = TwoTables()
    before = torch.cat([p.detach().flatten().clone() for p in tables.parameters()])
    ns["train_step"](tables, torch.optim.SGD(tables.parameters(), lr=1.0), targets[:, :-1], targets[:, 1:], grad_clip=1.0)
    after = torch.cat([p.detach().flatten() for p in tables.parameters()])
    return math.isclose(float((after - before).norm()), 1.0, rel_tol=1e-4)


def probe_09(ns):
    from tinylm.training import TrainConfig, lr_at

    data = torch.arange(12)  # seq_len 4: the valid starts are 0 .. 7
    x, y = ns["get_batch"](data, 4000, 4, _gen(0))
    logits, targets = torch.randn(2, 7, 10, generator=_gen(13)), torch.randint(0, 10, (2, 7), generator=_gen(14))
    sliced = logits[:, :-1]  # non-contiguous, as when the last position has no target
    padded = targets.clone()
    padded[0, :3] = -100  # the first three targets of one row are padding
    schedule = TrainConfig(steps=20, warmup_steps=5, lr=1e-2, min_lr=1e-3)
    model = Recorder(10)
    before = model.emb.weight.detach().clone()
    ns["train_step"](model, torch.optim.SGD(model.parameters(), lr=0.1), targets[:, :-1], targets[:, 1:])
    tables = TwoTables()
    ns["train_step"](tables, torch.optim.SGD(tables.parameters(), lr=0.0), targets[:, :-1], targets[:, 1:], grad_clip=1.0)
    # read after the call: a train_step that clears .grad once it has stepped leaves nothing to measure here
    clipped = attempt(lambda: float(torch.cat([p.grad.flatten() for p in tables.parameters()]).norm()))
    fresh = Recorder(10)
    with torch.no_grad():
        batch_loss = F.cross_entropy(fresh.emb(targets[:, :-1]).reshape(-1, 10), targets[:, 1:].reshape(-1)).item()
    reported = attempt(lambda: ns["train_step"](fresh, torch.optim.SGD(fresh.parameters(), lr=0.1), targets[:, :-1],
                                                targets[:, 1:]))
    handed_in_eval = Recorder(10).eval()  # as after an evaluation
    attempt(lambda: ns["train_step"](handed_in_eval, torch.optim.SGD(handed_in_eval.parameters(), lr=0.1), targets[:, :-1],
                                     targets[:, 1:]))
    torch.manual_seed(0)  # the global RNG, which get_batch uses when no generator is passed
    unseeded = [ns["get_batch"](data, 8, 4)[0] for _ in range(2)]
    return {"starts drawn": sorted(set(x[:, 0].tolist())),
            "x, y shapes == (4000, 4)": tuple(x.shape) == tuple(y.shape) == (4000, 4),
            "two calls without a generator differ": not torch.equal(*unseeded),
            "y == x shifted by one": torch.equal(y, x + 1),
            # closed form: uniform logits over 12 classes give a loss of ln 12, whatever the targets
            "F.cross_entropy on get_batch's y == ln 12": attempt(lambda: math.isclose(
                F.cross_entropy(torch.zeros(y.numel(), 12), y.flatten()).item(), math.log(12), rel_tol=1e-6)),
            "lm_loss == F.cross_entropy": _close(ns["lm_loss"](logits, targets),
                                                 F.cross_entropy(logits.reshape(-1, 10), targets.reshape(-1))),
            "lm_loss on sliced logits == F.cross_entropy": attempt(lambda: _close(
                ns["lm_loss"](sliced, targets[:, 1:]), F.cross_entropy(sliced.reshape(-1, 10), targets[:, 1:].reshape(-1)))),
            **{f"lr_schedule == tinylm.lr_at, steps {steps.start}..{steps.stop - 1} of 20": all(
                math.isclose(ns["lr_schedule"](s, 5, 20, 1e-2, 1e-3), lr_at(s, schedule)) for s in steps)
               for steps in (range(20), range(20, 25))},
            "lr_schedule(min_lr=0) == tinylm.lr_at": all(
                math.isclose(ns["lr_schedule"](s, 5, 20, 1e-2, 0.0), lr_at(s, replace(schedule, min_lr=0.0)), abs_tol=1e-12)
                for s in range(20)),
            "lr_schedule == tinylm.lr_at, warmup 5 of 6 steps": attempt(lambda: all(
                math.isclose(ns["lr_schedule"](s, 5, 6, 1e-2, 1e-3), lr_at(s, replace(schedule, steps=6))) for s in range(6))),
            "lm_loss at logits x 200 == F.cross_entropy": _close(ns["lm_loss"](logits * 200, targets),
                                                                 F.cross_entropy(logits.reshape(-1, 10) * 200, targets.reshape(-1))),
            "train_step moves the weights": not torch.equal(before, model.emb.weight),
            "train_step returns the batch's loss before the step": attempt(lambda: math.isclose(reported, batch_loss, rel_tol=1e-5)),
            "train_step's forward in train mode, model handed over in eval mode": handed_in_eval.training_seen[:1],
            "global gradient norm after clipping to 1 == 1": attempt(lambda: math.isclose(clipped, 1.0, rel_tol=1e-4)),
            # closed form: SGD at lr 1 moves the parameters by the gradient, whose global norm clipping has made 1
            "SGD(lr=1) step after clipping to 1 moves the weights by 1": attempt(lambda: _clipped_update_norm(ns, targets)),
            "lm_loss with -100 padding == F.cross_entropy": attempt(lambda: _close(
                ns["lm_loss"](logits, padded), F.cross_entropy(logits.reshape(-1, 10), padded.reshape(-1)))),
            **{f"train_step_costs, {label} == one AdamW step of tinylm": attempt(
                lambda c=c: ns["train_step_costs"](c, 2, 6) == _training_costs(c, 2, 6))
               for label, c in (("GQA, tied", _config(2)), ("MHA, untied", _config(4, tie_embeddings=False)))},
            "train_step with gradients left in .grad == on a clean model": attempt(lambda: _leftover_gradients_ignored(ns, targets)),
            "train_step, gradient norm below grad_clip: SGD step == unclipped": attempt(lambda: _unclipped_below_bound(ns, targets)),
            "get_batch of uint8 data: x, y dtypes": attempt(lambda: tuple(
                str(t.dtype) for t in ns["get_batch"](torch.arange(12, dtype=torch.uint8), 3, 4, _gen(1)))),
            "train_step returns a Python float": attempt(lambda: _returned_type(ns, targets)),
            **{f"train_step_accumulated, {label}: (weights, loss) == one step on the whole batch": attempt(
                lambda split=split, pad=pad, clip=clip: _accumulated_matches(ns, split, pad, clip, lambda: Recorder(10)))
               for label, split, pad, clip in (("one micro-batch", (4,), False, 1e3),
                                               ("micro-batches of 1 and 3 rows", (1, 3), False, 1e3),
                                               ("micro-batches of 1 and 3 rows, padding", (1, 3), True, 1e3),
                                               ("micro-batches of 2 and 2 rows, padding, clipped to 0.5", (2, 2), True, 0.5))}}


def _returned_type(ns, targets) -> str:
    """The type of what train_step returns: the exercise asks for loss.item(), a float."""
    model = Recorder(10)
    return type(ns["train_step"](model, torch.optim.SGD(model.parameters(), lr=0.1), targets[:, :-1], targets[:, 1:])).__name__


def _unclipped_below_bound(ns, targets) -> bool:
    """One train_step (SGD, lr 0.1, grad_clip 1e3) on a Recorder, whose gradient norm is far below 1e3: clipping
    leaves the gradient as it is, so the weights move exactly as one plain SGD step on the same batch moves them."""
    torch.manual_seed(0)
    model = Recorder(10)
    torch.manual_seed(0)
    plain = Recorder(10)
    ns["train_step"](model, torch.optim.SGD(model.parameters(), lr=0.1), targets[:, :-1], targets[:, 1:], grad_clip=1e3)
    F.cross_entropy(plain(targets[:, :-1]).reshape(-1, 10), targets[:, 1:].reshape(-1)).backward()
    with torch.no_grad():
        plain.emb.weight -= 0.1 * plain.emb.weight.grad
    return torch.allclose(model.emb.weight, plain.emb.weight, atol=1e-6)


def _leftover_gradients_ignored(ns, targets) -> bool:
    """One train_step (SGD, lr 0.1) on the same model, once with .grad empty and once with a leftover gradient of 5
    in every entry (from an earlier backward): a step on the batch (x, y) must move both the same way."""
    moved = []
    for leftover in (False, True):
        torch.manual_seed(0)
        model = Recorder(10)
        if leftover:
            model.emb.weight.grad = torch.full_like(model.emb.weight, 5.0)
        ns["train_step"](model, torch.optim.SGD(model.parameters(), lr=0.1), targets[:, :-1], targets[:, 1:])
        moved.append(model.emb.weight.detach().clone())
    return torch.equal(*moved)


def _quiet(fn, *args):
    """fn(*args) with torch's deprecation warnings (e.g. uint8 used as an index) kept out of the table."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def _bigram_reference(train: torch.Tensor, val: torch.Tensor, alpha: float) -> float:
    """Counted pair by pair in Python: independent of any tensor dtype."""
    counts = [[0] * 256 for _ in range(256)]
    for a, b in zip(train[:-1].tolist(), train[1:].tolist()):
        counts[a][b] += 1
    nll = [-math.log((counts[a][b] + alpha) / (sum(counts[a]) + 256 * alpha)) for a, b in zip(val[:-1].tolist(), val[1:].tolist())]
    return sum(nll) / len(nll)


def _targets_kept(nll_sum_and_count, logits, targets) -> bool:
    handed = targets.clone()
    nll_sum_and_count(logits, handed)
    return torch.equal(handed, targets)


def probe_10(ns):
    gen = _gen(15)
    logits, targets = torch.randn(2, 5, 7, generator=gen), torch.randint(0, 7, (2, 5), generator=gen)
    targets[0, :2] = 0  # ignore_index=0 below: two padded positions
    padded = targets.masked_fill(targets == 0, -100)  # the same padding, marked with the default -100

    def nll_matches(scored, ignore_index):
        nll, count = ns["nll_sum_and_count"](logits, scored, ignore_index=ignore_index)
        reference = F.cross_entropy(logits.reshape(-1, 7), scored.reshape(-1), ignore_index=ignore_index, reduction="sum")
        return math.isclose(nll, reference.item(), rel_tol=1e-5), count

    model = Recorder()
    batches = [(torch.randint(0, 16, (b, 6), generator=gen), torch.randint(0, 16, (b, 6), generator=gen)) for b in (1, 3)]
    result = ns["evaluate"](model, batches)
    with torch.no_grad():
        token_mean = F.cross_entropy(torch.cat([model.emb(x).reshape(-1, 16) for x, _ in batches]),
                                     torch.cat([y.reshape(-1) for _, y in batches])).item()
    frozen = Recorder().eval()
    ns["evaluate"](frozen, batches)
    training = Recorder().train()
    ns["evaluate"](training, batches)
    long_batches = [(torch.randint(0, 16, (8, 64), generator=gen), torch.randint(0, 16, (8, 64), generator=gen))]
    with torch.no_grad():
        long_mean = F.cross_entropy(model.emb(long_batches[0][0]).reshape(-1, 16), long_batches[0][1].reshape(-1)).item()
    corpus = torch.randint(0, 256, (600,), generator=gen, dtype=torch.uint8)
    train, val, expected = corpus[:500], corpus[500:], _bigram_reference(corpus[:500], corpus[500:], 0.5)
    repeated = torch.tensor(list(b"abc" * 120))
    return {"nll_sum_and_count(ignore_index=-100)": nll_matches(padded, -100),
            "nll_sum_and_count, all padding == (0.0, 0)": ns["nll_sum_and_count"](logits, torch.full_like(targets, -100)) == (0.0, 0),
            "nll_sum_and_count(ignore_index=0)": nll_matches(targets, 0),
            "nll_sum_and_count keeps the caller's targets": attempt(lambda: _targets_kept(ns["nll_sum_and_count"], logits, padded)),
            "parameters still trainable after evaluate": all(p.requires_grad for p in model.parameters()),
            "perplexity == exp(token-weighted loss)": math.isclose(result["perplexity"], math.exp(token_mean), rel_tol=1e-5),
            "grad enabled in evaluate's forward": any(model.grad_seen),
            "a model evaluated in eval mode stays in eval mode": not frozen.training,
            "a model evaluated in train mode returns to train mode": training.training,
            "perplexity of 512 tokens == exp(token-weighted loss)": attempt(lambda: math.isclose(
                ns["evaluate"](model, long_batches)["perplexity"], math.exp(long_mean), rel_tol=1e-5)),
            "bits_per_byte == token-weighted loss / ln 2": math.isclose(result["bits_per_byte"], token_mean / math.log(2),
                                                                        rel_tol=1e-5),
            "perplexity with bytes_per_token=4 == exp(token-weighted loss)": math.isclose(
                ns["evaluate"](model, batches, bytes_per_token=4.0)["perplexity"], math.exp(token_mean), rel_tol=1e-5),
            "bigram_nll(int64) == counted": attempt(lambda: math.isclose(ns["bigram_nll"](train.long(), val.long()), expected,
                                                                         rel_tol=1e-9)),
            "bigram_nll(uint8) == counted": attempt(lambda: math.isclose(_quiet(ns["bigram_nll"], train, val), expected,
                                                                         rel_tol=1e-9)),
            # the same bfloat16 logits upcast: a sum of about 600 rounded to bfloat16 (spacing 4 there) is off by up to 2
            "nll_sum_and_count, bfloat16 logits: sum == float32 sum": attempt(lambda: _bfloat16_sum_matches(ns)),
            # 257 scored targets: bfloat16 holds whole numbers exactly up to 256 only
            "nll_sum_and_count, bfloat16 logits, 257 targets: count": attempt(lambda: ns["nll_sum_and_count"](
                torch.zeros(1, 257, 7, dtype=torch.bfloat16), torch.randint(0, 7, (1, 257), generator=_gen(70)))[1]),
            # a text of repeated pairs: 'abcabc...' holds each of its three pairs about 100 times
            "bigram_nll, repeated pairs == counted": attempt(lambda: math.isclose(
                ns["bigram_nll"](repeated[:300], repeated[300:]), _bigram_reference(repeated[:300], repeated[300:], 0.5),
                rel_tol=1e-9)),
            "bits_per_byte with bytes_per_token=4 == token-weighted loss / ln 2 / 4": math.isclose(
                ns["evaluate"](model, batches, bytes_per_token=4.0)["bits_per_byte"], token_mean / math.log(2) / 4,
                rel_tol=1e-5)}


def _bfloat16_sum_matches(ns) -> bool:
    logits, targets = torch.randn(1, 257, 7, generator=_gen(71)).to(torch.bfloat16), torch.randint(0, 7, (1, 257), generator=_gen(72))
    reference = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="sum").item()
    return math.isclose(ns["nll_sum_and_count"](logits, targets)[0], reference, rel_tol=1e-5)


PROBES = {f"{n:02d}": globals()[f"probe_{n:02d}"] for n in range(1, 11)}


def left_padded_passes(ns, prompts: list, new_tokens: int, keys: tuple = ("positions", "attention_mask")) -> list:
    """The `keys` keyword arguments (as lists; a tuple of them, or the one value for one key) that the learner's
    generate_left_padded hands a one-layer RoPE model at every pass: a greedy token of a small model can survive
    wrong positions or a wrong mask (its logits follow the last token's embedding); what the model is handed cannot."""
    model = tinylm.Transformer(tinylm.ModelConfig(vocab_size=32, d_model=16, n_layers=1, n_heads=2, n_kv_heads=2,
                                                  max_seq_len=32)).eval()
    seen: list = []

    def record(module, args, kwargs):
        values = tuple(t.tolist() if isinstance(t, torch.Tensor) else t for t in (kwargs.get(key) for key in keys))
        seen.append(values if len(keys) > 1 else values[0])
    hook = model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        ns["generate_left_padded"](model, prompts, new_tokens, tinylm.KVCache(model.config, len(prompts)))
    finally:
        hook.remove()
    return seen
