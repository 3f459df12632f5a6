"""ModelConfig: every size of the model in one frozen, validated dataclass."""
from __future__ import annotations

import math
from dataclasses import dataclass

# Llama rounds the SwiGLU hidden size up to a multiple of this, which keeps
# matrix shapes friendly to vectorised kernels.
D_FF_MULTIPLE = 32
ATTN_IMPLS = ("sdpa", "reference")


def default_d_ff(d_model: int, multiple: int = D_FF_MULTIPLE) -> int:
    """The 8/3 rule: a gated MLP with three matrices of size 8/3·d holds as
    many parameters as a plain MLP with two matrices of size 4·d."""
    return multiple * math.ceil(8 * d_model / 3 / multiple)


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 256          # byte-level tokenizer: one id per byte value
    d_model: int = 128             # width of the residual stream
    n_layers: int = 4              # number of transformer blocks
    n_heads: int = 4               # query heads
    n_kv_heads: int | None = None  # key/value heads: None = n_heads (MHA), 1 = MQA, between = GQA
    d_ff: int | None = None        # SwiGLU hidden size: None = 8/3·d_model rounded up
    max_seq_len: int = 256         # longest sequence (and KV cache) the model accepts
    rope_theta: float = 10000.0    # RoPE base: larger = slower-turning low frequencies
    norm_eps: float = 1e-6         # RMSNorm epsilon, inside the square root
    dropout: float = 0.0           # dropout on attention weights and residual branches (training only)
    tie_embeddings: bool = True    # output head shares the token embedding matrix
    attn_impl: str = "sdpa"        # "sdpa" (torch's fused kernel) or "reference" (causal_attention: explicit softmax)
    # Features per head: None = d_model // n_heads. Published models may set it apart (Gemma 7B: 256 with
    # d_model 3072 and 16 heads), so q/k/v are n_heads·head_dim wide and o_proj maps that back to d_model.
    head_dim: int | None = None

    def __post_init__(self) -> None:
        # Frozen dataclass: fill the derived defaults through object.__setattr__.
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        if self.d_ff is None and _is_positive_int(self.d_model):
            object.__setattr__(self, "d_ff", default_d_ff(self.d_model))
        self._validate()

    @property
    def n_rep(self) -> int:
        """How many query heads share one key/value head."""
        return self.n_heads // self.n_kv_heads

    def _validate(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "max_seq_len"):
            value = getattr(self, name)
            if not _is_positive_int(value):
                raise ValueError(f"ModelConfig.{name} must be a positive integer, got {value!r}.")
        if self.head_dim is None:
            if self.d_model % self.n_heads:
                raise ValueError(
                    f"ModelConfig.d_model={self.d_model} is not divisible by n_heads={self.n_heads}: "
                    f"without head_dim each head gets d_model // n_heads features. Pick n_heads among the "
                    f"divisors of d_model, or set head_dim."
                )
            object.__setattr__(self, "head_dim", self.d_model // self.n_heads)
        elif not _is_positive_int(self.head_dim):
            raise ValueError(f"ModelConfig.head_dim must be a positive integer or None (= d_model // n_heads), "
                             f"got {self.head_dim!r}.")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"ModelConfig.n_heads={self.n_heads} is not divisible by n_kv_heads={self.n_kv_heads}: "
                f"every key/value head must serve the same number of query heads. "
                f"Pick n_kv_heads among the divisors of n_heads."
            )
        if self.head_dim % 2:
            raise ValueError(
                f"ModelConfig.head_dim={self.head_dim} is odd, but RoPE rotates features in pairs. "
                f"Set an even head_dim (or, leaving it None, choose d_model and n_heads so that d_model // n_heads is even)."
            )
        if not self.rope_theta > 0:
            raise ValueError(f"ModelConfig.rope_theta must be > 0, got {self.rope_theta!r}.")
        if not self.norm_eps > 0:
            raise ValueError(f"ModelConfig.norm_eps must be > 0 (it keeps RMSNorm finite for all-zero inputs), got {self.norm_eps!r}.")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"ModelConfig.dropout is a probability in [0, 1), got {self.dropout!r}.")
        if self.attn_impl not in ATTN_IMPLS:
            raise ValueError(f"ModelConfig.attn_impl must be one of {ATTN_IMPLS}, got {self.attn_impl!r}.")


def _is_positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
