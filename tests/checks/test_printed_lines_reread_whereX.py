"""Where lines for a call that raises on a later line than the edit: the
reread found "it raises here" on an untouched line where the value the
raising call reads was bound on an earlier, edited line. Each test runs one
mistake through its notebook's check and holds the Where line to the line
that bound that value, with a fact about the value that the code makes."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_size_unpacked_the_wrong_way_round_is_named_on_its_binding_line():
    # the check's w is (n_heads · head_dim, d_in) = (3 · 8, 10): `d_in, rows = w.shape` binds d_in = 24, and the
    # reshape on the next-but-one line passes it as its last size, which the error prints
    message = _message("fresh16", "04", "interleaved_to_half", "d_in, rows = w.shape")
    where = _line(message, "Where:")
    assert where.startswith("Where: line 4 of your interleaved_to_half, `d_in, rows = w.shape` and line 6")
    assert "it raises here" not in where
    assert "`d_in` = 24 is bound here from w.shape[0], where the input's d_in is 10" in where


def test_nan_probabilities_are_named_where_they_are_made_not_only_where_multinomial_raises():
    # a softmax over the batch axis of filtered logits (-inf in whole columns) makes nan; multinomial reads them
    message = _message("fresh16", "08", "sample_next", "probs = logits.softmax(dim=0)")
    where = _line(message, "Where:")
    assert "`probs = logits.softmax(dim=0)" in where.split(" and line ")[0]
    assert "`probs` is bound here" in where and " nan among its " in where
    assert "the `logits` it reads holds no nan and no +inf" in where
    assert "it raises here" not in where


def test_a_float32_rotation_met_by_float64_values_names_the_two_rotating_lines():
    # q and k are rotated after .float() (float32); v, untouched, stays float64 in the float64 row
    message = _message("fresh6", "04", "rotary_attention", "q = apply_rope(q.float(), cos, sin, start_pos)")
    where = _line(message, "Where:")
    assert where.startswith("Where: line 4 of your rotary_attention, `q = apply_rope(q.float()")
    assert "and line 5, `k = apply_rope(k.float()" in where
    assert "`q` (line 4), `k` (line 5) are bound to float32 tensors" in where and "`v`" in where and "float64" in where
    assert "it raises here" not in where


def test_a_right_size_passed_to_a_reshape_that_raises_does_not_move_the_where_to_its_binding():
    # `hd = d_in // n_heads` is the wrong line; d_in = w.shape[1] = 10 on line 4 is the input's d_in, right
    message = _message("fresh12", "04", "interleaved_to_half", "hd = d_in // n_heads")
    where = _line(message, "Where:")
    assert "rows, d_in = w.shape" not in where


def test_a_slice_stop_written_wrong_does_not_blame_the_line_that_reads_the_length_right():
    # cos[start_pos:T] with T = x.shape[-2] = 5 (the reference's length too): the wrong stop is written on line 13
    message = _message("default", "04", "apply_rope", "cos = cos[start_pos:T]")
    where = _line(message, "Where:")
    assert where.startswith("Where: line 13 of your apply_rope, `cos = cos[start_pos:T]")
    assert "T = x.shape[-2]" not in where and "they are read on the other line" not in where
    assert "your slice [5:5]" in where and "the reference's [5:10]" in where


def test_a_call_of_two_results_is_shown_by_the_result_the_line_goes_on_to_read():
    # topk(...)[1] takes the indices: the Where shows topk's second result (int64 positions in 0..10), not its values
    message = _message("fresh4", "08", "top_k_filter", "kth = logits.topk(k, dim=-1)[1][..., -1:]")
    where = _line(message, "Where:")
    assert "topk over axis -1 (size 11) gives, as its second result, shape (3, 3), int64" in where
    assert "float32" not in where


def test_a_slice_of_the_right_length_inside_a_called_model_is_not_said_to_be_given_other_sizes():
    # `cache = cache.reset()` binds None: the model starts its positions at 0, a slice [0:1] where the
    # reference's is [5:6], the same length; the model call on line 8 reads `cache`, bound on line 4
    message = _message("fresh5", "06", "generate_greedy", "cache = cache.reset()")
    where = _line(message, "Where:")
    assert "the sizes this call is given differ" not in where
    assert "has the reference's length, not its bounds; the call reads a name bound on the other line" in where
    assert "and line 4, `cache = cache.reset()" in where


def test_positions_out_of_range_are_named_where_the_loop_made_them():
    # the loop's own rebinding of positions (after the model call, in text) made the values the call raises on;
    # the error prints their smallest and largest, 13..17
    message = _message("fresh16", "06", "generate_left_padded", "positions[:, -1:] + ids.shape[1]")
    where = _line(message, "Where:")
    assert "positions[:, -1:] + ids.shape[1]" in where.split(" and line ")[0]
    assert "`positions` is bound here on the loop's previous pass" in where
    assert "it holds values 13 to 17" in where and "it raises here" not in where


def test_an_index_made_from_a_tensor_an_earlier_line_makes_is_not_placed_on_its_binding():
    # the window's starts (line 4) run one too far; idx = starts + arange on line 5 is right, and reads starts,
    # so nothing shows that line 5 made the out-of-range index: the Where stays on the raise
    message = _message("default", "09", "get_batch", "torch.randint(len(data) - seq_len + 1,")
    where = _line(message, "Where:")
    assert where.startswith("Where: line 6 of your get_batch") and "it raises here" in where
    assert "idx = starts" not in where
