"""What fresh18's arrival reading found (64 mistakes written without reading
the checks, most of them far symptoms, moved steps and entry states): each
test runs one mistake through its notebook's check and holds the message to
what the code does, or an honest answer to a pass."""
from __future__ import annotations

import torch

from autograder import checks

from .test_printed_lines_true import _line, _message

from benchmarks.mutations.fresh18 import ATTN_FILL, ATTN_SOFTMAX, STEP_ROPE_K, STEP_UPDATE  # noqa: E402  (the benchmarks folder on sys.path)


def test_rope_tables_that_follow_the_callers_default_dtype_are_caught_at_the_line_that_takes_it():
    message = _message("fresh18", "04", "rope_cache", "-torch.arange(0, head_dim, 2) / head_dim")
    measured = _line(message, "Measured:")
    assert "default dtype set to float64, your rope_cache returns float64, float64 where it returns float32" in measured
    where = _line(message, "Where:")
    assert "line 4 of your rope_cache" in where and "makes a float64 tensor from int64" in where


def test_rope_tables_made_in_float32_whatever_the_default_pass():
    def rope_cache(head_dim, max_seq_len, theta=10000.0):
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos(), angles.sin()
    checks.check_rope_cache(rope_cache)


def test_a_cache_reset_at_the_end_instead_of_the_start_is_caught_with_a_cache_that_arrives_full():
    message = _message("fresh18", "06", "generate_greedy", "# leave it empty for the next call")
    likely = _line(message, "Likely bug:")
    assert "the cache is not emptied before the prefill" in likely and "found 3 in it" in likely


def test_rms_norm_orders_that_round_otherwise_in_bfloat16_are_named_bit_for_bit():
    gain_first = _line(_message("fresh18", "02", "rms_norm", "return (weight * x32 * inv_rms).to(x.dtype)"),
                       "Likely bug:")
    assert "the gain multiplied in before the cast back" in gain_first and "1/rms rounded" not in gain_first
    statistic = _line(_message("fresh18", "02", "rms_norm", "+ eps).to(x.dtype)"), "Likely bug:")
    assert "1/rms rounded to x.dtype before the product" in statistic and "gain multiplied" not in statistic


def test_rms_norm_written_another_way_in_the_exercise_order_passes_the_rounding_rows():
    def by_division(x, weight, eps=1e-6):
        x32 = x.float()
        return weight * (x32 / torch.sqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)).to(x.dtype)

    def in_float64(x, weight, eps=1e-6):
        x64 = x.double()
        return weight * (x64 * torch.rsqrt((x64 * x64).mean(dim=-1, keepdim=True) + eps)).to(x.dtype)
    checks.check_rms_norm(by_division)
    checks.check_rms_norm(in_float64)


def test_starts_drawn_with_an_extra_axis_are_named_not_given_the_slicing_the_code_already_has():
    likely = _line(_message("fresh18", "09", "get_batch", "(batch_size, 1), generator"), "Likely bug:")
    assert "the windows carry an axis too many" in likely and "(batch_size, 1)" in likely
    assert "x = window[:, :-1], y = window[:, 1:]" not in likely


def test_a_mode_handed_back_as_model_training_is_not_told_to_read_the_mode_it_already_reads_first():
    message = _message("fresh18", "10", "evaluate", "model.train(model.training)")
    likely = _line(message, "Likely bug:")
    assert "the mode given back is the one model.eval() had just set" in likely
    assert "model.train(was_training) at the end" in likely
    assert "read was_training = model.training before model.eval()" not in message


def test_short_windows_and_a_shift_along_the_batch_axis_are_named_from_the_windows_values():
    short = _line(_message("fresh12", "09", "get_batch", "idx = starts[:, None] + torch.arange(seq_len)"), "Likely bug:")
    assert "the windows hold seq_len = 7 tokens, not seq_len + 1" in short
    by_rows = _line(_message("fresh4", "09", "get_batch", "return window[:-1], window[1:]"), "Likely bug:")
    assert "the shift is taken along the batch axis" in by_rows and "row i of y is row i + 1 of x" in by_rows


def test_a_step_taken_after_the_line_that_needs_it_is_not_said_to_be_missing():
    # the mask applied to the scores after the softmax read them; the keys rotated after the cache stored them
    for nb, fn, new, later in (("03", "causal_attention", ATTN_SOFTMAX + ATTN_FILL, "7"),
                               ("06", "attention_step", STEP_UPDATE + STEP_ROPE_K, "12")):
        where = _line(_message("fresh18", nb, fn, new), "Where:")
        assert "a step the reference takes" not in where
        assert "a step is taken after the line that needs it" in where and f"your line {later}'s" in where


def test_a_shape_unpacked_into_the_wrong_letters_is_placed_on_its_unpacking_line():
    where = _line(_message("fresh18", "03", "split_heads", "B, d, T = x.shape"), "Where:")
    assert "line 4 of your split_heads, `B, d, T = x.shape`" in where
    assert "`T` = 12 is bound here from x.shape[2], where the input's T is 5" in where


def test_a_module_raising_on_the_tensor_its_caller_handed_it_is_placed_on_the_callers_line():
    # the final norm applied to the logits: RMSNorm.forward raises on x (vocab wide) against its own d_model-wide gain
    where = _line(_message("fresh18", "05", "Transformer", "return self.norm(tied_logits(x, self.lm_head.weight))"),
                  "Where:")
    assert "of your Transformer.forward, `return self.norm(tied_logits(" in where
    assert "raises on its parameter `x`, a tensor of shape (2, 7, 256) handed to it by this line, against its own " \
           "`weight` of shape (32,)" in where


def test_two_calls_of_one_function_on_a_line_do_not_blame_a_name_only_one_of_them_reads():
    # q is rotated from start, k from 0, on one line: the k call reads no name bound on line 5
    where = _line(_message("fresh14", "07", "gqa_step", "tinylm.apply_rope(k, cos, sin)"), "Where:")
    assert "the call reads a name bound on the other line" not in where and "line 5" not in where
    assert "the first line whose value the reference never computes" in where


def test_an_attention_output_transposed_before_merge_heads_is_named_by_what_merge_heads_gets():
    likely = _line(_message("fresh18", "03", "self_attention", "transpose(1, 2)"), "Likely bug:")
    assert "hands merge_heads the attention output with axes 1 and 2 exchanged" in likely
    assert "(2, 6, 3, 4), the attention output (B, H, T, hd) = (2, 3, 6, 4) transposed" in likely
