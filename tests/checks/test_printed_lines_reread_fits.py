"""Lines a second reading of the older sets found untrue, in the fits,
filters and counts the exercise checks print: a law fitted but never held to
the data, a filter's finite entries read as kept ones, a count's cause that a
passing row rules out, a head-axis error blamed on k and v when the mask had
the other count. Each test runs one mistake through its notebook's check and
holds the line to what the code does."""
from __future__ import annotations

import math

import torch

from autograder.checks.accounting import train_mistakes
from autograder.checks.accounting_reading import refuted
from autograder.checks.references.heads import head_mismatch_fact
from autograder.checks.rope import _explain_frequencies
from autograder.checks.framework.check import Check

from .test_printed_lines_true import _line, _message


def _frequencies_line(inv_freq: torch.Tensor, head_dim: int = 8, theta: float = 10000.0, rows: int = 12) -> str:
    angles = torch.outer(torch.arange(rows, dtype=torch.float32), inv_freq.float())
    angles = torch.cat((angles, angles), dim=-1)
    chk = Check("rope_cache")
    _explain_frequencies(chk, angles.cos(), angles.sin(), head_dim, theta)
    return "\n".join(chk.facts)


def test_a_frequency_law_is_printed_only_where_every_column_follows_it():
    # -arange(0, 8, 2) // 8 = [0, -1, -1, -1]: no theta^(b + s·i) goes through these four exponents
    message = _message("fresh5", "04", "rope_cache", "-torch.arange(0, head_dim, 2) // head_dim")
    measured = _line(message, "Measured:")
    assert "theta^(-0.300 -0.300·i)" not in measured and "fitted" not in measured
    assert "e = 0.000, -1.000, -1.000, -1.000" in measured
    # a law that does hold is still printed, with the tolerance it holds to: theta^(-2i) / 8 = theta^(-0.226 - 2i)
    line = _frequencies_line(10000.0 ** -torch.arange(0, 8, 2, dtype=torch.float32) / 8)
    assert "theta^(-0.226 -2.000·i)" in line and "within 0.001" in line


def test_a_column_turning_whole_turns_gets_no_logarithm_of_its_rounding():
    # 2π times the right frequencies: column 0 turns exactly 2π per position, which whole positions see as no turn
    message = _message("fresh6", "04", "rope_cache", "inv_freq) * 2 * torch.pi")
    measured = _line(message, "Measured:")
    assert "+0.317·i" not in measured and "-1.123" not in measured
    # the other columns turn by 2π·theta^(-2i/8) = theta^(0.200 - 0.250·i): i = 1, 2, 3 measured as such
    assert "e = none, -0.050, -0.300, -0.550" in measured and "whole turns" in measured


def test_tables_whose_rows_restart_are_read_on_the_rows_before_the_break():
    inv_freq = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    angles = torch.outer(torch.arange(12, dtype=torch.float64), inv_freq)
    angles = torch.cat((angles, angles), dim=0)                           # positions 0..11 twice
    chk = Check("rope_cache")
    _explain_frequencies(chk, angles.cos().float(), angles.sin().float(), 8, 10000.0)
    assert "rows 0..11" in chk.facts[0] and "row 12 breaks" in chk.facts[0]


def test_a_temperature_is_printed_only_where_its_softmax_holds_to_the_draws():
    # normalised sigmoids: no softmax(logits / T) at any T
    message = _message("fresh8", "08", "sample_next", "probs = torch.sigmoid(logits)")
    measured = _line(message, "Measured:")
    assert "T=1.0: your frequencies follow" not in measured and "T=0.5: your frequencies follow" not in measured
    assert "T=0.5: no softmax(logits / T) gives your frequencies" in measured
    bound = 5 * math.sqrt(0.25 / 20000)
    assert f"beyond the draws' noise ({bound:.3f}" in measured
    # the rows filtered to a few tokens do follow a softmax of their own, and say within what
    assert f"T=2.0, top_k=4: your frequencies follow softmax(logits / 6.48) (every drawn token within {bound:.3f}" \
        in measured


def test_filtered_entries_left_finite_are_not_called_kept_ones_changed():
    # masked_fill with logits.min(): the top-k entries are untouched, the others finite
    message = _message("fresh8", "08", "top_k_filter", "logits.masked_fill(logits < kth, logits.min())")
    measured = _line(message, "Measured:")
    assert "changes the values of the logits it keeps" not in measured
    assert "gives the entries it should drop finite values, not -inf" in measured
    assert "the entries it should keep are the input logits unchanged" in measured


def test_a_count_cause_that_a_passing_row_rules_out_is_not_named():
    # n_kv_heads in place of n_heads: a third of attention in both GQA configs (6/2, 9/3), right for MHA
    message = _message("fresh3", "09", "train_step_costs", "4 * seq_len * config.n_kv_heads * hd")
    assert "forward pass only" not in message
    assert "counted for n_kv_heads heads" in _line(message, "Likely bug:")


def test_forward_only_attention_is_ruled_out_by_a_right_mha_count_and_kept_by_a_wrong_one():
    import tinylm
    mha = (tinylm.ModelConfig(d_model=64, n_layers=2, n_heads=4), 8, 256)
    forward_only = [bug for bug in train_mistakes(*mha, "flops")[1] if "forward pass only" in bug]
    assert forward_only and forward_only[0] in refuted(10 ** 9, *train_mistakes(*mha, "flops"))
    # counting n_kv_heads changes nothing where n_kv_heads = n_heads: a right MHA count cannot rule it out
    by_kv = [bug for bug in train_mistakes(*mha, "flops")[1] if "n_kv_heads heads" in bug]
    assert by_kv and by_kv[0] not in refuted(10 ** 9, *train_mistakes(*mha, "flops"))


def test_a_head_axis_error_from_the_mask_says_the_mask():
    # k and v are repeated; the mask was expanded to n_kv_heads heads
    message = _message("fresh9", "07", "gqa_step", "expand(B, attn.n_kv_heads")
    measured = _line(message, "Measured:")
    assert "so the keys or the values" not in measured and "not repeated" not in measured
    assert "the queries, keys and values have 4; the mask has 2" in measured


def test_a_head_axis_error_without_the_operands_names_the_mask_among_the_candidates():
    text = "The size of tensor a (4) must match the size of tensor b (2) at non-singleton dimension 1"
    evidence = head_mismatch_fact(text)
    assert evidence.kind == "candidates" and "mask" in evidence.text and "candidates" in evidence.text
    evidence = head_mismatch_fact(text, {"queries": 4, "keys": 2, "values": 2})
    assert evidence.kind == "measured" and "the keys and values have 2, not repeated to the queries' 4" in evidence.text
