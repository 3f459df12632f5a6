"""Four mistakes of the fresh13 set that their checks passed, each run
through its notebook's check cell: the check now fails it, every printed
cause says what the mistake does, and the notebook's own solution (with the
hidden tests) still passes the same cell."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_diagnostics  # noqa: E402
from benchmarks.mutations import SETS  # noqa: E402
from benchmarks.mutations.unseen import Unseen  # noqa: E402


def _message(notebook: str, cell: str, new_text: str) -> str:
    found = [m for m in SETS["fresh13"]()[notebook] if m.cell == cell and (new_text in m.new if new_text else m.new == "")]
    assert len(found) == 1, f"fresh13 {notebook} {cell}: {len(found)} mistakes hold {new_text!r}"
    outcome = bench_diagnostics.run_mutation(notebook, found[0], bench_diagnostics.notebook_cells(notebook))
    assert outcome.message, "the check passed the mistake"
    return outcome.message


def _lines(message: str, head: str) -> list[str]:
    return [line.strip().removeprefix(head).strip() for line in message.splitlines() if line.strip().startswith(head)]


@pytest.mark.parametrize("notebook, cell", [("01", "one_hot_embed"), ("02", "RMSNorm"),
                                            ("06", "generate_left_padded"), ("10", "evaluate")])
def test_the_solution_passes_the_visible_and_hidden_checks(notebook, cell):
    setup, answers, checks = bench_diagnostics.notebook_cells(notebook, hidden=True)
    unchanged = Unseen(cell, answers[cell].splitlines()[0], answers[cell].splitlines()[0], (), "the solution as it is")
    message, _ = bench_diagnostics._run_check(notebook, unchanged, setup, answers, checks[cell])
    assert message is None, message


def test_a_one_hot_built_on_the_cpu_is_named_by_the_call_that_copies_to_the_host():
    message = _message("01", "one_hot_embed", "ids.cpu()")
    assert "regime: inputs on another device" in message
    facts = " ".join(_lines(message, "Measured:"))
    # .cpu() is the learner's call; on the meta device it raises, and the check names that very call
    assert "your call of Tensor.cpu raised" in facts
    assert "copies a tensor from the inputs' device to the CPU" in facts
    assert not _lines(message, "Likely bug:")  # the call is measured; nothing else is claimed as its cause


def test_a_host_copy_made_by_torch_itself_is_not_blamed_on_the_learner():
    """An operation that needs the data on the host raises on the meta device
    too, but it is no copy the learner wrote: the regime stays silent on it. A
    .tolist() gives Python numbers, which may index rows that stay on the
    device, so it is no move to the CPU either; a .cpu() is."""
    import torch

    from autograder.checks.contracts.regimes import _HostCopies

    for sync in (lambda t: t.item(), lambda t: t.tolist()):  # a sync on a GPU, not a .cpu()
        with _HostCopies() as copies:
            with pytest.raises(Exception):
                sync(torch.ones(3, device="meta"))
        assert copies.call is None
    with _HostCopies() as copies:
        with pytest.raises(NotImplementedError):
            torch.ones(3, device="meta").cpu()
    assert copies.call == "cpu"


def test_a_detached_input_to_rmsnorm_fails_on_its_input_gradient():
    message = _message("02", "RMSNorm", "x.detach()")
    assert "gradient reaches the input x" in message
    offered = " ".join(_lines(message, "Candidates:"))
    assert "a backward pass from the output gives x no gradient" in offered
    assert ".detach()" in offered
    assert not _lines(message, "Likely bug:")  # which of the candidates it is is not measured


def test_a_cache_never_reset_is_found_by_a_second_call_with_the_same_cache():
    message = _message("06", "generate_left_padded", "")
    assert "a second call with the cache the first call used" in message
    bug = " ".join(_lines(message, "Likely bug:"))
    # the visible check decodes prompts of 3, 7 and 5 tokens, 6 new tokens: the prefill of width 7 and 5 single steps
    # leave 7 + 5 = 12 entries (the last new token is never fed back)
    assert "finds cache.length = 12" in bug
    assert "on the same cache emptied by the check, the same call gives every row its prompt decoded alone" in bug


def test_batches_sent_to_the_notebooks_device_are_seen_on_the_meta_device():
    message = _message("10", "evaluate", "dev = DEVICE")
    assert "batches sent to the model's device" in message
    bug = " ".join(_lines(message, "Likely bug:"))
    assert "the forward pass received its ids on the meta device" in bug
    assert "notebook's DEVICE" in bug


def test_the_learners_device_is_given_back_after_the_probe():
    import math

    import torch
    import torch.nn.functional as F

    from autograder.checks.perplexity import check_evaluate

    def evaluate(model, batches, bytes_per_token=1.0):
        was = model.training
        model.eval()
        total, count = 0.0, 0
        try:
            with torch.no_grad():
                for x, y in batches:
                    logits = model(x.to(DEVICE))
                    total += float(F.cross_entropy(logits.flatten(0, 1), y.to(DEVICE).flatten(), reduction="sum"))
                    count += int((y != -100).sum())
        finally:
            model.train(was)
        loss = total / count
        return {"loss": loss, "perplexity": math.exp(loss), "bits_per_byte": loss / math.log(2) / bytes_per_token}

    evaluate.__globals__["DEVICE"] = "cpu"
    try:
        with pytest.raises(Exception, match="notebook's DEVICE"):
            check_evaluate(evaluate)
        assert evaluate.__globals__["DEVICE"] == "cpu"
    finally:
        del evaluate.__globals__["DEVICE"]
