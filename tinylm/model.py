"""The pre-norm block and the whole decoder-only Transformer."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .attention import Attention
from .config import ModelConfig
from .derived import DerivedWeights
from .decode import decode_one
from .embedding import tied_logits
from .kv_cache import KVCache
from .mlp import SwiGLU
from .norm import RMSNorm
from .rope import rope_cache
from .validation import check_token_ids


class Block(nn.Module):
    """x + attn(norm(x)), then x + mlp(norm(x)). Normalising the input of each
    branch, not the sum, leaves the residual stream an identity path from the
    embedding to the head, which is what keeps deep stacks trainable."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.attn_norm = RMSNorm(config.d_model, config.norm_eps)
        self.attn = Attention(config)
        self.mlp_norm = RMSNorm(config.d_model, config.norm_eps)
        self.mlp = SwiGLU(config)
        self.dropout = config.dropout

    def _drop(self, h: torch.Tensor) -> torch.Tensor:
        """Residual dropout, in training only (no call at all when p = 0)."""
        return F.dropout(h, self.dropout, training=True) if self.dropout and self.training else h

    def folds_gains(self) -> bool:
        """Whether forward takes the fast path, which folds each norm's gain into
        the next layer's weights: only with tinylm's own modules (notebook 02
        swaps in the learner's RMSNorm) and the fast attention."""
        return (type(self.attn_norm) is RMSNorm and type(self.mlp_norm) is RMSNorm and type(self.attn) is Attention
                and type(self.mlp) is SwiGLU and self.attn.attn_impl != "reference")

    def forward(self, x, cos, sin, cache=None, layer_idx: int = 0):
        if not self.folds_gains():
            x = x + self._drop(self.attn(self.attn_norm(x), cos, sin, cache, layer_idx))
            return x + self._drop(self.mlp(self.mlp_norm(x)))
        # The same sums, faster: each norm's gain goes into the weights of the
        # layer it feeds, which saves a full-size product forward and two backward.
        attn_out = self.attn(self.attn_norm.normalize(x), cos, sin, cache, layer_idx, input_gain=self.attn_norm.weight)
        x = x + self._drop(attn_out)
        mlp_out = self.mlp(self.mlp_norm.normalize(x), input_gain=self.mlp_norm.weight)
        return x + self._drop(mlp_out)


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight  # one Parameter, two names
        cos, sin = rope_cache(config.head_dim, config.max_seq_len, config.rope_theta)
        # Not saved in checkpoints: rebuilt from the config.
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.derived = DerivedWeights()
        self.apply(self._init_weights)
        # Each block adds two branches to the residual stream; shrink their
        # output projections so the stream's variance does not grow with depth.
        for name, p in self.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layers))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_parameters(self) -> int:
        """Distinct parameters: a tied head is counted once."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """idx (B, T) token ids -> logits (B, T, vocab_size). With a cache, idx
        holds only the new tokens; they continue at position cache.length."""
        check_token_ids(idx, self.config.vocab_size)
        if idx.dim() != 2:
            raise ValueError(f"idx must have shape (batch, seq), got {tuple(idx.shape)}; add a batch axis with idx[None].")
        B, T = idx.shape
        start_pos = 0
        if cache is not None:
            cache.check_room(T)  # the more specific message first
            start_pos = cache.length
        if start_pos + T > self.config.max_seq_len:
            raise ValueError(
                f"sequence of {start_pos + T} positions ({start_pos} cached + {T} new) exceeds "
                f"max_seq_len={self.config.max_seq_len}; crop the input or build the model with a larger max_seq_len."
            )

        if T == 1 and cache is not None:
            logits = decode_one(self, idx, cache)  # generation's hot loop (tinylm/decode.py)
            if logits is not None:                 # None where it does not apply: run the modules
                return logits

        x = F.embedding(idx, self.tok_emb.weight)  # = embed(idx, ...): (B, T, d); idx is checked above
        if self.config.dropout and self.training:
            x = F.dropout(x, self.config.dropout)
        for i, block in enumerate(self.blocks):
            x = block(x, self.rope_cos, self.rope_sin, cache, i)
        if cache is not None:
            cache.advance(T)
        return self._logits(x)

    def folds_head_gain(self) -> bool:
        """Whether the final norm's gain goes into the head (fast path, tinylm's own RMSNorm)."""
        return self.config.attn_impl != "reference" and type(self.norm) is RMSNorm

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        """Final norm, then the tied head: (B, T, d) -> (B, T, V). The fast path
        folds the norm's gain into the head, as the blocks do."""
        if not self.folds_head_gain():
            return tied_logits(self.norm(x), self.lm_head.weight)
        head = self.derived.get("head", lambda: self.lm_head.weight * self.norm.weight, self.lm_head.weight, self.norm.weight)
        return tied_logits(self.norm.normalize(x), head)


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Mean cross-entropy of predicting targets[b, t] from logits[b, t].

    targets must already be the inputs shifted left by one (get_batch does
    this); scoring a token against itself is the "unshifted labels" bug."""
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"next_token_loss: logits {tuple(logits.shape)} must be targets {tuple(targets.shape)} plus a vocab axis.")
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=ignore_index)
