"""Two fresh35 mistakes the checks did not name: evaluate setting model.training = False (the submodules, dropout
among them, stay in train mode) and a Transformer keeping its RoPE tables as plain tensor attributes (.to() leaves
them behind). Each message is held to what the code does; the probes behind them are held to their inputs."""
from __future__ import annotations

import torch
from torch import nn

import tinylm
from autograder.checks.framework.check import Check
from autograder.checks.references.generation import ForwardLog, eval_flag_alone, flag_line, tiny_model
from autograder.checks.references.modules import MOVED_ROW, plain_attributes, unmoved_tensors

from .test_printed_lines_true import _line, _message


def test_the_eval_flag_set_alone_is_observed_at_the_forward_passes_and_placed():
    message = _message("fresh35", "10", "evaluate", "model.training = False")
    likely = _line(message, "Likely bug:")
    assert "at every forward pass of your evaluate, model.training was False, yet" in likely
    assert "Dropout layers among them, were in train mode" in likely
    assert "model.eval() sets every submodule's" in likely
    where = _line(message, "Where:")
    assert "of your evaluate, `model.training = False" in where
    assert "assigns the model's own training flag" in where
    # dropout makes the loss differ from call to call: the regrouping row measures nothing then
    assert "same loss when the same rows are batched differently" not in message
    assert "dropout off (eval mode)" in message.splitlines()[0]


def test_the_other_mode_mistakes_say_what_their_code_does():
    assert "31 of its 31 submodules, 3 Dropout layers among them, were still in eval mode" in _line(
        _message("fresh35", "09", "train_step", "model.training = True"), "Likely bug:")
    assert "calls on the model were model.eval(), then model.train(False)" in _line(
        _message("fresh35", "10", "evaluate", "    was_training = model.training"), "Likely bug:")


def test_plain_rope_tables_fail_with_the_move_measured_and_the_line_placed():
    message = _message("fresh35", "05", "Transformer", "self.rope_cos, self.rope_sin = cos, sin")
    assert MOVED_ROW in message.splitlines()[0]
    likely = _line(message, "Likely bug:")
    assert "`rope_cos` (and 1 more alike) is a tensor your Transformer holds as a plain attribute" in likely
    assert "has its parameters there and `rope_cos` still on the cpu" in likely
    assert 'self.register_buffer("rope_cos", tensor, persistent=False)' in likely
    assert "`self.rope_cos, self.rope_sin = cos, sin`" in _line(message, "Where:")


def test_buffers_are_not_plain_attributes_and_a_submodule_s_plain_tensor_is_found_by_path():
    cfg = tinylm.ModelConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, max_seq_len=6)
    model = tinylm.Transformer(cfg)
    assert plain_attributes(model) == []  # persistent=False buffers, as the solution registers them
    model.blocks[0].attn.mask = torch.ones(2)
    assert plain_attributes(model) == [("blocks.0.attn.mask", "mask")]


def test_the_move_is_measured_on_a_copy():
    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(3))
            self.table = torch.arange(3.0)

    module = Plain()
    chk = Check("Plain")
    assert not unmoved_tensors(chk, Plain, (), module, plain_attributes(module))
    assert "`table` still on the cpu" in chk.diagnoses[0]
    assert module.weight.device.type == "cpu" and module.table.device.type == "cpu"


def _flag_only(model, batches):
    model.training = False
    for x, _ in batches:
        model(x)
    model.train(True)


def _eval_call(model, batches):
    model.eval()
    for x, _ in batches:
        model(x)
    model.train(True)


def _logged(evaluate):
    """(model, batches, the forward calls logged with their submodules' modes) of evaluate run on a model in train
    mode with dropout."""
    model = tiny_model(0, dropout=0.3, vocab=19, d_model=16, n_heads=2).train()
    batches = [(torch.zeros(1, 3, dtype=torch.long), None)]
    log = ForwardLog(model, submodules=True)
    try:
        with torch.no_grad():
            evaluate(model, batches)
    finally:
        log.close()
    return model, batches, log.calls


def test_the_submodules_flags_are_recorded_and_the_flag_line_found_on_a_copy():
    model, batches, calls = _logged(_flag_only)
    assert "model.training was False, yet" in eval_flag_alone(calls, "evaluate")
    rng = torch.get_rng_state()
    model.eval()
    located = flag_line(_flag_only, model, (batches,))
    assert located is not None and located.kind == "flag" and "model.training = False" in located.code
    assert not model.training and torch.equal(torch.get_rng_state(), rng)  # the check's model and RNG as they were


def test_eval_is_neither_said_nor_placed():
    model, batches, calls = _logged(_eval_call)
    assert eval_flag_alone(calls, "evaluate") is None
    assert flag_line(_eval_call, model, (batches,)) is None
