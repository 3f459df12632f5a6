"""Input checks shared by the model's entry points: fail early, name the fix."""
from __future__ import annotations

import numbers

import torch


def check_token_tensor(ids: torch.Tensor, name: str = "idx") -> None:
    """A tensor of integers (any integer dtype: uint8 corpora are fine); the
    values are not read, so this check costs nothing and never syncs a device."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}; wrap it with torch.tensor(...).")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids (torch.long), got dtype {ids.dtype}; convert with {name}.long().")


def check_token_ids(ids: torch.Tensor, vocab_size: int, name: str = "idx") -> None:
    """check_token_tensor, and every id inside [0, vocab_size)."""
    check_token_tensor(ids, name)
    if ids.numel() and not _all_within(ids, vocab_size):
        bad = ids[(ids < 0) | (ids >= vocab_size)]
        raise ValueError(
            f"{name} holds token id {int(bad[0])}, outside the vocabulary [0, {vocab_size}). "
            f"Encode text with the model's tokenizer, or raise ModelConfig.vocab_size."
        )


def assert_token_ids_in_graph(ids: torch.Tensor, vocab_size: int, name: str = "idx") -> None:
    """check_token_ids for code that torch.compile traces: the range test runs
    on the device as part of the graph (no graph break, no host sync), so an
    out-of-range id fails with this message instead of the compiler's raw
    indexing error. A traced assertion cannot say which id it was."""
    in_range = ((ids >= 0) & (ids < vocab_size)).all()
    torch._assert_async(in_range, f"{name} holds a token id outside the vocabulary [0, {vocab_size}) (found while "
                                  f"running compiled). Encode text with the model's tokenizer, or raise ModelConfig.vocab_size.")


def _all_within(ids: torch.Tensor, vocab_size: int) -> bool:
    if ids.numel() == 1:  # a decoding step: one read instead of a reduction
        return 0 <= int(ids.item()) < vocab_size
    low, high = ids.aminmax()  # one pass over the ids
    return int(low) >= 0 and int(high) < vocab_size


def check_float(x: torch.Tensor, name: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}.")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}; convert with {name}.float().")


def check_int(value, name: str, minimum: int = 0) -> int:
    """An integer >= minimum (numpy integers too; bool is refused, since
    True would silently mean 1) returned as a plain int."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r} ({type(value).__name__}).")
    return int(value)
