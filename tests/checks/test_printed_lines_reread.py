"""Lines found untrue when every printed message of the older sets (the
default set, fresh to fresh9, heldout, offlist, unseen, causes,
entry_states) was read again against the code: a cause stated as certain
that another mistake gives, or a fix the code already has. Each test runs
one mistake through its notebook's check and holds the line to what the
code does: the measured fact stays, the cause is said only where the
check confirmed it on the learner's code, otherwise as a candidate."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def _said(message: str) -> str:
    """The likely bugs and candidates together: what the check offers as causes."""
    return "\n".join(line.strip() for line in message.splitlines()
                     if line.strip().startswith(("Likely bug:", "Candidates:")))


# notebook 01: tie_weights and embed


def test_an_attribute_misspelt_on_the_head_is_not_called_a_rebound_name():
    # lm_head.weights = ...: nn.Module registers a new Parameter under that name; no name is rebound
    likely = _line(_message("fresh3", "01", "tie_weights", "lm_head.weights = tok_emb.weight"), "Likely bug:")
    assert "new attribute holding tok_emb.weight" in likely and "rebinding a name" not in likely


def test_a_rebound_head_name_is_still_named_and_measured_on_the_call():
    likely = _line(_message("default", "01", "tie_weights", "lm_head = tok_emb"), "Likely bug:")
    assert "rebinding a name" in likely and "measured: when the call returns" in likely


def test_a_shared_weight_initialised_after_tying_is_not_called_the_wrong_way_round():
    # the tie is right; nn.init.normal_ on the shared weight rewrites the embedding
    message = _message("fresh6", "01", "tie_weights", "nn.init.normal_(lm_head.weight, std=0.02)")
    assert "wrong way round" not in _line(message, "Candidates:").split("candidates:")[0]
    assert "Likely bug:" not in message
    likely = _line(_message("default", "01", "tie_weights", "tok_emb.weight = lm_head.weight"), "Likely bug:")
    assert "tok_emb.weight is now the head's own Parameter" in likely


def test_ids_shifted_by_one_are_not_said_to_be_clamped():
    # weight[ids - 1]: id 11 reads row 10 because every id is shifted, not clamped
    said = _said(_message("default", "01", "embed", "return weight[ids - 1]"))
    assert "clamped" not in said and "shifted by -1" in said
    clamped = _said(_message("fresh15", "01", "embed", "ids.clamp(0, weight.shape[0] - 1)"))
    assert "the id was clamped into the table" in clamped


# notebook 02: RMSNorm's eps


def test_an_eps_not_kept_by_init_is_told_apart_from_one_not_passed_by_forward():
    kept_wrong = _line(_message("default", "02", "RMSNorm", "self.eps = 1e-6"), "Likely bug:")
    assert "__init__ must keep the eps it is given" in kept_wrong and "pass self.eps" not in kept_wrong
    not_passed = _line(_message("default", "02", "RMSNorm", "rms_norm(x, self.weight)"), "Likely bug:")
    assert "holds the eps it was given" in not_passed and "pass self.eps to the norm" in not_passed


# notebook 04: apply_rope


def test_a_flipped_rotation_with_a_right_rotate_half_does_not_blame_rotate_half():
    likely = _line(_message("default", "04", "apply_rope", "return x * cos - rotate_half(x) * sin"), "Likely bug:")
    assert "rotation direction flipped in apply_rope (measured: your rotate_half returns (-x2, x1), right" in likely
    assert "rotate_half must map" not in likely


def test_a_slice_that_fails_for_every_offset_is_not_said_to_fail_only_at_one():
    likely = _line(_message("default", "04", "apply_rope", "cos = cos[start_pos:T].to(x.dtype)"), "Likely bug:")
    assert "passes with start_pos=0 and fails with start_pos=5" in likely and "fails only" not in likely


# notebook 05: parameter shapes


def test_an_embedding_built_with_its_sizes_swapped_is_not_called_a_projection():
    likely = _line(_message("fresh5", "05", "Transformer", "nn.Embedding(config.d_model, config.vocab_size)"),
                   "Likely bug:")
    assert likely.startswith("Likely bug: tok_emb.weight:") and "nn.Embedding(num_embeddings" in likely
    assert "a projection" not in likely and "nn.Linear" not in likely


def test_keys_projected_to_every_query_head_are_named_by_their_measured_width():
    likely = _line(_message("heldout", "05", "Transformer", "n_heads * config.head_dim"), "Likely bug:")
    assert "n_heads · head_dim = 32 outputs (measured)" in likely and "n_kv_heads · head_dim = 16" in likely


# notebook 08: sampling


def test_one_draw_shared_by_the_batch_is_not_called_argmax():
    said = _said(_message("default", "08", "sample_next", "probs[:1]"))
    assert "no randomness" not in said and "every row got the same token" in said
    argmax = _said(_message("default", "08", "sample_next", "return probs.argmax(dim=-1)"))
    assert "no randomness" in argmax


def test_a_comparison_the_wrong_way_round_is_not_told_to_sort_descending():
    message = _message("default", "08", "top_k_filter", "logits > kth")
    assert "Likely bug:" not in message
    candidates = _line(message, "Candidates:")
    assert "keeps the least likely tokens" in candidates and "a comparison the wrong way round" in candidates


def test_a_top_k_over_the_batch_axis_is_not_said_to_be_no_filter_over_another_axis():
    candidates = _line(_message("default", "08", "top_k_filter", "logits.topk(k, dim=0)"), "Candidates:")
    assert "so it is not a filter over another whole axis" not in candidates and "(dim=0)" in candidates


# notebook 09: training


def test_a_batch_sliced_short_is_not_told_to_draw_with_randint():
    said = _said(_message("fresh4", "09", "get_batch", "return window[:-1], window[1:]"))
    assert "torch.randint" not in said


def test_windows_one_token_too_long_are_not_told_to_draw_other_starts():
    message = _message("default", "09", "get_batch", "torch.arange(seq_len + 2)")
    candidates = _line(message, "Candidates:")
    assert "windows longer than seq_len + 1 tokens" in candidates and "so draw" not in candidates


def test_a_warmup_branch_that_runs_at_zero_is_not_told_to_move_its_division():
    message = _message("default", "09", "lr_schedule", "if step <= warmup_steps:")
    assert "keep the warmup's division inside that branch" not in message
    assert "step <= warmup_steps" in _line(message, "Candidates:")


def test_a_clip_given_the_right_threshold_is_not_told_to_pass_grad_clip():
    # the generator model.parameters() is used up by the zeroing loop, so the clip gets no parameter
    message = _message("fresh8", "09", "train_step", "params = model.parameters()")
    assert "with the grad_clip argument" not in message
    assert "a fresh model.parameters(), not a generator an earlier loop has read" in _line(message, "Likely bug:")
