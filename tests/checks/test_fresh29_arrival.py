"""What fresh29's arrival reading found (67 mistakes written without reading
the checks: counting answers wrong in their own way, a needed call in the
wrong place, right routes with a later slip, dense lines, public bugs). Each
test runs one mistake through its notebook's check and holds the message to
what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_switch_to_eval_mode_after_the_first_pass_is_not_told_to_call_model_eval():
    likely = _line(_message("fresh29", "08", "generate", "                model.eval()\n"), "Likely bug:")
    assert "switch the model to eval mode for generation, model.eval()" not in likely
    assert "the switch to eval mode comes after the forward pass" in likely


def test_a_mode_given_back_inside_the_loop_is_measured_pass_by_pass():
    likely = _line(_message("fresh29", "10", "evaluate", "                model.train(was_training)\n"), "Likely bug:")
    assert "call model.eval() first" not in likely
    assert "2 of the 3 forward passes ran in train mode, from pass 2 on" in likely


def test_starts_drawn_at_multiples_of_seq_len_are_not_called_off_by_one():
    likely = _line(_message("fresh29", "09", "get_batch", "generator=generator) * seq_len"), "Likely bug:")
    assert "off by one" not in likely and "the starts [0, 4] are drawn, [1, 2, 3, 5, 6, 7] never" in likely


def test_the_dtypes_lowest_value_is_not_said_to_keep_probability():
    measured = _line(_message("fresh29", "08", "top_k_filter", "torch.finfo(logits.dtype).min"), "Measured:")
    assert "so softmax still gives them probability" not in measured
    assert "softmax gives 0 here only because exp underflows" in measured


def test_a_parenthesis_closed_before_the_element_size_is_read_by_parts():
    likely = _line(_message("fresh29", "07", "decode_bytes_per_token", "matrices + L * per_block + d * size"),
                   "Likely bug:")
    assert "every part but the final norm's gain (norm.weight) is counted in numbers, not bytes" in likely
