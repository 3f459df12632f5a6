"""What fresh24's arrival reading found (64 mistakes written without reading
the checks: the learner's own routes with one mistake inside, entry states
and sizes, public bugs): two passed their visible checks, two Where lines set
a learner's slice beside a reference slice it does not stand for, and two
mistakes were named or placed by nothing. Each test runs one mistake through
its notebook's check and holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_an_rmsnorm_module_written_inline_in_float16_fails_and_is_named():
    likely = _line(_message("fresh24", "02", "RMSNorm", "# the formula inline"), "Likely bug:")
    assert "x² taken in float16" in likely


def test_a_mask_read_off_the_ids_fails_on_a_prompt_holding_the_pad_id():
    likely = _line(_message("fresh24", "06", "generate_left_padded", "mask = ids != pad_id"), "Likely bug:")
    assert "the mask equals ids != pad_id" in likely and "row 1's slot 1" in likely


def test_clipping_by_the_sum_of_squares_is_measured_as_the_norms_square():
    likely = _line(_message("fresh24", "09", "train_step", "grad_clip / (total_sq + 1e-6)"), "Likely bug:")
    assert "is grad_clip / 4.824², the norm's square" in likely and "times 0.004298 (measured)" in likely


def test_a_base_changed_inside_the_exponent_is_measured():
    measured = _line(_message("fresh24", "10", "evaluate", "2 ** (loss * math.log(2))"), "Measured:")
    assert "your perplexity equals 2 ** (loss · ln 2)" in measured


def test_complex_rope_flattened_back_interleaved_is_measured_and_its_half_slice_not_called_wrong_sizes():
    message = _message("fresh24", "04", "apply_rope", "turned.flatten(-2)")
    assert "feature 2i holds the right result's feature i" in _line(message, "Measured:")
    where = _line(message, "Where:")
    # the half-width slice is the complex route's own step: no reference slice is set beside it
    assert "cos[start_pos:start_pos + T, :half]" in where
    assert "the reference's" not in where and "sizes" not in where


def test_a_call_the_reference_never_makes_is_not_given_other_bounds():
    message = _message("fresh24", "06", "generate_greedy", "while idx.shape[1] <= prompt.shape[1] + max_new_tokens")
    where = _line(message, "Where:")
    assert "other bounds" not in where and "the reference's [5:6]" not in where
    assert "called the model 7 times for max_new_tokens = 6" in _line(message, "Measured:")


def test_a_mean_over_the_micro_batches_on_top_is_named_by_its_divisor():
    likely = _line(_message("fresh24", "09", "train_step_accumulated", "mean"), "Likely bug:")
    assert "divided by the batch's target tokens times the number of micro-batches" in likely
    assert "divided by 66, where the batch's 22 target tokens belong" in likely
