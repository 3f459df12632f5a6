"""Lines found untrue, or true but saying nothing, when the fresh13 and
fresh14 sets' messages were read against the code on arrival (and a row
that failed one of fresh14's SAME edits): each test runs one mistake
through its notebook's check and holds the line to what the code does."""
from __future__ import annotations

import torch

from .test_printed_lines_true import _line, _message


def test_weights_transposed_before_the_values_are_not_told_to_take_the_softmax_over_the_keys():
    # the softmax is over the keys; its result is transposed before the product with v
    message = _message("fresh13", "03", "causal_attention", "return weights.transpose(-2, -1) @ v")
    likely = _line(message, "Likely bug:")
    assert "transposed before the product with v" in likely
    assert "softmax over the last axis" not in likely and "softmax(dim=-1)" not in likely


def test_a_softmax_over_the_queries_is_still_named_as_one():
    message = _message("default", "03", "causal_attention", "scores.softmax(dim=-2)")
    assert "dim=-2" in _line(message, "Likely bug:")


def test_a_gain_of_one_plus_weight_is_named_and_not_read_as_a_wrong_divisor_or_eps():
    # the normalisation is right; the gain multiplies by (1 + weight)
    message = _message("fresh13", "02", "rms_norm", "return (1 + weight) * (x32 * inv_rms).to(x.dtype)")
    assert "(1 + weight)" in _line(message, "Likely bug:")
    assert "divides x by" not in message and "effective eps" not in message


def test_rows_said_mixed_name_the_case_they_were_measured_on():
    # the three rows alone are right on the first case only; other cases differ row by row
    message = _message("fresh13", "08", "top_p_filter", "logits.sort(dim=0, descending=True)")
    assert "measured on p=0.5, logits of shape (3, 11): each of the 3 rows" in _line(message, "Likely bug:")


def test_a_measurement_that_equals_its_expectation_says_so():
    message = _message("fresh13", "04", "rope_cache", "return angles.cos().bfloat16(), angles.sin().bfloat16()")
    fitted = [line for line in _line(message, "Measured:").splitlines() if "fitted from your tables" in line]
    assert fitted and all("as expected" in line and "; expected" not in line for line in fitted)
    message = _message("fresh13", "07", "gqa_attention", "is_causal=True, scale=1.0)")
    assert "reads kv head h // n_rep, [0, 0, 0, 1, 1, 1], as expected" in _line(message, "Measured:")


def test_keys_repeated_the_wrong_number_of_times_are_not_said_to_be_unrepeated():
    # n_rep = n_kv_heads = 2: the keys are repeated, into 4 heads against 6 query heads
    message = _message("fresh13", "07", "gqa_attention", "n_rep = k.shape[1]")
    measured = _line(message, "Measured:")
    assert "6 heads met 4" in measured and "are not repeated" not in measured


# fresh14's arrival reading


def test_a_residual_added_to_the_normalised_copy_is_a_value_in_another_place_not_another_order():
    # the reference makes the normalised x before the add too; nothing runs in another order
    message = _message("fresh14", "05", "pre_norm_block", "x = attn_norm(x) + attn(attn_norm(x))")
    where = _line(message, "Where:")
    assert "a value is used in another's place" in where and "another order" not in where


def test_a_cache_asked_for_a_layer_it_lacks_is_not_explained_by_the_mask():
    # the blocks numbered from 1: the cache raises IndexError for the last block's layer; no size is involved
    message = _message("fresh14", "05", "Transformer", "enumerate(self.blocks, start=1)")
    assert "it fails only with a cache" in _line(message, "Measured:")
    assert "fewer queries than keys" not in message and "Likely bug:" not in message


def test_an_einsum_written_for_the_docstrings_three_axes_passes_tied_logits():
    from autograder.checks import check_tied_logits
    check_tied_logits(lambda x, w: torch.einsum("btd,vd->btv", x, w))  # a failing check raises CheckFailed


def test_attention_counted_without_its_backward_is_named_not_only_measured():
    message = _message("fresh14", "09", "train_step_costs", "+ attention_matmuls")
    assert "the attention matmuls counted for the forward pass only" in _line(message, "Likely bug:")


def test_batches_weighted_by_their_rows_are_named():
    message = _message("fresh14", "10", "evaluate", "total + s / n * len(y), count + len(y)")
    assert "weighted by its number of rows or of target positions (every row here holds 7, so the two weigh " \
        "alike), not of scored tokens" in _line(message, "Likely bug:")
