"""The variants the experiments compare against tinylm's model.

Each `with_*` / `without_*` function takes a freshly built tinylm.Transformer
and swaps one piece in place (returning the model), so two arms of an
experiment built under the same seed share every other weight. tinylm's own
modules keep their one forward path; the variants live here only. None of
them supports a KV cache: the experiments train and evaluate whole windows.
"""
from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import Attention
from ..config import ModelConfig
from ..mlp import SwiGLU
from ..model import Block, Transformer

__all__ = ["UnscaledAttention", "PostNormBlock", "GELUMLP", "TokenAndPosition", "MoEMLP",
           "with_unscaled_attention", "with_layer_norm", "without_norm", "with_post_norm",
           "without_positions", "with_learned_positions", "with_gelu_mlp", "with_moe", "gelu_hidden_size"]


def _init_like_tinylm(module: nn.Module, n_layers: int) -> nn.Module:
    """tinylm's initialisation for a swapped-in module: N(0, 0.02) weights,
    output projections shrunk by sqrt(2 · n_layers)."""
    module.apply(Transformer._init_weights)
    for name, p in module.named_parameters():
        if name.endswith("down_proj.weight"):
            nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layers))
    return module


class _Times(nn.Module):
    """A linear layer whose output is multiplied by a constant."""

    def __init__(self, linear: nn.Linear, factor: float):
        super().__init__()
        self.linear, self.factor = linear, factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.factor


class UnscaledAttention(Attention):
    """softmax(q kᵀ) v: attention without the 1/sqrt(head_dim).

    The queries are multiplied by sqrt(head_dim) before the (scaled) kernel,
    which cancels its scale exactly; RoPE is linear, so the order does not
    matter. Same parameters as Attention (q_proj.linear is the query weight)."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.q_proj = _Times(self.q_proj, math.sqrt(config.head_dim))


class PostNormBlock(Block):
    """The original Transformer's order: norm(x + attn(x)), then norm(x + mlp(x)).
    The residual stream itself is normalised after every branch."""

    def forward(self, x, cos, sin, cache=None, layer_idx: int = 0):
        if cache is not None:
            raise ValueError("PostNormBlock is an experiment variant without KV-cache support; pass cache=None.")
        x = self.attn_norm(x + self.drop(self.attn(x, cos, sin)))  # (B, T, d)
        return self.mlp_norm(x + self.drop(self.mlp(x)))            # (B, T, d)


def gelu_hidden_size(config: ModelConfig) -> int:
    """Hidden size of a two-matrix GELU MLP holding as many weights as
    SwiGLU's three matrices of d_ff: 2·d·h = 3·d·d_ff."""
    return 3 * config.d_ff // 2


class GELUMLP(nn.Module):
    """down(gelu(up(x))): the plain MLP of GPT-2, no gate, no biases."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        hidden = gelu_hidden_size(config)
        self.up_proj = nn.Linear(config.d_model, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.up_proj(x)))  # (B, T, d) -> (B, T, h) -> (B, T, d)


class TokenAndPosition(nn.Module):
    """Token embedding plus a learned absolute position embedding (GPT-2).
    Rows of positions never seen in training keep their random initialisation."""

    def __init__(self, tok_emb: nn.Embedding, max_seq_len: int):
        super().__init__()
        self.tok_emb = tok_emb  # the same module: the tied lm_head keeps sharing its weight
        self.pos_emb = nn.Embedding(max_seq_len, tok_emb.embedding_dim)
        nn.init.normal_(self.pos_emb.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)  # (T,)
        return self.tok_emb(idx) + self.pos_emb(positions)        # (B, T, d) + (T, d)


class MoEMLP(nn.Module):
    """Top-k routed mixture of SwiGLU experts. Each token goes to the k experts
    with the largest router logits; their outputs are mixed with the softmax of
    those k logits. `counts` accumulates how many tokens each expert received
    (while training), the load balance the experiment plots."""

    def __init__(self, config: ModelConfig, n_experts: int, top_k: int, d_ff: int | None = None):
        super().__init__()
        if not 1 <= top_k <= n_experts:
            raise ValueError(f"MoEMLP needs 1 <= top_k <= n_experts, got top_k={top_k}, n_experts={n_experts}.")
        expert_config = config if d_ff is None else dataclasses.replace(config, d_ff=d_ff)
        self.top_k = top_k
        self.router = nn.Linear(config.d_model, n_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(expert_config) for _ in range(n_experts))
        self.register_buffer("counts", torch.zeros(n_experts, dtype=torch.long), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        tokens = x.reshape(B * T, d)                                      # (N, d)
        top_logits, top_idx = self.router(tokens).topk(self.top_k, -1)    # (N, k) each
        gates = top_logits.softmax(dim=-1)                                # (N, k): weights of the chosen experts
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            rows, slot = (top_idx == e).nonzero(as_tuple=True)            # tokens routed to e, and in which slot
            if len(rows):
                out.index_add_(0, rows, gates[rows, slot, None] * expert(tokens[rows]))
        if self.training:
            self.counts += torch.bincount(top_idx.flatten(), minlength=len(self.experts))
        return out.view(B, T, d)


# --- swaps on a built tinylm.Transformer ---

def with_unscaled_attention(model: Transformer) -> Transformer:
    for block in model.blocks:
        attn = UnscaledAttention(model.config)
        attn.load_state_dict({k.replace("q_proj.", "q_proj.linear."): v for k, v in block.attn.state_dict().items()})
        block.attn = attn
    return model


def _replace_norms(model: Transformer, make) -> Transformer:
    for block in model.blocks:
        block.attn_norm, block.mlp_norm = make(), make()
    model.norm = make()
    return model


def with_layer_norm(model: Transformer) -> Transformer:
    """Every RMSNorm becomes a LayerNorm (mean subtracted, gain and bias), same eps."""
    return _replace_norms(model, lambda: nn.LayerNorm(model.config.d_model, eps=model.config.norm_eps))


def without_norm(model: Transformer) -> Transformer:
    """No normalisation anywhere: every RMSNorm becomes the identity."""
    return _replace_norms(model, nn.Identity)


def with_post_norm(model: Transformer) -> Transformer:
    """Post-norm blocks with the same weights (the final norm stays)."""
    for i, block in enumerate(model.blocks):
        post = PostNormBlock(model.config)
        post.load_state_dict(block.state_dict())
        model.blocks[i] = post
    return model


def without_positions(model: Transformer) -> Transformer:
    """NoPE: the rotation tables become cos = 1, sin = 0, so apply_rope is the
    identity and only the causal mask tells positions apart."""
    model.rope_cos.fill_(1.0)
    model.rope_sin.zero_()
    return model


def with_learned_positions(model: Transformer) -> Transformer:
    """No RoPE, a learned absolute position embedding added to the tokens instead."""
    without_positions(model)
    model.tok_emb = TokenAndPosition(model.tok_emb, model.config.max_seq_len)
    return model


def with_gelu_mlp(model: Transformer) -> Transformer:
    for block in model.blocks:
        block.mlp = _init_like_tinylm(GELUMLP(model.config), model.config.n_layers)
    return model


def with_moe(model: Transformer, n_experts: int = 4, top_k: int = 1) -> Transformer:
    """Each SwiGLU becomes n_experts routed experts with d_ff / top_k hidden
    units each, so a token uses as many MLP weights as the dense model."""
    d_ff = model.config.d_ff // top_k
    for block in model.blocks:
        block.mlp = _init_like_tinylm(MoEMLP(model.config, n_experts, top_k, d_ff), model.config.n_layers)
    return model
