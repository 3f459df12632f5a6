"""Check for notebook 09's gradient accumulation: one optimizer step from
several micro-batches, compared with the same step on one batch that holds
them all (SGD, so the step is the gradient itself); a cause is named only
when the call order or a rerun on micro-batches of equal size confirms it.
"""
from __future__ import annotations

import contextlib
import io
import math

import torch
import torch.nn.functional as F

from .framework.calling import NEEDS, refuse_delegation
from . import trace
from .framework.check import Check
from .framework.measure import describe_factor, fit_scale, python_number_problem, seeded
from .references.generation import ForwardLog, tiny_model
from .references.hints import call_with_hints, finish_with_upstream
from .training import NO_GRAPH, between_steps, flat_parameters, ref_lm_loss
from .training_order import order_text, recorded_calls

ACCUM_LR = 1.0        # SGD: one step from a fresh optimizer moves every parameter by exactly -lr x its gradient
ACCUM_NO_CLIP = 1e6   # a grad_clip far above any gradient norm here: clipping leaves the gradient as it is


def _accum_model(seed: int):
    """A dropout-free model (the big batch and its micro-batches then see the same network) and SGD with momentum.
    SGD's first step shows the gradient's scale (AdamW's first step divides it away); with momentum, a second
    step inside the same call moves the parameters by more than the first, so extra steps show too."""
    model = tiny_model(seed, vocab=23, d_model=20, n_heads=2)
    return model, torch.optim.SGD(model.parameters(), lr=ACCUM_LR, momentum=0.9)


def _accum_batches(seed: int, rows, seq: int, kept):
    """Micro-batches [(x, y)]: rows[i] sequences of seq tokens; of micro-batch i's targets (row-major) the first
    kept[i] are scored and the rest are -100 (padding)."""
    out = []
    for i, (b, n) in enumerate(zip(rows, kept)):
        x = torch.randint(23, (b, seq), generator=seeded(seed + 10 + i))
        y = torch.randint(23, (b * seq,), generator=seeded(seed + 20 + i))
        y[n:] = -100
        out.append((x, y.view(b, seq)))
    return out


def _flat_grads(model) -> torch.Tensor:
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).detach().flatten()
                      for p in model.parameters()])


class _FullBatch:
    """The independent reference: the micro-batches concatenated into one big batch, one mean loss over its target
    tokens, one backward pass. Also each micro-batch's own mean-loss gradient, for the known wrong ways to add them."""

    def __init__(self, seed: int, batches):
        model, _ = _accum_model(seed)
        model.train()
        x, y = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
        full = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100)
        full.backward()
        self.loss, self.grad = full.item(), _flat_grads(model)             # L and G of the whole batch
        self.counts = [int((yi != -100).sum()) for _, yi in batches]       # target tokens per micro-batch
        self.sizes = [yi.numel() for _, yi in batches]                     # target positions per micro-batch
        self.batches = [(xi.clone(), yi.clone()) for xi, yi in batches]    # as they came, for a run under the tracer
        self.targets = [yi for _, yi in self.batches]
        self.positions = sum(self.sizes)                                   # target positions, padding included
        self.means, self.each = [], []                                     # each micro-batch's mean loss, gradient
        for xi, yi in batches:
            model.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xi).flatten(0, 1), yi.flatten(), ignore_index=-100)
            loss.backward()
            self.means.append(loss.item())
            self.each.append(_flat_grads(model))

    def shifted_again(self, seed: int, batches) -> torch.Tensor:
        """The gradient of the hypothesis 'targets shifted once more': the logits at position t scored against
        y[t + 1] (y already holds the next token at t, so against token t + 2), summed over every micro-batch and
        divided by the whole batch's target tokens counted before that shift."""
        model, _ = _accum_model(seed)
        model.train()
        total = sum(self.counts)
        for xi, yi in batches:
            summed = F.cross_entropy(model(xi)[:, :-1].flatten(0, 1), yi[:, 1:].flatten(), ignore_index=-100,
                                     reduction="sum")
            (summed / total).backward()
        return _flat_grads(model)

    def clipped(self, grad_clip: float) -> torch.Tensor:
        return self.grad * min(1.0, grad_clip / float(self.grad.double().norm()))

    def clipped_as_it_accumulates(self, grad_clip: float) -> torch.Tensor:
        """clip_grad_norm_ called inside the loop: after each micro-batch's share is added, the running sum is clipped."""
        total, acc = sum(self.counts), torch.zeros_like(self.grad)
        for n, g in zip(self.counts, self.each):
            acc = acc + g * n / total
            acc = acc * min(1.0, grad_clip / float(acc.double().norm()))
        return acc


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.allclose(a.double(), b.double(), atol=1e-5, rtol=1e-3))


def _call_order(fn, seed: int, batches, grad_clip: float) -> list[str] | None:
    """The order in which one call of the learner's step ran backward passes, zero_grad, clip_grad_norm_ and
    optimizer.step on a fresh model (a call of its own, for the diagnosis only, on the same inputs); None when no
    backward pass was seen (recorded_calls)."""
    model, opt = _accum_model(seed)
    events = recorded_calls(fn, (model, opt, batches, grad_clip), model, opt, "train_step_accumulated")
    return None if events is None else [e for e, _ in events]


def _order_bugs(chk: Check, events: list[str], k: int) -> None:
    """Causes read off the order of the calls (measured, so stated as causes)."""
    steps = events.count("step")
    if steps > 1:
        chk.diagnose(f"optimizer.step() runs {steps} times in one call of {k} micro-batches (measured, in this order: "
                     f"{order_text(events)}): an accumulated step is ONE optimizer step; call optimizer.step() once, "
                     "after the last micro-batch's backward() (and the clipping)")
    pending = False  # gradients added since the last step, not yet used by one
    for e in events:
        if e == "backward":
            pending = True
        elif e == "step":
            pending = False
        elif e == "zero_grad" and pending:
            chk.diagnose(f"zero_grad() runs inside the loop, after a micro-batch's backward() (measured, in this order: "
                         f"{order_text(events)}): it erases the gradients of the micro-batches before it; "
                         "zero the gradients once per step, before the first micro-batch only, and none inside the "
                         "loop")
            break
    def backward_before_the_step(i: int) -> bool:  # a backward pass after events[i] and before the next step
        after = events[i + 1:]
        return "backward" in after[:after.index("step") if "step" in after else len(after)]
    if any(e == "clip" and backward_before_the_step(i) for i, e in enumerate(events)):
        chk.diagnose(f"clip_grad_norm_ runs before the last micro-batch's backward() (measured, in this order: "
                     f"{order_text(events)}): it clips a partial sum, so the step's gradient is not the whole batch's "
                     "gradient clipped; clip once, after the loop, just before optimizer.step()")


def _grad_diagnosis(chk: Check, fn, seed: int, rows, seq: int, kept, ref: _FullBatch, moved: torch.Tensor) -> None:
    """The step with clipping out of the way followed another gradient than the full batch's: which one, confirmed
    on the learner's own function with micro-batches whose target counts are equal (then a mean of per-micro-batch
    means IS the token mean, and a sum over micro-batches is exactly k times it)."""
    k, total = len(kept), sum(ref.counts)
    mean_of_means = sum(ref.each) / k
    sum_of_means = sum(ref.each)
    equal = max(1, min(b * seq for b in rows) - 1)
    if _close(moved, mean_of_means) or _close(moved, sum_of_means):
        eq_rows, eq_kept = tuple(rows) + (rows[0],), (equal,) * (k + 1)  # one micro-batch more: another k
        eq_batches = _accum_batches(seed + 50, eq_rows, seq, eq_kept)
        eq_ref = _FullBatch(seed, eq_batches)
        eq_moved = _moved_by(fn, seed, eq_batches)
        counts = ", ".join(map(str, ref.counts))
        if _close(moved, mean_of_means):
            if eq_moved is not None and _close(eq_moved, eq_ref.grad):
                chk.diagnose(f"mean of per-micro-batch means (measured: with {k} micro-batches of {counts} target "
                             f"tokens your step follows the mean of the {k} micro-batches' mean-loss gradients; with "
                             f"{k + 1} micro-batches of {equal} target tokens each, where that mean IS the token mean, "
                             "it follows the full batch's): a micro-batch with few target tokens weighs as much as one "
                             "with many; divide each micro-batch's summed loss by the number of target tokens of the "
                             "WHOLE batch, (y != -100).sum() added over every micro-batch")
            else:
                chk.candidates(f"with {k} micro-batches of {counts} target tokens your step follows the mean of the "
                               f"micro-batches' mean-loss gradients, not the full batch's (candidate: each micro-batch's "
                               "mean loss divided by the number of micro-batches)")
        elif eq_moved is not None and _close(eq_moved, (k + 1) * eq_ref.grad):
            chk.diagnose(f"each micro-batch's mean loss goes into backward() as it is, not divided by the number of "
                         f"micro-batches nor by the whole batch's target tokens (measured: with {k} micro-batches of "
                         f"{counts} target tokens your step follows the SUM of their mean-loss gradients; with {k + 1} "
                         f"micro-batches of equal token counts it is {k + 1} times the full batch's gradient): the "
                         "gradient grows with the number of micro-batches; divide each micro-batch's summed loss by "
                         "the number of target tokens of the whole batch (dividing mean losses by the number of "
                         "micro-batches would still weigh micro-batches, not tokens)")
        else:
            chk.candidates(f"with {k} micro-batches of {counts} target tokens your step follows the sum of the "
                           "micro-batches' mean-loss gradients, not the full batch's mean (candidate: each micro-batch's "
                           "mean loss backpropagated without dividing by the number of micro-batches)")
        return
    shifted = fit_scale(moved, ref.shifted_again(seed, _accum_batches(seed, rows, seq, kept)))
    if shifted is not None and shifted[1] < 1e-4:
        scale = "" if abs(shifted[0] - 1) < 1e-3 else f"{describe_factor(shifted[0])} times "
        chk.diagnose(f"the targets are shifted a second time (measured: with a bound far above the gradient's "
                     f"norm, which leaves it unscaled, your step follows {scale}the gradient of the logits at position t scored against y[:, t + 1], the "
                     f"next position's target (token t + 2 of a text whose y is x shifted by one), summed and divided by "
                     f"the batch's {total} target tokens, and not the full batch's gradient): y "
                     "already holds the next token at each position; score logits.flatten(0, 1) against y.flatten() "
                     "as they are")
        return
    fit = fit_scale(moved, ref.grad)
    if fit is not None and fit[1] < 1e-4 and abs(fit[0] - 1) > 1e-3:
        named = {"the number of micro-batches": k, "the number of target tokens in the batch": total,
                 f"its {total} target tokens over its {ref.positions} target positions (padding included)":
                     total / ref.positions}
        if abs(fit[0] - total) <= 1e-3 * total:  # exactly the token count: the division by it is what is missing
            chk.diagnose(f"the summed loss goes into backward() undivided (measured: your step follows {total} times "
                         f"the full batch's gradient, {total} = the batch's target tokens): divide each micro-batch's "
                         "summed loss by the whole batch's number of target tokens before backward()")
        else:
            chk.measured(f"your step follows {describe_factor(fit[0], named)} times the full batch's gradient")
            _divisor_read(chk, fn, seed, seq, ref, fit[0])
        return
    last = fit_scale(moved, ref.each[-1])
    if last is not None and last[1] < 1e-4:
        chk.candidates(f"your step follows the last micro-batch's gradient alone ({last[0]:.3g} times its mean-loss "
                       "gradient): the earlier micro-batches' gradients are not in it (candidates: zero_grad() or "
                       ".grad = None inside the loop, a loss variable overwritten before one backward() after the loop)")


def _moved_by(fn, seed: int, batches) -> torch.Tensor | None:
    """The learner's step on a fresh model over `batches`, unclipped, as the gradient SGD followed (None if it
    raised)."""
    model, opt = _accum_model(seed)
    before = flat_parameters(model)
    try:
        with contextlib.redirect_stdout(io.StringIO()), refuse_delegation("train_step_accumulated", fn):
            fn(model, opt, batches, ACCUM_NO_CLIP)
    except Exception:  # noqa: BLE001: no confirmation, what was measured stays a measurement
        return None
    return (before - flat_parameters(model)) / ACCUM_LR


# A second batch whose counts tell every divisor below apart (4 micro-batches of 9, 5, 11 and 2 target tokens).
_SECOND_ROWS, _SECOND_KEPT = (2, 2, 2, 2), (9, 5, 11, 2)


# A third batch whose rows hold padding at their first positions too (and a row with none at all): there a count
# that leaves out position 0 of each row differs from one that leaves out one target per row.
_THIRD_ROWS = (2, 2, 2)
_THIRD_HOLES = (((0, 1), (0, 2)), ((5, 6), (0, 0)), ((0, 6), (4, 6)))  # per micro-batch, per row: [start, stop) padded


def _third_batches(seed: int, seq: int):
    batches = _accum_batches(seed + 90, _THIRD_ROWS, seq, [b * seq for b in _THIRD_ROWS])
    for (_, y), holes in zip(batches, _THIRD_HOLES):
        for row, (start, stop) in enumerate(holes):
            y[row, start:stop] = -100
    return batches


def _divisor_sources(ref: _FullBatch) -> dict[str, float]:
    counts, positions = ref.counts, ref.positions
    total, k = sum(counts), len(counts)
    rows = sum(int((y != -100).any(dim=1).sum()) for y in ref.targets)
    return {"the number of micro-batches": k, "the first micro-batch's target tokens": counts[0],
            "the last micro-batch's target tokens": counts[-1], "the largest micro-batch's target tokens": max(counts),
            "the mean number of target tokens per micro-batch": total / k,
            "the mean number of target tokens per micro-batch, rounded down (//)": total // k,
            "the batch's target positions, padding included": positions,
            "the batch's target tokens times the number of micro-batches": total * k,  # a mean taken on top
            # a count that leaves targets out, by where they sit in a row (what y[:, 1:] or y[:, :-1] counts)
            "the batch's target tokens outside each row's first position, position 0 (what y[:, 1:] counts)":
                sum(int((y[:, 1:] != -100).sum()) for y in ref.targets),
            "the batch's target tokens outside each row's last position (what y[:, :-1] counts)":
                sum(int((y[:, :-1] != -100).sum()) for y in ref.targets),
            "the batch's target tokens less one for each row that holds any (its first or its last target left "
            "out)": total - rows}


def _divided_by(fn, seed: int, batches) -> tuple[_FullBatch, float] | None:
    """The batch's reference and what the learner's step divides the summed loss by on it, where the step follows
    the full batch's gradient times one factor."""
    ref = _FullBatch(seed, batches)
    moved = _moved_by(fn, seed, batches)
    fit = fit_scale(moved, ref.grad) if moved is not None else None
    return None if fit is None or fit[1] >= 1e-4 else (ref, sum(ref.counts) / fit[0])


def _fits(sources: dict[str, float], divisor: float) -> list[str]:
    return [name for name, value in sources.items() if math.isclose(value, divisor, rel_tol=1e-3)]


def _divisor_read(chk: Check, fn, seed: int, seq: int, ref: _FullBatch, factor: float) -> None:
    """A step that is the full batch's gradient times a factor is the summed loss's gradient divided by
    total / factor instead of by the batch's target tokens (an identity, so measured). What that divisor is,
    among the counts a learner might divide by, is confirmed on a second batch whose counts tell them apart, and,
    where two counts still fit, on a third whose rows hold padding at their first positions too. The line that
    makes the divisor is placed where the tracer finds one of the learner's names holding it in two runs."""
    total = sum(ref.counts)
    divisor = total / factor
    fact = (f"your update follows the gradient of the batch's summed loss divided by {divisor:.4g}, where the "
            f"batch's {total} target tokens belong")
    second = _accum_batches(seed + 70, _SECOND_ROWS, seq, _SECOND_KEPT)
    measured = _divided_by(fn, seed, second)
    fits_first = _fits(_divisor_sources(ref), divisor)
    if measured is None:
        if fits_first:
            chk.candidates(f"{fact}; candidates: {' or '.join(fits_first)}")
        else:
            chk.measured(fact)
        return
    second_ref, second_divisor = measured
    _place_divisor(chk, fn, seed, (ref.batches, divisor),
                   (second, second_divisor), total, sum(second_ref.counts))
    second_total = sum(second_ref.counts)
    both = [name for name in fits_first if name in _fits(_divisor_sources(second_ref), second_divisor)]
    counts = ", ".join(map(str, second_ref.counts))
    again = ""
    if len(both) > 1:
        third = _divided_by(fn, seed, _third_batches(seed, seq))
        kept = [name for name in both if third is not None and name in _fits(_divisor_sources(third[0]), third[1])]
        if len(kept) == 1:
            both = kept
            again = (f"; with micro-batches whose rows hold padding at their first positions too, by "
                     f"{third[1]:.4g}, that count again, where {sum(third[0].counts)} belong")
    if len(both) == 1:
        left_out = ": the targets at position 0 of each row go uncounted;" if "position 0" in both[0] else ":"
        chk.diagnose(f"the summed loss is divided by {both[0]}, not by the whole batch's target tokens (measured: "
                     f"{fact}; with {len(second_ref.counts)} micro-batches of {counts} target tokens it is divided "
                     f"by {second_divisor:.4g}, that count again, where {second_total} belong{again}){left_out} "
                     "divide each micro-batch's summed loss by the target tokens of every micro-batch together")
    elif both:
        chk.candidates(f"{fact}; candidates: {' or '.join(both)}")
    else:
        chk.measured(f"{fact} (with {len(second_ref.counts)} micro-batches of {counts} target tokens, by "
                     f"{second_divisor:.4g} where {second_total} belong)")


def _holding(value: float):
    """made(v) for the tracer: a local that holds the whole number `value` (a Python number or a one-element
    tensor, never a bool)."""
    def made(v) -> bool:
        if isinstance(v, torch.Tensor):
            if v.numel() != 1 or v.dtype == torch.bool:
                return False
            v = float(v.detach())
        return not isinstance(v, bool) and isinstance(v, (int, float)) and v == value
    return made


def _place_divisor(chk: Check, fn, seed: int, first: tuple, second: tuple, total: int, second_total: int) -> None:
    """Where the divisor is made: the first line after which one of the learner's names holds it, found on the
    same line in two runs whose divisors differ (a whole number each: a count)."""
    if chk.located is not None or any(abs(d - round(d)) > 1e-3 for _, d in (first, second)) or \
            round(first[1]) == round(second[1]):
        return
    places = []
    for batches, divisor in (first, second):
        model, opt = _accum_model(seed)
        batches = [(x.clone(), y.clone()) for x, y in batches]
        places.append(trace.line_making(fn, (model, opt, batches, ACCUM_NO_CLIP), _holding(round(divisor)), [],
                                        "count", within=lambda code: code is getattr(fn, "__code__", None)))
    a, b = places
    if a is None or b is None or (a.file, a.line) != (b.file, b.line):
        return
    a.facts = [f"{round(first[1])} here, where the batch's {total} target tokens belong; {round(second[1])} in the "
               f"second run, where {second_total} belong"]
    chk.located = a


def _clip_diagnosis(chk: Check, ref: _FullBatch, moved: torch.Tensor, grad_clip: float) -> None:
    norm = float(moved.double().norm())
    if _close(moved, ref.grad):
        chk.diagnose(f"the gradients are not clipped before the step (measured: with grad_clip = {grad_clip:g} your step "
                     f"follows the full batch's gradient unclipped, norm {norm:.3g}): "
                     "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip) goes once, after the loop and "
                     "before optimizer.step() (a clip after the step comes too late for it)")
    elif _close(moved, ref.clipped_as_it_accumulates(grad_clip)):
        chk.candidates(f"with grad_clip = {grad_clip:g} your step follows the gradient clipped after each micro-batch's "
                       "share was added (each running sum clipped to grad_clip), not the whole batch's gradient clipped "
                       "once (candidate: clip_grad_norm_ inside the loop)")
    elif norm > grad_clip * 1.001:
        chk.measured(f"with grad_clip = {grad_clip:g} your step's gradient has norm {norm:.3g}, above grad_clip")


def _body_train_step_accumulated(fn, seed, rows, seq, kept, grad_clip) -> Check:
    k = len(kept)
    chk = Check("train_step_accumulated", expects="the mean loss over every target token of the batch, as a Python "
                                                  "float", gradients=NEEDS)
    batches = _accum_batches(seed, rows, seq, kept)
    ref = _FullBatch(seed, batches)
    counts = ", ".join(map(str, ref.counts))

    def step(clip, stale=False, forward_calls=None, in_train_mode=False, micro_batches=None, label=None):
        model, opt = _accum_model(seed)  # in eval mode, as a caller leaves it after an evaluation
        model.train(in_train_mode)
        if stale:  # gradients left by something before the call (an evaluation with autograd on)
            between_steps(model, seed, 1)
        before = flat_parameters(model)
        log = ForwardLog(model)
        try:
            got = call_with_hints(chk, fn, model, opt, batches if micro_batches is None else micro_batches, clip,
                                  hints=NO_GRAPH, row_label=label)
        finally:
            log.close()
            if forward_calls is not None:
                forward_calls += log.calls
        return got, (before - flat_parameters(model)) / ACCUM_LR  # the gradient a single SGD step followed

    calls: list[dict] = []
    got, moved = step(ACCUM_NO_CLIP, forward_calls=calls)
    in_eval = sum(not c["training"] for c in calls)
    if in_eval:  # the check's model has no dropout, so the mode changes no value here; with dropout it would
        chk.require("trains in train mode (the model handed over in eval mode)", False,
                    f"{in_eval} of {len(calls)} forward passes ran in eval mode",
                    diagnosis="eval mode left on: call model.train() at the start of the step (dropout must be on "
                              f"while training; measured: on a model handed over in eval mode, {in_eval} of the "
                              f"{len(calls)} forward passes of the step ran in eval mode)")
    problem = python_number_problem(got, float)
    if problem:
        chk.require("returns a Python float", False, f"returned {problem}",
                    diagnosis=f"train_step_accumulated returned {problem}: return the batch's mean loss as a Python "
                              "float (accumulate summed.item() over the micro-batches, divide by the target tokens)")
    got_t = _loss_tensor(got)
    loss_ok = chk.compare(f"{k} micro-batches of {counts} target tokens: returned loss", got_t,
                          torch.tensor(ref.loss, dtype=torch.float64), atol=1e-5, rtol=1e-5)
    if not loss_ok and isinstance(got_t, torch.Tensor) and got_t.numel() == 1:
        for words, value in ((f"the mean of the {k} micro-batches' mean losses", sum(ref.means) / k),
                             (f"the sum of the {k} micro-batches' mean losses", sum(ref.means)),
                             ("the last micro-batch's mean loss", ref.means[-1]),
                             (f"the last micro-batch's summed NLL divided by the batch's {sum(ref.counts)} target "
                              "tokens (the loss of the last pass through the loop, not the batch's sum)",
                              ref.means[-1] * ref.counts[-1] / sum(ref.counts)),
                             (f"the batch's summed NLL divided by the {k} micro-batches, not by its {sum(ref.counts)} "
                              "target tokens", ref.loss * sum(ref.counts) / k),
                             (f"the batch's summed NLL divided by its {ref.positions} target positions, padding "
                              f"included, not by its {sum(ref.counts)} target tokens",
                              ref.loss * sum(ref.counts) / ref.positions),
                             (f"the batch's mean loss divided by its {sum(ref.counts)} target tokens a second time",
                              ref.loss / sum(ref.counts)),
                             (f"the sum over the micro-batches of each one's mean loss times its positions, padding "
                              f"included ({', '.join(map(str, ref.sizes))}), not times its target tokens ({counts}), "
                              f"divided by the batch's {sum(ref.counts)}",
                              sum(m * n for m, n in zip(ref.means, ref.sizes)) / sum(ref.counts))):
            if math.isclose(float(got_t), value, rel_tol=1e-5):
                chk.measured(f"the returned loss, {value:.6g}, is {words}; the batch's mean over its "
                             f"{sum(ref.counts)} target tokens is {ref.loss:.6g}")
                break
    grads_ok = chk.compare(f"grad_clip {ACCUM_NO_CLIP:g} (no clipping): the step follows the full batch's gradient", moved, ref.grad,
                           atol=1e-5, rtol=1e-3)
    clip_ok = True
    if grads_ok:
        _, clipped = step(grad_clip)
        clip_ok = chk.compare(f"grad_clip {grad_clip:g}: the step follows that gradient clipped to norm {grad_clip:g}",
                              clipped, ref.clipped(grad_clip), atol=1e-5, rtol=1e-3)
    stale_ok = True
    if grads_ok and clip_ok:
        _, with_stale = step(ACCUM_NO_CLIP, stale=True)
        stale_ok = chk.compare("gradients left in .grad before the call: not added", with_stale, ref.grad,
                               atol=1e-5, rtol=1e-3)
    if not (grads_ok and clip_ok and stale_ok):
        events = _call_order(fn, seed, batches, ACCUM_NO_CLIP if not grads_ok or not stale_ok else grad_clip)
        if events is not None:
            _order_bugs(chk, events, k)
            if not stale_ok and "zero_grad" not in events[:events.index("backward")]:
                chk.diagnose(f"no zero_grad() before the first micro-batch's backward() (measured, in this order: "
                             f"{order_text(events)}; the step is right on a fresh model and wrong when .grad already "
                             "holds gradients): those are added to the batch's; call optimizer.zero_grad() once, "
                             "before the loop")
        if not stale_ok and events is None:
            chk.candidates("the step is right on a fresh model and wrong when .grad already holds gradients before the "
                           "call: they are added to the batch's (candidate: no optimizer.zero_grad() before the loop)")
        if not grads_ok and not chk.diagnoses:
            _grad_diagnosis(chk, fn, seed, rows, seq, kept, ref, moved)
        if grads_ok and not clip_ok and not chk.diagnoses:
            _clip_diagnosis(chk, ref, clipped, grad_clip)
    if chk.passed:  # the other entry state: a model the caller hands over in train mode (between two steps)
        from_train: list[dict] = []
        step(ACCUM_NO_CLIP, forward_calls=from_train, in_train_mode=True)
        in_eval = sum(not c["training"] for c in from_train)
        chk.require("trains in train mode (the model handed over in train mode)", not in_eval,
                    f"{in_eval} of {len(from_train)} forward passes ran in eval mode",
                    diagnosis=f"your train_step_accumulated switches a model that came in train mode to eval mode "
                              f"(measured: handed the model in train mode, {in_eval} of the {len(from_train)} forward "
                              "passes of the step ran in eval mode; handed it in eval mode, none did): set the mode, "
                              "model.train(), at the start of the step, whatever mode it came in")
    if chk.passed:
        # one more micro-batch whose every target is padding (-100), as the tail of a packed batch can be: it scores
        # nothing, so the loss and the step are the batch's own
        x, y = batches[0]
        label = "one more micro-batch whose every target is padding (-100)"
        got, moved = step(ACCUM_NO_CLIP, in_train_mode=True, label=label,
                          micro_batches=[*batches, (x.clone(), torch.full_like(y, -100))])
        _padding_read(chk, label, _loss_tensor(got), moved, ref)
    return chk


def _loss_tensor(got):
    """The returned loss as a float64 tensor to compare (a Python number or a tensor), else as it came."""
    got_t = torch.tensor(float(got), dtype=torch.float64) if isinstance(got, (int, float)) else got
    return got_t.detach().double() if isinstance(got_t, torch.Tensor) else got_t


def _padding_read(chk: Check, label: str, got_t, moved: torch.Tensor, ref) -> None:
    """The rows of a step given one more micro-batch of padding only: the batch's loss and gradient, and where
    either is not finite, that measured."""
    spoiled = []
    if not chk.compare(f"{label}: the same loss", got_t, torch.tensor(ref.loss, dtype=torch.float64), atol=1e-5,
                       rtol=1e-5) and isinstance(got_t, torch.Tensor) and not bool(torch.isfinite(got_t).all()):
        spoiled.append("the loss it returns")
    if not chk.compare(f"{label}: the step follows the same gradient", moved, ref.grad, atol=1e-5, rtol=1e-3) \
            and not bool(torch.isfinite(moved).all()):
        spoiled.append("the parameters after the step")
    if spoiled:
        chk.measured(f"with a micro-batch that scores no target, {' and '.join(spoiled)} "
                     f"{'hold' if len(spoiled) > 1 else 'holds'} nan or inf (measured), "
                     "where that micro-batch adds nothing to the batch's sum and count: a mean over its 0 target "
                     "tokens is 0 / 0 = nan, and nan times 0 is still nan")


def check_train_step_accumulated(train_step_accumulated, *, seed: int = 0, rows=(2, 2, 2), seq: int = 6,
                                 kept=(12, 7, 3), grad_clip: float = 0.05) -> None:
    """train_step_accumulated(model, optimizer, micro_batches, grad_clip) on
    micro-batches with different numbers of target tokens, against one big
    batch of them all (one mean over its target tokens, one backward pass):
    the step must follow the full batch's gradient, clipped once. SGD shows
    the gradient in the step; the order of the step's calls names the cause."""
    __tracebackhide__ = True
    finish_with_upstream("train_step_accumulated",
                         lambda: _body_train_step_accumulated(train_step_accumulated, seed, rows, seq, kept, grad_clip),
                         train_step_accumulated, {"lm_loss": ref_lm_loss}, {"lm_loss": "exercise 2"})
