"""One decoding step with a KV cache, without the module machinery.

A decoding step pushes one token through the model: little arithmetic and a
hundred small tensor operations, so its time is mostly per-operation
overhead. `decode_one` is Transformer.forward for exactly that case (one new
token per row, a cache, no gradients, no dropout, float32 weights), written
as a flat sequence of operations on matrices prepared once per parameter
change: q/k/v and gate/up each fused into one matrix, norm gains folded in,
stored transposed, RoPE as a complex table. tests/test_kv_cache.py checks it
against the module path step by step.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .rope import rope_rotation


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


def _prepare(model) -> tuple[list[tuple], torch.Tensor, torch.Tensor]:
    layers = []
    for block in model.blocks:
        attn, mlp = block.attn, block.mlp
        gate_up = torch.cat((mlp.gate_proj.weight, mlp.up_proj.weight)) * block.mlp_norm.weight  # [2·d_ff, d]
        matrices = (attn._fused_weight(block.attn_norm.weight), attn.o_proj.weight, gate_up, mlp.down_proj.weight)
        # Stored transposed, [d_in, d_out], so a step multiplies with a bare x @ w.
        qkv_t, o_t, gate_up_t, down_t = (w.t().contiguous() for w in matrices)
        layers.append((block.attn_norm.eps, qkv_t, o_t, block.mlp_norm.eps, gate_up_t, down_t))
    head_t = (model.lm_head.weight * model.norm.weight).t().contiguous()  # [d, V]
    turns = torch.view_as_complex(rope_rotation(model.rope_cos, model.rope_sin))  # (max_seq_len, hd/2): cos θ + i·sin θ
    return layers, head_t, turns


def _prepare_if_standard(model):
    """None unless every block is tinylm's own (see Block.folds_gains)."""
    if not model.folds_head_gain() or not all(block.folds_gains() for block in model.blocks):
        return None
    return model.derived.get("decode", lambda: _prepare(model), *_sources(model))


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
        cache.decode_weights = (model, _prepare_if_standard(model))
    if cache.decode_weights[1] is None:
        return None
    layers, head_t, turns = cache.decode_weights[1]
    B, pos = idx.shape[0], cache.length
    x = F.embedding(idx[:, 0], model.tok_emb.weight)                         # (B, d)
    for layer, (eps_attn, qkv_t, o_t, eps_mlp, gate_up_t, down_t) in enumerate(layers):
        qkv = F.rms_norm(x, x.shape[1:], None, eps_attn) @ qkv_t             # (B, (H+2K)·hd)
        pairs = torch.view_as_complex(qkv[:, :(H + K) * hd].view(B, H + K, hd // 2, 2))  # q, k: RoPE pairs adjacent
        rotated = torch.view_as_real(pairs * turns[pos])                      # (B, H+K, hd/2, 2)
        qk = rotated.transpose(-1, -2).reshape(B, H + K, 1, hd)               # half-split, as the cache keeps keys
        k_all, v_all = cache.update(layer, qk[:, H:], qkv[:, (H + K) * hd:].view(B, K, 1, hd))
        y = F.scaled_dot_product_attention(qk[:, :H], k_all, v_all, enable_gqa=H != K)  # (B, H, 1, hd); no mask
        x = x + y.view(B, H * hd) @ o_t
        gate, up = (F.rms_norm(x, x.shape[1:], None, eps_mlp) @ gate_up_t).chunk(2, dim=-1)  # (B, d_ff) each
        x = x + (F.silu(gate) * up) @ down_t
    cache.advance(1)
    return (F.rms_norm(x, x.shape[1:], None, model.norm.eps) @ head_t)[:, None]  # (B, 1, V)
