"""Mistakes of fresh15 and fresh16 whose messages named nothing or only
located them: each cause is now confirmed on the learner's own function (a
re-run, the flags its forward pass ran with, its output recomputed under the
hypothesis) and named, or its measurement said with candidates; and a
different mistake with the same symptom does not get that line."""
from __future__ import annotations

# imported from there: that module puts benchmarks/ on the path first
from .test_printed_lines_true import Mutation, _line, _message, bench_diagnostics


def _own(notebook: str, cell: str, old: str, new: str) -> str:
    """The failure message of a mistake written here: `old` of the solution cell becomes `new`."""
    mutation = Mutation(cell, old, new, ("-",), "a sibling with the same symptom")
    outcome = bench_diagnostics.run_mutation(notebook, mutation, bench_diagnostics.notebook_cells(notebook))
    assert outcome.message, "the check passed the mistake"
    return outcome.message


def test_targets_shifted_again_are_named_from_the_step_gradient():
    message = _message("fresh16", "09", "train_step_accumulated", "y[:, 1:].flatten()")
    likely = _line(message, "Likely bug:")
    assert "shifted a second time" in likely and "against y[:, t + 1]" in likely
    assert "Compare your code with the formula" not in message


def test_logits_shifted_the_other_way_are_not_said_to_shift_the_targets_again():
    old = "summed = F.cross_entropy(logits.flatten(0, 1), y.flatten(),"
    message = _own("09", "train_step_accumulated", old,
                   "summed = F.cross_entropy(logits[:, 1:].flatten(0, 1), y[:, :-1].flatten(),")
    assert "shifted a second time" not in message


def test_a_train_mode_set_on_the_top_module_only_is_read_off_the_submodules():
    message = _message("fresh15", "09", "train_step", "model.training = True")
    likely = _line(message, "Likely bug:")
    assert "only the top module" in likely and "Dropout layers among them, were still in eval mode" in likely


def test_no_train_mode_at_all_is_still_eval_mode_left_on():
    message = _own("09", "train_step", "model.train()                                # dropout on",
                   "pass                                         # dropout on")
    assert "eval mode left on" in _line(message, "Likely bug:")
    assert "only the top module" not in message


def test_a_block_wired_in_parallel_is_named_by_the_block_check():
    message = _message("fresh16", "05", "Transformer", "return x + h + self.mlp(self.mlp_norm(x))")
    likely = _line(message, "Likely bug:")
    assert "branches in parallel" in likely and "x + attn(attn_norm(x)) + mlp(mlp_norm(x))" in likely


def test_the_mlp_reading_attn_norm_is_not_said_to_be_parallel():
    message = _own("05", "Transformer", "return x + self.mlp(self.mlp_norm(x))",
                   "return x + self.mlp(self.attn_norm(x))")
    assert "attn_norm used for both branches" in _line(message, "Likely bug:")
    assert "parallel" not in message


def test_positions_advanced_by_the_prefill_width_are_read_though_the_loop_raises():
    message = _message("fresh16", "06", "generate_left_padded", "positions[:, -1:] + ids.shape[1]")
    likely = _line(message, "Likely bug:")
    assert "wrong positions handed to the model" in likely
    assert "given position 9" in likely and "its position at the call before, 2, plus 7" in likely
    assert "with only the positions your function hands the model replaced by the right ones" in likely


def test_a_loop_that_raises_with_right_positions_gets_no_position_line():
    message = _own("06", "generate_left_padded", "ids, positions = next_id[:, None], positions[:, -1:] + 1",
                   "ids, positions = next_id, positions[:, -1:] + 1")
    assert "positions handed to the model" not in message and "given position" not in message


def test_layer_norm_eps_added_to_the_inverse_root_and_the_uncentred_output_are_named():
    message = _message("fresh16", "02", "layer_norm", "(torch.rsqrt(var) + eps)")
    assert "eps added to 1/sqrt(var)" in _line(message, "Likely bug:")
    message = _message("fresh16", "02", "layer_norm", "return weight * x * torch.rsqrt(var + eps) + bias")
    assert "the output scales x itself, not x - mean" in _line(message, "Likely bug:")


def test_layer_norm_siblings_keep_their_own_causes():
    old = "return weight * centred * torch.rsqrt(var + eps) + bias"
    message = _own("02", "layer_norm", old, "return weight * centred / (var.sqrt() + eps) + bias")
    likely = _line(message, "Likely bug:")
    assert "eps outside the sqrt" in likely and "1/sqrt(var)" not in likely
    message = _own("02", "layer_norm", old,
                   "return weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) + bias")
    likely = _line(message, "Likely bug:")
    assert "that is RMSNorm" in likely and "scales x itself" not in likely


def test_a_weight_shape_read_swapped_says_the_reshape_sizes_as_candidates():
    message = _message("fresh16", "04", "interleaved_to_half", "d_in, rows = w.shape")
    said = _line(message, "Candidates:")
    assert "asks for [3, 1, 2, 24] of w's 240 entries" in said and "d_in = w.shape[1] = 10" in said
    assert "on a square weight (24, 24)" in said and "right rows" in said
    # w.shape[0] written where d_in goes gives the same error: the code is not named as certain
    assert "wrong way round" not in "\n".join(line for line in message.splitlines() if "Likely bug:" in line)


def test_rows_written_for_d_in_get_the_same_measured_candidates():
    message = _own("04", "interleaved_to_half", "pairs = w.reshape(n_heads, hd // 2, 2, d_in)",
                   "pairs = w.reshape(n_heads, hd // 2, 2, rows)")
    said = _line(message, "Candidates:")
    assert "asks for [3, 4, 2, 24]" in said and "w.shape[0] used where d_in belongs" in said
    assert "Likely bug:" not in message


# the located ones of fresh15/fresh16 whose cause a closed form of the learner's output confirms


def test_a_warmup_ending_one_step_early_and_a_floored_cosine_are_named():
    message = _message("fresh15", "09", "lr_schedule", "max(1, warmup_steps - 1)")
    assert "max_lr * step / (warmup_steps - 1)" in _line(message, "Likely bug:")
    message = _message("fresh16", "09", "lr_schedule", "return max(min_lr, 0.5")
    assert "floored at min_lr" in _line(message, "Likely bug:")


def test_a_warmup_starting_at_zero_over_warmup_steps_keeps_its_own_line():
    message = _own("09", "lr_schedule", "max_lr * (step + 1) / warmup_steps", "max_lr * step / warmup_steps")
    likely = _line(message, "Likely bug:")
    assert "warmup starts at 0" in likely and "warmup_steps - 1" not in likely


def test_layer_norm_divided_by_the_squared_variance_is_measured_as_a_power():
    message = _message("fresh15", "02", "layer_norm", "1 / (var + eps) ** 2")
    likely = _line(message, "Likely bug:")
    assert "divided by (var + eps)²" in likely and "(x - mean) · (var + eps)^-2 on every value" in likely


def test_layer_norm_divided_by_the_variance_without_eps_is_not_said_to_use_var_plus_eps():
    old = "return weight * centred * torch.rsqrt(var + eps) + bias"
    message = _own("02", "layer_norm", old, "return weight * centred / var + bias")
    assert "(var + eps)^" not in message


def test_eps_used_as_a_floor_in_rms_norm_is_named_on_the_tiny_inputs():
    message = _message("fresh16", "02", "rms_norm", ".clamp(min=eps)")
    assert "eps used as a floor" in _line(message, "Likely bug:")


def test_eps_left_out_of_rms_norm_is_not_said_to_be_a_floor():
    message = _own("02", "rms_norm", "x32.pow(2).mean(dim=-1, keepdim=True) + eps",
                   "x32.pow(2).mean(dim=-1, keepdim=True)")
    assert "floor" not in message


def test_the_table_rows_apply_rope_reads_are_measured_and_named():
    message = _message("fresh15", "04", "apply_rope", "cos = cos[-T:]")
    assert "cos and sin rows 16..20 (the table's last T rows)" in _line(message, "Likely bug:")
    message = _message("fresh16", "04", "apply_rope", "sin = sin[:T].to")
    assert "cos rows 5..9 and sin rows 0..4" in _line(message, "Likely bug:")


def test_start_pos_ignored_keeps_its_own_line():
    old = "cos[start_pos:start_pos + T].to(x.dtype)  # (T, hd), broadcasts over (B, H)\n    sin = sin[start_pos:start_pos + T]"
    message = _own("04", "apply_rope", old, "cos[:T].to(x.dtype)\n    sin = sin[:T]")
    assert "positions not offset" in _line(message, "Likely bug:")
    assert "table rows are not the T rows" not in message
    # cos alone taken from row 0: the rows measured are those of the code
    message = _own("04", "apply_rope", "cos[start_pos:start_pos + T]", "cos[:T]")
    assert "cos rows 0..4 and sin rows 5..9" in _line(message, "Likely bug:")


def test_queries_rotated_one_ahead_are_measured_without_telling_which_side_moved():
    message = _message("fresh15", "04", "rotary_attention", "q = apply_rope(q, cos, sin, start_pos + 1)")
    likely = _line(message, "Likely bug:")
    assert "rotated 1 position ahead of the keys" in likely and "is not told" in likely


def test_keys_behind_at_one_start_pos_only_are_not_said_to_be_a_constant_offset():
    # start_pos 0 is right, start_pos 4 has the keys 2 behind: no single offset gives both outputs
    message = _own("04", "rotary_attention", "k = apply_rope(k, cos, sin, start_pos)",
                   "k = apply_rope(k, cos, sin, max(start_pos - 2, 0))")
    assert "ahead of the keys" not in message


def test_an_outer_product_the_other_way_round_is_named_from_the_tables():
    message = _message("fresh16", "04", "rope_cache", "torch.outer(inv_freq, torch.arange(max_seq_len")
    assert "the outer product taken the other way round" in _line(message, "Likely bug:")


def test_tables_returned_transposed_are_not_said_to_come_from_the_outer_product():
    message = _own("04", "rope_cache", "return angles.cos(), angles.sin()", "return angles.cos().T, angles.sin().T")
    assert "outer product" not in message


def test_a_key_cache_rotated_again_after_appending_is_named_from_k_all():
    message = _message("fresh15", "06", "attention_step", "k_all = tinylm.apply_rope(k_all, cos, sin)")
    assert "the whole key cache rotated after appending" in _line(message, "Likely bug:")


def test_keys_never_rotated_are_not_said_to_be_rotated_twice():
    message = _own("06", "attention_step", "    k = tinylm.apply_rope(k, cos, sin, start_pos=start)\n", "")
    assert "keys cached before RoPE" in _line(message, "Likely bug:")
    assert "rotated after appending" not in message
