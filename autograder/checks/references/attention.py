"""Reference attention, step by step, for every check that needs one: the
causal mask, repeating kv heads, and scaled dot-product attention written out
so the tracer can set the learner's values beside each step."""
from __future__ import annotations

import math

import torch


def ref_mask(q_len: int, kv_len: int) -> torch.Tensor:
    """Closed form: query i sits at absolute position kv_len - q_len + i and
    may see key j iff j <= that position."""
    i = torch.arange(q_len)[:, None] + (kv_len - q_len)
    j = torch.arange(kv_len)[None, :]
    return j <= i  # (q_len, kv_len)


def repeat_kv_steps(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    return x.repeat_interleave(n_rep, dim=1)   # head h of the result is kv head h // n_rep


def attention_steps(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention written out: scores, scale, mask, softmax over the keys, weighted values."""
    scores = q @ k.transpose(-2, -1)                              # (..., Tq, Tk)
    scores = scores / math.sqrt(q.shape[-1])
    allowed = causal_mask_steps(q.shape[-2], k.shape[-2]).to(q.device)
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v


# -- contracts: the regimes each exercise promises, and its step-by-step reference ---------------
def causal_mask_steps(q_len: int, kv_len: int | None = None) -> torch.Tensor:
    kv_len = q_len if kv_len is None else kv_len
    position = torch.arange(q_len)[:, None] + (kv_len - q_len)   # (q_len, 1): where each query sits
    key = torch.arange(kv_len)[None, :]                           # (1, kv_len)
    return key <= position
