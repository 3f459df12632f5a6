"""Token embedding and the tied output head."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .validation import check_token_ids


def embed(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Row lookup: ids (B, T) -> (B, T, d_model). Equal to
    one_hot(ids, V).float() @ weight, without building the one-hot matrix."""
    check_token_ids(ids, weight.shape[0], "ids")
    return F.embedding(ids.long(), weight)  # weight[ids], with a cheaper backward; any integer dtype


def tied_logits(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Score every vocabulary entry by its dot product with the hidden state:
    x (B, T, d_model) @ weight.T (d_model, V) -> (B, T, V). `weight` is the
    embedding matrix [V, d_model] itself, so the head costs no parameters."""
    return x @ weight.T
