"""What fresh16's arrival reading found (60 mistakes, most from bugs public
projects shipped, written without reading the checks), and what the review
of every message changed this session found: each test runs one mistake
through its notebook's check and holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_default_eps_too_small_to_read_is_not_printed_as_a_measured_value():
    # RMSNorm's default eps 1e-6, estimated from float32 outputs as 9.3e-07: below what their rounding resolves
    likely = _line(_message("fresh16", "05", "Transformer", "self.attn_norm = RMSNorm(config.d_model)"), "Likely bug:")
    assert "uses an eps too small to read from its outputs" in likely and "uses eps 9.3e-07" not in likely


def test_a_filter_that_drops_nothing_is_not_told_a_step_after_it_is_missing():
    # log-probabilities are never positive, so the mass before a token never reaches p: masked_fill ran, dropped none
    message = _message("fresh16", "08", "top_p_filter", "probs = sorted_logits.log_softmax(dim=-1)")
    assert "a step after it is missing" not in message


def test_a_projection_sized_d_model_wide_is_told_both_ways_it_could_come_about():
    likely = _line(_message("fresh16", "05", "Transformer", "self.q_proj = nn.Linear(config.d_model, config.d_model"),
                   "Likely bug:")
    assert "(or n_heads · head_dim as d_model)" in likely


def test_a_clamped_id_in_one_hot_embed_no_longer_passes():
    likely = _line(_message("fresh16", "01", "one_hot_embed", "ids.clamp(max=weight.shape[0] - 1)"), "Likely bug:")
    assert "the id was clamped into the table" in likely


def test_the_token_read_where_the_sequence_so_far_belongs_is_a_value_in_another_place():
    # the loop's cat reads step_input (the last token) where the reference's reads idx: nothing is missing
    where = _line(_message("offlist", "06", "generate_greedy", "torch.cat((step_input, next_id), dim=1)"), "Where:")
    assert "a value is used in another's place" in where and "a step the reference takes" not in where


def test_an_input_resized_by_out_is_described_as_it_was_given():
    message = _message("fresh5", "06", "cache_update", "out=past_k")
    assert "(2, 3, 8, 6)" not in _line(message, "Called with") and " nan " not in message


def test_a_batch_axis_dropped_only_for_a_batch_of_one_is_said_with_its_candidates():
    message = _message("fresh16", "08", "sample_next", "generator=generator).squeeze()")
    measured = _line(message, "Measured:")
    assert "the axis of size 1 at position 0 is missing" in measured
    assert "candidates: a bare squeeze()" in _line(message, "Candidates:")


def test_a_summed_loss_backpropagated_undivided_is_named_by_its_token_count():
    likely = _line(_message("fresh16", "09", "train_step_accumulated", "summed.backward()"), "Likely bug:")
    assert "the summed loss goes into backward() undivided" in likely and "22 = the batch's target tokens" in likely


def test_query_and_output_projections_counted_square_in_the_decode_bytes_are_named():
    likely = _line(_message("fresh16", "07", "decode_bytes_per_token", "attention = 2 * d * d +"), "Likely bug:")
    assert "in q_proj and o_proj (counted d_model × d_model)" in likely
