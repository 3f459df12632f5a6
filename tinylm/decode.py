"""One decoding step with a KV cache, without the module machinery.

A decoding step pushes one token through the model: little arithmetic and
many small tensor operations, so its time is mostly per-operation
overhead. `decode_one` is Transformer.forward for exactly that case (one new
token per row, a cache, no gradients, no dropout, float32 weights), written
as a flat sequence of few operations on matrices prepared once per parameter
change:

- each norm's gain, and its 1/sqrt(d), go into the matrix it feeds, so a
  norm is one batched dot product (x·x + d·eps) and a 1/sqrt scaling of the
  product's output;
- q, k, v, and q and k turned by rotate_half, come out of one matrix
  (`rope.rotate_half_rows`), so RoPE is q·cos + turned(q)·sin: one product
  and one sum, already in the cache's half-split layout;
- the softmax scale 1/sqrt(head_dim) is folded into the query rows, and a
  group of query heads that shares a kv head attends in one batched product
  (no repetition of keys for GQA);
- weights are stored transposed, [d_in, d_out], so a step multiplies with a
  bare x @ w.

tests/test_kv_cache.py checks it against the module path step by step,
logits and cache contents.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .rope import rotate_half_rows


def _weight(module) -> torch.Tensor:
    return module._parameters["weight"]  # a dict lookup: Module.__getattr__ is a Python call per access


def _sources(model) -> list[torch.Tensor]:
    """Every tensor _prepare reads, looked up afresh (a reassigned Parameter is seen)."""
    mods = model._modules
    tensors = [_weight(mods["tok_emb"]), _weight(mods["lm_head"]), _weight(mods["norm"]),
               model._buffers["rope_cos"], model._buffers["rope_sin"]]
    for block in mods["blocks"]._modules.values():
        sub = block._modules
        attn, mlp = sub["attn"]._modules, sub["mlp"]._modules
        tensors += [_weight(sub["attn_norm"]), _weight(sub["mlp_norm"]),
                    *(_weight(attn[name]) for name in ("q_proj", "k_proj", "v_proj", "o_proj")),
                    *(_weight(mlp[name]) for name in ("gate_proj", "up_proj", "down_proj"))]
    return tensors


def _prepare(model) -> tuple[list[tuple], tuple, torch.Tensor]:
    c = model.config
    H, K = c.n_heads, c.n_kv_heads
    root_d = math.sqrt(c.d_model)  # x / rms(x) = sqrt(d) · x / sqrt(x·x + d·eps)

    def norm_eps(norm) -> torch.Tensor:  # d·eps as a (1, 1, 1) tensor: the start value of a baddbmm
        return torch.full((1, 1, 1), c.d_model * norm.eps, device=norm.weight.device)

    layers = []
    for block in model.blocks:
        attn, mlp = block.attn, block.mlp
        q = attn.q_proj.weight / math.sqrt(c.head_dim)  # the softmax scale, applied once here
        k = attn.k_proj.weight
        qkv = torch.cat((q, k, rotate_half_rows(q, H), rotate_half_rows(k, K), attn.v_proj.weight))
        gate_up = torch.cat((mlp.gate_proj.weight, mlp.up_proj.weight))          # [2·d_ff, d]
        layers.append((norm_eps(block.attn_norm), (qkv * (block.attn_norm.weight * root_d)).t().contiguous(),
                       attn.o_proj.weight.t().contiguous(),
                       norm_eps(block.mlp_norm), (gate_up * (block.mlp_norm.weight * root_d)).t().contiguous(),
                       mlp.down_proj.weight.t().contiguous()))
    head = (norm_eps(model.norm), (model.lm_head.weight * (model.norm.weight * root_d)).t().contiguous())  # [d, V]
    # Per position: cos for every q and k feature, then sin, matching the
    # (q k | turned q, turned k) columns of the fused matrix.
    n_qk = H + K
    cos_sin = torch.cat((model.rope_cos.repeat(1, n_qk), model.rope_sin.repeat(1, n_qk)), dim=1).float()
    return layers, head, cos_sin  # cos_sin: (max_seq_len, 2·(H+K)·hd)


def _prepare_if_standard(model):
    """None unless every block is tinylm's own (see Block.folds_gains)."""
    if not model.folds_head_gain() or not all(block.folds_gains() for block in model.blocks):
        return None
    return model.derived.get("decode", lambda: _prepare(model), *_sources(model))


def _scaled_by_inv_rms(x: torch.Tensor, y: torch.Tensor, eps_d: torch.Tensor) -> torch.Tensor:
    """y · 1/sqrt(x·x + d·eps) per row, in place; y = x @ w with w holding sqrt(d) and the gain."""
    B, d = x.shape
    return y.mul_(torch.baddbmm(eps_d, x.view(B, 1, d), x.view(B, d, 1)).rsqrt_().view(B, 1))


def decode_one(model, idx: torch.Tensor, cache) -> torch.Tensor | None:
    """model(idx, cache) for idx (B, 1): logits (B, 1, V). None where it does
    not apply (gradients on, dropout active, the reference attention, weights
    not float32, or modules it does not know), and the caller runs the modules."""
    c = model.config
    if (torch.is_grad_enabled() or (model.training and c.dropout) or c.attn_impl != "sdpa"
            or model.tok_emb.weight.dtype != torch.float32):
        return None
    H, K, hd = c.n_heads, c.n_kv_heads, c.head_dim
    if cache.decode_weights is None or cache.decode_weights[0] is not model:  # once per prompt
        # A cache of another dtype or head layout goes to the module path, whose
        # cache.update names the problem and the fix.
        fits = cache.k.dtype == torch.float32 and (cache.k.shape[2], cache.k.shape[4]) == (K, hd)
        cache.decode_weights = (model, _prepare_if_standard(model) if fits else None,
                                cache.k.unbind(0), cache.v.unbind(0))
    _, prepared, k_layers, v_layers = cache.decode_weights
    B, pos = idx.shape[0], cache.length
    if prepared is None or B != cache.batch_size:  # (a batch the cache was not built for: the same)
        return None
    layers, (eps_head, head), cos_sin = prepared
    n_qk, G = (H + K) * hd, H // K
    seen = pos + 1
    turn = cos_sin[pos].view(2, n_qk)
    x = model.tok_emb.weight.index_select(0, idx.view(B))                         # (B, d)
    for layer, (eps_attn, qkv_t, o_t, eps_mlp, gate_up_t, down_t) in enumerate(layers):
        qkv = _scaled_by_inv_rms(x, x @ qkv_t, eps_attn)                          # (B, q k | turned q k | v)
        qk = (qkv[:, :2 * n_qk].view(B, 2, n_qk) * turn).sum(1)                   # (B, (H+K)·hd): RoPE applied
        k_cache, v_cache = k_layers[layer], v_layers[layer]                       # (B, K, max_seq_len, hd)
        k_cache.narrow(2, pos, 1).copy_(qk[:, H * hd:].view(B, K, 1, hd))
        v_cache.narrow(2, pos, 1).copy_(qkv[:, 2 * n_qk:].view(B, K, 1, hd))
        keys = k_cache.narrow(2, 0, seen).view(B * K, seen, hd)
        values = v_cache.narrow(2, 0, seen).view(B * K, seen, hd)
        # The G query heads of kv head j are rows j·G .. j·G+G-1: they attend together.
        scores = torch.bmm(qk[:, :H * hd].reshape(B * K, G, hd), keys.transpose(1, 2))  # (B·K, G, seen)
        y = torch.bmm(scores.softmax(dim=-1), values)                             # (B·K, G, hd)
        x = torch.addmm(x, y.view(B, H * hd), o_t)
        gate, up = _scaled_by_inv_rms(x, x @ gate_up_t, eps_mlp).chunk(2, dim=-1)  # (B, d_ff) each
        x = torch.addmm(x, F.silu(gate).mul_(up), down_t)
    cache.advance(1)
    return _scaled_by_inv_rms(x, x @ head, eps_head)[:, None]                      # (B, 1, V)
