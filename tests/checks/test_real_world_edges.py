"""Notebook 08's edges that real implementations shipped wrong: top-k past
the vocabulary, top-p's one token per row, and decoding a left-padded batch.
A cause is printed as certain only where the check confirmed it on the
learner's own function; these tests give it answers where the obvious guess
is not the whole story."""
from __future__ import annotations

import pytest
import torch

from autograder import checks
from ..helpers import left_padded


def _failure(check, fn, **kwargs) -> str:
    with pytest.raises(checks.CheckFailed) as err:
        check(fn, **kwargs)
    return str(err.value)


def decode(model, prompts, max_new_tokens, kv, pad_id=0, *, cache=True, mask_steps=True, last=-1,
           positions_from=None):
    """A left-padded greedy decoder with switches for its mistakes."""
    ids, mask, row_positions = left_padded(prompts, pad_id)
    B, T = ids.shape
    positions = row_positions if positions_from is None else positions_from(B, T)
    kv.reset()
    seq, new = ids, []
    with torch.no_grad():
        for step in range(max_new_tokens):
            given_mask = mask if (mask_steps or step == 0) else None
            if cache:
                logits = model(ids, cache=kv, positions=positions, attention_mask=given_mask)[:, last]
            else:
                full = torch.cat((row_positions, row_positions[:, -1:] + torch.arange(1, step + 1)), 1)
                logits = model(seq, positions=full, attention_mask=mask)[:, last]
            next_id = logits.argmax(-1)
            new.append(next_id)
            seq = torch.cat((seq, next_id[:, None]), 1)
            ids, positions = next_id[:, None], positions[:, -1:] + 1
            mask = torch.cat((mask, mask.new_ones(B, 1)), 1)
    return torch.stack(new, 1)


def test_a_right_decoder_passes_with_and_without_the_cache(capsys):
    checks.check_generate_left_padded(decode)
    checks.check_generate_left_padded(lambda m, p, n, c, pad_id=0: decode(m, p, n, c, pad_id, cache=False))
    checks.check_generate_left_padded(decode, seed=21, lengths=(6, 2, 9, 4), max_new_tokens=8, vocab=31, n_kv_heads=3)
    assert capsys.readouterr().out.count("PASS generate_left_padded") == 3


def test_mask_dropped_after_the_prompt_is_named_after_the_rerun():
    said = _failure(checks.check_generate_left_padded,
                    lambda m, p, n, c, pad_id=0: decode(m, p, n, c, pad_id, mask_steps=False))
    assert "Likely bug: mask not carried into the cached steps" in said, said
    assert "with only the attention mask your function hands the model replaced by the right ones" in said


def test_no_cause_is_certain_when_the_rerun_does_not_restore_the_reference():
    # Two mistakes: no mask at the decoding steps, and the next token read from the first position. Replacing the
    # mask alone cannot give the reference, so the mask is said as a measured fact, not as the cause.
    said = _failure(checks.check_generate_left_padded,
                    lambda m, p, n, c, pad_id=0: decode(m, p, n, c, pad_id, mask_steps=False, last=0))
    assert "Likely bug" not in said, said
    assert "Measured: the prompt's forward pass gets an attention_mask, decoding step 1" in said
    assert "Candidates: " in said and "candidates: " in said


def test_positions_shifted_by_the_padding_everywhere_fail_the_positions_row_only():
    said = _failure(checks.check_generate_left_padded,
                    lambda m, p, n, c, pad_id=0: decode(m, p, n, c, pad_id,
                                                        positions_from=lambda B, T: torch.arange(T).expand(B, T)))
    assert "failed 1 of" in said and "positions handed to the model" in said, said
    assert "Likely bug: positions counted from the padded start" in said
    assert "your tokens still equal decoding each prompt alone here" in said


def test_top_k_past_the_vocabulary_is_named_only_when_k_equal_to_it_works():
    def raises_past(logits, k):  # right for k <= V, raises past it
        return logits.masked_fill(logits < logits.topk(k, dim=-1).values[..., -1:], float("-inf"))
    assert "Likely bug: top-k larger than the vocabulary raises" in _failure(checks.check_top_k_filter, raises_past)

    def loses_one_at_the_whole_vocabulary(logits, k):  # also wrong at k = V: the measurement says so, no cause
        out = raises_past(logits, k)
        return out.masked_fill(logits == logits.min(-1, keepdim=True).values, float("-inf")) if k == logits.shape[-1] else out
    said = _failure(checks.check_top_k_filter, loses_one_at_the_whole_vocabulary)
    assert "top-k larger than the vocabulary raises" not in said, said
    assert "Measured: your filter raises for k=15 on 11 tokens, and with k=11 it does not return the logits whole" in said


def _top_p(logits, p, first_row_only):
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    drop = sorted_logits.softmax(-1).cumsum(-1) > p
    if first_row_only:  # the crossing token kept by shifting; 'keep the top token' reaches the first row only
        drop[..., 1:] = drop[..., :-1].clone()
        drop.view(-1, drop.shape[-1])[0, 0] = False
    else:               # the crossing token dropped, the first row's top token kept
        drop.view(-1, drop.shape[-1])[0, 0] = False
    return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))


def test_top_p_rows_right_alone_and_wrong_in_the_batch_are_named_as_such():
    said = _failure(checks.check_top_p_filter, lambda x, p: _top_p(x, p, first_row_only=True))
    assert "Likely bug: rows are not filtered independently" in said, said
    assert "drops the crossing token" not in said  # each row alone keeps it


def test_top_p_empty_rows_and_the_dropped_crossing_token_are_measured():
    # the filter is not the crossing-token variant everywhere (its first row keeps its top token), so the rows it
    # gets wrong are measured, each row's rule said as a fact, not named as one cause of the whole filter
    said = _failure(checks.check_top_p_filter, lambda x, p: _top_p(x, p, first_row_only=False))
    assert "your filter keeps the most likely tokens up to, not including, the one whose probability takes the " \
           "running sum past p" in said, said
    assert "keep no token at all" in said
    assert "rows are not filtered independently" not in said
