"""What fresh35's arrival measurement and reading found (69 mistakes written without reading the checks: two slips at
once, torch API semantics, nn.Module plumbing, off-by-one boundaries, public threads). Each test runs one mistake
through its notebook's check and holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_flipped_rotate_half_that_apply_rope_makes_up_for_fails_its_own_row_with_both_fixes():
    message = _message("fresh35", "04", "apply_rope", "return x * cos - rotate_half(x) * sin")
    assert "failed 1 of" in message and "rotate_half on its own: (x1, x2) -> (-x2, x1)" in message
    measured = _line(message, "Measured:")
    assert "run again with a rotate_half returning (-x2, x1) in its place, it turns each pair by -angle" in measured
    assert "your rotate_half returns (x2, -x1)" in _line(message, "Likely bug:")


def test_a_pair_from_min_with_a_dim_is_said_as_values_and_indices_and_placed_where_it_is_bound():
    message = _message("fresh35", "08", "top_k_filter", ".values.min(dim=-1, keepdim=True)")
    assert "`kth` is the pair (values, indices) that torch's min returns" in _line(message, "Measured:")
    assert "line 5 of your top_k_filter" in _line(message, "Where:")
