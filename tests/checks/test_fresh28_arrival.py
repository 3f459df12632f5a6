"""What fresh28's arrival reading found (58 mistakes written without reading
the checks: mistakes inside dense lines, the learner's earlier answers reused
wrongly, look-alike mistakes, promised inputs). Each test runs one mistake
through its notebook's check and holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_transposed_view_of_the_table_is_not_called_a_copy():
    likely = _line(_message("fresh28", "01", "tie_weights", "nn.Parameter(tok_emb.weight.mT)"), "Likely bug:")
    assert "a copy" not in likely and "a view of the embedding's storage (measured)" in likely


def test_the_gain_and_eps_exchanged_in_the_norms_call_are_named():
    likely = _line(_message("fresh28", "02", "RMSNorm", "self.eps, self.weight"), "Likely bug:")
    assert "the gain and eps exchanged in the call of the norm" in likely


def test_padding_positions_below_zero_are_measured_on_what_the_model_is_handed():
    likely = _line(_message("fresh28", "06", "generate_left_padded", "positions = mask.long().cumsum(-1) - 1"), "Likely bug:")
    assert "padding slots are given positions [-1] (your positions), below 0" in likely


def test_attention_counted_with_the_weights_factor_is_named():
    likely = _line(_message("fresh28", "09", "train_step_costs", "6 * (matmul_weights * tokens + attention_matmuls)"),
                   "Likely bug:")
    assert "attention's T × T matmuls counted twice" in likely


def test_the_last_micro_batch_over_the_whole_count_is_measured():
    measured = _line(_message("fresh28", "09", "train_step_accumulated", "return summed.item() / n_tokens"), "Measured:")
    assert "the last micro-batch's summed NLL divided by the batch's 22 target tokens" in measured


def test_q_and_o_counted_without_head_dim_are_read_so_in_every_case():
    likely = _line(_message("fresh28", "07", "decode_bytes_per_token",
                            "2 * d * (config.n_heads + config.n_kv_heads * hd)"), "Likely bug:")
    assert ("attn.q_proj.weight in every block and attn.o_proj.weight in every block without the factor head_dim "
            "(1,536 parameters instead of 24,576, head_dim = 16") in likely


def test_rows_read_in_another_axis_order_say_that_order():
    likely = _line(_message("fresh28", "04", "interleaved_to_half", "pairs.transpose(0, 2).reshape(rows, d_in)"),
                   "Likely bug:")
    assert "read with its axes in the order (member of the pair, pair, head)" in likely
