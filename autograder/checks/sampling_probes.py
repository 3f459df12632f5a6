"""What notebook 08's checks measure on the learner's own functions before
they name a cause: a filter re-run with the vocabulary on another axis, a
generate re-run on a model handed over in eval mode (dropout off), what
generate hands the sampler (read by a stand-in), and generate called from
the caller's other entry state (eval mode under torch.no_grad())."""
from __future__ import annotations


import torch

import tinylm

from ..diagnosis_record import Evidence, candidates, confirmed
from .spies import first_call_arguments
from .framework.calling import quiet_call
from .framework.check import Check
from .framework.measure import mode_split, seeded
from .references.generation import ForwardLog, mode_given_back


INDEX_ERROR = r"selected index k out of range|k \(\d+\) is too big|out of bounds|IndexError|dimension out of range"


def wrong_axis_hints(fn, logits: torch.Tensor, arg, reference) -> list:
    """The hint for a filter that raises an index error on `logits`: that it
    works on another axis is said only when the learner's own function,
    given the same logits with the vocabulary moved to that axis, gives the
    reference's filter there (measured; a single row is given a leading axis
    of one); otherwise the fact and the candidates. Evaluated only when the
    call raised."""
    def bug() -> Evidence:
        shape = tuple(logits.shape)
        want = reference(logits, arg)
        tries = [(a, logits.movedim(-1, a), lambda out, a=a: out.movedim(a, -1)) for a in range(logits.dim() - 1)]
        if logits.dim() == 1:
            tries.append((1, logits[None], lambda out: out[0]))
        for axis, moved, back in tries:
            out = quiet_call(fn, moved.clone(), arg)
            if isinstance(out, torch.Tensor) and out.shape == moved.shape and torch.equal(back(out).detach().cpu(), want):
                return confirmed(f"the filter works on axis {axis}, not on the last (measured: your function raises "
                                 f"on {shape} logits, and on the same logits with the vocabulary moved to axis {axis} "
                                 "it gives the right filter there): take top-k / sort on the LAST axis (dim=-1, "
                                 "thresholds [..., -1:]) so that it works for any batch shape, a single row (V,) "
                                 "included")
        return candidates(f"your filter raises an index error on {shape} logits, and with the vocabulary moved to "
                          "another axis it does not give the right filter there either (measured); candidates: top-k "
                          "or a sort over another axis (dim=0) while another step reads the last one (a k clamped to "
                          "logits.shape[-1]); a size or an index read from the batch axis where it needs "
                          "the vocabulary (logits.shape[0] or len(logits) for logits.shape[-1]); a threshold picked "
                          "from the wrong axis after a sort on the last one (values[k - 1] for values[..., k - 1:k])")
    return [(INDEX_ERROR, bug)]


def hands_probabilities(generate, model, prompts) -> bool:
    """Whether the first logits the learner's generate hands sample_next are
    probabilities (every entry >= 0, each row summing to 1): measured by a
    stand-in for sample_next that stops the call; False when generate does
    not call it by that name."""
    def call():
        return generate(model, prompts, 1, 1.0, None, None, seeded(13))
    received = (first_call_arguments(generate, "sample_next", call)
                or first_call_arguments(generate, "sample_next", call, [vars(tinylm)]))
    logits = next(iter(received.values()), None) if received else None
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or logits.dim() == 0:
        return False
    rows = logits.detach().double()
    return bool((rows >= 0).all() and torch.allclose(rows.sum(-1), torch.ones(()).double(), atol=1e-4))


def flatter_with_dropout(chk: Check, generate, sharp, prompts, top, mean: float, sd: float, measured: str,
                         mixed: str | None = None) -> bool:
    """Draws flatter than the softmax from forward passes that ran in train
    mode (dropout on): the same call on the model handed over in eval mode
    tells dropout (the draws follow the softmax then) from a mistake in the
    sampling itself, which is then not named from these draws. True when
    dropout was named. mixed: what the passes' modes measured where only
    some ran in train mode (references.generation.modes_mixed)."""
    sharp.eval()
    try:
        again = quiet_call(generate, sharp, prompts, 1, 1.0, None, None, seeded(13))
    finally:
        sharp.train()
    hits = int((again[:, -1].cpu() == top).sum()) if isinstance(again, torch.Tensor) and again.shape[0] == len(prompts) \
        and again.dim() == 2 else None
    if hits is not None and abs(hits - mean) <= 6 * sd:
        chk.diagnose(f"dropout stays on while sampling (measured: {measured}, from forward passes in train mode; the "
                     f"same call on the model handed over in eval mode draws it {hits} times, as the softmax expects): "
                     + (mixed or "switch the model to eval mode for generation, model.eval()"))
        return True
    else:
        chk.measured(f"{measured}: the draws are flatter than the distribution, from forward passes that ran in train "
                     "mode (dropout on); handed over in eval mode they are still not the softmax's, so dropout is not "
                     "the only cause")
    return False


def from_eval_mode_without_grad(chk: Check, generate, model, prompt, max_new_tokens: int) -> None:
    """The other entry states: a model handed over in eval mode, with grad
    mode off (a caller inside torch.no_grad(), after an evaluation) and with
    it on (a caller that called model.eval() alone). The model must leave in
    eval mode each time (a model.train() at the end switches it whatever it
    came in), and grad mode must stay as it was (Check.call measures the
    torch settings the call leaves changed)."""
    for grad in (False, True):
        model.eval()
        log = ForwardLog(model, limit=2 * max_new_tokens)
        state = "under torch.no_grad()" if not grad else "with autograd on"
        try:
            with torch.set_grad_enabled(grad):
                chk.call(generate, model, prompt, max_new_tokens, 0.0, None, None, None,
                         row_label=f"a model handed over in eval mode, {state}")
        finally:
            log.close()
        # reached with autograd on only when the no_grad call kept eval mode (the loop stops at a failed row)
        follows_grad = grad and model.training and mode_split(model) is None
        mode_given_back(chk, "generate", model, False, f"a model handed over in eval mode, {state}", cause=(
            "the mode given back follows grad mode, not the model's own flag (measured: a model handed over in eval "
            "mode leaves in eval mode under torch.no_grad() and in train mode with autograd on, as "
            "torch.is_grad_enabled() would restore it): save model.training before switching and restore it, "
            "model.train(was_training)") if follows_grad else None)
        if not chk.passed:
            break
    model.train()

