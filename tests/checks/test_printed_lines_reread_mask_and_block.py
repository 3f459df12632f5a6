"""Lines read against the code and found untrue: a dtype fix that named an
input's dtype where no input is a tensor, an axes-in-another-order cause
measured on one row that another row refutes, and a block said to run its
branches in parallel where attention's output is dropped. Each test runs
one mistake through its notebook's check and holds the lines to the code."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_float_mask_from_two_lengths_is_told_to_give_bool_not_an_inputs_dtype():
    # `torch.ones(q_len, kv_len, dtype=torch.float32)`: the inputs are two ints, the dtype= is already there
    where = _line(_message("default", "03", "causal_mask", "dtype=torch.float32"), "Where:")
    assert "an input's .dtype" not in where and "whatever the inputs' dtypes" not in where
    assert "give it dtype=torch.bool in place of float32" in where


def test_a_mask_built_kv_len_by_q_len_is_not_told_a_transpose_fixes_it():
    # all True at (7, 3): its transpose is not the (3, 7) mask, so the order of axes is not the mistake
    message = _message("default", "03", "causal_mask", "torch.ones(kv_len, q_len")
    assert "transpose/permute the axes into place" not in message
    assert "axes in another order" not in _line(message, "Likely bug:")
    measured = _line(message, "Measured:")
    assert "for q_len=1, kv_len=6 your result's shape is (6, 1)" in measured
    assert "but for q_len=3, kv_len=7 no order of its axes gives the right result" in measured
    assert "build it as (q_len, kv_len)" in _line(message, "Likely bug:")


def test_a_block_that_drops_attentions_output_is_not_said_to_run_its_branches_in_parallel():
    # `h = x + attn(attn_norm(x))`, then the MLP reads x and the block returns x + mlp(mlp_norm(x))
    bug = _line(_message("fresh34", "05", "pre_norm_block", "h = x + attn(attn_norm(x))"), "Likely bug:")
    assert "in parallel" not in bug
    assert "the block returns x + mlp(mlp_norm(x))" in bug and "its output reaches neither the MLP nor the result" in bug
