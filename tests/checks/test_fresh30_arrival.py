"""What fresh30's arrival reading found (63 mistakes written without reading
the checks: whole answers in a learner's own style with one slip, mistakes
that show only in a regime, two slips in one edit, the modules run end to
end, public bugs). Each test runs one mistake through its notebook's check
and holds the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_rope_turned_along_the_heads_axis_is_not_called_missing():
    message = _message("fresh30", "05", "Transformer", "apply_rope(heads(self.q_proj(x), self.n_heads)")
    likely = _line(message, "Likely bug:")
    assert "RoPE missing" not in message
    assert "the first apply_rope call gets a tensor of shape (2, 6, 4, 8), whose axis -2" in likely


def test_greedy_decoding_runs_a_batch_of_one():
    message = _message("fresh30", "06", "generate_greedy", "[:, -1:].squeeze()")
    assert "a batch of one (1x5)" in message and "squeeze()" in _line(message, "Where:")


def test_temperature_zero_after_the_division_places_the_first_inf():
    message = _message("fresh30", "08", "sample_next", "    logits = logits / temperature             # on logits, "
                       "before any filter\n    if temperature == 0:")
    assert "logits = logits / temperature" in _line(message, "Where:")
    assert "holds inf or nan from line 4 on" in _line(message, "Likely bug:")


def test_a_schedule_wrong_in_both_phases_is_read_phase_by_phase():
    likely = _line(_message("fresh30", "09", "lr_schedule", "max(1, total_steps - warmup_steps)"), "Likely bug:")
    assert "steps 0 to 9 (the warmup): warmup starts at 0" in likely
    assert "steps 10 to 49 (the decay): cosine does not reach min_lr" in likely


def test_two_new_tensors_without_dtype_are_both_placed():
    message = _message("fresh30", "06", "cache_update", "k_all = torch.zeros(B, H, T_past + T_new, hd, device=k.device)")
    where = _line(message, "Where:")
    assert "line 6 of your cache_update" in where and "and line 7" in where and "a dtype is fixed here" in where
    assert ".to(x.dtype)" not in _line(message, "Likely bug:")


def test_a_mean_over_the_bytes_instead_of_the_pairs_is_measured():
    likely = _line(_message("fresh30", "10", "bigram_nll", "sum() / len(val)).item()"), "Likely bug:")
    assert "the 399 pairs' summed NLL divided by 400" in likely

