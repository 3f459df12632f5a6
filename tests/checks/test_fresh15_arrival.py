"""What fresh15's arrival reading found (64 mistakes written without reading
the checks): two lines untrue of the code and mistakes left unnamed or
passed. Each test runs one of its mistakes through its notebook's check and
holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_square_taken_before_an_upcast_is_not_told_there_is_no_upcast():
    likely = _line(_message("fresh15", "02", "rms_norm", "keepdim=True).float() + eps"), "Likely bug:")
    assert "x² taken in float16" in likely and "no float32 upcast:" not in likely


def test_a_val_left_uint8_is_told_it_indexes_as_a_mask_not_that_bytes_overflow():
    likely = _line(_message("fresh15", "10", "bigram_nll", "train = train.long()"), "Likely bug:")
    assert "reads a uint8 index as a boolean mask" in likely and "overflow" not in likely


def test_an_evaluation_scored_against_its_inputs_is_named():
    likely = _line(_message("fresh15", "10", "evaluate", "nll_sum_and_count(model(x.to(dev)), x.to(dev))"),
                   "Likely bug:")
    assert "compares the logits with x, the inputs (labels not shifted)" in likely


def test_post_norm_in_the_attention_half_only_is_named():
    likely = _line(_message("fresh15", "05", "Transformer", "self.attn_norm(x + self.attn(x"), "Likely bug:")
    assert likely.startswith("Likely bug: post-norm in the attention half")


def test_a_position_table_counted_for_rope_is_named():
    likely = _line(_message("fresh15", "05", "param_counts", "config.max_seq_len) * d"), "Likely bug:")
    assert "a learned position table counted" in likely


def test_the_group_size_in_place_of_the_kv_heads_is_named_in_the_cache_bytes():
    likely = _line(_message("fresh15", "06", "kv_cache_bytes", "(config.n_heads // config.n_kv_heads)"),
                   "Likely bug:")
    assert "the group size n_heads // n_kv_heads in place of n_kv_heads" in likely


def test_keys_permuted_by_the_group_size_fail_on_a_second_grouping_with_candidates():
    # 4 heads over 2: the group size is 2 = n_kv_heads, so only the second grouping (6 over 2) tells them apart
    message = _message("fresh15", "04", "interleaved_to_half", "interleaved_to_half(wk, n_heads // n_kv_heads)")
    candidates = _line(message, "Candidates:")
    assert "fails with 6 over 2" in candidates and "Likely bug:" not in message
