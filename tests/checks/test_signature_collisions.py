"""Signatures two causes share (benchmarks/mutations/collisions.py, written
reading the checks): the mistake that is not the listed cause must not be
told the listed cause as certain, and what was measured is said. Each test
runs one mistake of the set through its notebook's check; where the listed
cause has a mistake of its own in a set, it is checked to be still named."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def _likely(message: str) -> str:
    return "\n".join(line.strip() for line in message.splitlines() if line.strip().startswith("Likely bug:"))


def test_rounding_to_the_nearest_multiple_is_not_told_it_rounds_down():
    # round() agrees with floor on the check's own widths; the sweep has widths where it rounds up
    message = _message("collisions", "05", "swiglu_hidden", "return multiple * round(8 * d_model / (3 * multiple))")
    assert "rounded down" not in _likely(message)
    assert "nearest multiple" in _line(message, "Likely bug:")
    truncated = _message("collisions", "05", "swiglu_hidden", "return multiple * int(8 * d_model / 3 / multiple)")
    assert "rounded down" in _line(truncated, "Likely bug:") and "nearest" not in _likely(truncated)


def test_a_weight_in_another_weights_place_is_not_told_to_take_the_transpose():
    # every weight is transposed; w_up.T stands where w_down.T belongs, and the sizes do not fit
    message = _message("collisions", "05", "swiglu", "return (gate * up) @ w_up.T")
    assert "nn.Linear's layout" not in _likely(message) and "without .T" not in _likely(message)
    assert "used in another's place" in _line(message, "Candidates:")
    # the untransposed weight is named, with the counterfactual that shows it
    missing = _message("collisions", "05", "swiglu", "gate = F.silu(x @ w_gate)")
    assert "`w_gate` multiplied without .T (measured: handed `w_gate` transposed" in _line(missing, "Likely bug:")


def test_a_merge_to_n_kv_heads_is_not_told_to_view_k_and_v_with_n_kv_heads():
    # attention is reached with the right heads (measured by a stand-in): the error is after it
    message = _message("collisions", "05", "Transformer", "self.n_kv_heads * self.head_dim)")
    assert "so view k and v" not in message and "Likely bug:" not in message
    assert "after attention (measured: attention got q with 4 heads, k and v with 2" in _line(message, "Measured:")
    # q split into n_kv_heads heads raises before attention: the regime and both candidates
    before = _message("collisions", "05", "Transformer", "q = self.q_proj(x).view(B, T, self.n_kv_heads, self.head_dim)")
    assert "so view k and v" not in before and "Likely bug:" not in before
    candidates = _line(before, "Candidates:")
    assert "it fails only with n_kv_heads=2 < n_heads=4" in candidates
    assert "n_kv_heads where n_heads belongs" in candidates


def test_a_scale_of_one_over_head_dim_from_two_square_roots_is_not_told_it_divides_by_head_dim():
    message = _message("collisions", "03", "causal_attention", "(k / math.sqrt(k.shape[-1])).transpose(-2, -1)")
    assert "divided by head_dim instead of sqrt(head_dim)" not in message
    assert "scaled by 1/4 = 1/head_dim" in _line(message, "Measured:")
    assert "on q and on k each" in _line(message, "Candidates:")
    inverse = _message("collisions", "03", "causal_attention", "/ q.shape[-1] ** -0.5")
    assert "instead of dividing" not in inverse and "head_dim ** -0.5" in _line(inverse, "Candidates:")


def test_a_rotation_flipped_in_apply_rope_is_not_blamed_on_a_right_rotate_half():
    message = _message("collisions", "04", "apply_rope", "return x * cos - rotate_half(x) * sin")
    assert "rotate_half must map" not in message
    assert "flipped in apply_rope (measured: your rotate_half returns (-x2, x1), right on its own" in \
        _line(message, "Likely bug:")
    # a flipped rotate_half is still named on rotate_half
    flipped = _message("default", "04", "apply_rope", "torch.cat((x2, -x1), dim=-1)")
    assert "your rotate_half returns (x2, -x1)" in _line(flipped, "Likely bug:")


def test_a_gain_reshaped_against_x_is_not_told_to_reduce_with_keepdim():
    message = _message("collisions", "02", "rms_norm", "return weight[:, None] * (x32 * inv_rms).to(x.dtype)")
    assert "keepdim=True (mean(dim=-1)" not in _likely(message)
    assert "the gain reshaped or indexed" in _line(message, "Candidates:")
    keepdim = _message("collisions", "02", "rms_norm", "x32.pow(2).mean(dim=-1)[..., None, :]")
    assert "reduce with keepdim=True" in _line(keepdim, "Likely bug:")


def test_an_expand_given_its_sizes_in_another_order_is_not_told_to_insert_an_axis():
    message = _message("collisions", "07", "repeat_kv", "x = x[:, :, None].expand(B, n_rep, n_kv, T, hd)")
    assert "insert one first" not in message
    assert "expand was asked for sizes [2, 2, 3, 5, 4] of a tensor of sizes [2, 3, 1, 5, 4]" in _line(message, "Measured:")
    flat = _message("collisions", "07", "repeat_kv", "x = x.expand(B, n_kv * n_rep, T, hd)")
    assert "your tensor of sizes [2, 3, 5, 4] has none" in _line(flat, "Likely bug:")


def test_a_window_built_one_further_is_not_told_its_start_range_is_wrong():
    message = _message("collisions", "09", "get_batch", "torch.arange(1, seq_len + 2)")
    said = _line(message, "Candidates:")
    assert "so draw torch.randint" not in message
    assert "your code reads index 12 of data's 12 tokens" in said and "windows longer than seq_len + 1 tokens" in said


def test_one_cause_one_line_int32_batches_dropout_and_an_unclipped_step():
    batches = _message("collisions", "09", "get_batch", "window = data[idx].int()")
    assert _likely(batches).count("Likely bug:") == 1 and "x and y are torch.int32" in batches
    dropout = _message("collisions", "08", "generate", "model.train(model.training)")
    assert _likely(dropout).count("Likely bug:") == 1 and "dropout stays on while sampling (measured" in dropout
    clipped = _message("collisions", "09", "train_step", "<= grad_clip\n    loss.backward()")
    assert _likely(clipped).count("Likely bug:") == 1 and "not clipped to grad_clip = 0.1 at optimizer.step()" in clipped


def test_adam_moments_at_half_the_bytes_are_two_candidates_not_one_moment():
    message = _message("collisions", "09", "train_step_costs", '"adam_moments": 2 * 2 * n_params')
    assert "one moment only" not in _likely(message)
    candidates = _line(message, "Candidates:")
    assert "one moment only" in candidates and "the moments counted at 2 bytes each" in candidates
