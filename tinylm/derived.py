"""Weights derived from parameters, rebuilt only when a parameter changes.

The fast path folds norm gains into projection weights and concatenates the
q/k/v weights. With gradients on, that has to happen inside the autograd graph
on every call. Without them (generation, evaluation) the result changes only
when a parameter does, so it is kept: a decoding step then runs a few matmuls
instead of a dozen small weight copies first.
"""
from __future__ import annotations

from typing import Any, Callable

import torch


class DerivedWeights:
    """A small cache of values (tensors, or tuples of them) computed from tensors (the sources).

    An entry is reused while every source keeps its storage and version counter
    (bumped by every in-place update: optimizer steps, load_state_dict,
    `with torch.no_grad(): p.copy_(...)`); otherwise it is rebuilt. A move to
    another device or dtype gives new storage. Nothing is cached when a source
    requires grad and gradients are on: the derivation must then be part of
    each call's autograd graph."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[list, Any, bool]] = {}

    def get(self, name: str, build: Callable[[], Any], *sources: torch.Tensor) -> Any:
        grad = torch.is_grad_enabled()
        if grad and any(t.requires_grad for t in sources):
            return build()
        try:
            key = [(t.data_ptr(), t._version) for t in sources]
        except RuntimeError:  # an inference tensor among the sources: it has no version counter
            return build()
        entry = self._entries.get(name)
        # A value built under inference_mode is an inference tensor, which
        # autograd may not save: reuse it only while gradients are off.
        if entry is None or entry[0] != key or (entry[2] and grad):
            entry = (key, build(), torch.is_inference_mode_enabled())
            self._entries[name] = entry
        return entry[1]
