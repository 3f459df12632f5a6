"""What fresh21's arrival reading found (66 mistakes written without reading
the checks: look-alikes of better-known mistakes, mid-function mistakes,
idioms from elsewhere): one passed its visible check, 3 printed lines were
untrue of the code, 2 named or placed nothing. Each test runs one mistake
through its notebook's check and holds the message to what the code does."""
from __future__ import annotations

import torch

import tinylm
from autograder.learner_values import type_words

from .test_printed_lines_true import _line, _message


def test_a_scale_written_as_hd_over_2_fails_at_a_head_dim_other_than_4():
    message = _message("fresh21", "03", "causal_attention", "** 1/2")
    assert "wrong for head_dim 6" in _line(message, "Measured:")
    assert _line(message, "Where:").startswith("Where: line 4 ")


def test_embeddings_scaled_before_block_0_are_placed_on_the_scaling_line_and_measured():
    message = _message("fresh21", "05", "Transformer", "math.sqrt(self.config.d_model)")
    where = _line(message, "Where:")
    assert "of your Transformer.forward" in where and "math.sqrt(self.config.d_model)" in where
    assert "v_proj" not in where
    assert "the embedding of the ids times 5.657 = sqrt(d_model)" in _line(message, "Likely bug:")


def test_the_output_axes_are_named_by_their_place_where_two_inputs_share_a_size():
    likely = _line(_message("fresh21", "03", "causal_attention", "torch.stack(per_head, dim=2)"), "Likely bug:")
    assert "the axis of size 7 (queries)" in likely and "kv_len" not in likely


def test_a_mean_scaled_by_every_target_position_is_named():
    likely = _line(_message("fresh21", "10", "nll_sum_and_count", "targets.numel()"), "Likely bug:")
    assert "the mean NLL of the scored targets times the number of all target positions" in likely


def test_a_checks_own_subclass_and_a_torch_optimizer_are_named_by_their_known_classes():
    class Spy(tinylm.Transformer):
        pass
    model = Spy(tinylm.ModelConfig(vocab_size=16, d_model=8, n_layers=1, n_heads=2, max_seq_len=8))
    assert type_words(model) == "a Transformer module"
    assert type_words(torch.optim.AdamW(model.parameters())) == "an AdamW object"


def test_a_temperature_applied_with_floor_division_is_measured_as_such():
    message = _message("fresh21", "08", "sample_next", "logits // temperature")
    assert "T=1.0: your frequencies follow softmax(floor(logits / 1.0))" in message
    assert "no softmax(logits / T) does: divide with /" in message
