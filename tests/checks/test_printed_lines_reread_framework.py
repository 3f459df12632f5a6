"""Lines of the framework's (checks/framework, checks/contracts) found untrue
when the older sets' messages were read again: each test runs one mistake
through its notebook's check and holds the line to what the code does, and
a small call shows the mechanism on its own."""
from __future__ import annotations

import pytest
import torch

from autograder.checks.framework.check import Check
from autograder.checks.framework.failure import CheckFailed

from .test_printed_lines_true import _line, _message


# A NotImplementedError is a stub only when the learner's own line raises it.

def test_an_error_torch_raises_as_not_implemented_is_reported_as_the_error_it_is():
    # F.cross_entropy(targets, logits): torch has no log_softmax for int64 and raises NotImplementedError
    message = _message("fresh5", "09", "lm_loss", "F.cross_entropy(targets.flatten(), logits.flatten(0, 1)")
    assert "not implemented yet" not in message and "Replace the `raise NotImplementedError()`" not in message
    assert "raised NotImplementedError inside your lm_loss" in message and "not implemented for 'Long'" in message


def _stop_of(fn) -> str:
    with pytest.raises(CheckFailed) as failed:
        Check("f", expects="a tensor").call(fn, torch.zeros(3, dtype=torch.long))
    return str(failed.value)


def test_a_raise_statement_left_in_the_cell_is_still_a_stub():
    def stub(ids):
        raise NotImplementedError()

    def torch_raises(ids):
        return ids.log_softmax(-1)  # the learner's line calls; torch raises

    assert "is not implemented yet" in _stop_of(stub)
    said = _stop_of(torch_raises)
    assert "is not implemented yet" not in said and "raised NotImplementedError" in said


# What a call should return is said for that call's own inputs.

def test_a_call_on_other_shapes_is_told_what_it_should_return_for_its_own_inputs():
    # the check's second call passes ids of shape (4,): the right result is (4, 6), not the first call's (3, 4, 6)
    message = _message("fresh7", "01", "one_hot_embed", 'torch.einsum("btv,vd->btd", one_hot, weight)')
    called = next(line for line in message.splitlines() if "Called with a torch.int64 tensor of shape (4,)" in line)
    assert "(3, 4, 6)" not in called
    assert "it should return a torch.float32 tensor of shape (4, 6)" in called


def test_expects_is_kept_for_the_call_it_was_written_for_and_not_beside_another():
    chk = Check("f", expects="a (batch, d) = (2, 3) tensor")

    def f(x):
        if x.dim() == 1:
            raise ValueError("no batch axis")
        return x

    chk.call(f, torch.zeros(2, 3))
    with pytest.raises(CheckFailed) as failed:
        chk.call(f, torch.zeros(3))
    said = str(failed.value)
    assert "(2, 3) tensor" in said and "for its first inputs (shapes (2, 3))" in said  # no reference for "f"


# Sizes are named only from an error about shapes or sizes.

def test_the_count_of_an_unpacking_error_is_not_named_as_an_axis():
    # too many values to unpack (expected 2): the 2 counts the names on the left, not the batch
    message = _message("offlist", "04", "apply_rope", "x1, x2 = x.split(2, dim=-1)")
    assert "in that error" not in message and "2 = batch" not in message


def test_sizes_are_still_named_from_a_shape_error():
    chk = Check("f")
    chk.axes = {"batch": 2, "seq": 4, "d_model": 6}
    assert chk._name_sizes("The size of tensor a (4) must match the size of tensor b (6) at non-singleton dimension 1") \
        == "in that error 4 = seq, 6 = d_model"
    assert chk._name_sizes("Dimension out of range (expected to be in range of [-2, 1], but got 2)") is None
    assert chk._name_sizes("the number of sizes provided (2) must be greater or equal to the number of dimensions "
                           "in the tensor (4)") is None


# A gradient that differs while the values are right: measured, its causes candidates.

def test_a_gradient_left_out_by_padding_idx_is_not_said_to_be_cut_from_autograd():
    message = _message("offlist", "01", "embed", "F.embedding(ids, weight, padding_idx=0)")
    assert not any("cut from autograd" in line for line in _line(message, "Measured:").splitlines())
    candidates = _line(message, "Candidates:")
    assert "yours is 0 at every one of them (row 0)" in candidates  # padding_idx=0 leaves row 0 without gradient
    assert "padding_idx" in candidates and "cut from autograd" in candidates


def test_a_cut_the_tracer_finds_on_the_learners_line_is_said_measured():
    # the inverse RMS is detached: the tracer sees that line leave autograd, so the cut is no candidate there
    message = _message("fresh3", "02", "rms_norm", "keepdim=True) + eps).detach()")
    assert "the branch through the line named below leaves autograd" in _line(message, "Measured:")
    assert "the gradient stops here" in _line(message, "Where:")
    assert "Candidates:" not in message


# Values rounded to whole numbers: measured, what drops the fraction as candidates.

def test_values_truncated_by_a_cast_are_not_told_to_divide_with_a_slash():
    # the weight is cast to int64 before the product: there is no division in the code
    message = _message("fresh", "01", "one_hot_embed", "return one_hot @ weight.to(one_hot.dtype)")
    assert "divide with `/`" not in message
    assert not any("integer division" in line for line in _line(message, "Measured:").splitlines())
    assert "truncated towards zero to whole numbers, and your result is int64" in _line(message, "Measured:")
    assert "candidates: a cast to an integer dtype" in _line(message, "Candidates:")


# A known variant is matched at a tolerance scaled to the row's values.

def test_a_schedule_ending_at_a_tiny_floor_is_not_the_variant_that_decays_to_zero():
    # lo = min_lr * max_lr = 9e-7: the curve ends at 9e-7, not at 0, among rates of 3e-3
    message = _message("fresh8", "09", "lr_schedule", "lo = min_lr * max_lr")
    assert "decays to 0" not in message and "drops to 0 past the last step" not in message


def test_a_variant_is_matched_relative_to_the_row_scale():
    steps = torch.linspace(0, 1, 8, dtype=torch.float64)
    want = 3e-3 * (1 - steps) + 3e-4 * steps
    to_zero = 3e-3 * (1 - steps)
    chk = Check("f")
    chk.compare("rates", to_zero + 9e-7 * steps, want, atol=1e-12, rtol=1e-9, variants={"decays to 0": to_zero})
    assert "decays to 0" not in chk.votes
    same = Check("f")
    same.compare("rates", to_zero * (1 + 1e-12), want, atol=1e-12, rtol=1e-9, variants={"decays to 0": to_zero})
    assert same.votes.get("decays to 0") == 1


def test_the_graders_recheck_tells_a_stub_from_torchs_not_implemented_error():
    # the recheck raises the child's errors again by name, without frames: the child names torch's apart
    from autograder.checks.framework.failure import raised_by_learner, raised_name
    from autograder.grading.recheck.parent import learner_exception

    def stub():
        raise NotImplementedError()
    errors = []
    for fn in (stub, lambda: torch.zeros(3, dtype=torch.long).log_softmax(-1)):
        try:
            fn()
        except NotImplementedError as err:
            errors.append(err)
    again = [learner_exception(raised_name(err), str(err), None) for err in errors]
    assert isinstance(again[0], NotImplementedError) and raised_by_learner(again[0])
    assert not isinstance(again[1], NotImplementedError) and type(again[1]).__name__ == "NotImplementedError"
