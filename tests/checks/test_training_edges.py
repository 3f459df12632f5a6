"""Notebook 09's real-world edges: gradient accumulation (the loss over the
whole batch's target tokens, clipping, zero_grad and the step once) and the
learning-rate schedule at its edges. Each wrong step or schedule below is
written out by hand; the check must name its own mistake, and only that."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import tinylm
from autograder.checks import check_lr_schedule, check_train_step_accumulated
from autograder.checks.core import independent_copy

from ..helpers import check_failure


def _step(mistake: str | None = None):
    """A learner's train_step_accumulated, right or with one mistake."""
    def train_step_accumulated(model, optimizer, micro_batches, grad_clip=1.0):
        model.train()
        n_tokens = sum(int((y != -100).sum()) for _, y in micro_batches)
        if mistake != "no zero_grad":
            optimizer.zero_grad()
        total = 0.0
        for x, y in micro_batches:
            if mistake == "zero_grad in the loop":
                optimizer.zero_grad()
            logits = model(x)
            token_mean = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100)
            summed = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum")
            if mistake == "mean of means":
                (token_mean / len(micro_batches)).backward()
            elif mistake == "not divided by k":
                token_mean.backward()
            else:
                (summed / n_tokens).backward()
            total += summed.item()
            if mistake in ("clip in the loop", "step in the loop"):
                torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            if mistake == "step in the loop":
                optimizer.step()
        if mistake not in ("no clipping", "clip in the loop", "step in the loop"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        if mistake != "step in the loop":
            optimizer.step()
        return total / n_tokens
    return train_step_accumulated


def test_the_right_step_passes_and_so_does_tinylms():
    assert check_failure(check_train_step_accumulated, _step()) is None
    assert check_failure(check_train_step_accumulated, independent_copy(tinylm.train_step_accumulated)) is None


def test_the_right_step_passes_the_hidden_call_too():
    assert check_failure(check_train_step_accumulated, _step(), seed=4, rows=(1, 3), seq=5, kept=(5, 4),
                         grad_clip=0.02) is None


MISTAKES = [
    ("mean of means", "mean of per-micro-batch means", "grad_clip 1e+06"),
    ("not divided by k", "mean loss goes into backward() as it is, not divided by the number of micro-batches",
     "grad_clip 1e+06"),
    ("zero_grad in the loop", "zero_grad() runs inside the loop", "grad_clip 1e+06"),
    ("step in the loop", "optimizer.step() runs 3 times", "grad_clip 1e+06"),
    ("clip in the loop", "clip_grad_norm_ runs before the last micro-batch's backward()", "grad_clip 0.05"),
    ("no clipping", "the gradients are not clipped before the step", "grad_clip 0.05"),
    ("no zero_grad", "no zero_grad() before the first micro-batch's backward()", "gradients left in .grad"),
]


@pytest.mark.parametrize("mistake, cause, row", MISTAKES, ids=[m for m, _, _ in MISTAKES])
def test_each_accumulation_mistake_is_named_and_no_other(mistake, cause, row):
    err = check_failure(check_train_step_accumulated, _step(mistake))
    assert err is not None
    assert any(r.startswith(row) for r in err.diagnosis.failed_rows), err.diagnosis.failed_rows
    bugs = err.diagnosis.likely_bugs
    assert len(bugs) == 1 and cause in bugs[0], bugs


def test_the_cause_is_confirmed_on_the_learners_function_or_left_a_candidate():
    """A step that follows the mean of the micro-batches' means with 3 micro-batches, and is wrong again with the
    4 micro-batches of equal token counts the check then tries, gets the measurement as a candidate, no cause."""
    wrong = _step("mean of means")

    def only_three(model, optimizer, micro_batches, grad_clip=1.0):
        if len(micro_batches) == 3:
            return wrong(model, optimizer, micro_batches, grad_clip)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)  # moves the weights by another rule: no gradient of the batch explains it
        return 0.0
    err = check_failure(check_train_step_accumulated, only_three)
    assert err is not None and not err.diagnosis.likely_bugs
    assert any("candidate" in line and "mean of the micro-batches' mean-loss gradients" in line
               for line in err.diagnosis.candidates)


def test_the_diagnosis_call_leaves_torch_and_the_optimizer_as_it_found_them():
    clip = torch.nn.utils.clip_grad_norm_
    check_failure(check_train_step_accumulated, _step("zero_grad in the loop"))
    assert torch.nn.utils.clip_grad_norm_ is clip


def test_tinylms_accumulated_step_is_the_big_batchs_step():
    """Independent of the check: the step on 3 micro-batches of 12, 5 and 1 target tokens moves the weights as
    one SGD step on their concatenation does."""
    torch.manual_seed(0)
    config = tinylm.ModelConfig(vocab_size=17, d_model=16, n_layers=1, n_heads=2, max_seq_len=8)
    whole, pieces = tinylm.Transformer(config), tinylm.Transformer(config)
    pieces.load_state_dict(whole.state_dict())
    x = torch.randint(17, (6, 4))
    y = torch.randint(17, (6, 4))
    y[2:4].view(-1)[5:] = -100
    y[4:].view(-1)[1:] = -100
    batches = [(x[i:i + 2], y[i:i + 2]) for i in (0, 2, 4)]
    loss = tinylm.train_step_accumulated(pieces, torch.optim.SGD(pieces.parameters(), lr=0.1), batches, None)
    opt = torch.optim.SGD(whole.parameters(), lr=0.1)
    whole.train()
    full = F.cross_entropy(whole(x).flatten(0, 1), y.flatten(), ignore_index=-100)
    full.backward()
    opt.step()
    assert math.isclose(loss, full.item(), rel_tol=1e-5)
    for a, b in zip(whole.parameters(), pieces.parameters()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


# -- the learning-rate schedule at its edges ---------------------------------------------------
def _schedule(mistake: str | None = None):
    def lr_schedule(step, warmup_steps, total_steps, max_lr, min_lr):
        if mistake == "warmup divided outside its branch":
            ramp = max_lr * (step + 1) / warmup_steps
            if step < warmup_steps:
                return ramp
        elif step < warmup_steps:
            return max_lr * (step + 1) / warmup_steps
        decay = total_steps - 1 - warmup_steps
        progress = (step - warmup_steps) / (decay if mistake == "no guard" else max(1, decay))
        if mistake != "no clamp":
            progress = min(progress, 1.0)
        return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)
    return lr_schedule


def test_a_right_schedule_passes_every_edge_row():
    assert check_failure(check_lr_schedule, _schedule()) is None
    assert check_failure(check_lr_schedule, _schedule(), warmup=3, total=17, max_lr=1.0, min_lr=0.1) is None


def test_the_closed_form_at_the_edges():
    """The rows' values, written out: no warmup starts at max_lr, the one step after a warmup runs at max_lr, and
    past the end the rate is min_lr."""
    from autograder.checks.training_schedule import ref_lr
    assert ref_lr(0, 0, 10, 1.0, 0.1) == 1.0
    assert ref_lr(0, 10, 50, 3.0, 0.3) == 3.0 / 10
    assert ref_lr(10, 10, 11, 1.0, 0.1) == 1.0
    assert all(ref_lr(s, 10, 50, 1.0, 0.1) == pytest.approx(0.1) for s in (49, 50, 75, 100))


SCHEDULE_MISTAKES = [
    ("no guard", "total_steps 11 = warmup_steps + 1", "max(1, total_steps - 1 - warmup_steps)"),
    ("warmup divided outside its branch", "warmup_steps 0", "warmup_steps = 0"),
    ("no clamp", "steps 50, 51, 75, 100", "not clamped"),
]


@pytest.mark.parametrize("mistake, row, cause", SCHEDULE_MISTAKES, ids=[m for m, _, _ in SCHEDULE_MISTAKES])
def test_each_schedule_edge_mistake_is_named_on_its_row(mistake, row, cause):
    err = check_failure(check_lr_schedule, _schedule(mistake))
    assert err is not None and err.diagnosis.failed_rows and err.diagnosis.failed_rows[0].startswith(row)
    assert len(err.diagnosis.likely_bugs) == 1 and cause in err.diagnosis.likely_bugs[0], err.diagnosis.likely_bugs
