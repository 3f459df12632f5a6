"""Lines the reread found true as measured but loose, left after the first
pass: a size of a shape error named after an axis it equals by chance, a
fix the code already has given as the cause, and lists of culprits that
leave out the one the code has. Each test runs one mistake through its
notebook's check and holds the line to what was measured."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_size_a_shape_error_holds_twice_is_not_named_after_an_axis():
    # reshape(3, 5 // 2, 2, 24) of 16 rows: one 2 is the pair, the other 16 // 3 // 2; neither is n_kv_heads
    message = _message("fresh15", "04", "interleaved_to_half", "interleaved_to_half(wk, n_heads // n_kv_heads)")
    measured = _line(message, "Measured:")
    assert "2 = n_kv_heads" not in message
    assert measured == "Measured: in that error 24 = d_model"


def test_a_start_pos_rebound_inside_the_function_is_named_not_the_slice_it_already_has():
    message = _message("default", "04", "apply_rope", "start_pos = 0")
    likely = _line(message, "Likely bug:")
    assert "slice cos[start_pos:start_pos + T]" not in message
    # the mutation adds `start_pos = 0` right after `T = x.shape[-2]`; the call passes start_pos = 5
    assert "`start_pos = 0`, rebinds it (measured: it holds 0 after that line, where the call passed 5)" in likely


def test_a_gain_registered_under_both_names_is_told_to_keep_one():
    # self.gain = nn.Parameter(...); self.weight = self.gain: one Parameter, two names in the state dict
    likely = _line(_message("default", "02", "RMSNorm", "self.weight = self.gain"), "Likely bug:")
    assert "registered as `gain`" not in likely
    assert "registered under two names, `gain` and `weight`" in likely and "name it `weight` and drop `gain`" in likely


def test_rows_merged_under_one_factor_leave_no_stale_candidates():
    # / x.shape[0] with a batch of 3: step 1 alone was one value (candidates); step 2 merges it into a measured line
    message = _message("fresh6", "09", "train_step", "/ x.shape[0]")
    assert "Candidates: `step 1: returned loss`" not in message
    measured = _line(message, "Measured: `step 1: returned loss` and `step 2: returned loss`")
    assert "exactly 1/3 of the right value (measured on `step 2: returned loss`:" in measured


def test_the_in_place_culprits_are_examples_and_include_max_norm():
    likely = _line(_message("fresh6", "01", "embed", "max_norm=1.0"), "Likely bug: embed changes its input")
    assert "(for example `x -= ...`" in likely and "F.embedding's max_norm=" in likely


def test_a_gradient_cut_by_from_pretrained_is_among_the_examples():
    likely = _line(_message("fresh7", "01", "embed", "from_pretrained"), "Likely bug:")
    assert "for example a .detach()" in likely and "nn.Embedding.from_pretrained" in likely


def test_an_integer_result_is_said_as_the_measured_cut_of_the_gradient():
    # weight.to(one_hot.dtype) casts the table to int64: the result is int64 and carries no gradient
    message = _message("fresh", "01", "one_hot_embed", "weight.to(one_hot.dtype)")
    likely = _line(message, "Likely bug: the result does not depend on weight")
    assert ".tolist()" not in likely
    assert "it is torch.int64 (measured), and an integer tensor carries no gradient" in likely


def test_the_dtype_culprits_name_torch_tensor_of_python_numbers():
    # torch.tensor(weight[ids].tolist()) makes the default float32 from Python floats
    likely = _line(_message("default", "01", "embed", "torch.tensor(weight[ids].tolist())"),
                   "Likely bug: the values are right")
    assert "for example a dtype= argument" in likely and "torch.tensor(...) of Python numbers" in likely


def test_a_size_repeated_within_one_shape_is_left_unnamed_and_two_shapes_are_read_apart():
    from autograder.checks.framework.check import Check
    chk = Check("f")
    chk.axes = {"d_ff": 10, "n_kv_heads": 2, "d_model": 24}
    # one shape [3, 2, 2, 24]: its two 2s cannot both be n_kv_heads, and nothing says which one is
    assert chk._name_sizes("shape '[3, 2, 2, 24]' is invalid for input of size 384") == "in that error 24 = d_model"
    # two shapes in one parenthesis: 10 is once in each, d_ff both times
    assert chk._name_sizes("mat1 and mat2 shapes cannot be multiplied (6x10 and 6x10)") == "in that error 10 = d_ff"
