"""Mistakes of fresh18 (notebooks 06, 07, 09, 10) whose messages on arrival
named nothing, or said a moved step as a missing one: each cause is now
confirmed on the learner's own function (its step or NLL re-scored under the
hypothesis, a re-run with the prompts reordered, the tracer's copy of the
tensor the raising cat was handed, the value its model.train(...) call was
handed) before it is named; and a different mistake with a similar symptom,
written here, does not get that line."""
from __future__ import annotations

# imported from there: that module puts benchmarks/ on the path first
from .test_printed_lines_true import Mutation, _line, _message, bench_diagnostics


def _own(notebook: str, cell: str, old: str, new: str) -> str:
    """The failure message of a mistake written here: `old` of the solution cell becomes `new`."""
    mutation = Mutation(cell, old, new, ("-",), "a sibling with a similar symptom")
    outcome = bench_diagnostics.run_mutation(notebook, mutation, bench_diagnostics.notebook_cells(notebook))
    assert outcome.message, "the check passed the mistake"
    return outcome.message


# 09 train_step: the targets shifted a second time in the step


def test_a_step_scoring_position_t_against_y_t_plus_one_is_named_a_second_shift():
    message = _message("fresh18", "09", "train_step", "loss = lm_loss(model(x)[:, :-1], y[:, 1:])")
    likely = _line(message, "Likely bug:")
    assert "shifted once more" in likely and "against y[:, t + 1]" in likely
    assert "Compare your code with the formula" not in message


def test_a_step_shifting_the_other_way_is_not_said_to_shift_again():
    message = _own("09", "train_step", "loss = lm_loss(model(x), y)", "loss = lm_loss(model(x)[:, 1:], y[:, :-1])")
    assert "shifted once more" not in message


# 10 nll_sum_and_count: the same second shift, on the NLL sum


def test_an_nll_sum_of_already_shifted_targets_shifted_again_is_named():
    message = _message("fresh18", "10", "nll_sum_and_count", "targets[:, 1:].flatten()")
    likely = _line(message, "Likely bug:")
    assert "shifted once more" in likely and "targets[:, t + 1]" in likely
    assert "Compare your code with the formula" not in message


def test_an_nll_sum_shifted_the_other_way_is_not_said_to_shift_again():
    old = "F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index,"
    new = "F.cross_entropy(logits[:, 1:].flatten(0, 1).float(), targets[:, :-1].flatten(), ignore_index=ignore_index,"
    assert "shifted once more" not in _own("10", "nll_sum_and_count", old, new)


# 10 evaluate: the bound method model.train stored as the mode


def test_the_method_stored_for_the_mode_is_read_off_the_raising_train_call():
    message = _message("fresh18", "10", "evaluate", "was_training = model.train")
    likely = _line(message, "Likely bug:")
    assert "the bound method model.train itself" in likely and "model.training" in likely


def test_another_non_bool_handed_to_train_is_measured_not_said_to_be_the_method():
    message = _own("10", "evaluate", "model.train(was_training)", "model.train(int(was_training))")
    assert "model.train(...) was handed" in _line(message, "Measured:")
    assert "bound method" not in message


def test_the_method_stored_for_the_mode_in_generate_gets_the_same_line():
    message = _own("08", "generate", "was_training = model.training", "was_training = model.train")
    assert "the bound method model.train itself" in _line(message, "Likely bug:")


# 07 gqa_step: keys and values repeated before the cache update


def test_keys_repeated_before_the_cache_are_named_from_the_tensor_the_cat_was_handed():
    message = _message("fresh18", "07", "gqa_step", "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)")
    likely = _line(message, "Likely bug:")
    assert "new keys are repeated to the 4 query heads before the cache update" in likely
    assert "2 heads each copied 2 times" in likely


def test_keys_of_as_many_heads_as_the_queries_but_no_copies_are_measured_not_said_repeated():
    # the keys projected with q_proj: the cat meets 2 past heads and 4 new ones, and no head is a copy of another
    old = "k = attn.k_proj(x).view(B, T, attn.n_kv_heads, attn.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)"
    new = "k = attn.q_proj(x).view(B, T, attn.n_heads, attn.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)"
    message = _own("07", "gqa_step", old, new)
    assert "repeated to the" not in message
    assert "joins the past's 2 kv heads with a new tensor of 4 heads" in _line(message, "Measured:")


# 06 generate_left_padded: the padded width taken from the first prompt


def test_a_width_from_the_first_prompt_is_named_by_a_rerun_longest_first():
    message = _message("fresh18", "06", "generate_left_padded", "len(prompts[0])")
    likely = _line(message, "Likely bug:")
    assert "the first prompt's length" in likely and "longest first (7, 5, 3)" in likely


def test_a_width_from_the_shortest_prompt_is_not_said_to_come_from_the_first():
    old = "B, T = len(prompts), max(len(p) for p in prompts)"
    message = _own("06", "generate_left_padded", old, "B, T = len(prompts), min(len(p) for p in prompts)")
    assert "first prompt" not in message


# 09 train_step: model.train() present, after the forward


def test_train_mode_set_after_the_forward_is_said_late_not_missing():
    message = _message("fresh18", "09", "train_step", "model.train()                                # dropout on")
    likely = _line(message, "Likely bug:")
    assert "only after the forward pass" in likely and "eval mode left on" not in message


# loose lines of the arrival reading: wordings that told the code to do what it already does


def test_a_divisor_that_grows_with_bytes_per_token_is_not_contrasted_with_itself():
    message = _message("fresh18", "10", "evaluate", "loss / math.log(256) / bytes_per_token")
    likely = _line(message, "Likely bug:")
    assert "5.545 · bytes_per_token (it grows as 1 : 2 : 4, as it must)" in likely
    assert "where it must grow as 1 : 2 : 4" not in likely and "two separate divisions" not in likely


def test_val_left_uint8_is_not_told_to_convert_train_which_is_converted():
    likely = _line(_message("fresh18", "10", "bigram_nll", "train, val = train.long(), val"), "Likely bug:")
    assert "boolean mask" in likely and "convert train and val" not in likely


def test_keys_left_unrepeated_are_measured_with_the_repetition_they_need_right_before_attention():
    # n_rep = len(q) // len(k) is batch // batch = 1: the keys reach attention with their 2 kv heads
    measured = _line(_message("fresh18", "07", "gqa_attention", "n_rep = len(q) // len(k)"), "Measured:")
    assert "not repeated to the queries' 6" in measured and "n_rep = n_heads // n_kv_heads times" in measured
    assert "a KV cache keeps them unrepeated" in measured


def test_a_temperature_without_effect_is_told_to_come_before_the_filters():
    # the filters ran on the untempered logits too: at T=0.5, top_p=0.8 the draws land outside the kept set
    message = _message("fresh18", "08", "sample_next", "probs = logits.softmax(dim=-1) / temperature")
    said = _line(message, "Candidates:")
    assert "the temperature has no effect on the draws" in said and "before the top-k / top-p filters" in said
    assert "no effect" not in "\n".join(l for l in message.splitlines() if "Likely bug:" in l)  # measured, not a cause
