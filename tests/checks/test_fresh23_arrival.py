"""What fresh23's arrival reading found (63 mistakes written without reading
the checks: realistic first attempts, torch API mix-ups, numerics): one
passed its visible check, printed lines untrue of the code, and mistakes
named or placed by nothing. Each test runs one mistake through its
notebook's check and holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_an_rmsnorm_whose_default_eps_is_layernorms_fails_and_is_named():
    likely = _line(_message("fresh23", "02", "RMSNorm", "eps: float = 1e-5"), "Likely bug:")
    assert "the default eps is 1e-5, LayerNorm's" in likely


def test_an_eps_added_outside_the_root_is_measured_where_it_sits():
    likely = _line(_message("fresh23", "02", "layer_norm", "torch.rsqrt(var) + eps"), "Likely bug:")
    assert "your normalisation computes (x - mean) / sqrt(variance) + eps" in likely
    assert "eps is added to the output" in likely


def test_halves_unpacked_the_other_way_get_a_fix_that_says_the_unpacking():
    likely = _line(_message("fresh23", "04", "apply_rope", "x2, x1 = x.chunk(2, dim=-1)"), "Likely bug:")
    assert "x1, x2 = x.chunk(2, dim=-1) in that order" in likely


def test_a_transpose_of_the_last_two_axes_in_a_row_reordering_is_measured():
    candidates = _line(_message("fresh23", "04", "interleaved_to_half", ".mT"), "Candidates:")
    assert "a row of it mixes entries of several rows of w" in candidates


def test_a_reshape_asked_for_too_few_elements_says_by_how_much():
    measured = _line(_message("fresh23", "04", "interleaved_to_half", "hd = rows // n_heads // 2"), "Measured:")
    assert "the shape asked for holds 120 elements, 2 times fewer than the 240" in measured


def test_cos_and_sin_swapped_in_the_blocks_call_are_placed_on_that_call():
    where = _line(_message("fresh23", "05", "Transformer", "self.rope_sin, self.rope_cos"), "Where:")
    assert "of your Transformer.forward" in where and "the arguments that differ here: cos, sin" in where


def test_one_kv_projection_left_out_of_the_bytes_is_named():
    message = _message("fresh23", "07", "decode_bytes_per_token", "+ d * config.n_kv_heads * hd  #")
    likely = _line(message, "Likely bug:")
    assert "one d_model × n_kv_heads·head_dim matrix per block is missing" in likely


def test_a_loss_recomputed_after_the_step_is_named():
    likely = _line(_message("fresh23", "09", "train_step", "return lm_loss(model(x), y).item()"), "Likely bug:")
    assert "computed again after optimizer.step()" in likely


def test_a_mean_divided_twice_by_the_target_tokens_is_measured():
    measured = _line(_message("fresh23", "09", "train_step_accumulated", "n_tokens"), "Measured:")
    assert "divided by its 22 target tokens a second time" in measured


def test_a_table_counted_from_val_is_not_called_counted_once():
    message = _message("fresh23", "10", "bigram_nll", "torch.bincount(val[:-1] * 256 + val[1:]")
    assert "each distinct pair is counted once" not in message
    assert "does not depend on train" in _line(message, "Likely bug:")
