"""KV cache: keys and values of past positions, kept so each decoding step
only computes the new token."""
from __future__ import annotations

import torch

from .config import ModelConfig


class KVCache:
    """Preallocated storage, per layer (B, n_kv_heads, max_seq_len, head_dim).

    Only the kv heads are stored: with GQA the repetition to query heads
    happens inside attention, so the cache is n_heads / n_kv_heads times
    smaller than an MHA cache. New entries go along the sequence axis (2).

    Usage: the model calls update(layer, k, v) in each layer, then advance(T)
    once after the forward pass, so every layer of one step writes the same
    slots."""

    def __init__(self, config: ModelConfig, batch_size: int, device=None, dtype: torch.dtype = torch.float32):
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"KVCache: batch_size must be a positive integer, got {batch_size!r}.")
        shape = (config.n_layers, batch_size, config.n_kv_heads, config.max_seq_len, config.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0  # positions filled so far, identical across layers

    # update() writes through one view per layer, taken when k or v is set:
    # a decoding step then indexes a tuple instead of slicing the 5-D tensor
    # 2·n_layers times, and under torch.compile each layer's write stays an
    # in-place write to that view (written through self.k[layer] inside a
    # compiled step, the whole cache was copied once per layer).
    @property
    def k(self) -> torch.Tensor:
        return self._k

    @k.setter
    def k(self, value: torch.Tensor) -> None:
        self._k, self._k_layers = value, _layer_views(value)

    @property
    def v(self) -> torch.Tensor:
        return self._v

    @v.setter
    def v(self, value: torch.Tensor) -> None:
        self._v, self._v_layers = value, _layer_views(value)

    @property
    def batch_size(self) -> int:
        return self.k.shape[1]

    @property
    def max_seq_len(self) -> int:
        return self.k.shape[3]

    def reset(self) -> None:
        """Forget every position; call before a new prompt. Stale entries
        need no zeroing: reads never go past self.length."""
        self.length = 0

    def check_room(self, n_new: int) -> None:
        if self.length + n_new > self.max_seq_len:
            raise ValueError(
                f"KVCache is full: it holds {self.length} of max_seq_len={self.max_seq_len} positions and cannot "
                f"take {n_new} more. Call cache.reset() for a new prompt, or generate fewer tokens."
            )

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (B, n_kv, T_new, hd) at positions length .. length+T_new-1
        of `layer`; return every key and value so far, (B, n_kv, length+T_new, hd)."""
        B, n_kv, n_new, hd = k.shape
        if B != self.batch_size:
            raise ValueError(
                f"KVCache was built for batch_size={self.batch_size} but got a batch of {B}. "
                f"Build a new KVCache(config, batch_size={B})."
            )
        if (n_kv, hd) != (self.k.shape[2], self.k.shape[4]):
            raise ValueError(
                f"KVCache holds {self.k.shape[2]} kv heads of size {self.k.shape[4]}, got k of shape {tuple(k.shape)} "
                f"(expected (B, n_kv_heads, T, head_dim)); store keys before repeating them to the query heads."
            )
        if k.dtype != self.k.dtype:
            raise TypeError(f"KVCache stores {self.k.dtype} but got k of dtype {k.dtype}; build the cache with dtype={k.dtype} "
                            f"(under torch.autocast that is torch.get_autocast_dtype(device_type)).")
        self.check_room(n_new)
        end = self.length + n_new
        k_layer, v_layer = self._k_layers[layer], self._v_layers[layer]  # (B, n_kv, max_seq_len, hd) views
        k_layer.narrow(2, self.length, n_new).copy_(k)  # sequence axis: one slot per position
        v_layer.narrow(2, self.length, n_new).copy_(v)
        return k_layer.narrow(2, 0, end), v_layer.narrow(2, 0, end)

    def advance(self, n_new: int) -> None:
        self.check_room(n_new)
        self.length += n_new

    def nbytes(self) -> int:
        """2 (K and V) · n_layers · B · n_kv_heads · max_seq_len · head_dim · bytes per element."""
        return self.k.nbytes + self.v.nbytes


def _layer_views(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """t[0], t[1], ...: one view per layer. Not t.unbind(0): autograd
    refuses in-place writes to the views of a multi-view operation."""
    return tuple(t[i] for i in range(t.shape[0]))
