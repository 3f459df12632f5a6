"""What fresh34's arrival measurement and reading found (61 mistakes written without reading the checks: notebook
globals, edge arguments, half-finished edits, numerics). Each test runs one mistake through its notebook's check and
holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_notebook_config_read_in_place_of_the_argument_is_confirmed_by_running_again():
    message = _message("fresh34", "06", "kv_cache_bytes", "NB06_MODEL.head_dim")
    assert "line 4 of your kv_cache_bytes" in _line(message, "Where:")
    likely = _line(message, "Likely bug:")
    assert "reads `NB06_MODEL`, a name bound in the notebook" in likely
    assert "with its argument `config` standing for `NB06_MODEL`, it returns the reference's result" in likely


def test_an_attribute_of_a_notebook_config_is_stood_in_for_by_the_argument():
    likely = _line(_message("fresh34", "09", "train_step_costs", "NB09_TRAIN.batch_size"), "Likely bug:")
    assert "its argument `batch_size` standing for `NB09_TRAIN.batch_size`" in likely


def test_a_notebook_tensor_is_stood_in_for_in_its_own_dtype():
    likely = _line(_message("fresh34", "10", "bigram_nll", "val_ids"), "Likely bug:")
    assert "its argument `val`, as int64, standing for `val_ids`" in likely


def test_a_fill_float16_cannot_hold_is_named_with_its_range():
    message = _message("fresh34", "03", "causal_attention", "-1e10")
    assert "Measured: right in float32, raises in float16" in message
    where = _line(message, "Where:")
    assert "-1e10, written on this line, lies outside float16's range (its largest finite value is 65504)" in where


def test_tables_sliced_by_a_length_other_than_x_s_fail_at_another_length():
    message = _message("fresh34", "04", "apply_rope", "T = seq_len")
    assert "with 4 in place of 5, the number line 12 binds, your function returns the reference's result" in message
    assert "start_pos" not in _line(message, "Where:").split("`")[0]
    assert "it passes with start_pos=0 and fails with start_pos" not in message  # the length differs, not the start


def test_a_single_kv_head_is_converted_too():
    likely = _line(_message("fresh34", "04", "interleaved_to_half", "if n_kv_heads > 1 else wk"), "Likely bug:")
    assert "k not permuted" in likely and "n_kv_heads = 1 heads" in likely


def test_a_default_eps_other_than_the_exercise_s_is_measured_against_the_learner_s_own():
    message = _message("fresh34", "02", "rms_norm", "eps: float = 1e-5")
    assert "rms_norm(x, weight) gives what your rms_norm(x, weight, 1e-6) gives (tiny inputs)" in message
    assert "the default eps is 1e-5" in _line(message, "Likely bug:")


def test_the_module_s_forward_call_is_said_to_return_a_tensor():
    message = _message("fresh34", "02", "RMSNorm", "self.epsilon")
    assert "it should return a tensor shaped like its input x" in message
    assert "it should return an nn.Module" not in message
    where = _line(message, "Where:")
    assert "`self.epsilon` is stored here and no line of the class reads it" in where


def test_a_name_bound_under_another_spelling_is_placed_where_it_is_bound():
    where = _line(_message("fresh34", "09", "train_step_accumulated", "n_targets"), "Where:")
    assert where.startswith("Where: line 5 of your train_step_accumulated")
    assert "`n_targets` is bound here and no line of the function reads it; line 11 reads `n_tokens`" in where


def test_temperatures_near_zero_are_sampled_and_a_floor_is_measured():
    # Greedy draws at T=0.005 are also what logits divided by T twice give: said as candidates, never as certain.
    greedy = _message("fresh34", "08", "sample_next", "<= 0.01")
    assert "T=0.005 (logits 0.005 times as spread): frequencies" in greedy
    assert "candidates: a temperature this small taken as greedy" in _line(greedy, "Candidates:")
    floor = _message("fresh34", "08", "sample_next", "max(temperature, 0.1)")
    assert "your frequencies follow softmax(logits / 0.10)" in _line(floor, "Measured:")
    assert "Likely bug:" not in floor  # on logits this close the known wrong distributions are alike


def test_a_count_short_by_the_targets_of_id_zero_is_confirmed():
    likely = _line(_message("fresh34", "10", "nll_sum_and_count", "targets > 0"), "Likely bug:")
    assert "the targets of id 0 are not counted" in likely and "your count is right" in likely


def test_counts_of_an_mlp_with_two_matrices_and_a_final_norm_per_block_are_named():
    assert "one d_model × d_ff matrix per block is missing" in _line(
        _message("fresh34", "09", "train_step_costs", "2 * d * config.d_ff"), "Likely bug:")
    assert "the final norm's gain counted in every block" in _line(
        _message("fresh34", "07", "decode_bytes_per_token", "L * (per_block + d)"), "Likely bug:")


def test_a_sum_that_went_through_float16_is_measured_as_a_float16_number():
    measured = _line(_message("fresh34", "10", "nll_sum_and_count", ".half()"), "Measured:")
    assert "is a float16 number (measured: float16 holds it exactly, and not the reference's" in measured
    # a wrong sum far from the reference is not read as rounding, even where it is a whole number
    assert "float16 number" not in _message("default", "10", "nll_sum_and_count", "return count, nll.item()")


def test_a_column_appended_when_no_token_was_asked_for_is_placed_on_the_line_adding_it():
    message = _message("fresh34", "06", "generate_greedy", "if idx.shape[1] - prompt.shape[1] >= max_new_tokens")
    assert "Measured: asked for no new token, your generate_greedy returns 1 more column" in message
    where = _line(message, "Where:")
    assert "torch.cat((idx, next_id), dim=1)" in where and "a column past the prompt is added here" in where


def test_draws_from_the_notebook_s_generator_are_confirmed_by_running_with_the_caller_s():
    message = _message("fresh34", "08", "generate", "top_p, gen)")
    assert "sample_next(logits, temperature, top_k, top_p, gen)" in _line(message, "Where:")
    likely = _line(message, "Likely bug:")
    assert "draws from `gen`, a generator bound in the notebook, where the call's `generator` is meant" in likely
    assert "the generator is not used" not in message
