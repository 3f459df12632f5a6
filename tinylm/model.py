"""The pre-norm block and the whole decoder-only Transformer, one forward
path from token ids to logits (training, evaluation and cached decoding)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .attention import Attention, padded_causal_mask
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
                layer_idx: int = 0, positions: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        at = {} if positions is None and mask is None else {"positions": positions, "mask": mask}
        x = x + self.drop(self.attn(self.attn_norm(x), cos, sin, cache, layer_idx, **at))  # (B, T, d)
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

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None, positions: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """idx (B, T) token ids of any integer dtype -> logits (B, T, vocab_size).
        With a cache, idx holds only the new tokens; they continue at position
        cache.length, and the cache advances by T.

        For a batch of left-padded prompts (rows of different lengths, padding
        in front): attention_mask (B, cache.length + T), True or 1 at real
        tokens, covers every position so far (the cached ones too, at every
        decoding step), and no query attends to a padding key; positions
        (B, T) are each row's RoPE positions of the new tokens, counted from 0
        at the row's first real token. The model does not derive positions
        from the mask: without `positions`, row b's tokens sit at their slot
        numbers, padding counted."""
        idx = self._checked_ids(idx, cache)                        # (B, T) int64
        T = idx.shape[1]
        start_pos = 0 if cache is None else cache.length
        positions = self._checked_positions(positions, idx)
        mask = None if attention_mask is None else padded_causal_mask(
            self._checked_mask(attention_mask, idx, start_pos), T)  # (B, 1, T, start_pos + T)
        at = {} if positions is None and mask is None else {"positions": positions, "mask": mask}
        x = self.drop(self.tok_emb(idx))                           # (B, T, d)
        for i, block in enumerate(self.blocks):
            x = block(x, self.rope_cos, self.rope_sin, cache, i, **at)  # (B, T, d)
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

    def _checked_positions(self, positions: torch.Tensor | None, idx: torch.Tensor) -> torch.Tensor | None:
        if positions is None:
            return None
        check_token_tensor(positions, "positions")
        if tuple(positions.shape) != tuple(idx.shape):
            raise ValueError(f"positions must be (batch, seq) like idx, {tuple(idx.shape)}, got {tuple(positions.shape)}.")
        if positions.numel() and not torch.compiler.is_compiling():
            low, high = positions.aminmax()
            if int(low) < 0 or int(high) >= self.config.max_seq_len:
                raise ValueError(f"positions must lie in [0, max_seq_len={self.config.max_seq_len}), got "
                                 f"{int(low)}..{int(high)}.")
        return positions.to(self.rope_cos.device).long()

    def _checked_mask(self, attention_mask: torch.Tensor, idx: torch.Tensor, start_pos: int) -> torch.Tensor:
        if not isinstance(attention_mask, torch.Tensor) or attention_mask.is_floating_point():
            raise TypeError("attention_mask must be a bool or integer tensor (True or 1 = a real token), got "
                            f"{attention_mask.dtype if isinstance(attention_mask, torch.Tensor) else type(attention_mask).__name__}.")
        want = (idx.shape[0], start_pos + idx.shape[1])
        if tuple(attention_mask.shape) != want:
            raise ValueError(f"attention_mask must cover every position so far, (batch, cached + new) = {want}, got "
                             f"{tuple(attention_mask.shape)}; with a KV cache, append one column per decoded token.")
        return attention_mask.to(idx.device)


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Mean cross-entropy of predicting targets[b, t] from logits[b, t].

    targets must already be the inputs shifted left by one (get_batch does
    this); scoring a token against itself is the "unshifted labels" bug."""
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"next_token_loss: logits {tuple(logits.shape)} must be targets {tuple(targets.shape)} plus a vocab axis.")
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=ignore_index)
