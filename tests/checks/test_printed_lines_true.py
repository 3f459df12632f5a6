"""Every line a check prints is true of the learner's code: for mistakes
whose printed lines were read against the code and found untrue (the
fresh10 set's first measurement, and a known suspect of the default set),
the message now states what the code does and no longer states what it
does not. Each test runs one mistake through its notebook's check."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_diagnostics  # noqa: E402
from benchmarks.mutations import SETS, Mutation  # noqa: E402


def _message(mutation_set: str, notebook: str, cell: str, new_text: str) -> str:
    """The failure message of the one mistake of `cell` whose replacement is, or else holds, `new_text`."""
    mutations = [m for m in SETS[mutation_set]()[notebook] if m.cell == cell]
    found = [m for m in mutations if m.new == new_text] or [m for m in mutations if new_text in m.new]
    assert len(found) == 1, f"{mutation_set} {notebook} {cell}: {len(found)} mistakes hold {new_text!r}"
    outcome = bench_diagnostics.run_mutation(notebook, found[0], bench_diagnostics.notebook_cells(notebook))
    assert outcome.message, "the check passed the mistake"
    return outcome.message


def _line(message: str, head: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip().startswith(head)]
    assert lines, f"no {head!r} line in:\n{message}"
    return "\n".join(lines)


def test_a_merge_with_another_permutation_is_not_told_a_step_is_missing():
    message = _message("fresh10", "03", "split_heads", "y.permute(0, 2, 3, 1)")
    where = _line(message, "Where:")
    assert "a step after it is missing" not in where
    assert "the same values, permuted" in where


def test_a_split_reshaped_straight_is_not_told_of_a_view_it_never_wrote():
    message = _message("fresh10", "03", "split_heads", "x.reshape(B, n_heads, T, d // n_heads)")
    assert "x.view(B, H, T, hd)" not in message
    assert "reshape to (B, T, H, hd) first" not in message  # the learner did split to (B, T, H, hd) first
    assert "the reference's reshape" not in _line(message, "Where:")  # the check's reference has no such call there
    assert "transpose(1, 2)" in _line(message, "Likely bug:")


def test_a_strict_top_p_comparison_says_which_inputs_its_line_was_measured_on():
    message = _message("fresh10", "08", "top_p_filter", "mass_before > p")
    assert "right for the visible inputs, wrong when the mass before a token is exactly p" in message
    # the Where line's values are those of the edge row, where > and >= differ (on the visible inputs they agree)
    assert "measured on the inputs of the row 'mass exactly p'" in _line(message, "Where:")


def test_temperature_after_the_filters_is_measured_on_the_kept_set_not_as_another_temperature():
    message = _message("fresh10", "08", "sample_next", "logits = logits / temperature             # on the kept")
    assert "expected temperature" not in message  # the code divides by exactly T
    measured = _line(message, "Measured:")
    assert "softmax(logits / 2.0), the temperature given" in measured
    assert "the set of tokens kept is what differs" in measured
    assert "temperature applied after top-k/top-p filtering" in _line(message, "Likely bug:")


def test_a_start_range_one_short_is_told_the_last_start_is_never_drawn():
    message = _message("fresh10", "09", "get_batch", "len(data) - seq_len - 1")
    bug = _line(message, "Likely bug:")
    assert "still exists" not in bug  # every target exists; the range is short, not long
    assert "is never drawn" in bug and "torch.randint(len(data) - seq_len, ...)" in bug


def test_is_causal_after_a_prefill_states_which_keys_a_new_token_sees():
    message = _message("fresh10", "06", "attention_step", "is_causal=True)")
    bug = _line(message, "Likely bug:")
    assert "cannot see the cached keys" not in bug  # new token i sees cached keys 0 .. i
    assert "new token i sees keys 0 .. i only" in bug and "0 .. past + i" in bug


def test_a_second_shift_is_not_set_beside_an_unrelated_reference_value():
    message = _message("fresh10", "09", "lm_loss", "logits[:, :-1].flatten(0, 1), targets[:, 1:]")
    where = _line(message, "Where:")
    assert "int64" not in where and "the reference's __getitem__" not in where
    assert "the first line whose value the reference never computes" in where


def test_a_table_sliced_from_zero_points_at_its_slice_not_at_the_length_it_reads():
    message = _message("fresh10", "04", "apply_rope", "cos = cos[:T]")
    where = _line(message, "Where:")
    assert "they are read on the other line" not in where and "T = x.shape[-2]" not in where
    assert "cos[:T]" in where and "not its bounds" in where


def test_rope_on_the_values_instead_of_the_keys_is_named():
    message = _message("fresh10", "04", "rotary_attention", "v = apply_rope(v")
    assert "RoPE applied to the values instead of the keys" in _line(message, "Likely bug:")


def test_a_nucleus_on_the_logits_is_not_blamed_on_the_crossing_token():
    message = _message("default", "08", "top_p_filter", "probs = sorted_logits")
    bugs = _line(message, "Likely bug:")
    assert "top-p drops the crossing token" not in bugs
    assert "nucleus computed on logits, not probabilities" in bugs


def test_the_crossing_token_dropped_is_still_named():
    message = _message("default", "08", "top_p_filter", "drop_sorted = probs.cumsum(dim=-1) > p")
    assert "top-p drops the crossing token" in _line(message, "Likely bug:")


def test_apply_ropes_table_error_gives_both_candidates():
    import tinylm

    cos, sin = tinylm.rope_cache(8, 6)
    with pytest.raises(ValueError) as raised:
        tinylm.apply_rope(torch.zeros(1, 1, 4, 8), cos, sin, start_pos=4)  # positions 4..7 of a 6-row table
    text = str(raised.value)
    assert "positions 4..7 exceed the RoPE table of 6 positions" in text
    assert "larger max_seq_len" in text and "start_pos" in text and "(B, H, T, hd)" in text


# fresh11's first measurement: seven printed lines found untrue of the code

def test_a_head_tied_through_data_is_not_called_a_copy_that_drifts_apart():
    message = _message("fresh11", "01", "tie_weights", "lm_head.weight.data = tok_emb.weight.data")
    bug = _line(message, "Likely bug:")
    assert "copy" not in bug and "drift apart" not in bug  # one storage: every update writes both
    assert "second Parameter over the embedding's storage" in bug and "values stay equal" in bug
    assert "not a share" in bug


def test_a_result_left_in_float32_is_a_missing_cast_not_another_layout():
    message = _message("fresh11", "02", "rms_norm", "(x32 * inv_rms)")
    where = _line(message, "Where:")
    assert "axes split or ordered differently" not in where and "another layout" not in where
    assert "a cast is missing on this line or casts to another dtype" in where and "cast to float16; yours reads it as float32" in where


def test_a_gain_stored_as_an_offset_from_one_is_not_told_to_start_at_ones_alone():
    message = _message("fresh11", "02", "RMSNorm", "return rms_norm(x, 1 + self.weight, self.eps)")
    bug = _line(message, "Likely bug:")
    assert "gain initialised wrongly" not in bug  # ones plus the 1 the forward adds would be a gain of 2
    assert "offset from 1" in bug and "the forward adds 1" in bug


def test_a_mask_that_several_diagonals_give_names_them_all():
    message = _message("fresh11", "03", "causal_mask", "allowed.tril(diagonal=q_len - kv_len)")
    measured = _line(message, "Measured:")
    assert "your mask is tril(diagonal=-7);" not in measured  # the code's diagonal is 3 - 7 = -4
    assert "for every d from -7 to -3" in measured and "no query may attend to any key" in measured


def test_a_count_slightly_short_is_not_printed_as_1x():
    from autograder.checks.accounting_reading import ratio_words

    assert ratio_words(998, 1000) == "0.998x the measured value"  # less than the measurement is not 1x
    assert ratio_words(500, 1000) == "0.5x the measured value"
    message = _message("fresh11", "07", "decode_bytes_per_token", "per_block = attention + 3 * d * config.d_ff + d")
    assert "(1x the measured value)" not in message
    assert "one norm gain per block is missing" in _line(message, "Likely bug:")


def test_gradients_clamped_entry_by_entry_are_not_told_they_are_not_clipped():
    message = _message("fresh11", "09", "train_step", "torch.nn.utils.clip_grad_value_(model.parameters(), grad_clip)")
    bug = _line(message, "Likely bug:")
    assert "gradients not clipped" not in bug and "between backward() and step()" not in bug
    assert "each gradient entry is clamped to [-grad_clip, grad_clip]" in bug and "clip_grad_value_" in bug


def test_each_micro_batch_divided_by_its_own_count_is_said_so():
    message = _message("fresh11", "09", "train_step_accumulated", "(summed / (y != -100).sum()).backward()")
    bug = _line(message, "Likely bug:")
    assert not bug.startswith("Likely bug: loss not divided by the number of micro-batches")
    assert "each micro-batch's mean loss goes into backward() as it is" in bug


def test_padding_counted_in_the_accumulated_denominator_is_measured_as_such():
    message = _message("fresh11", "09", "train_step_accumulated", "n_tokens = sum(y.numel() for _, y in micro_batches)")
    assert "is the batch's summed NLL divided by its 36 target positions, padding included, not by its 22 target tokens" \
        in message
    assert "its 22 target tokens over its 36 target positions (padding included)" in message


def test_a_gather_in_top_p_is_told_a_scatter_on_names_the_code_has():
    message = _message("fresh11", "08", "top_p_filter", "drop = drop_sorted.gather(-1, order)")
    assert "use drop_sorted.scatter(-1, order, drop_sorted)" in _line(message, "Likely bug:")


def test_a_length_that_changes_offers_the_pairing_and_the_tables_as_candidates():
    # Evens and odds paired, with the right tables: the length changes, and the tables are not the cause.
    message = _message("default", "04", "apply_rope", "x1, x2 = x[..., ::2], x[..., 1::2]")
    line = next(line for line in message.splitlines() if "not a rotation" in line)
    assert line.strip().startswith("Candidates: ") and "candidates" in line and "i + head_dim/2" in line and "different rows or angles" in line
    assert "only when cos and sin come from the same rows" not in message


def test_a_mask_wrong_the_same_way_at_each_size_is_one_likely_bug_naming_each_size():
    from autograder import checks

    def upper(q_len, kv_len):  # the upper triangle, from the diagonal the lower one should end at
        return torch.ones(q_len, kv_len, dtype=torch.bool).triu(kv_len - q_len)

    def transposed(q_len, kv_len):  # the right pattern, built (kv_len, q_len)
        return torch.ones(q_len, kv_len, dtype=torch.bool).tril(kv_len - q_len).T
    for wrong, said, sizes in ((upper, "keeps the upper triangle", ("triu(diagonal=4) for q_len=3, kv_len=7",
                                                                    "triu(diagonal=5) for q_len=1, kv_len=6")),
                               (transposed, "the mask has shape (kv_len, q_len)", ("(7, 3) for q_len=3, kv_len=7",
                                                                                   "(6, 1) for q_len=1, kv_len=6"))):
        with pytest.raises(checks.CheckFailed) as err:
            checks.check_causal_mask(wrong)
        lines = [line for line in str(err.value).splitlines() if "Likely bug:" in line and said in line]
        assert len(lines) == 1 and all(size in lines[0] for size in sizes), str(err.value)


# The audit of every set's printed lines (notebooks 03-10 first): each test below stands for one mechanism that
# printed an untrue line, fixed where the line is made, shown on one mistake it misdescribed.

def test_zeros_are_not_said_to_be_right_values_rounded_down():
    # a warmup from 0 gives lr 0 at step 0: no integer division made it
    message = _message("fresh10", "09", "lr_schedule", "max_lr * step / warmup_steps")
    assert "whole numbers" not in message and "integer division" not in message


def test_one_hot_draws_are_not_said_to_be_rounded_frequencies():
    # argmax draws give frequencies 1, 0, 0, ...: values within [0, 1] rounded are no evidence of a `//`
    message = _message("default", "08", "sample_next", "return probs.argmax(dim=-1)")
    assert "whole numbers" not in message
    assert "no randomness" in _line(message, "Likely bug:")


def test_a_call_whose_inputs_each_match_another_reference_call_names_no_producer_line():
    # x * sin shares x with the reference's x * cos and sin with rotate_half(x) * sin: the sin slice is not to blame
    message = _message("default", "04", "apply_rope", "return x * cos + x * sin")
    where = _line(message, "Where:")
    assert "line 14" not in where and "another's place" not in where
    assert "line 15 of your apply_rope" in where and "the first line whose value the reference never computes" in where


def test_a_slice_of_the_value_the_reference_returns_is_no_value_in_anothers_place():
    message = _message("default", "06", "generate_greedy", "return idx[:, prompt.shape[1]:]")
    where = _line(message, "Where:")
    assert "another's place" not in where and "line 10" not in where  # line 10's idx is what the reference returns
    assert "line 12 of your generate_greedy" in where


def test_tiling_is_named_by_the_mapping_not_by_a_call_the_learner_never_wrote():
    message = _message("default", "07", "repeat_kv", "x = x[:, None].expand(B, n_rep, n_kv, T, hd)")
    bug = _line(message, "Likely bug:")
    assert "x.repeat (tiling) gives" not in bug
    assert "tiling: the kv heads come tiled, 0 to n_kv - 1 and again from 0" in bug


def test_no_try_finally_advice_where_generate_never_gives_the_mode_back():
    message = _message("default", "08", "generate", "model.eval()")
    assert "try/finally" not in message  # it never restores, interrupted or not
    assert "the mode is never given back" in _line(message, "Likely bug:")  # read off the model's own mode calls
    restores = _message("fresh3", "08", "generate", "    model.train(was_training)")
    assert "try/finally" in _line(restores, "Likely bug:")  # restores after the loop only: the try/finally is it


def test_right_labels_of_another_dtype_are_not_called_shifted():
    message = _message("default", "09", "get_batch", "return window[:, :-1].float(), window[:, 1:].float()")
    assert "labels shifted by 1" not in message and "expected data[start + t + 1]" not in message
    assert "keep the dtype of the inputs" not in message  # the inputs are uint8 or int64 bytes, not float32


def test_a_pooled_loss_is_not_said_to_mix_rows():
    # a mean of per-sequence means weights the rows otherwise; nothing runs across the batch that the reference
    # does not pool too
    message = _message("default", "09", "lm_loss", ".sum(1) / (targets != -100).sum(1)).mean()")
    assert "rows of a batch are mixed" not in _line(message, "Likely bug:")
    assert "candidates" in _line(message, "Candidates:")


def test_a_swapped_pair_is_not_told_its_count_is_a_float():
    message = _message("default", "10", "nll_sum_and_count", "return count, nll.item()")
    bugs = _line(message, "Likely bug:")
    assert "the count is a float" not in bugs and "the NLL sum is an int" not in bugs
    assert "returns (count, nll_sum)" in bugs


def test_a_decode_steps_table_slice_is_set_beside_the_references_step_slice():
    message = _message("fresh", "06", "generate_greedy", "cache.reset()                                       # a clean")
    where = _line(message, "Where:")
    assert "the reference's [0:5]" not in where  # the prefill's slice, another call
    assert "as the reference's [5:6] does" in where


def test_a_value_made_by_another_route_is_not_a_step_applied_twice():
    # topk(1).values equals the reference's sort(...)[..., 0:1]: no slice of the learner's came before this one
    message = _message("default", "08", "top_k_filter", "values[..., -2:-1]")
    assert "applied twice" not in _line(message, "Where:")
    summed = _message("fresh", "10", "bigram_nll", "/ len(val)")
    assert "applied twice" not in _line(summed, "Where:")  # its sum is the reference's mean, not its row totals


def test_draws_that_two_mistakes_give_alike_name_both_as_candidates():
    message = _message("fresh4", "08", "sample_next", "    elif top_p is not None:")
    assert "top-k alone" not in "\n".join(line for line in message.splitlines() if "Likely bug:" in line)
    bug = _line(message, "Candidates:")
    assert "candidates" in bug and "top-p skipped when top-k is set" in bug and "top-p applied before top-k" in bug


def test_a_scale_that_comes_out_one_is_said_as_the_scale_measured():
    message = _message("fresh4", "03", "causal_attention", "math.sqrt(q.shape[-1] // q.shape[1])")
    assert "comes out 1" in _line(message, "Likely bug:")


def test_a_dtype_fix_does_not_point_at_the_inputs_dtype():
    message = _message("default", "03", "causal_mask", "dtype=torch.float32")
    bugs = _line(message, "Likely bug:")
    assert "keep the dtype of the inputs" not in bugs  # the inputs are two ints
    assert "find the step that makes torch.float32" in bugs


def test_a_size_matching_one_ratio_on_one_value_is_a_candidate():
    # 1 - cos ends at max_lr, 10 times this min_lr; 10 warmup steps is a coincidence
    message = _message("fresh5", "09", "lr_schedule", "0.5 * (1 - math.cos(")
    fact = [line.strip() for line in message.splitlines() if "is `warmup_steps` in this call" in line]
    assert fact and fact[0].startswith("Candidates:") and "candidates" in fact[0]


def test_a_result_of_the_right_values_in_another_shape_is_not_a_missing_step():
    message = _message("fresh8", "03", "split_heads", "torch.cat(tuple(y), dim=-1)")
    where = _line(message, "Where:")
    assert "a step after it is missing" not in where
    assert "the very same values, in another shape" in where


def test_a_mask_of_the_wrong_width_says_how_many_cached_positions_it_counts():
    message = _message("default", "06", "attention_step", "start = past_k.shape[1]")
    assert "counts 3 cached positions where past_k holds 0" in _line(message, "Likely bug:")


def test_temperature_zero_lost_on_the_way_is_not_told_to_pass_it_on_only():
    message = _message("fresh9", "08", "generate", "temperature or 1.0")
    bug = _line(message, "Candidates:")
    assert "candidates" in bug and "temperature or 1.0" in bug


def test_a_rotate_half_of_the_wrong_shape_names_the_split_as_well_as_the_join():
    message = _message("offlist", "04", "apply_rope", "x1, x2 = x.split(2, dim=-1)")
    assert "x.chunk(2, dim=-1)" in _line(message, "Likely bug:")


def test_a_future_leak_names_what_lets_it_through_as_candidates():
    message = _message("default", "03", "causal_attention", ".to(q.device).T")
    leak = [line.strip() for line in message.splitlines() if "future leak" in line]
    assert leak and leak[0].startswith("Candidates:") and "candidates" in leak[0]


def test_a_batch_of_another_shape_is_not_said_to_mix_rows():
    message = _message("default", "01", "embed", "return weight[ids.flatten()]")
    assert "rows of a batch are mixed" not in message  # the axes are merged; no row reads another's values
    assert "right rows, wrong shape" in _line(message, "Likely bug:")


def test_a_scale_applied_on_the_queries_and_again_on_the_scores_is_still_applied_twice():
    # the learner's own code divides q, and causal_attention divides its scores again: twice is what it does
    message = _message("offlist", "03", "self_attention", "q / math.sqrt(q.shape[-1])")
    assert "this step is applied twice" in _line(message, "Where:")


def test_a_division_by_one_is_not_told_a_step_is_missing():
    # the code divides by sqrt(head_dim // n_heads) = 1: the step is there, it changes nothing
    message = _message("fresh4", "03", "causal_attention", "math.sqrt(q.shape[-1] // q.shape[1])")
    assert "a step the reference takes" not in message
    left_out = [m for m in SETS["default"]()["03"] if m.why == "forgets the scale"]
    assert len(left_out) == 1
    outcome = bench_diagnostics.run_mutation("03", left_out[0], bench_diagnostics.notebook_cells("03"))
    assert "a step the reference takes between these lines" in _line(outcome.message, "Where:")  # left out


def test_a_row_compared_on_placeholders_says_nothing_of_which_part_was_kept():
    # x's shape row compares zeros with zeros: the window one token short is not "the first entry dropped"
    message = _message("fresh12", "09", "get_batch", "idx = starts[:, None] + torch.arange(seq_len)")
    assert "dropped" not in message and "x has shape (5, 6)" in _line(message, "Likely bug:")


def test_query_heads_that_read_no_kv_head_are_not_said_to_read_head_0():
    # n_rep = n_kv // n_heads = 0: repeat_kv returns no heads and the output is 0 everywhere
    message = _message("fresh12", "07", "gqa_attention", "n_rep = k.shape[1] // q.shape[1]")
    assert "reads kv head [0, 0" not in message
    assert "none reads a kv head" in _line(message, "Measured:")


def test_a_group_size_computed_wrong_is_placed_on_the_line_that_computes_it():
    # the first wrong tensor is repeat_kv's empty result on line 5; the number behind it is made on line 4
    where = _line(_message("fresh12", "07", "gqa_attention", "n_rep = k.shape[1] // q.shape[1]"), "Where:")
    assert where.startswith("Where: line 4 of your gqa_attention, `n_rep = k.shape[1] // q.shape[1]` and line 5")
    assert "the number this line binds is 0, read at line 5" in where
    assert "with 3 in its place your function returns the reference's result" in where  # 6 query heads over 2


def test_a_group_count_taken_for_the_group_size_is_placed_where_it_is_bound_on_the_row_it_fails():
    # right for the visible 4 heads over 2 (2 groups of 2), wrong for 6 over 2: measured on that row's inputs
    where = _line(_message("fresh4", "07", "gqa_step", "start, n_rep = past_k.shape[2], attn.n_kv_heads"), "Where:")
    assert where.startswith("Where: line 5 of your gqa_step, `start, n_rep = past_k.shape[2], attn.n_kv_heads` and "
                            "line 13")
    assert "the second of the 2 values this line binds is 2, read at line 13" in where
    assert "with 3 in its place" in where and "measured on the inputs of the row '6 heads over 2 kv heads'" in where


GQA_BODY = ("    n_rep = q.shape[1] // k.shape[1]\n"
            "    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, n_heads, T, hd): only inside attention\n"
            "    return F.scaled_dot_product_attention(q, k, v, is_causal=True)")


@pytest.mark.parametrize("group_size", ["q.size(1) // k.size(1)", "len(range(q.shape[1])) // k.shape[1]"])
def test_a_right_group_size_computed_another_way_adds_no_line_to_a_later_mistake(group_size):
    # the causal mask left out: the Where line is the one the same mistake gets with the solution's group size
    def where(first_line: str) -> str:
        new = GQA_BODY.replace("q.shape[1] // k.shape[1]", first_line).replace(", is_causal=True)", ")")
        mutation = Mutation("gqa_attention", GQA_BODY, new, ("causal",), "no causal mask")
        outcome = bench_diagnostics.run_mutation("07", mutation, bench_diagnostics.notebook_cells("07"))
        assert outcome.message, "the check passed the mistake"
        lines = [line.strip() for line in outcome.message.splitlines() if line.strip().startswith("Where:")]
        return lines[0].replace(first_line, "...") if lines else ""
    assert where(group_size) == where("q.shape[1] // k.shape[1]")
    assert "number bound here" not in where(group_size)


def test_a_two_matrix_mlp_in_the_decode_count_is_named_by_the_matrix_missing():
    message = _message("fresh12", "07", "decode_bytes_per_token", "per_block = attention + 2 * d * config.d_ff + 2 * d")
    assert "one d_model × d_ff matrix per block is missing" in _line(message, "Likely bug:")


def test_a_step_taken_in_another_order_is_not_a_missing_step():
    # the bias added before the scaling: every step is there, the add meets the scaling one call later
    message = _message("fresh12", "02", "layer_norm", "return (weight * centred + bias) * torch.rsqrt(var + eps)")
    where = _line(message, "Where:")
    assert "a step the reference takes" not in where and "line 6" in where
