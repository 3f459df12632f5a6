"""A GPT-2-style baseline for the training benchmark, written for this course.

The differences from tinylm's Llama-style model are exactly the ones the
course teaches: learned absolute position embeddings instead of RoPE,
LayerNorm (with mean subtraction and biases) instead of RMSNorm, a GELU MLP
instead of SwiGLU, and biases in every linear layer. Everything else is the
same: pre-norm blocks, tied embeddings, F.scaled_dot_product_attention, and
the MLP width is chosen so that both models have the same parameter count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GPT2Config:
    vocab_size: int = 256
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 512
    max_seq_len: int = 256
    dropout: float = 0.0


class GPT2Block(nn.Module):
    def __init__(self, c: GPT2Config):
        super().__init__()
        self.n_heads = c.n_heads
        self.ln1 = nn.LayerNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)  # q, k, v in one matmul
        self.proj = nn.Linear(c.d_model, c.d_model)
        self.ln2 = nn.LayerNorm(c.d_model)
        self.fc = nn.Linear(c.d_model, c.d_ff)
        self.fc_out = nn.Linear(c.d_ff, c.d_model)
        self.dropout = c.dropout

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)  # 3 x (B, T, D)
        # (B, T, D) -> (B, H, T, D/H)
        q, k, v = (t.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, D))  # (B, H, T, D/H) -> (B, T, D)
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x))))


class GPT2(nn.Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.max_seq_len, config.d_model)  # learned positions
        self.blocks = nn.ModuleList(GPT2Block(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.d_model)
        # Same initialisation scheme as tinylm (and GPT-2): N(0, 0.02), residual
        # output projections scaled down by sqrt(2 * n_layers).
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * config.n_layers) if name.endswith(("proj.weight", "fc_out.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx):
        B, T = idx.shape
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device))  # (B, T, D)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.tok_emb.weight.T  # tied head: (B, T, V)


def gpt2_like(config) -> GPT2:
    """A GPT-2-style model with the width, depth and heads of a tinylm
    ModelConfig and the MLP width that makes the parameter counts match."""
    from tinylm import Transformer

    target = Transformer(config).num_parameters()
    d, L = config.d_model, config.n_layers
    # Everything but the MLP hidden layer, then solve for d_ff:
    # per block the MLP holds d*ff + ff (fc) + ff*d + d (fc_out).
    fixed = config.vocab_size * d + config.max_seq_len * d + 2 * d  # embeddings, final LN
    fixed += L * (4 * d * d + 4 * d + 4 * d + d)  # qkv, proj (+biases), 2 LNs, fc_out bias
    d_ff = max(1, round((target - fixed) / (L * (2 * d + 1))))
    return GPT2(GPT2Config(config.vocab_size, d, L, config.n_heads, d_ff, config.max_seq_len, config.dropout))
