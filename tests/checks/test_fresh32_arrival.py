"""What fresh32's arrival reading found (63 mistakes written without reading
the checks: look-alikes of familiar bugs, helpers of the learner's own, random
state, dtypes and devices, a batch of one). Each test runs one mistake through
its notebook's check and holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_count_with_the_batch_once_more_is_read_across_the_cases():
    likely = _line(_message("fresh32", "03", "attention_flops", "per_head = 2 * B * T * T * head_dim"), "Likely bug:")
    assert "your count is exactly the measurement times batch in every failing case" in likely
    assert "one factor batch too many" in likely


def test_a_squeeze_that_leaves_a_batch_of_one_without_axes_is_placed():
    where = _line(_message("fresh32", "06", "generate_left_padded", "keepdim=True).squeeze()"), "Where:")
    assert "line 17 of your generate_left_padded" in where and "at line 19 it has 0 axes (shape ())" in where
    assert "squeeze() without a dim removes every axis of size 1" in where


def test_a_cache_kept_in_half_is_placed_at_the_lines_that_make_it():
    where = _line(_message("fresh32", "07", "gqa_step", "dim=2).half()          # (B, n_kv"), "Where:")
    assert "line 10 of your gqa_step" in where and "line 11" in where
    assert "are bound to float16 tensors, while `x`, `cos`, `sin`, `past_k`, `past_v`" in where


def test_a_group_size_read_from_the_batch_is_placed_where_it_is_bound():
    where = _line(_message("fresh32", "07", "gqa_attention", "n_rep = q.shape[1] // k.shape[0]"), "Where:")
    assert "line 4 of your gqa_attention" in where and "the number this line binds is 3" in where
    assert "with 6, 1 or -1 in its place your function returns the reference's result" in where


def test_a_step_that_seeds_the_random_state_itself_is_measured():
    likely = _line(_message("fresh32", "09", "train_step", "torch.manual_seed(0)                         # the same"),
                   "Likely bug:")
    assert "draws the same dropout masks whatever random state it is called in" in likely
    assert "it seeds the random state itself" in likely


def test_micro_batch_sums_that_count_padding_are_measured():
    measured = _line(_message("fresh32", "09", "train_step_accumulated", "* y.numel()"), "Measured:")
    assert "each one's mean loss times its positions, padding included (12, 12, 12), not times its target tokens " \
        "(12, 7, 3)" in measured


def test_attention_sized_by_the_context_is_named():
    likely = _line(_message("fresh32", "09", "train_step_costs", "4 * config.max_seq_len * config.n_heads"),
                   "Likely bug:")
    assert "sized by config.max_seq_len in place of one of their two seq_len" in likely


def test_a_forward_call_of_a_module_says_what_the_forward_returns():
    message = _message("fresh32", "05", "Transformer", "heads = lambda proj: proj(x).view(B, T, self.n_heads")
    called = _line(message, "Called with")
    assert "it should return (B, T, d_model) (a call of the module: its forward(x, cos, sin, cache, layer_idx))" \
        in called


def test_batches_weighted_by_their_positions_are_not_said_to_be_weighted_by_rows_alone():
    likely = _line(_message("fresh32", "10", "evaluate", "y.numel()"), "Likely bug:")
    assert "weighted by its number of rows or of target positions (every row here holds 7, so the two weigh alike)" \
        in likely


def test_a_helper_right_on_one_call_and_wrong_on_the_next_is_placed_at_the_call():
    where = _line(_message("fresh32", "06", "cache_update", "append(past_k, k), append(past_k, v)"), "Where:")
    assert where.startswith("Where: line 5 of your cache_update") and "and line 4" in where
    assert "the helper's line 4 gave a value the reference computes on an earlier call" in where


def test_positions_made_in_float_are_placed_where_they_are_made():
    where = _line(_message("fresh32", "06", "generate_left_padded", "mask.float().cumsum(-1)"), "Where:")
    assert where.startswith("Where: line 12 of your generate_left_padded") and "and line 16" in where
    assert "`positions` is bound here before the loop" in where and "to a float32 tensor" in where
