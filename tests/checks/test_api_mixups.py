"""torch API mix-ups and names mixed up on a first try, each run through its
notebook's check: the message names what the code computes, measured by the
wrong code's whole output matching what that mix-up gives."""
from __future__ import annotations

from benchmarks import bench_diagnostics
from benchmarks.mutations.unseen import Unseen


def _message(notebook: str, cell: str, old: str, new: str) -> str:
    outcome = bench_diagnostics.run_mutation(notebook, Unseen(cell, old, new, (), "a torch API mix-up"),
                                             bench_diagnostics.notebook_cells(notebook))
    assert outcome.message, "the check passed the mistake"
    return outcome.message


def test_the_maxima_taken_for_their_positions_in_greedy_sampling_are_named():
    message = _message("08", "sample_next", "return logits.argmax(dim=-1)", "return logits.max(dim=-1)[0]")
    assert "the largest logits themselves, not their positions" in message


def test_attention_left_unscaled_through_sdpas_scale_argument_is_named():
    message = _message("06", "attention_step", "attn_mask=mask)", "attn_mask=mask, scale=1.0)")
    assert "the scores not scaled by 1/sqrt(head_dim)" in message


def test_the_new_keys_appended_to_the_value_cache_are_named():
    message = _message("06", "attention_step", "cache_update(past_k, past_v, k, v)", "cache_update(past_k, past_v, k, k)")
    assert "the new keys, rotated, appended to the value cache" in message
