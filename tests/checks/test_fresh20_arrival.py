"""What fresh20's arrival reading found (65 mistakes written without reading
the checks: torch API confusions, code ported from other projects, loops and
schedules): none passed, 5 printed lines were untrue of the code, 4 named or
placed nothing. Each test runs one mistake through its notebook's check and
holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_queries_and_keys_exchanged_are_named_from_the_output():
    likely = _line(_message("fresh20", "03", "self_attention", "for w in (w_k, w_q, w_v)"), "Likely bug:")
    assert "query and key projections swapped" in likely


def test_queries_offset_twice_are_offered_with_keys_from_0_as_candidates_not_named_as_one():
    message = _message("fresh20", "04", "rotary_attention", "cos[start_pos:], sin[start_pos:], start_pos")
    said = _line(message, "Candidates:")
    assert "the queries' positions run start_pos ahead of the keys'" in said
    assert "the queries shifted by start_pos twice" in said and "the keys rotated from position 0" in said
    assert "Likely bug: keys rotated from position 0" not in message
    # the learner's slice of the table is a step of its own: no reference slice is set beside it
    assert "the reference's __getitem__" not in _line(message, "Where:")


def test_a_biased_final_norm_is_named_by_its_module_not_sent_to_nn_linear():
    likely = _line(_message("fresh20", "05", "Transformer", "nn.LayerNorm("), "Likely bug:")
    assert "`norm` is a LayerNorm" in likely and "RMSNorm" in likely and "bias=False" not in likely


def test_sorts_indices_read_as_its_values_are_placed_on_the_unpacking_line():
    where = _line(_message("fresh20", "08", "top_p_filter", "order, sorted_logits = "), "Where:")
    assert where.startswith("Where: line 4 ") and "its indices (int64): sort returns (values, indices)" in where


def test_a_greedy_argmax_over_the_batch_axis_is_named():
    likely = _line(_message("fresh20", "08", "sample_next", "argmax(dim=0)"), "Likely bug:")
    assert "the greedy argmax is taken over the batch axis" in likely


def test_smoothing_added_once_to_the_denominator_is_not_said_to_be_missing():
    message = _message("fresh20", "10", "bigram_nll", "keepdim=True) + alpha")
    assert "smoothing missing from the denominator" not in message
    assert "the denominator's smoothing is alpha once, not 256 * alpha" in _line(message, "Likely bug:")


def test_weight_matmuls_counted_forward_only_are_named_by_the_count():
    likely = _line(_message("fresh20", "09", "train_step_costs", "2 * "), "Likely bug:")
    assert "the weight matmuls counted for the forward pass only" in likely
