"""The pre-norm block and the whole decoder-only Transformer, one forward
path from token ids to logits (training, evaluation and cached decoding)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .attention import Attention
from .config import ModelConfig
from .kv_cache import KVCache
from .mlp import SwiGLU
from .norm import RMSNorm
from .rope import rope_cache
from .validation import assert_token_ids_in_graph, check_token_ids, check_token_tensor


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
        self.drop = nn.Dropout(config.dropout)  # residual dropout: active in train mode only

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache | None = None,
                layer_idx: int = 0) -> torch.Tensor:
        x = x + self.drop(self.attn(self.attn_norm(x), cos, sin, cache, layer_idx))  # (B, T, d)
        x = x + self.drop(self.mlp(self.mlp_norm(x)))                                # (B, T, d)
        return x


class Transformer(nn.Module):
    """ids -> token embedding -> n_layers Blocks -> final RMSNorm -> lm_head
    (the embedding matrix itself when tie_embeddings). RoPE's cos/sin tables
    are buffers shared by every layer."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight  # one Parameter, two names
        cos, sin = rope_cache(config.head_dim, config.max_seq_len, config.rope_theta)
        # Not saved in checkpoints: rebuilt from the config.
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
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
        """idx (B, T) token ids of any integer dtype -> logits (B, T, vocab_size).
        With a cache, idx holds only the new tokens; they continue at position
        cache.length, and the cache advances by T."""
        idx = self._checked_ids(idx, cache)                        # (B, T) int64
        T = idx.shape[1]
        x = self.drop(self.tok_emb(idx))                           # (B, T, d)
        for i, block in enumerate(self.blocks):
            x = block(x, self.rope_cos, self.rope_sin, cache, i)   # (B, T, d)
        if cache is not None:
            cache.advance(T)  # after every layer has written the same slots
        x = self.norm(x)                                           # (B, T, d)
        return self.lm_head(x)                                     # (B, T, V): tied to tok_emb by default

    def _checked_ids(self, idx: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        """Fail early with a message that names the fix; any integer dtype
        (the course corpus is uint8) becomes int64, what nn.Embedding indexes with."""
        check_token_tensor(idx)
        if idx.dim() != 2:
            raise ValueError(f"idx must have shape (batch, seq), got {tuple(idx.shape)}; add a batch axis with idx[None].")
        if torch.compiler.is_compiling():  # reading the ids' values on the host would break the graph
            assert_token_ids_in_graph(idx, self.config.vocab_size)
        else:
            check_token_ids(idx, self.config.vocab_size)
        T = idx.shape[1]
        start_pos = 0
        if cache is not None:
            cache.check_room(T)  # the more specific message first
            start_pos = cache.length
        if start_pos + T > self.config.max_seq_len:
            raise ValueError(
                f"sequence of {start_pos + T} positions ({start_pos} cached + {T} new) exceeds "
                f"max_seq_len={self.config.max_seq_len}; crop the input or build the model with a larger max_seq_len."
            )
        return idx.long()


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Mean cross-entropy of predicting targets[b, t] from logits[b, t].

    targets must already be the inputs shifted left by one (get_batch does
    this); scoring a token against itself is the "unshifted labels" bug."""
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"next_token_loss: logits {tuple(logits.shape)} must be targets {tuple(targets.shape)} plus a vocab axis.")
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=ignore_index)
