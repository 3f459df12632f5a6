"""fresh35's two notebook-09 mistakes that failed without a cause or a place: a train_step that clips before
backward and zeroes after the step, and an accumulated step whose count leaves out each row's position 0. Each test
runs the mistake through its notebook's check and holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_clip_before_backward_and_a_zero_grad_after_the_step_are_measured_and_placed():
    message = _message("fresh35", "09", "train_step", "loss.backward()\n    optimizer.step()\n    optimizer.zero_grad")
    measured = _line(message, "Measured:")
    assert "with no gradient in .grad before the call, this batch's gradient unclipped" in measured
    assert "those gradients plus this batch's, where grad_clip = 1e+06 leaves both as they are" in measured
    assert "those gradients clipped to grad_clip plus this batch's gradient unclipped" in measured
    where = _line(message, "Where:")
    assert where.startswith("Where: line 6 of your train_step, `torch.nn.utils.clip_grad_norm_(")
    assert "and line 9, `optimizer.zero_grad(set_to_none=True)`" in where
    assert "in this order: clip, backward, step, zero_grad" in where
    likely = _line(message, "Likely bug:")
    assert "clip_grad_norm_ runs before loss.backward() (measured, in this order: clip, backward, step, zero_grad)" \
        in likely
    assert "optimizer.zero_grad() runs after optimizer.step(), not before loss.backward()" in likely


def test_a_count_without_each_row_s_first_position_is_confirmed_and_placed():
    message = _message("fresh35", "09", "train_step_accumulated", "y[:, 1:] != -100")
    where = _line(message, "Where:")
    assert where.startswith("Where: line 5 of your train_step_accumulated, `n_tokens = ")
    assert "17 here, where the batch's 22 target tokens belong; 21 in the second run, where 27 belong" in where
    likely = _line(message, "Likely bug:")
    assert "divided by the batch's target tokens outside each row's first position, position 0" in likely
    assert "by 21, that count again, where 24 belong" in likely  # the third run: rows padded at their start too
    assert "the targets at position 0 of each row go uncounted" in likely
