"""Entry states a function must give back, or work from, checked as regimes:
each mistake below is wrong only from a state the visible calls did not hand
over before (a model in eval mode with gradients on for generate_greedy, a
caller inside torch.no_grad() for train_step, a model in train mode for
train_step_accumulated), and must fail with a line saying the regime and
what was measured; a right answer that trains under no_grad passes. Also the
cause of a model left in eval mode, read off the model's own train()/eval()
calls, and layer_norm over torch.std said as measured (no eps, n - 1)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_diagnostics  # noqa: E402

from benchmarks.mutations import Mutation  # noqa: E402

from .test_printed_lines_true import _line, _message  # noqa: E402


def _outcome(notebook: str, cell: str, old: str, new: str, extra: str = ""):
    mutation = Mutation(cell, old, new, (), "a mistake only an entry state shows", extra=extra)
    return bench_diagnostics.run_mutation(notebook, mutation, bench_diagnostics.notebook_cells(notebook))


def test_generate_greedy_switching_to_train_mode_at_the_end_is_caught_from_eval_mode():
    # model.train() before returning: right for a model handed over in train mode (the regime that existed), wrong
    # for the eval mode the visible calls hand over; the check's model has no dropout, so no token shows it
    outcome = _outcome("06", "generate_greedy", "    return idx", "    model.train()\n    return idx")
    assert outcome.message, "the check passed the mistake"
    assert "a model handed over in eval mode, gradients on: eval mode given back" in outcome.message
    likely = _line(outcome.message, "Likely bug:")
    assert "came in eval mode in train mode" in likely
    assert "model.training is False before the call, True after it" in likely


def test_generate_left_padded_switching_to_train_mode_at_the_end_is_caught_from_eval_mode():
    outcome = _outcome("06", "generate_left_padded",
                       "    return torch.stack(new, dim=1)                                      # (B, max_new_tokens)",
                       "    model.train()\n    return torch.stack(new, dim=1)")
    assert outcome.message, "the check passed the mistake"
    assert "a model handed over in eval mode, gradients on: eval mode given back" in outcome.message
    assert "model.training is False before the call, True after it" in _line(outcome.message, "Likely bug:")


def test_train_step_turning_gradients_on_is_caught_inside_no_grad():
    # torch.set_grad_enabled(True) at the start trains from inside torch.no_grad() and leaves the caller's
    # grad mode on; with gradients already on (every earlier call) it changes nothing
    outcome = _outcome("09", "train_step",
                       "    model.train()                                # dropout on, whatever mode the caller left",
                       "    torch.set_grad_enabled(True)\n    model.train()")
    assert outcome.message, "the check passed the mistake"
    assert "a caller inside torch.no_grad(): grad mode given back" in outcome.message
    likely = _line(outcome.message, "Likely bug:")
    assert "torch.is_grad_enabled() is False before the call, True after it" in likely
    assert "torch.enable_grad()" in likely


def test_train_step_that_skips_the_step_without_a_graph_is_caught_inside_no_grad():
    outcome = _outcome("09", "train_step", "    loss.backward()                              # d loss / d every parameter",
                       "    if not loss.requires_grad:\n        return loss.item()\n    loss.backward()")
    assert outcome.message, "the check passed the mistake"
    likely = _line(outcome.message, "Likely bug:")
    assert "called inside torch.no_grad()" in likely and "changes no parameter" in likely


def test_train_step_that_trains_under_enable_grad_passes():
    # the exercise allows either answer inside torch.no_grad(): raising (the solution) or training
    outcome = _outcome("09", "train_step", "    return loss.item()", "    return loss.item()",
                       extra="_step = train_step\n\n\n"
                             "def train_step(model, optimizer, x, y, grad_clip=1.0):\n"
                             "    with torch.enable_grad():\n"
                             "        return _step(model, optimizer, x, y, grad_clip)")
    assert not outcome.message, outcome.message


def test_train_step_accumulated_flipping_the_mode_is_caught_from_train_mode():
    # model.train(not model.training): train mode from eval mode (the only state handed over before), eval mode
    # from train mode
    outcome = _outcome("09", "train_step_accumulated",
                       "    model.train()                                                     # as in train_step",
                       "    model.train(not model.training)")
    assert outcome.message, "the check passed the mistake"
    assert "trains in train mode (the model handed over in train mode)" in outcome.message
    likely = _line(outcome.message, "Likely bug:")
    assert "switches a model that came in train mode to eval mode" in likely
    assert "3 of the 3 forward passes of the step ran in eval mode" in likely


def test_a_mode_never_given_back_is_named_from_the_models_own_calls():
    message = _message("fresh10", "10", "evaluate", "pass  # the trainer sets its own mode")
    likely = _line(message, "Likely bug:")
    assert "the mode is never given back" in likely
    assert "its calls on the model were model.eval())" in likely
    assert "Candidates:" not in message


def test_a_mode_read_after_eval_is_named_from_the_models_own_calls():
    message = _message("fresh17", "10", "evaluate", "model.eval()\n    was_training = model.training ")
    likely = _line(message, "Likely bug:")
    assert "the one model.eval() had just set" in likely
    assert "model.eval(), then model.train(False)" in likely
    assert "never given back" not in message and "Candidates:" not in message


def test_layer_norm_over_torch_std_says_the_missing_eps_and_the_unbiased_variance():
    message = _message("fresh17", "02", "layer_norm", "(1 / centred.std(dim=-1, keepdim=True))")
    likely = _line(message, "Likely bug:")
    assert "eps is not added" in likely
    assert "divided by n - 1" in likely
    assert "gives nan (measured)" in likely
    assert likely.count("Likely bug:") == 1  # the unbiased-variance variant is not said again beside it


def test_layer_norm_with_the_unbiased_variance_and_eps_keeps_its_variant():
    message = _message("fresh17", "02", "layer_norm", "x.var(dim=-1, keepdim=True)")
    likely = _line(message, "Likely bug:")
    assert "unbiased variance" in likely and "eps is not added" not in likely
