"""What fresh26's arrival found (62 mistakes written without reading the
checks: inputs and entry states outside the notebook's own examples, right
calls given wrong arguments, routes of the learner's own, public bugs). Each
test runs one mistake through its notebook's check and holds the message to
what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_one_uniform_for_the_whole_batch_is_not_called_argmax():
    # every row of a call got one token, the most likely one here; other generators draw other tokens
    likely = _line(_message("fresh26", "08", "sample_next", "u = torch.rand(1, generator=generator)"), "Likely bug:")
    assert "no randomness" not in likely
    assert likely.count("Likely bug:") == 1 and "one draw shared by the whole batch" in likely
    assert "generators of 6 other seeds" in likely


def test_q_and_k_converted_together_and_cut_in_halves_are_measured_as_one_split():
    likely = _line(_message("fresh26", "04", "interleaved_to_half", 'both.chunk(2)'), "Likely bug:")
    assert "q_proj and k_proj are split at row 24, not 32" in likely and "half of their 48 rows" in likely
    assert "a loop that runs" not in likely


def test_a_block_that_never_hands_on_the_cache_is_measured_as_uncached():
    likely = _line(_message("fresh26", "05", "Transformer", "cos, sin, layer_idx=layer_idx)"), "Likely bug:")
    assert "a cached step gives the new tokens' output without the cache" in likely
    assert "a block hands it on to its attention" in likely


def test_a_decode_count_multiplied_by_the_layers_again_is_named_by_its_ratio():
    likely = _line(_message("fresh26", "07", "decode_bytes_per_token", "* size * config.n_layers"), "Likely bug:")
    assert "your count is n_layers times the bytes of every weight (measured in each case)" in likely


def test_a_maximum_over_the_batch_is_told_by_rows_shifted_to_one_maximum():
    message = _message("fresh26", "08", "sample_next", "(logits - logits.max()).exp()")
    assert "with every row shifted to share one maximum" in _line(message, "Measured:")


def test_an_axis_counted_from_the_front_is_not_called_rows_mixed():
    # each row is right without the batch axis and wrong as a batch of one: the rank, not the other rows
    message = _message("fresh26", "02", "rms_norm", "mean(dim=2, keepdim=True)")
    assert "the rows of a batch are mixed" not in message
    assert "an axis given by its position from the front" in _line(message, "Candidates:")


def test_a_swap_whose_sign_sits_on_the_table_is_not_the_place_of_a_missing_cache():
    # tinylm's rotation puts rotate_half's sign on the sin table: its cat is a right route, not the wrong value
    message = _message("fresh26", "05", "Transformer", "cos, sin, layer_idx=layer_idx)")
    assert "cat gives" not in message
