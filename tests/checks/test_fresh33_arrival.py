"""What fresh33's arrival reading found (61 mistakes written without reading
the checks: ported code, small effects, conventions, answers that meet each
other). Each test runs one mistake through its notebook's check and holds the
message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_finite_additive_mask_fails_where_a_future_key_scores_far_above():
    message = _message("fresh33", "03", "causal_attention", "* -10000.0  # BERT's additive mask")
    assert "outputs 0..3 ignore keys after 3 that score about 1e5 above the rest" in message
    likely = _line(message, "Likely bug:")
    assert "the masked scores hold a finite value, added or filled, which a large score outweighs" in likely


def test_padding_ids_written_in_are_placed_where_they_are_made():
    where = _line(_message("fresh33", "06", "generate_left_padded", "torch.full((B, T), -100"), "Where:")
    assert where.startswith("Where: line 7 of your generate_left_padded") and "and line 16" in where
    assert "`ids` is bound here with -100 written in" in where


def test_probabilities_handed_to_cross_entropy_are_named():
    likely = _line(_message("fresh33", "10", "nll_sum_and_count", "softmax"), "Likely bug:")
    assert "cross_entropy handed probabilities" in likely


def test_an_ignore_index_handed_down_is_measured_at_the_call():
    likely = _line(_message("fresh33", "10", "evaluate", "ignore_index=0"), "Likely bug:")
    assert "your evaluate calls nll_sum_and_count with ignore_index=0 (measured: its first call)" in likely


def test_a_lookup_that_returns_no_row_per_id_is_not_said_to_return_an_embedding():
    message = _message("fresh33", "01", "embed", "torch.take(weight, ids)")
    assert "returns an embedding for id" not in message
    assert "take gives shape (2, 5)" in _line(message, "Where:")
    assert "your result is weight.flatten()[ids], as torch.take(weight, ids) gives" in _line(message, "Likely bug:")


def test_logits_handed_on_as_probabilities_are_said_as_the_parameter_they_are():
    measured = _line(_message("fresh33", "08", "sample_next", "probs = logits  # multinomial takes the scores"), "Measured:")
    assert "holds the values of the parameter `logits` as handed in, unchanged" in measured
    assert "exp() of them are the probabilities" not in measured


def test_a_transposed_head_through_f_linear_is_told_that_f_linear_transposes():
    likely = _line(_message("fresh33", "01", "tied_logits", "F.linear(x, weight.T)"), "Likely bug:")
    assert "F.linear(x, w) computes x @ w.T itself, so it takes weight as it is" in likely
