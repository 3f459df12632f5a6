"""Where lines re-read as true but loose: a step, a cast or a layout said to
be missing "between these lines" or on the way to "the later line" where
the value and the call that reads it sit on one line. Each test runs one
mistake through its notebook's check and holds the Where line to the code."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_cast_missing_inside_one_line_is_said_to_be_missing_on_that_line():
    # `return weight * (x32 * inv_rms)`: the product and the gain's mul are both on line 6
    where = _line(_message("default", "02", "rms_norm", "(x32 * inv_rms)"), "Where:")
    assert "reaches the later line" not in where and " and line " not in where
    assert "a cast is missing on this line or casts to another dtype" in where and "float16" in where


def test_a_step_missing_inside_one_line_names_no_second_line():
    # the minus before arange is dropped; the division that reads the arange is on the same line 4
    where = _line(_message("default", "04", "rope_cache", "-torch.arange(0, head_dim, 2, dtype=torch.float32)"),
                  "Where:")
    assert "between these lines" not in where and "a later line" not in where
    assert "a step the reference takes on this line is not on it" in where and "div" in where


def test_a_layout_wrong_inside_one_line_does_not_speak_of_a_later_line():
    # counts.sum(dim=1) without keepdim: the totals are divided on the same line 6
    where = _line(_message("causes", "10", "bigram_nll", "counts.sum(dim=1)"), "Where:")
    assert "the later line" not in where and "reaches line 6" not in where
    assert "a later step of this same line with its axes split or ordered differently" in where


def test_an_argument_read_in_another_s_place_is_not_called_a_value_the_line_makes():
    # `return weights @ k`: k is causal_attention's argument; line 8 reads it where the reference reads v
    where = _line(_message("default", "03", "causal_attention", "return weights @ k"), "Where:")
    assert "uses the value line 8 makes" not in where and "the value made here" not in where
    assert "line 8's matmul reads an argument of your function where the reference's matmul reads another value" \
        in where


def test_a_value_is_set_beside_no_reference_value_it_shares_no_input_with():
    # model(idx[:, -1:]): the slice of the sequence has no counterpart in the reference, whose only slice of
    # this kind is next_id[:, None] (the new token): the two read nothing in common
    where = _line(_message("default", "08", "generate", "model(idx[:, -1:])"), "Where:")
    assert "[:, None]" not in where and "the reference's __getitem__" not in where
    assert "the first line whose value the reference never computes (yours: __getitem__ gives shape (2, 1)" in where


def test_a_module_s_own_initialisation_is_no_line_whose_value_the_reference_never_computes():
    # nn.LayerNorm(...)(x) built in the function: its gain, filled with ones in torch's constructor, depends on
    # none of the function's inputs; it is no step of the computation to set beside the reference's
    message = _message("fresh8", "02", "layer_norm", "nn.LayerNorm(x.shape[-1], eps=eps)(x)")
    assert "fill_" not in message
