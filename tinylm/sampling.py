"""Turning logits into tokens: temperature, top-k, top-p, then sampling.

The order matters: every transform works on logits, and the draw comes last.
Sampling from the raw logits and filtering afterwards changes nothing.
"""
from __future__ import annotations

import numbers

import torch

from .kv_cache import KVCache
from .validation import check_float, check_int, check_token_ids


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """logits / T. T < 1 sharpens, T > 1 flattens. Dividing the logits is not
    the same as dividing the probabilities (that would change nothing after
    renormalising). T = 0 (greedy) is handled by sample_next, not here."""
    if not temperature > 0:
        raise ValueError(f"apply_temperature: temperature must be > 0, got {temperature!r}; use sample_next(..., temperature=0) for greedy decoding.")
    return logits / temperature


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits on the last axis, set the rest to -inf.
    Entries tied with the k-th largest are kept too."""
    k = check_int(k, "top_k_filter: k", minimum=1)
    if k >= logits.shape[-1]:
        return logits
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth_largest, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose
    probability sums to at least p, including the token that crosses p."""
    _check_top_p(p, "top_p_filter: p")
    if p == 1:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # probability of the strictly more likely tokens
    drop_sorted = mass_before >= p              # the crossing token has mass_before < p: kept
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """logits (B, V) of the last position -> next token ids (B,).

    temperature 0 is greedy (argmax); otherwise temperature, then top-k, then
    top-p, and only then one draw from the softmax."""
    check_float(logits, "logits")
    if logits.dim() != 2:
        raise ValueError(f"sample_next: logits must be (batch, vocab), got {tuple(logits.shape)}; take logits[:, -1, :] of the model output.")
    if isinstance(temperature, bool) or not temperature >= 0:
        raise ValueError(f"sample_next: temperature must be a number >= 0 (0 = greedy), got {temperature!r}.")
    # Checked even when greedy ignores them, so a typo fails on the first try, not when sampling is switched on.
    if top_k is not None:
        check_int(top_k, "sample_next: top_k", minimum=1)
    if top_p is not None:
        _check_top_p(top_p, "sample_next: top_p")
    if temperature == 0:
        _check_samplable(logits)  # argmax of a NaN row is an arbitrary token: fail as sampling does
        return logits.argmax(dim=-1)
    logits = apply_temperature(logits.float(), temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    _check_samplable(logits)
    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)  # (B,)


def _check_top_p(p, name: str) -> None:
    if not isinstance(p, numbers.Real) or isinstance(p, bool) or not 0 < p <= 1:
        raise ValueError(f"{name} must be a number in (0, 1], got {p!r}; 1 keeps every token, None turns the filter off.")


def _check_samplable(logits: torch.Tensor) -> None:
    """Every row (B, V) must define a distribution: no NaN, no +inf, and at
    least one finite logit (after the filters).

    A row's maximum tells all three at once (amax propagates NaN; it is +inf
    if any logit is, -inf only if every logit is): one reduction and one
    sync per step, where a decoded token pays for every operation. Only a
    bad row is looked at again, to say what is wrong with it."""
    if logits.shape[-1] and bool(logits.amax(dim=-1).isfinite().all()):
        return
    has_nan = logits.isnan().any(dim=-1)                     # (B,)
    has_pos_inf = (logits == float("inf")).any(dim=-1)
    all_masked = (logits == float("-inf")).all(dim=-1)
    row = int((has_nan | has_pos_inf | all_masked).nonzero()[0])
    if has_nan[row]:
        cause = "holds NaN: the model's output is not finite (check the weights and the input, e.g. for a diverged run)"
    elif has_pos_inf[row]:
        cause = "holds +inf, which softmax turns into NaN; clamp the logits or find where they overflow"
    else:
        cause = "has no finite logit (every logit is -inf): nothing is left to sample; a mask or filter removed every token"
    raise ValueError(f"sample_next: row {row} of logits {cause}.")


def generate(model, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None, use_cache: bool = True,
             stop_token: int | None = None, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Autoregressive decoding. prompt (B, T) or (T,) -> the prompt followed
    by up to max_new_tokens new tokens, same number of dims as the prompt.

    attention_mask (B, T), for prompts of different lengths padded on the
    left (True or 1 = a real token): each row is decoded as if it were alone,
    its positions counted from its first real token and its padding never
    attended to, at the prompt and at every later step.

    stop_token (e.g. a chat model's end-of-turn id) ends decoding once every
    row has produced it; the output keeps it, and a row that stopped earlier
    is filled with it, so all rows keep one length.

    Runs in eval mode (dropout off: a train-mode model samples from a noisy
    distribution) and restores the previous mode afterwards."""
    idx, unbatched, max_new_tokens = _checked_prompt(model, prompt, max_new_tokens, stop_token)
    mask = _checked_left_padding(attention_mask, idx)
    pick = lambda logits: sample_next(logits, temperature, top_k, top_p, generator)  # noqa: E731
    new = list(_in_eval_mode(model, _steps(model, idx, max_new_tokens, use_cache, pick, stop_token, mask)))
    idx = torch.cat([idx.to(next(model.parameters()).device)] + [t[:, None] for t in new], dim=1)  # (B, T + new)
    idx = idx.clone()  # an ordinary tensor again, usable with autograd (e.g. as training data)
    return idx[0] if unbatched else idx


def generate_stream(model, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                    top_k: int | None = None, top_p: float | None = None,
                    generator: torch.Generator | None = None, stop_token: int | None = None):
    """generate() for one prompt (T,), yielding each new token id (an int)
    as soon as it is decoded, stop_token included; for printing as you go."""
    if prompt.dim() != 1:
        raise ValueError(f"generate_stream: prompt must be one sequence (T,), got shape {tuple(prompt.shape)}.")
    idx, _, max_new_tokens = _checked_prompt(model, prompt, max_new_tokens, stop_token)
    pick = lambda logits: sample_next(logits, temperature, top_k, top_p, generator)  # noqa: E731
    for next_id in _in_eval_mode(model, _steps(model, idx, max_new_tokens, True, pick, stop_token)):
        yield int(next_id[0])


def _checked_prompt(model, prompt: torch.Tensor, max_new_tokens: int, stop_token) -> tuple[torch.Tensor, bool]:
    config = model.config
    check_token_ids(prompt, config.vocab_size, "prompt")
    max_new_tokens = check_int(max_new_tokens, "generate: max_new_tokens")
    if stop_token is not None and not (isinstance(stop_token, numbers.Integral) and not isinstance(stop_token, bool) and 0 <= stop_token < config.vocab_size):
        raise ValueError(f"generate: stop_token must be a token id in [0, {config.vocab_size}) or None, got {stop_token!r}.")
    unbatched = prompt.dim() == 1
    idx = prompt[None] if unbatched else prompt  # (B, T)
    if idx.dim() != 2 or idx.shape[1] == 0:
        raise ValueError(f"generate: prompt must be (T,) or (B, T) with T >= 1, got shape {tuple(prompt.shape)}.")
    if idx.shape[1] > config.max_seq_len:
        raise ValueError(
            f"generate: the prompt holds {idx.shape[1]} tokens, more than the model's max_seq_len={config.max_seq_len}; "
            f"shorten the prompt (keep its last tokens, e.g. prompt[..., -{config.max_seq_len // 2}:]) "
            f"to leave room for max_new_tokens."
        )
    total = idx.shape[1] + max_new_tokens
    if total > config.max_seq_len:
        raise ValueError(
            f"generate: prompt length {idx.shape[1]} + max_new_tokens {max_new_tokens} = {total} exceeds "
            f"max_seq_len={config.max_seq_len}; shorten the prompt or generate fewer tokens."
        )
    return idx, unbatched, max_new_tokens


def _checked_left_padding(attention_mask, idx: torch.Tensor) -> torch.Tensor | None:
    """The prompt's padding mask as bool (B, T), or None; every row must end
    with a real token (decoding continues each row from its last column)."""
    if attention_mask is None:
        return None
    mask = attention_mask[None] if attention_mask.dim() == 1 else attention_mask
    if not isinstance(mask, torch.Tensor) or mask.is_floating_point() or tuple(mask.shape) != tuple(idx.shape):
        raise ValueError(f"generate: attention_mask must be a bool or integer tensor shaped like the prompt, "
                         f"{tuple(idx.shape)}, got {getattr(mask, 'dtype', type(mask).__name__)} "
                         f"{tuple(getattr(mask, 'shape', ()))}.")
    mask = mask.bool()
    ends_padded = ~mask[:, -1]
    if bool(ends_padded.any()):
        row = int(ends_padded.nonzero()[0])
        raise ValueError(f"generate: row {row} of attention_mask ends with padding; pad prompts on the left, so that "
                         "every row's last column is a real token (decoding continues each row from there).")
    return mask


def _in_eval_mode(model, steps):
    """Run the decoding generator `steps` with the model in eval mode and
    under inference_mode, restoring the previous mode afterwards (also when
    the consumer stops early)."""
    was_training = model.training
    model.eval()
    try:
        while True:
            # inference_mode is no_grad without autograd's per-op bookkeeping,
            # which is most of the cost of a one-token decoding step.
            with torch.inference_mode():
                next_id = next(steps, None)
            if next_id is None:
                return
            yield next_id
    finally:
        model.train(was_training)


def _steps(model, idx: torch.Tensor, max_new_tokens: int, use_cache: bool, pick, stop_token=None, mask=None):
    """Yield the next ids (B,) one step at a time. mask (B, T): the prompt's
    left padding, or None; it grows by one real column per step, and each
    row's positions count its real tokens only."""
    weight = next(model.parameters())
    cache = KVCache(model.config, idx.shape[0], device=weight.device, dtype=_kv_dtype(weight)) if use_cache else None
    idx = idx.to(weight.device)
    step_input = idx  # prefill: the whole prompt in one pass
    stopped = torch.zeros(idx.shape[0], dtype=torch.bool, device=weight.device)
    if mask is not None:
        mask = mask.to(weight.device)
    for _ in range(max_new_tokens):
        padding = {}
        if mask is not None:
            positions = (mask.long().cumsum(-1) - 1).clamp(min=0)  # (B, T_total): 0 at each row's first real token
            n_in = step_input.shape[1] if use_cache else idx.shape[1]
            padding = {"positions": positions[:, -n_in:], "attention_mask": mask}
        logits = model(step_input if use_cache else idx, cache=cache, **padding)[:, -1, :]  # (B, V)
        next_id = pick(logits)                                                   # (B,)
        if stop_token is not None:
            next_id = next_id.masked_fill(stopped, stop_token)  # finished rows repeat the stop token
            stopped |= next_id == stop_token
        if not use_cache:  # with the cache only the new token goes in: no growing copy of the sequence
            idx = torch.cat((idx, next_id[:, None]), dim=1)                      # (B, T + 1)
        if mask is not None:
            mask = torch.cat((mask, mask.new_ones(mask.shape[0], 1)), dim=1)     # the new token is real
        step_input = next_id[:, None]  # decode: only the new token goes in
        yield next_id
        if stop_token is not None and bool(stopped.all()):
            return


def _kv_dtype(weight: torch.Tensor) -> torch.dtype:
    """The dtype the k/v projections produce: the weights' own, or, inside
    torch.autocast (which casts every linear layer's output), autocast's."""
    device_type = weight.device.type
    if weight.dtype.is_floating_point and torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return weight.dtype
