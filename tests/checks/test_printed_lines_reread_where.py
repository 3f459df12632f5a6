"""The tracer's Where lines found untrue when the older sets' messages were
read again: a kind that says a right value sits in another's place for a
value made wrongly on its own line, a step said missing where it is there
in another order, a shape blamed for an error about an index's numbers,
and a line named as the maker of a value it only reads. Each test runs one
mistake through its notebook's check and holds the Where line to the code."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message

ROLE = "a value is used in another's place"
VALUE = "the first line whose value the reference never computes"
MISSING = "a step the reference takes"


def test_exponents_from_a_shifted_arange_are_a_value_made_wrongly_on_their_line():
    # arange(2, hd + 2, 2): the line computes its own exponents wrongly; no right value is read in a wrong place
    where = _line(_message("fresh8", "04", "rope_cache", "torch.arange(2, head_dim + 2, 2"), "Where:")
    assert ROLE not in where and "line 4 uses the value line 4 makes" not in where
    assert VALUE in where and "neg gives shape (4,)" in where


def test_one_dimensional_positions_in_a_mask_are_not_a_value_in_anothers_place():
    # the query positions kv_len - q_len + i are right; they lack the axis that would broadcast them
    where = _line(_message("fresh6", "03", "causal_mask", "torch.arange(kv_len) <= torch.arange(q_len)"), "Where:")
    assert ROLE not in where and VALUE in where


def test_a_nucleus_mask_from_a_fixed_fraction_is_a_value_made_wrongly():
    where = _line(_message("fresh8", "08", "top_p_filter", "drop_sorted = (torch.arange(logits.shape[-1]) >="),
                  "Where:")
    assert ROLE not in where and "line 7 uses the value line 7 makes" not in where
    assert VALUE in where and "ge gives shape (11,), bool" in where


def test_one_position_too_few_is_a_value_made_wrongly_beside_the_references_table():
    # arange(max_seq_len - 1) numbers 11 positions where the table has max_seq_len = 12 rows
    where = _line(_message("offlist", "04", "rope_cache", "torch.arange(max_seq_len - 1"), "Where:")
    assert ROLE not in where and VALUE in where
    assert "outer gives shape (11, 4)" in where and "the reference's outer gives shape (12, 4)" in where


def test_angles_negated_on_an_earlier_line_are_named_there_not_as_a_value_in_anothers_place():
    # cat((angles, -angles)) makes a table the reference never has (its cos still agrees); line 7 reads what it should
    where = _line(_message("fresh7", "04", "rope_cache", "angles = torch.cat((angles, -angles)"), "Where:")
    assert ROLE not in where and VALUE in where
    assert where.startswith("Where: line 6 ") and "line 7's sin reads the value the cat here makes" in where


def test_right_tokens_given_a_leading_axis_are_said_to_be_in_another_shape():
    # argmax(dim=-1)[None]: the tokens are the reference's, as (1, B) where the reference keeps them (B, 1)
    where = _line(_message("offlist", "06", "generate_greedy", "logits.argmax(dim=-1)[None]"), "Where:")
    assert ROLE not in where
    assert "the reference's numbers in another shape" in where
    assert "gives shape (1, 2)" in where and "the reference has these numbers in shape (2, 1)" in where
    assert "then line 10 raises" in where


def test_a_line_that_only_reads_a_value_is_not_named_as_its_maker():
    # step_input is read on line 8 (and given back unchanged by the model's cast); the token is made by line 9's argmax
    where = _line(_message("offlist", "06", "generate_greedy", "idx = torch.cat((step_input, next_id), dim=1)"),
                  "Where:")
    assert "line 8 " not in where and "logits = model(step_input" not in where
    assert where.startswith("Where: line 9 ") and "line 10" in where


def test_an_extra_cast_of_the_mean_square_is_not_told_a_step_is_missing():
    # every step is there (eps, rsqrt, the product, the final cast); a float16 cast is added before them
    where = _line(_message("fresh9", "02", "rms_norm",
                           "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True).to(x.dtype) + eps)"), "Where:")
    assert MISSING not in where
    assert VALUE in where and "to gives shape (2, 3, 5, 1), float16" in where


def test_eps_added_after_the_rsqrt_is_an_order_not_a_missing_step():
    where = _line(_message("fresh9", "02", "rms_norm",
                           "inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True)) + eps"), "Where:")
    assert MISSING not in where and VALUE in where and where.startswith("Where: line 5 ")


def test_the_log_taken_after_the_mean_is_an_order_not_a_missing_step():
    where = _line(_message("fresh4", "10", "bigram_nll", "-probs[val[:-1], val[1:]].mean().log().item()"), "Where:")
    assert MISSING not in where and VALUE in where


def test_keys_rotated_after_the_cache_update_are_not_told_a_step_is_missing():
    # the rotation is there, on line 12, after the cat; the cat's keys are the reference's only before it rotates
    where = _line(_message("unseen", "06", "attention_step", "k_all = tinylm.apply_rope(k_all, cos, sin)"), "Where:")
    assert MISSING not in where and VALUE in where and where.startswith("Where: line 11 ")


def test_an_index_out_of_bounds_is_not_blamed_on_a_shape():
    # gather's (3, 5, 1) index is the shape gather needs; the -100 padding targets are out of bounds in any shape
    message = _message("fresh", "09", "lm_loss", "gather(-1, targets[..., None]).mean()")
    where = _line(message, "Where:")
    assert "another shape" not in where and "a later line raises" not in where
    assert "it raises here" in where and "index -100 is out of bounds" in where


def test_a_shape_said_wrong_says_no_later_line_raises_when_its_own_line_does():
    message = _message("fresh5", "03", "causal_attention", "q @ k.T")
    assert "a later line raises" not in message


def test_a_preallocated_float32_result_is_named_where_its_dtype_is_fixed():
    # torch.zeros without dtype= makes float32 whatever x is; the slices copied into it are float64 and right
    where = _line(_message("fresh6", "07", "repeat_kv", "out = torch.zeros(B, n_kv * n_rep, T, hd)"), "Where:")
    assert VALUE not in where and "out[:, h] = x[:, h // n_rep]" not in where
    assert where.startswith("Where: line 5 ") and "a dtype is fixed here" in where and "zeros makes a new float32" in where
