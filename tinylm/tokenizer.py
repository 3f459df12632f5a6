"""Byte-level tokenizer: the 256 byte values are the vocabulary."""
from __future__ import annotations

import torch


class ByteTokenizer:
    """UTF-8 bytes in, UTF-8 bytes out. Every string round-trips exactly and
    no vocabulary file is needed; the price is longer sequences than a BPE."""

    vocab_size = 256

    def encode(self, text: str) -> torch.Tensor:
        if not isinstance(text, str):
            raise TypeError(f"ByteTokenizer.encode(text) takes a str, got {type(text).__name__}.")
        return torch.tensor(list(text.encode("utf-8")), dtype=torch.long)  # (T,)

    def decode(self, ids) -> str:
        """Accepts a 1-D tensor or a list of ints. A model can emit byte
        sequences that are not valid UTF-8; those bytes decode to U+FFFD."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(f"ByteTokenizer.decode(ids) takes a 1-D sequence, got shape {tuple(ids.shape)}; decode one row at a time.")
            ids = ids.tolist()
        bad = [i for i in ids if not 0 <= int(i) < 256]
        if bad:
            raise ValueError(f"ByteTokenizer.decode: ids must lie in [0, 256), got {bad[:5]}.")
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")
