"""What fresh25's arrival reading found (62 mistakes written without reading
the checks: helpers of the learner's own, modules and their state, partial
and compensating mistakes, public bugs): two passed their visible checks,
three printed lines were untrue of the code (fixes already written, a cause
for what the count leaves out), and three mistakes were named or placed by
nothing. Each test runs one mistake through its notebook's check and holds
the message to what the code does."""
from __future__ import annotations

from .test_printed_lines_true import _line, _message


def test_a_mode_read_from_grad_mode_fails_from_eval_mode_with_autograd_on():
    likely = _line(_message("fresh25", "08", "generate", "was_training = torch.is_grad_enabled()"), "Likely bug:")
    assert "the mode given back follows grad mode, not the model's own flag" in likely


def test_a_temperature_applied_twice_shows_at_temperature_two():
    candidates = _line(_message("fresh25", "08", "generate", "scaled = logits / temperature"), "Candidates:")
    assert "with temperature 2" in candidates and "as many as softmax(logits / 4) expects" in candidates
    assert "the logits divided by the temperature twice" in candidates


def test_a_wrong_projection_size_is_measured_beside_the_config():
    measured = _line(_message("fresh25", "05", "Transformer", "nn.Linear(config.d_model, config.head_dim"),
                     "Measured:")
    assert "k_proj.weight is [8, 32], tinylm's [32, 32]" in measured and "8 (= config.head_dim)" in measured


def test_bfloat16_arithmetic_before_the_upcast_is_measured_on_the_learners_function():
    measured = _line(_message("fresh25", "10", "nll_sum_and_count", "dim=-1).float()"), "Measured:")
    assert "the same logits handed over as float32 give your function an NLL sum of" in measured


def test_a_loss_divided_the_other_way_round_is_measured():
    measured = _line(_message("fresh25", "10", "evaluate", "s, n = _scored(x, y)"), "Measured:")
    assert "the scored tokens over the summed NLL (36 / 114.471, measured)" in measured


def test_an_eps_that_never_arrives_gets_no_fix_the_code_already_has():
    likely = _line(_message("fresh25", "02", "rms_norm", "def _inv_rms(t, eps=1e-5)"), "Likely bug:")
    assert "the eps argument never reaches the statistic" in likely and "not a number of its own" in likely


def test_a_norm_shared_inside_a_block_is_not_told_to_build_blocks_in_a_list():
    likely = _line(_message("fresh25", "05", "Transformer", "self.mlp_norm = self.attn_norm"), "Likely bug:")
    assert "nn.ModuleList" not in likely and "a constructor call of its own for `mlp_norm`" in likely


def test_a_head_left_out_of_the_memory_is_not_blamed_on_counting_only_what_multiplies():
    message = _message("fresh25", "09", "train_step_costs", "    matmul_weights = L * per_block")
    assert "not only those that multiply" not in message
    assert "the head's matmul is missing" in message
