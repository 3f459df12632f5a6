"""What fresh17's arrival reading found (64 mistakes written without reading
the checks, 24 of them twins: two causes of one symptom): each test runs one
mistake through its notebook's check and holds the message to what the code
does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message, bench_diagnostics  # the benchmarks folder on sys.path

from benchmarks.mutations import SETS  # noqa: E402
from benchmarks.mutations.unseen import M  # noqa: E402

SETS_FRESH17 = SETS["fresh17"]()


def test_values_rotated_in_place_of_the_queries_are_named_apart_from_in_place_of_the_keys():
    likely = _line(_message("fresh17", "04", "rotary_attention", "v = apply_rope(v, cos, sin, start_pos)"),
                   "Likely bug:")
    assert "instead of the queries" in likely and "instead of the keys" not in likely


def test_a_gelu_mlp_counted_for_swiglu_is_named_from_every_config():
    likely = _line(_message("fresh17", "05", "param_counts", '"mlp": L * 2 * d * 4 * d'), "Likely bug:")
    assert "a GELU MLP counted" in likely


def test_a_perplexity_taken_as_the_square_root_of_the_loss_is_measured_as_such():
    measured = _line(_message("fresh17", "10", "evaluate", '"perplexity": math.sqrt(loss)'), "Measured:")
    assert "your perplexity equals sqrt(loss)" in measured


def test_logits_shifted_by_their_row_maximum_and_by_their_row_mean_are_told_apart():
    by_max = _line(_message("fresh17", "01", "tied_logits", ".amax(dim=-1, keepdim=True)"), "Likely bug:")
    by_mean = _line(_message("fresh17", "01", "tied_logits", ".mean(dim=-1, keepdim=True)"), "Likely bug:")
    assert "each row's maximum subtracted" in by_max and "mean" not in by_max
    assert "each row centred on its mean" in by_mean and "maximum" not in by_mean


def test_logits_shifted_by_an_unlisted_constant_are_measured_as_shifted_not_named():
    for new, said in (("return x @ weight.T + 1.5  #", "with 1.5 added to every logit"),
                      ("return x @ weight.T - x.sum(-1, keepdim=True)  #",
                       "a constant added to each row (not the same in every row)")):
        message = bench_diagnostics.run_mutation("01", M("tied_logits", "return x @ weight.T  #", new, (), ""),
                                  bench_diagnostics.notebook_cells("01")).message
        assert said in _line(message, "Measured:") and "Likely bug:" not in message


def _lm_loss_message(new: str) -> str:
    old = "return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)"
    return bench_diagnostics.run_mutation("09", M("lm_loss", old, new, (), ""), bench_diagnostics.notebook_cells("09")).message


def test_padding_scored_as_a_token_is_confirmed_by_moving_only_the_padded_logits():
    likely = _line(_message("fresh17", "09", "lm_loss", "targets.flatten().clamp(min=0), ignore_index=-100"),
                   "Likely bug:")
    assert "the padded positions are scored, each as token 0" in likely


def test_padding_counted_only_in_the_denominator_is_not_said_to_be_scored():
    # the padded positions add nothing to the sum: moving their logits moves nothing
    message = _lm_loss_message("return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100, "
                               "reduction='sum') / targets.numel()")
    assert "padding counted" in message and "the padded positions are scored" not in message


def test_padding_that_reaches_the_loss_as_no_one_token_is_said_with_its_candidates():
    # each padded target scored as the token before it in the row: the padded logits reach the loss, as no one
    # token; a softmax over the positions would move it too, so neither is said as certain
    message = _lm_loss_message("return F.cross_entropy(logits.flatten(0, 1), torch.where(targets == -100, "
                               "targets.roll(1, -1).clamp(min=0), targets).flatten())")
    assert "candidates: the padded positions are scored" in _line(message, "Candidates:")
    assert "each as token" not in message


def test_a_merge_that_reads_its_input_in_another_axis_order_is_told_which_order():
    likely = _line(_message("fresh17", "03", "split_heads", "y.transpose(2, 3).reshape(B, T, H * hd)"), "Likely bug:")
    assert "read in the axis order (batch, heads, head_dim, seq), y.permute(0, 1, 3, 2)" in likely


def test_smoothing_added_to_the_denominator_only_is_named_apart_from_the_numerator_only():
    likely = _line(_message("fresh17", "10", "bigram_nll", "probs = counts /"), "Likely bug:")
    assert "smoothing missing from the numerator" in likely and "from the denominator" not in likely


def test_eps_added_after_the_reciprocal_root_is_named_apart_from_eps_outside_the_root():
    likely = _line(_message("fresh17", "02", "rms_norm", "keepdim=True)) + eps"), "Likely bug:")
    assert "eps added after the reciprocal square root" in likely and "eps outside the sqrt" not in likely


def test_keys_passed_as_the_values_in_a_cached_step_are_named():
    likely = _line(_message("fresh17", "07", "gqa_step", "repeat_kv(k_all, n_rep), repeat_kv(k_all, n_rep)"),
                   "Likely bug:")
    assert "the keys passed as the values too" in likely


def test_a_layer_norm_that_scales_before_it_normalises_is_not_told_a_step_is_missing():
    # weight * centred first, as the exercise's own solution does, then 1 / std: the normalisation is there
    where = _line(_message("fresh17", "02", "layer_norm", "(1 / centred.std(dim=-1, keepdim=True))"), "Where:")
    assert "a step the reference takes" not in where and "std over axis -1" in where


def test_the_exponent_divided_by_half_head_dim_is_shown_at_the_division_not_the_minus_sign():
    where = _line(_message("fresh17", "04", "rope_cache", "/ (head_dim // 2))"), "Where:")
    assert "yours: div gives" in where and "neg gives" not in where


def test_a_mode_read_after_eval_is_named_from_the_models_own_mode_calls():
    # both codes give back eval mode; the model's own train()/eval() calls, watched during the call, tell them
    # apart, and the fix the code already has is not its cause
    for nb, fn, words in (("08", "generate", "model.train(model.training)"),
                          ("10", "evaluate", "model.eval()\n    was_training")):
        found, = [m for m in SETS_FRESH17[nb] if m.cell == fn and words in m.new]
        message = bench_diagnostics.run_mutation(nb, found, bench_diagnostics.notebook_cells(nb)).message
        assert "remember was_training" not in message
        assert "the mode given back is the one model.eval() had just set" in _line(message, "Likely bug:")
        assert "Candidates:" not in message


def test_a_wrong_position_is_shown_at_the_first_slot_that_has_one():
    # the mask shifted one slot right: the first real token (slot 4) keeps position 0, slot 5 gets 0 too
    likely = _line(_message("fresh17", "06", "generate_left_padded", "mask[b, T - len(p) + 1:] = True"),
                   "Likely bug: wrong positions")
    assert "row 0's token in slot 5 is given position 0" in likely and "slot 4 is given" not in likely


def test_sizes_read_in_another_order_before_an_expand_are_not_blamed_on_the_unsqueeze():
    message = _message("fresh17", "07", "repeat_kv", "B, T, n_kv, hd = x.shape")
    assert "the sizes asked are the tensor's own in another order" in _line(message, "Candidates:")
    assert "x[:, :, None].expand(B, n_kv, n_rep, T, hd), then reshape" not in message
    assert "has the reference's numbers in another shape" not in _line(message, "Where:")


def test_the_divisor_of_an_accumulated_loss_is_named_only_when_a_second_batch_confirms_it():
    # 12, 7 and 3 are each both a micro-batch's token count and another count of the first batch (12 the first
    # micro-batch's and the largest; 7 the second's and 22 // 3; 3 the last's and the number of micro-batches)
    for words, divisor in (("n_tokens = int((micro_batches[0][1]", "the first micro-batch's target tokens"),
                           ("// len(micro_batches)", "the mean number of target tokens per micro-batch, rounded down"),
                           ("(summed / len(micro_batches))", "the number of micro-batches")):
        likely = _line(_message("fresh17", "09", "train_step_accumulated", words), "Likely bug:")
        assert f"the summed loss is divided by {divisor}" in likely


def test_cached_values_split_into_heads_without_the_transpose_are_named():
    likely = _line(_message("fresh17", "07", "gqa_step", "v = attn.v_proj(x).view(B, attn.n_kv_heads, T"), "Likely bug:")
    assert "values split into heads without the transpose" in likely


def test_a_block_whose_mlp_exchanges_gate_and_up_is_named_from_its_own_weights():
    likely = _line(_message("fresh17", "05", "Transformer", "swiglu(x, self.up_proj.weight, self.gate_proj.weight"),
                   "Likely bug:")
    assert "gate and up swapped in the MLP" in likely


def test_a_top_k_threshold_at_the_k_th_smallest_logit_is_named_from_the_count_law():
    likely = _line(_message("fresh17", "08", "top_k_filter", "largest=False).values"), "Likely bug:")
    assert "the threshold is the row's k-th SMALLEST logit" in likely


def test_positions_made_in_bfloat16_are_read_off_the_tables_of_a_long_length():
    likely = _line(_message("fresh17", "04", "rope_cache", "dtype=torch.bfloat16).float(), inv_freq"), "Likely bug:")
    assert "the positions are rounded to the integers bfloat16 holds" in likely
    assert "row 257 of your tables for max_seq_len=600 holds the angles of position 256" in likely


def test_a_log_softmax_over_the_positions_is_not_told_the_padding_is_scored():
    message = _message("fresh7", "09", "lm_loss", "F.log_softmax(logits, dim=1).flatten(0, 1)")
    assert "Likely bug: the padded positions are scored" not in message


def test_queries_rotated_one_position_ahead_in_a_cached_step_are_said_as_an_offset_between_the_two():
    # the scores depend on q's and k's positions only through their difference: which side moved is not told
    likely = _line(_message("fresh17", "06", "attention_step", "start_pos=start + 1)"), "Likely bug:")
    assert "rotated one position apart (the queries one ahead, start_pos + 1, or the keys one behind)" in likely


def test_a_layer_norm_that_applies_neither_weight_nor_bias_is_named():
    likely = _line(_message("fresh8", "02", "layer_norm", "nn.LayerNorm(x.shape[-1], eps=eps)(x)"), "Likely bug:")
    assert "weight and bias not applied" in likely
