"""What fresh31's arrival reading found (60 mistakes written without reading
the checks: loops that carry state, sizes at the edges, numerics, whole
answers in the learner's own style, public bugs). Each test runs one mistake
through its notebook's check and holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_forward_that_casts_the_gain_in_place_is_measured():
    likely = _line(_message("fresh31", "02", "RMSNorm", "self.weight.data = self.weight.data.to(x.dtype)"),
                   "Likely bug:")
    assert "after the call self.weight is now float16, where it was float32" in likely


def test_a_bytes_count_right_in_half_precision_is_not_said_to_ignore_the_dtype():
    message = _message("fresh31", "07", "decode_bytes_per_token", "size = 2 if dtype in (torch.bfloat16, torch.float16)")
    assert "Likely bug:" not in message
    candidates = _line(message, "Candidates:")
    assert "d_model 48, GQA 6/2, untied, bfloat16, context 100" in candidates
    assert "d_model 64, MHA, tied, float32" not in candidates, "a float32 case does not rule out 4 bytes"


def test_sampling_without_a_generator_draws_from_the_global_one():
    likely = _line(_message("fresh31", "08", "generate", "torch.Generator().manual_seed(0)"), "Likely bug:")
    assert "give identical tokens" in likely


def test_groups_clipped_apart_are_measured_by_their_norms():
    likely = _line(_message("fresh31", "09", "train_step", 'clip_grad_norm_(group["params"], grad_clip)'),
                   "Likely bug:")
    assert "global norm is 0.1414, above grad_clip = 0.1" in likely


def test_a_micro_batch_of_padding_only_is_given():
    measured = _line(_message("fresh31", "09", "train_step_accumulated", "(mean_i * n_i / n_tokens).backward()"),
                     "Measured:")
    assert "the loss it returns holds nan or inf" in measured


def test_no_new_token_returns_the_prompt():
    measured = _line(_message("fresh31", "06", "generate_greedy", "range(max_new_tokens - 1):                 # the prefill gave"), "Measured:")
    assert "asked for no new token, your generate_greedy returns 1 more column" in measured


def test_a_triu_mask_is_not_read_as_the_reference_mask_transposed():
    """triu() of ones equals tril() transposed: a 0/1 mask cannot tell that from a layout change, so the line that
    makes it is the first wrong one, not a step said to be missing after it."""
    message = _message("fresh31", "07", "gqa_attention", "dtype=torch.bool, device=q.device).triu()")
    where = _line(message, "Where:")
    assert "the first line whose value the reference never computes (yours: triu gives shape (5, 5), bool, 15 of 25 " \
        "True)" in where and "__invert__" not in message
