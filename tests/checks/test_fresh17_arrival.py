"""What fresh17's arrival reading found (64 mistakes written without reading
the checks, 24 of them twins: two causes of one symptom): each test runs one
mistake through its notebook's check and holds the message to what the code
does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_values_rotated_in_place_of_the_queries_are_named_apart_from_in_place_of_the_keys():
    likely = _line(_message("fresh17", "04", "rotary_attention", "v = apply_rope(v, cos, sin, start_pos)"),
                   "Likely bug:")
    assert "instead of the queries" in likely and "instead of the keys" not in likely


def test_a_gelu_mlp_counted_for_swiglu_is_named_from_every_config():
    likely = _line(_message("fresh17", "05", "param_counts", '"mlp": L * 2 * d * 4 * d'), "Likely bug:")
    assert "a GELU MLP counted" in likely


def test_a_perplexity_taken_as_the_square_root_of_the_loss_is_measured_as_such():
    measured = _line(_message("fresh17", "10", "evaluate", '"perplexity": math.sqrt(loss)'), "Measured:")
    assert "your perplexity equals sqrt(loss)" in measured
