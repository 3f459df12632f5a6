"""Evaluation: mean negative log-likelihood, perplexity and bits per byte."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["EvalResult", "evaluate", "check_data"]


def check_data(data, name: str = "data", min_len: int = 2) -> torch.Tensor:
    """A 1-D integer tensor of token ids with at least `min_len` entries."""
    if not isinstance(data, torch.Tensor):
        raise TypeError(f"{name} must be a 1-D torch.Tensor of token ids (e.g. corpus.val), "
                        f"got {type(data).__name__}")
    if data.dim() != 1:
        raise ValueError(f"{name} must be 1-D (one long stream of tokens), got shape "
                         f"{tuple(data.shape)}; flatten it with {name}.flatten()")
    if data.dtype.is_floating_point or data.dtype == torch.bool or data.dtype.is_complex:
        raise TypeError(f"{name} must hold integer token ids, got dtype {data.dtype}")
    if len(data) < min_len:
        raise ValueError(f"{name} has {len(data)} tokens, need at least {min_len}; "
                         f"use a longer text or a shorter seq_len")
    return data


def _positive_int(value, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


@dataclass(frozen=True)
class EvalResult:
    """loss: mean NLL in nats per token over every predicted token;
    perplexity = exp(loss); bits_per_byte = loss / ln 2 / bytes per token."""

    loss: float
    perplexity: float
    bits_per_byte: float
    tokens: int

    def __str__(self) -> str:
        return (f"loss {self.loss:.4f} nats/token | perplexity {self.perplexity:.3f} | "
                f"{self.bits_per_byte:.4f} bits/byte | {self.tokens:,} tokens")


@torch.no_grad()
def evaluate(model, data: torch.Tensor, batch_size: int = 32, seq_len: int | None = None,
             bytes_per_token: float = 1.0) -> EvalResult:
    """Token-weighted mean NLL of `model` over the whole of `data`.

    `data` is cut into consecutive windows of `seq_len` inputs; each window
    predicts its next `seq_len` tokens, so every token but the first is scored
    exactly once (the last window may be shorter). The windows do not depend
    on `batch_size`, so neither does the result (up to float rounding).
    Each window starts without context: a model loses a little at the start
    of every window, less with a longer `seq_len` (default: max_seq_len).

    The model is put in eval mode (no dropout) and back in its previous mode.
    """
    data = check_data(data)
    seq_len = model.config.max_seq_len if seq_len is None else seq_len
    _positive_int(seq_len, "seq_len")
    _positive_int(batch_size, "batch_size")
    if seq_len > model.config.max_seq_len:
        raise ValueError(f"seq_len={seq_len} exceeds the model's max_seq_len="
                         f"{model.config.max_seq_len}; pass a smaller seq_len")
    if not bytes_per_token > 0:
        raise ValueError(f"bytes_per_token must be > 0 (1 for the byte tokenizer), got {bytes_per_token}")
    dev = next(model.parameters()).device
    data = data.long()
    n_pred = len(data) - 1  # targets are data[1:]
    n_full = n_pred // seq_len
    x_full = data[: n_full * seq_len].view(n_full, seq_len)  # (n_full, T) inputs
    y_full = data[1 : n_full * seq_len + 1].view(n_full, seq_len)  # (n_full, T) targets
    # (inputs, targets) batches: full windows, then the shorter remainder.
    batches = [(x_full[i : i + batch_size], y_full[i : i + batch_size])
               for i in range(0, n_full, batch_size)]
    if n_pred % seq_len:
        batches.append((data[n_full * seq_len : -1][None], data[n_full * seq_len + 1 :][None]))

    was_training = model.training
    model.eval()
    try:
        total = torch.zeros((), dtype=torch.float64, device=dev)
        for x, y in batches:
            logits = model(x.to(dev))  # (b, T, V)
            nll = F.cross_entropy(logits.flatten(0, 1).float(), y.to(dev).flatten(), reduction="sum")
            total += nll.double()  # sum in float64: no drift over millions of tokens
    finally:
        model.train(was_training)
    loss = total.item() / n_pred
    return EvalResult(loss=loss, perplexity=math.exp(loss),
                      bits_per_byte=loss / math.log(2) / bytes_per_token, tokens=n_pred)
