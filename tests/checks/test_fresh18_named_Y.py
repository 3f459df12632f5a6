"""Mistakes of fresh18 whose messages named nothing (or only measured): each
cause is now confirmed on the learner's own function (its output recomputed
under the hypothesis, a probe read in closed form, the function called again
with its arguments exchanged, its counts fitted in every case) and named; and a
different mistake with a similar symptom does not get that line."""
from __future__ import annotations

# imported from there: that module puts benchmarks/ on the path first
from .test_printed_lines_true import Mutation, _line, _message, bench_diagnostics


def _own(notebook: str, cell: str, old: str, new: str) -> str:
    """The failure message of a mistake written here: `old` of the solution cell becomes `new`."""
    mutation = Mutation(cell, old, new, ("-",), "a sibling with a similar symptom")
    outcome = bench_diagnostics.run_mutation(notebook, mutation, bench_diagnostics.notebook_cells(notebook))
    assert outcome.message, "the check passed the mistake"
    return outcome.message


# 02 layer_norm: the mean subtracted after the division

LN_RETURN = "return weight * centred * torch.rsqrt(var + eps) + bias"


def test_the_mean_subtracted_after_the_division_is_named():
    message = _message("fresh18", "02", "layer_norm", "x * torch.rsqrt(var + eps) - x.mean(dim=-1, keepdim=True)")
    likely = _line(message, "Likely bug:")
    assert "the mean is subtracted after the division" in likely and "x / sqrt(var + eps) - mean" in likely
    assert "Compare your code with the formula" not in message


def test_one_mean_of_the_whole_tensor_subtracted_after_the_division_is_not_said_to_be_the_rows_mean():
    # x / sqrt(var + eps) - x.mean(): the mean of every number, not each row's: the closed form does not hold
    message = _own("02", "layer_norm", LN_RETURN, "return weight * (x * torch.rsqrt(var + eps) - x.mean()) + bias")
    assert "the mean is subtracted after the division" not in message


# 03 causal_attention: the 1/sqrt(head_dim) scale applied after the softmax

def test_the_scale_applied_after_the_softmax_is_named_with_the_row_sums():
    message = _message("fresh18", "03", "causal_attention", "scores.softmax(dim=-1) / math.sqrt(q.shape[-1])")
    assert "row sums 0.5 to 0.5" in _line(message, "Measured:")
    likely = _line(message, "Likely bug:")
    assert "scale is applied after the softmax" in likely and "divided by sqrt(4)" in likely


def test_weights_halved_after_a_right_softmax_are_measured_not_said_to_move_the_scale():
    # the scores are scaled right; the weights are then halved: row sums 0.5 too (1/sqrt(4)), another cause
    message = _own("03", "causal_attention", "weights = scores.softmax(dim=-1) ",
                   "weights = scores.softmax(dim=-1) * 0.5 ")
    assert "scale is applied after the softmax" not in message
    assert "softmax of the masked scores divided by sqrt(head_dim) times 0.5" in _line(message, "Measured:")


# 03 attention_flops, 09 train_step_costs: size arguments exchanged, or one missing as a factor

def test_sizes_exchanged_are_named_from_a_call_with_the_two_exchanged():
    message = _message("fresh18", "03", "attention_flops", "B, T, d = batch, d_model, seq_len")
    likely = _line(message, "Likely bug:")
    assert "reads seq_len where it needs d_model and d_model where it needs seq_len" in likely
    assert "called again with seq_len and d_model exchanged" in likely


def test_one_size_read_for_another_in_one_place_is_not_said_to_exchange_them():
    # T read as d_model in the projections only: no call with two sizes exchanged gives the measurement
    message = _own("03", "attention_flops", "projection = 2 * B * T * d * d", "projection = 2 * B * d * d * d")
    assert "exchanged" not in message and "exchange them back" not in message


def test_the_tokens_counted_as_sequences_are_a_missing_factor_seq_len():
    message = _message("fresh18", "09", "train_step_costs", "tokens = batch_size")
    likely = _line(message, "Likely bug:")
    assert "flops: your count is exactly the measurement divided by seq_len in every failing case" in likely
    assert "a factor seq_len is missing" in likely


def test_seq_len_missing_from_the_weights_term_only_is_not_a_missing_factor():
    # the attention term still has its seq_len: the count is not the measurement over seq_len
    message = _own("09", "train_step_costs", "return {\"flops\": 6 * matmul_weights * tokens",
                   "return {\"flops\": 6 * matmul_weights * batch_size")
    assert "a factor seq_len is missing" not in message


# 05 param_counts: a per-block part counted once

def test_k_and_v_counted_for_one_block_only_are_named():
    message = _message("fresh18", "05", "param_counts", "\"attention\": L * q_and_o + k_and_v")
    likely = _line(message, "Likely bug:")
    assert "attn.k_proj.weight and attn.v_proj.weight for one block only" in likely
    assert "8,192 parameters instead of 16,384" in likely


def test_k_and_v_counted_for_every_block_at_half_size_are_not_said_to_be_counted_once():
    # k_proj's count missing (in every block): a known mistake, not a part outside the n_layers product
    message = _own("05", "param_counts", "\"attention\": L * (q_and_o + k_and_v)",
                   "\"attention\": L * (q_and_o + k_and_v // 2)")
    assert "for one block only" not in message
    assert "k_proj or v_proj is missing" in _line(message, "Likely bug:")


# 04 meta_to_hf_attention: wq's columns permuted instead of its rows

def test_the_columns_of_wq_permuted_are_named():
    message = _message("fresh18", "04", "interleaved_to_half", "interleaved_to_half(wq.T, n_heads).T")
    likely = _line(message, "Likely bug:")
    assert "wq's columns (its input features) are permuted instead of its rows" in likely
    assert "its 24 columns reordered evens then odds in 4 blocks" in likely


def test_wq_left_unpermuted_is_not_said_to_permute_its_columns():
    message = _own("04", "interleaved_to_half", "q_proj = interleaved_to_half(wq, n_heads)", "q_proj = wq")
    assert "columns" not in message and "q not permuted" in _line(message, "Likely bug:")


# 05 Block: the MLP sub-block before the attention sub-block

BLOCK_OLD = ("        x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)"
             "  # the branch reads a normalised copy\n"
             "        return x + self.mlp(self.mlp_norm(x))")


def test_the_mlp_before_attention_is_named_from_the_blocks_own_weights():
    message = _message("fresh18", "05", "Transformer", "        x = x + self.mlp(self.mlp_norm(x))\n")
    likely = _line(message, "Likely bug:")
    assert "the MLP sub-block runs before the attention sub-block" in likely
    assert "Compare your code with the formula" not in message


def test_branches_in_parallel_are_not_said_to_run_the_mlp_first():
    new = ("        h = x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)\n"
           "        return h + self.mlp(self.mlp_norm(x))")
    message = _own("05", "Transformer", BLOCK_OLD, new)
    likely = _line(message, "Likely bug:")
    assert "branches in parallel" in likely and "runs before the attention" not in likely
