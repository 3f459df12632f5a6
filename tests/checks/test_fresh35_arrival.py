"""What fresh35's arrival measurement and reading found (69 mistakes written without reading the checks: two slips at
once, torch API semantics, nn.Module plumbing, off-by-one boundaries, public threads). Each test runs one mistake
through its notebook's check and holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_flipped_rotate_half_that_apply_rope_makes_up_for_fails_its_own_row_with_both_fixes():
    message = _message("fresh35", "04", "apply_rope", "return x * cos - rotate_half(x) * sin")
    assert "failed 1 of" in message and "rotate_half on its own: (x1, x2) -> (-x2, x1)" in message
    measured = _line(message, "Measured:")
    assert "run again with a rotate_half returning (-x2, x1) in its place, it turns each pair by -angle" in measured
    assert "your rotate_half returns (x2, -x1)" in _line(message, "Likely bug:")


def test_a_pair_from_min_with_a_dim_is_said_as_values_and_indices_and_placed_where_it_is_bound():
    message = _message("fresh35", "08", "top_k_filter", ".values.min(dim=-1, keepdim=True)")
    assert "`kth` is the pair (values, indices) that torch's min returns" in _line(message, "Measured:")
    assert "line 5 of your top_k_filter" in _line(message, "Where:")


def test_a_head_assigned_the_embedding_s_data_is_said_to_be_a_plain_tensor_not_a_second_parameter():
    likely = _line(_message("fresh35", "01", "tie_weights", "tok_emb.weight.data"), "Likely bug:")
    assert "head is a plain tensor, not the embedding's Parameter" in likely and "requires_grad False" in likely
    assert "second Parameter" not in likely and "yields two" not in likely


def test_a_tie_undone_by_a_later_assignment_places_that_line_instead_of_asking_for_the_tie_again():
    message = _message("fresh35", "05", "Transformer", "nn.Parameter(self.tok_emb.weight.data * 0.02)")
    assert "self.tok_emb.weight = nn.Parameter(" in _line(message, "Where:")
    likely = _line(message, "Likely bug:")
    assert "line 91 ties them, and line 92, after it, assigns one of the two weights again" in likely
    assert "set self.lm_head.weight = self.tok_emb.weight" not in likely


def test_buffers_saved_with_the_weights_get_the_number_advice_only_for_a_number():
    message = _message("fresh35", "05", "Transformer", 'persistent=True')
    assert "Transformer failed 1 of 2 checks: state_dict keys as tinylm's." in message
    assert "self.eps = eps" not in message and "persistent=False" in _line(message, "Likely bug:")


def test_two_slips_that_give_two_bytes_per_element_are_said_as_the_dtype_ignored_with_both_routes():
    likely = _line(_message("fresh35", "06", "kv_cache_bytes", "seq_len * batch_size * 4"), "Likely bug:")
    assert "the dtype is ignored: your count is 2 / itemsize times the right one in every case" in likely
    assert "(or 4 with only the keys or only the values counted)" in likely


def test_new_tokens_placed_at_the_padded_length_get_only_the_decoding_fix():
    likely = _line(_message("fresh35", "06", "generate_left_padded", "torch.full((B, 1), cache.length)"), "Likely bug:")
    assert likely.startswith("Likely bug: new tokens' positions counted from the padded start")
    assert "count each row from 0 at its first real token" not in likely


def test_a_bigram_table_normalised_by_columns_and_read_backwards_is_the_previous_byte_given_the_next():
    message = _message("fresh35", "10", "bigram_nll", "counts.sum(dim=0, keepdim=True)")
    assert "your NLL scores the previous byte given the next one" in _line(message, "Measured:")
    assert "counts are not train's (measured" not in message.replace("the counts your NLL implies", "")
    assert "a table normalised over its columns (dim=0) and read at [next, prev]" in _line(message, "Candidates:")


def test_two_count_slips_that_every_case_agrees_on_together_are_named_together():
    likely = _line(_message("fresh35", "07", "decode_bytes_per_token", "kv_cache = L * config.n_heads * hd"),
                   "Likely bug:")
    assert "K and V both" in likely and "; and n_heads instead of n_kv_heads" in likely
