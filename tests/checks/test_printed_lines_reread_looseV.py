"""Lines the reread found true as measured but loose (a coincidence of the
test shapes named as the code's number, a truncation said of a result that
is only short): each test runs one mistake through its notebook's check and
holds the line to what was measured."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_count_of_dropped_positions_is_not_named_after_the_batch_it_happens_to_equal():
    # x[:, [-1], :] keeps the last of T = 3 positions: the 2 missing are T - 1, equal to the batch by chance
    likely = _line(_message("fresh8", "01", "tied_logits", "x[:, [-1], :]"), "Likely bug:")
    assert "x.shape[0]" not in likely and "(=" not in likely
    assert "holds the last 1 of the 3 entries" in likely and "the first 2 are missing" in likely


def test_a_result_short_by_its_end_is_not_said_to_be_cut_off():
    likely = _line(_message("fresh8", "01", "tied_logits", "x[:, [-1], :]"), "Likely bug:")
    assert "may be cut off" not in likely
    assert "(e.g. a slice that cuts them off)" in likely


def test_the_axis_a_stack_adds_is_not_named_after_the_batch_it_happens_to_equal():
    # torch.stack of two tensors adds an axis of 2: the batch of the test is 2 as well
    likely = _line(_message("default", "06", "cache_update", "torch.stack((past_k, k), dim=2)"), "Likely bug:")
    assert "past_k.shape[0]" not in likely
    assert "is split into your axes 2 and 3 (sizes 2 and 4)" in likely


def test_a_generation_loop_one_step_short_is_not_said_to_cut_its_result_off():
    # range(max_new_tokens - 1): the first tokens are right, the last one is never generated
    likely = _line(_message("default", "06", "generate_greedy", "for _ in range(max_new_tokens - 1):"), "Likely bug:")
    assert "cut off" not in likely.split("e.g.")[0] and "dropped" not in likely
    assert "the last 1 is missing" in likely and "a loop that runs 1 step fewer" in likely


def test_the_missing_prompt_is_still_named_after_the_prompts_length():
    # idx[:, prompt.shape[1]:] drops exactly the prompt: a size along the same axis
    likely = _line(_message("default", "06", "generate_greedy", "return idx[:, prompt.shape[1]:]"), "Likely bug:")
    assert "the first 5 (= prompt.shape[1]) are missing" in likely


def test_causal_attentions_seven_keys_are_named_kv_len_not_seq():
    # causal_mask(k, q) on 4 queries over 7 keys: the 7 in the error is the number of keys
    message = _message("fresh3", "03", "causal_attention", "causal_mask(k.shape[-2], q.shape[-2])")
    measured = _line(message, "Measured:")
    assert "7 = seq" not in measured and "7 = kv_len" in measured


def test_rms_norms_probe_measurements_name_the_probes_shape():
    # the RMS 0.25 = 1/sqrt(16) is measured on the explainer's (6, 16) probe, not on the rows' d = 8
    message = _message("default", "02", "rms_norm", "x32.norm(dim=-1, keepdim=True) + eps")
    assert "your output's RMS per token on a (6, 16) probe is 0.25" in message


def test_a_mask_of_the_new_tokens_alone_is_not_said_to_count_zero_cached_positions():
    # causal_mask(T, T) in attention_step: the width is T_new, the cached positions are left out
    message = _message("default", "06", "attention_step", "causal_mask(T, T)")
    assert "counts 0 cached positions" not in message
    assert "its width 3 is T_new alone: the 5 cached positions past_k holds (past_k.shape[2]) are left out" in message


def test_a_cache_that_holds_none_is_not_told_only_the_call_it_already_makes():
    # cache = cache.reset() makes cache None; the calls already say cache=cache
    likely = _line(_message("fresh5", "06", "generate_greedy", "cache = cache.reset()"), "Likely bug:")
    assert "called without one (cache=None) at every one of its calls (measured on its calls)" in likely
    assert "must pass a KVCache object as cache=" in likely


def test_rope_positions_shifted_twice_are_not_told_the_offset_the_code_already_has():
    # cos[start:] and start_pos=start: the new keys are rotated from 2·start on
    likely = _line(_message("fresh4", "06", "attention_step", "cos[start:], sin[start:], start_pos=start"),
                   "Likely bug:")
    assert "rotated for positions 10..12, not 5..7" in likely
    assert "start at the number of cached positions, start_pos = past_k.shape[2]" not in likely
    assert "shifted by the number of cached positions twice" in likely


def test_a_clamp_from_below_is_not_told_that_progress_is_not_clamped():
    # max(progress, 1.0) clamps from below; past the end progress still passes 1
    likely = _line(_message("fresh4", "09", "lr_schedule", "max(progress, 1.0)"), "Likely bug:")
    assert "is not clamped:" not in likely and "not clamped from above" in likely
    assert "progress needs an upper bound, min(progress, 1.0)" in likely
