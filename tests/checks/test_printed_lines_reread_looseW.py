"""Where lines read again (loose: true as measured, but naming an untouched line): each test runs one
mistake through its notebook's check and holds the Where line to the line the edit is on."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_position_offset_by_one_on_its_own_line_does_not_name_the_line_that_reads_the_cache_length():
    # `start = past_k.shape[2]` is right; the + 1 that moves the positions is on the apply_rope line
    message = _message("default", "06", "attention_step", "start_pos=start + 1")
    where = _line(message, "Where:")
    assert "line 11" in where and "start_pos=start + 1" in where
    assert "past_k.shape[2]" not in where and "read on the other line" not in where
    assert "other bounds" in where  # the measured fact stays: the same length, other bounds


def test_an_off_by_one_slice_bound_does_not_name_the_line_that_clamps_k():
    # `k = min(k, logits.shape[-1])` is right; the bound k:k + 1 is written on the slicing line
    message = _message("default", "08", "top_k_filter", "k:k + 1")
    where = _line(message, "Where:")
    assert "line 5" in where and "k:k + 1" in where
    assert "min(k" not in where and "read on the other line" not in where
    assert "[..., 11:12]" in where and "[..., 10:11]" in where
