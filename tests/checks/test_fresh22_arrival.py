"""What fresh22's arrival reading found (60 mistakes written without reading
the checks: mistakes a later step partly hides, mistakes shown only in some
states or sizes, mistakes that raise mid-function, look-alikes): printed
lines untrue of the code, and mistakes named or placed by nothing. Each test
runs one mistake through its notebook's check and holds the message to what
the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_lookup_rounded_through_float16_is_measured_and_placed_on_the_rounding_line():
    message = _message("fresh22", "01", "one_hot_embed", "(one_hot @ weight.half()).to(weight.dtype)")
    measured = _line(message, "Measured:")
    assert "every value of your result is exactly a float16 number" in measured
    where = _line(message, "Where:")
    assert "(one_hot @ weight.half()).to(weight.dtype)" in where
    assert "half on line 5 turns float32 values into float16" in where


def test_a_difference_below_float32s_tolerance_is_not_left_as_a_dtype_difference():
    message = _message("fresh22", "02", "layer_norm", "clamp(min=eps)")
    candidates = _line(message, "Candidates:")
    assert "within the tolerance a float32 result gets" in candidates and "an eps clamped to" in candidates


def test_a_stream_scaled_before_the_final_norm_is_placed_on_the_scaling_line_and_measured():
    message = _message("fresh22", "05", "Transformer", "x = x / math.sqrt(self.config.d_model)")
    where = _line(message, "Where:")
    assert "of your Transformer.forward" in where and "x = x / math.sqrt(self.config.d_model)" in where
    assert "RMSNorm.forward" not in where
    assert "block 1's output times 0.1768 = 1/sqrt(d_model)" in _line(message, "Likely bug:")


def test_a_mask_rebuilt_as_all_real_is_not_told_to_pass_a_mask_it_passes():
    likely = _line(_message("fresh22", "06", "generate_left_padded", "mask.new_ones(B, mask.shape[1] + 1)"), "Likely bug:")
    assert "pad keys marked as real tokens" in likely
    assert "pass attention_mask (True at real tokens" not in likely


def test_a_top_k_that_drops_ties_is_not_said_to_keep_less_likely_tokens():
    message = _message("fresh22", "08", "top_k_filter", "logits.topk(k, dim=-1).indices")
    assert "not the most likely tokens" not in message
    assert "ties with the k-th largest dropped" in _line(message, "Likely bug:")


def test_gradients_scaled_by_the_batch_size_are_measured_below_the_clip():
    candidates = _line(_message("fresh22", "09", "train_step", "(loss * x.shape[0]).backward()"), "Candidates:")
    assert "the gradients your step leaves in .grad are 3 times (3 is x.shape[0]" in candidates


def test_a_missing_untied_embedding_is_not_called_the_missing_head():
    message = _message("fresh22", "09", "train_step_costs", "(2 * L + 1) * d                               # + gains")
    assert "the untied head is missing" not in message
    assert "one vocab_size × d_model matrix is missing" in message


def test_targets_shifted_a_second_time_are_named():
    likely = _line(_message("fresh22", "10", "evaluate", "y.to(dev)[:, 1:]"), "Likely bug:")
    assert "the targets shifted a second time" in likely


def test_a_gain_taken_first_is_placed_without_a_reference_step_that_reads_another_value():
    where = _line(_message("fresh22", "02", "rms_norm", "(weight * x).float()"), "Where:")
    assert where.startswith("Where: line 4 ") and "the reference's mul" not in where


def test_a_dtype_an_input_has_is_asked_for_by_that_inputs_name():
    likely = _line(_message("fresh21", "04", "apply_rope", "cos = cos[start_pos:start_pos + T]  #"), "Likely bug:")
    assert "give torch.float16, the dtype of `x`, instead (or cast with .to(x.dtype))" in likely
