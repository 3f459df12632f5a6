"""Checks for notebook 09: batches, the loss, one training step (the schedule: training_schedule.py).

References: windows read straight out of the data, F.cross_entropy, the
closed-form warmup + cosine formula, and a training step written out with
torch.optim.AdamW and clip_grad_norm_ on a deep copy of the same model with
the same dropout random state.
"""
from __future__ import annotations

import math
import re

import torch
import torch.nn.functional as F

from .contracts import Contract, defaults, run_contract
from ..diagnosis_record import Evidence, candidates
from ..learner_values import describe
from .framework.calling import NEEDS, guarded_call
from .framework.check import Check
from .framework.explain.notebook_names import say_notebook_generator
from .framework.measure import fit_scale, mode_split, python_number_problem, randn, seeded
from .references.generation import ForwardLog, tiny_model
from .references.hints import call_with_hints, finish_with_upstream
from .training_order import explain_step
from .training_random import seeds_itself

UNSHIFTED = ("labels not shifted: y must be x shifted left by one (y[t] = data[start + t + 1]), the token that "
             "follows x[t]; scoring a token against itself teaches the model to copy its input")


def _past_end(length: int) -> list:
    """error_hints for get_batch on `length` tokens: that the windows run past the end is said when torch's error
    names an index at or past the end of data; which of the start range and the window's extent overshoots, the
    error does not tell, so both are said as candidates."""
    def hint(error: str) -> Evidence | None:
        found = re.search(rf"index (\d+) is out of bounds for dimension 0 with size {length}\b", error)
        if found is None:
            return None
        return candidates(f"windows go past the end of data (measured: your code reads index {found.group(1)} of "
                          f"data's {length} tokens): a window is data[start : start + seq_len + 1] (seq_len + 1 "
                          "tokens: x, and y one further), and the largest start is len(data) - seq_len - 1; "
                          "candidates: starts drawn past it (torch.randint(len(data) - seq_len, ...) draws the right "
                          "ones), or windows longer than seq_len + 1 tokens")
    return [(r"out of bounds|out of range|index \d+ is out", hint)]


def _windows(fn, chk, data, batch, seq, gen):
    out = call_with_hints(chk, fn, data, batch, seq, gen, hints=_past_end(len(data)))
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)):
        chk._stop(f"get_batch returned {describe(out)}; it should return a pair of tensors (x, y)")
    return out


def _label_offset(y: torch.Tensor, pos: torch.Tensor, where: torch.Tensor, n_data: int) -> int | None:
    """d with y[b, t] = data[start_b + t + d] everywhere (None if no single d)."""
    if y.shape != pos.shape or y.is_floating_point() and not torch.equal(y, y.round()):
        return None
    at = where[y.long().cpu().clamp(0, n_data - 1)]
    d = at - pos
    return int(d[0, 0]) if bool((d == d[0, 0]).all()) else None


def _x_shape_said(chk: Check, x: torch.Tensor, y: torch.Tensor, where: torch.Tensor, batch: int, seq: int) -> None:
    """A wrong x shape, measured; named where its values show the cause
    (`where` maps a token of data to its position, every token being
    distinct): windows one token short (each row of x a run of seq_len - 1
    tokens, y the same run one further), the shift taken along the batch
    axis (rows of seq_len + 1 tokens, y holding the next window), or windows
    that carry an extra axis of size 1 (what window[:, :-1] leaves empty)."""
    shape = tuple(x.shape)
    if len(shape) == 3 and shape[0] == batch and shape[1] == 0 and shape[2] == seq + 1:
        chk.diagnose(f"the windows carry an axis too many, (batch_size, 1, seq_len + 1) (measured: x has shape {shape}: "
                     f"its last axis holds seq_len + 1 = {seq + 1} tokens, a whole window, and its axis 1 is empty, which "
                     "window[:, :-1] makes of an axis of size 1): the start positions or the index made from them have "
                     "an extra axis, e.g. starts drawn with shape (batch_size, 1); draw them with shape (batch_size,), "
                     "so starts[:, None] + torch.arange(seq_len + 1) is (batch_size, seq_len + 1)")
        return
    runs = _runs(x, where)
    if runs is not None and y.shape == x.shape and shape == (batch, seq - 1) and torch.equal(_runs(y, where), runs + 1):
        chk.diagnose(f"the windows hold seq_len = {seq} tokens, not seq_len + 1 (measured: x has shape {shape}, each row "
                     f"a run of {seq - 1} consecutive tokens of data and y the same run one further, so each window "
                     f"spans {seq} tokens): take seq_len + 1 tokens per window, "
                     "starts[:, None] + torch.arange(seq_len + 1), then x = window[:, :-1], y = window[:, 1:]")
        return
    if runs is not None and y.shape == x.shape and shape == (batch - 1, seq + 1) and torch.equal(y[:-1], x[1:]):
        chk.diagnose(f"the shift is taken along the batch axis (measured: x has shape {shape}, each row a whole window of "
                     f"seq_len + 1 = {seq + 1} consecutive tokens, and row i of y is row i + 1 of x): window[:-1] and "
                     "window[1:] drop a window, not a position; shift along the positions, x = window[:, :-1], "
                     "y = window[:, 1:]")
        return
    chk.measured(f"x has shape {shape}; expected (batch_size, seq_len) = {(batch, seq)}, window[:, :-1] of "
                 "(batch_size, seq_len + 1) windows")


def _runs(x: torch.Tensor, where: torch.Tensor) -> torch.Tensor | None:
    """The position in data of each row's first token, when every row of the
    2-D integer x is a run of consecutive tokens of data; else None."""
    if x.dim() != 2 or x.shape[1] == 0 or x.is_floating_point() or int(x.min()) < 0 or int(x.max()) >= len(where):
        return None
    at = where[x.long().cpu()]
    first = at[:, :1]
    return first[:, 0] if torch.equal(at, first + torch.arange(x.shape[1])) else None


def check_get_batch(get_batch, *, seed: int = 0, n_data: int = 300, batch: int = 5, seq: int = 7) -> None:
    """get_batch(data, batch_size, seq_len, generator) -> x, y (B, T): random
    windows of data, y = x shifted by one (the measured offset between them
    names the bug), int64 even for the course's uint8 corpus, reproducible
    with the generator, every valid start possible."""
    __tracebackhide__ = True
    chk = Check("get_batch", expects=f"a pair (x, y) of int64 tensors, each (batch_size, seq_len) = {(batch, seq)}")
    data = torch.randperm(n_data, generator=seeded(seed))  # distinct values: a value tells its position
    where = torch.empty(n_data, dtype=torch.long)
    where[data] = torch.arange(n_data)
    x, y = _windows(get_batch, chk, data, batch, seq, seeded(seed + 1))
    # One dtype, one line: the x row says it (naming y too when y has it), and the rows after it compare values.
    wrong_dtype = x.dtype if x.dtype != torch.long else None
    if tuple(x.shape) != (batch, seq) or wrong_dtype is None:
        if not chk.compare("x shape and dtype", torch.zeros(x.shape, dtype=x.dtype),
                           torch.zeros(batch, seq, dtype=torch.long)):
            _x_shape_said(chk, x, y, where, batch, seq)
    else:
        both = "x and y are" if y.dtype == wrong_dtype else "x is"
        chk.require("x shape and dtype", False, f"x is {wrong_dtype}, expected torch.int64",
                    diagnosis=f"{both} {wrong_dtype}: token ids must be int64 (torch.long) for the embedding and "
                              "F.cross_entropy; convert the windows with .long()")
        if y.dtype == wrong_dtype:
            y = y.long()
    y_ok = False
    if tuple(x.shape) == (batch, seq):
        starts = where[x[:, 0].long().cpu().clamp(0, n_data - 1)]                 # (B,)
        pos = starts[:, None] + torch.arange(seq)                                  # (B, T)
        in_range = bool((pos[:, -1] + 1 < n_data).all())
        chk.require("x rows are contiguous windows of data", in_range and torch.equal(x.cpu().long(), data[pos.clamp(max=n_data - 1)]),
                    "each row of x must be data[start : start + seq_len] for a random start")
        if in_range:
            y_ok = chk.compare("y is x shifted by one", y, data[pos + 1], variants={
                UNSHIFTED: x,
                "labels shifted the wrong way (x and y swapped?): y[t] must be the token AFTER x[t], not before":
                    data[(pos - 1).clamp(min=0)],
            })
            if not y_ok:
                d = _label_offset(y, pos, where, n_data)
                if d is not None and d != 1:  # offset 1 is right: what fails is not the shift (the dtype)
                    chk.measured(f"your y[b, t] = data[start + t + {d}]; expected data[start + t + 1]")
                    if d not in (0, -1):
                        chk.diagnose(f"labels shifted by {d}: y is the window moved by one token, "
                                     "y = data[start + 1 : start + seq_len + 1]")
        if batch > 1 and bool((starts == starts[0]).all()):
            chk.diagnose("every row starts at the same position: draw batch_size starts, "
                         "torch.randint(..., (batch_size,), generator=generator)")
    # The course's corpus is uint8 (bytes): the batches must still be int64.
    small = torch.randperm(200, generator=seeded(seed + 5)).to(torch.uint8)
    xu, yu = _windows(get_batch, chk, small, 3, 5, seeded(seed + 6))
    as_long = xu.dtype == torch.long and yu.dtype == torch.long
    said = wrong_dtype is not None and xu.dtype == wrong_dtype  # the same dtype, already said on the x row
    off = " and ".join(f"{n} as {t.dtype}" for n, t in (("x", xu), ("y", yu)) if t.dtype != torch.long)
    chk.require("uint8 data (the course corpus) gives int64 batches", as_long, f"got {xu.dtype} and {yu.dtype}",
                diagnosis=None if as_long or said else
                f"get_batch returns {off} for the course's uint8 corpus: token ids must be int64 "
                "(torch.long) for the embedding and F.cross_entropy; convert with .long()")
    a = _windows(get_batch, chk, data, batch, seq, seeded(seed + 2))
    b = _windows(get_batch, chk, data, batch, seq, seeded(seed + 2))
    c = _windows(get_batch, chk, data, batch, seq, seeded(seed + 3))
    same = torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    notebooks = not same and say_notebook_generator(chk, get_batch, (data, batch, seq, seeded(seed + 2)))
    chk.require("same generator seed, same batch", same, "two calls with identically seeded generators differ",
                diagnosis=None if same or notebooks else
                "the generator is not used: torch.randint(..., generator=generator)")
    if not chk.require("another seed, another batch", not torch.equal(a[0], c[0]), "different seeds gave the same windows") \
            and isinstance(a[0], torch.Tensor) and tuple(a[0].shape) == (batch, seq):  # empty windows are all alike
        # In the grader's recheck every call starts from the same global random state: there a generator left
        # unused gives the same windows, and two calls cannot differ by it.
        unused = ("the generator is not used (in this rerun each call starts from the same global random state)"
                  if getattr(get_batch, "recheck_trace", None) is not None else
                  "the generator is not used and the starts come from no other random source either (or from one "
                  "seeded inside get_batch)")
        chk.candidates(f"the windows do not depend on the generator (measured: generators seeded {seed + 2} and "
                       f"{seed + 3} gave the same windows); candidates: {unused}, or the generator is seeded again "
                       "inside get_batch: draw the starts with torch.randint(..., generator=generator), from the "
                       "generator as it comes")
    # Every start in [0, len - seq_len - 1] must be possible, and nothing beyond.
    short = torch.arange(12) * 10
    xs, _ = _windows(get_batch, chk, short, 2000, 4, seeded(seed + 4))
    first = set((xs[:, 0] // 10).long().tolist()) if isinstance(xs, torch.Tensor) and xs.dim() == 2 else set()
    # More rows than distinct windows: the batch still has batch_size rows, so some windows repeat.
    rows = int(xs.shape[0]) if isinstance(xs, torch.Tensor) and xs.dim() else None
    # As many rows as distinct windows is the mark of windows drawn without repeats (a permutation of the starts);
    # any other count has other causes, and the row's own note says what was measured.
    chk.require("batch_size rows when it exceeds the number of windows", rows == 2000,
                f"{rows} rows for batch_size 2000", diagnosis=None if rows != 12 - 4 else
                f"for 12 tokens and seq_len 4 (8 possible windows) with batch_size 2000, your x has {rows} rows, "
                "expected 2000: x and y have batch_size rows whatever the data's length, so a batch larger than the "
                "number of windows repeats some of them (draw each start independently, torch.randint)")
    chk.require("every window start in [0, len(data) - seq_len - 1] occurs", first == set(range(12 - 4)),
                f"starts drawn: {sorted(first)}; expected 0..{12 - 4 - 1}",
                diagnosis=None if first == set(range(12 - 4)) or len(first) < 2 or not y_ok else
                _start_bound_words(first, 12 - 4 - 1))
    run_contract(chk, get_batch, GET_BATCH)
    chk.finish()


def _start_bound_words(first: set, last: int) -> str:
    """What the starts drawn show, by the direction the range is off (the
    words differ: a start past `last` reads past the data's end, a range
    short of it never draws the last window)."""
    # a range cut short or run past its end draws every start up to where it stops; starts with gaps between them
    # (whole chunks, every other start) are another mistake, said by the starts never drawn
    contiguous = first == set(range(max(first) + 1))
    if max(first) == last + 1 and contiguous:
        return (f"window starts off by one: starts up to {max(first)} are drawn, past the last one, {last}, whose "
                "target data[start + seq_len] is the data's last token; draw start from "
                "torch.randint(len(data) - seq_len, ...)")
    if max(first) == last - 1 and contiguous:
        return (f"window starts off by one: the last start, {last} = len(data) - seq_len - 1, is never drawn (the "
                f"largest drawn is {max(first)}), so the last window and its last target never occur; randint's "
                "upper bound is already exclusive: torch.randint(len(data) - seq_len, ...)")
    missing = sorted(set(range(last + 1)) - first)
    past = sorted(s for s in first if s > last)
    return (f"window starts: the starts {sorted(first)} are drawn" + (f" ({past} past the last one, {last})" if past else "")
            + (f", {missing[:8]}{' and more' if len(missing) > 8 else ''} never" if missing else "") + "; every start in 0 .. len(data) - seq_len - 1 must be "
            "possible, each with the same chance: torch.randint(len(data) - seq_len, ...)")


# ---------------------------------------------------------------- the loss

def _loss_variants(logits, targets, ignore):
    flat, tgt = logits.flatten(0, 1), targets.flatten()
    valid = (targets != ignore)
    per_token = F.cross_entropy(flat, tgt, ignore_index=ignore, reduction="none").view(targets.shape)  # (B, T), 0 at padding
    return {
        "loss summed instead of averaged: use the mean over the predicted tokens": lambda: per_token.sum(),
        "loss averaged wrongly: per-sequence means averaged over sequences; weight every token equally "
        "(sum of losses / number of non-padding tokens)": lambda: (per_token.sum(1) / valid.sum(1)).mean(),
        "padding counted: the ignored positions are included in the mean's denominator":
            lambda: per_token.sum() / targets.numel(),
        "loss averaged wrongly: divided by the batch size instead of the number of tokens":
            lambda: per_token.sum() / targets.shape[0],
        "softmax applied before cross_entropy: F.cross_entropy takes raw logits":
            lambda: F.cross_entropy(flat.softmax(-1), tgt, ignore_index=ignore),
        "F.nll_loss on raw logits: nll_loss expects log-probabilities; use F.cross_entropy (it applies log_softmax)":
            lambda: F.nll_loss(flat, tgt, ignore_index=ignore),
        "labels shifted again inside the loss: get_batch already made y[t] the token after x[t], so compare "
        "logits[:, t] with targets[:, t]": lambda: F.cross_entropy(logits[:, :-1].flatten(0, 1), targets[:, 1:].flatten(),
                                                                   ignore_index=ignore),
    }


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) or (isinstance(value, torch.Tensor) and value.numel() == 1)


def _padding_scored(chk: Check, lm_loss, logits, padded, got: float | None) -> None:
    """Whether the -100 positions reach the learner's loss, measured on their function: the logits at those
    positions alone are changed and the loss is asked again (the reference's would not move). Where they do, the
    token they are scored as is named when one token's cross-entropy with no ignored position gives the loss."""
    pad = padded == -100                                                     # (B, T)
    moved = logits.clone()
    moved[pad] = moved[pad] + randn(int(pad.sum()), logits.shape[-1], seed=99, dtype=logits.dtype) * 3
    try:
        again = guarded_call(lm_loss, (moved, padded.clone()))
        again = float(again)
    except Exception:  # noqa: BLE001: a call that raises measures nothing; the rows said why
        return
    if got is None or not math.isfinite(again) or math.isclose(again, got, rel_tol=1e-6, abs_tol=1e-7):
        return
    flat = logits.flatten(0, 1)
    scored_as = [token for token in range(logits.shape[-1])
                 if math.isclose(float(F.cross_entropy(flat, padded.flatten().masked_fill(pad.flatten(), token))),
                                 got, rel_tol=1e-5, abs_tol=1e-6)]
    fact = (f"your loss moves ({got:.6g} -> {again:.6g}) when only the logits at the -100 positions change, where "
            "the mean over the predicted tokens does not read them")
    if len(scored_as) == 1:
        chk.diagnose(f"the padded positions are scored, each as token {scored_as[0]} (measured: {fact}; your loss is "
                     f"the cross-entropy with every -100 replaced by {scored_as[0]}): score only the targets that are "
                     "not -100 and divide by their count (F.cross_entropy with ignore_index=-100 does both; a "
                     "gathered NLL needs a mask of targets != -100)")
    else:
        chk.candidates(f"{fact}; candidates: the padded positions are scored, or the logits are normalised across "
                       "positions (a softmax over another axis than the vocabulary lets every position's logits "
                       "reach every other's log-probabilities)")


def check_lm_loss(lm_loss, *, seed: int = 0, batch: int = 3, seq: int = 5, vocab: int = 7, dtype=torch.float32) -> None:
    """lm_loss(logits (B, T, V), targets (B, T)) -> mean cross-entropy over
    non-padding targets (-100), against F.cross_entropy."""
    __tracebackhide__ = True
    chk = Check("lm_loss", expects="a scalar tensor: mean cross-entropy over the non-padding targets")
    logits = (randn(batch, seq, vocab, seed=seed, dtype=dtype) * 2).requires_grad_()
    full = torch.randint(vocab, (batch, seq), generator=seeded(seed))
    padded = full.clone()
    for b in range(batch):
        padded[b, seq - b:] = -100  # row b ends with b padding positions
    for label, targets in (("no padding", full), ("with -100 padding", padded)):
        got = chk.call(lm_loss, logits, targets)
        want = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        row_ok = chk.compare(f"{label}: {tuple(logits.shape)}", got, want.detach(),
                             variants=_loss_variants(logits.detach(), targets, -100))
        if not row_ok and targets is padded and not chk.reproduced.get(chk.rows[-1].name):
            _padding_scored(chk, lm_loss, logits.detach(), padded, float(got) if _is_number(got) else None)
        if isinstance(got, torch.Tensor):
            chk.require(f"{label}: differentiable", got.requires_grad,
                        "the loss does not depend on the logits through autograd",
                        diagnosis="the loss is detached from the logits (.detach(), .item() or torch.tensor(...) "
                                  "inside): return F.cross_entropy's result as it is, so that backward() reaches the model")
    run_contract(chk, lm_loss, LM_LOSS)
    chk.finish()


# ---------------------------------------------------------------- schedule

# ---------------------------------------------------------------- one step

def _ref_step(model, opt, x, y, clip, *, train=True, zero_grad=True, clip_on=True, reduction="mean",
              zero_after_backward=False, zero_after_step=False, targets=None, shift_again=False, loss_after=False):
    model.train(train)
    y = y if targets is None else targets

    def batch_loss():
        logits = model(x)                                                # (B, T, V)
        scored = y
        if shift_again:  # the hypothesis of a second shift: position t scored against y[:, t + 1]
            logits, scored = logits[:, :-1], y[:, 1:]
        return F.cross_entropy(logits.flatten(0, 1), scored.flatten(), reduction=reduction)
    loss = batch_loss()
    if zero_grad and not zero_after_backward:
        opt.zero_grad()
    loss.backward()
    if zero_after_backward:
        opt.zero_grad()
    if clip_on:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    if zero_after_step:
        opt.zero_grad()
    if loss_after:  # the hypothesis of a loss computed again once the step is taken
        with torch.no_grad():
            return batch_loss().detach()
    return loss.detach()


def flat_parameters(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _setup(seed: int, dropout: float, lr: float, two_groups: bool = False):
    """The check's model and its AdamW; with two_groups, in two parameter groups as training usually builds it:
    weight decay on the matrices, none on the vectors (the norms' gains)."""
    model = tiny_model(seed, dropout=dropout, vocab=23, d_model=20, n_heads=2)
    if not two_groups:
        return model, torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    vectors = [p for p in model.parameters() if p.dim() < 2]
    return model, torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                                     {"params": vectors, "weight_decay": 0.0}], lr=lr)


def between_steps(model, seed: int, i: int) -> None:
    """Before the second step, gradients left in .grad by something between the steps (an evaluation run with
    autograd on, a gradient check), which a step must not add to its own; the first step meets a fresh model,
    whose .grad are None."""
    if i == 1:
        for k, p in enumerate(model.parameters()):
            left = 0.03 * randn(*p.shape, seed=seed + 100 + k)  # about a real gradient's size: clipping keeps both
            p.grad = left if p.grad is None else p.grad + left


def ref_lm_loss(logits, targets):
    """Correct exercise 2 of notebook 09 (for upstream attribution)."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)


NO_GRAPH = [(r"does not require grad|has no attribute 'backward'",
             "the loss has no autograd graph when backward() runs: compute it with gradients on (no torch.no_grad(), "
             "no .item() or .detach() before loss.backward()); call .item() only on the value you return")]


def _grad_norm(grads) -> float:
    """The global norm of the gradients given (None entries left out), in float64."""
    return float(torch.cat([g.detach().flatten() for g in grads if g is not None]).double().norm())


NOT_CLIPPED = ("gradients not clipped before optimizer.step(): torch.nn.utils.clip_grad_norm_(model.parameters(), "
               "grad_clip) goes between backward() and step()")


def _unclipped_gradients(seed: int, dropout: float, lr: float, x, y) -> list[torch.Tensor]:
    """The first step's gradients before any clipping: the reference's loss on a fresh model, dropout drawn as the
    check draws it for the learner's first step."""
    model, opt = _setup(seed, dropout, lr)
    torch.manual_seed(seed)
    _ref_step(model, opt, x, y, 0.0, clip_on=False)  # the step moves this copy's parameters; its gradients stay
    return [p.grad for p in model.parameters()]


def _scaled_otherwise(chk: Check, grads, unclipped, grad_clip: float) -> None:
    """Gradients at the step that are the unclipped ones times one factor, not clipping's: the factor measured,
    beside clipping's, and said as the norm's square where it is grad_clip over the squared norm."""
    if len(grads) != len(unclipped) or any(g is None for g in grads):
        return
    mine = torch.cat([g.detach().flatten() for g in grads]).double()
    raw = torch.cat([g.detach().flatten() for g in unclipped]).double()
    if mine.shape != raw.shape:
        return
    n = float(raw.norm())
    if n == 0:
        return
    r = float(mine @ raw) / n ** 2
    if float((mine - r * raw).norm()) > 1e-4 * float(mine.norm()):
        return  # not one factor of the unclipped gradient: another gradient
    right = min(1.0, grad_clip / n)
    if abs(r / right - 1) < 1e-4:
        return
    said = (f"your gradients at optimizer.step() are the loss's gradient times {r:.4g} (measured), where clipping "
            f"its global norm, {n:.4g}, to grad_clip = {grad_clip} multiplies it by {right:.4g}")
    if abs(r * n ** 2 / grad_clip - 1) < 1e-3:
        chk.diagnose(f"{said}; {r:.4g} is grad_clip / {n:.4g}², the norm's square: the norm taken as the sum of "
                     "squares, its square root missing (the global norm is the square root of the sum of every "
                     "gradient entry's square)")
    else:
        chk.measured(said)


def _measure_step(chk: Check, model, before: torch.Tensor, grad_clip: float, unclipped=None) -> None:
    """What the learner's step did to the parameters and their gradients; `unclipped`, where given, makes the
    step's gradients before clipping, to measure a scaling other than clipping's."""
    grads = [p.grad for p in model.parameters()]
    moved = not torch.equal(flat_parameters(model), before)
    if all(g is None for g in grads):  # after the call: moved parameters had gradients at the step, cleared since
        if not moved:
            chk.diagnose("no parameter has a gradient at optimizer.step(): call loss.backward() before the step, and "
                         "optimizer.zero_grad() BEFORE backward() (zero_grad after backward erases the gradients)")
        return
    if not moved:
        chk.diagnose("the parameters did not move: call optimizer.step() after backward() (and the clipping)")
        return
    norm = _grad_norm(grads)
    if norm == 0:
        chk.diagnose("the gradients were zero at optimizer.step(): optimizer.zero_grad() runs after loss.backward() "
                     "and erases them; zero the gradients BEFORE backward()")
    elif norm < grad_clip * 0.999 and unclipped is not None:
        _scaled_otherwise(chk, grads, unclipped(), grad_clip)
    elif norm > grad_clip * 1.001:
        chk.measured(f"global gradient norm left at optimizer.step(): {norm:.3g}; grad_clip = {grad_clip}")
        each = [float(g.detach().double().norm()) for g in grads if g is not None]
        if len(each) > 1 and max(each) <= grad_clip * 1.001 and sum(n > grad_clip * 0.999 for n in each) > 1:
            chk.diagnose(f"each parameter's gradient is clipped on its own (measured: {sum(n > grad_clip * 0.999 for n in each)} "
                         f"of the {len(each)} gradients have norm grad_clip = {grad_clip}, none more, yet their global "
                         f"norm is {norm:.3g}): clip the global norm over all parameters at once, "
                         "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)")
        elif _clamped_entries(grads, grad_clip) > 1:
            chk.diagnose(f"each gradient entry is clamped to [-grad_clip, grad_clip] (measured: entries at exactly "
                         f"+-{grad_clip}, none beyond, while the global norm stays above grad_clip), as "
                         "clip_grad_value_ does: that changes the gradient's direction and leaves its norm above "
                         "grad_clip; clip the global norm instead, torch.nn.utils.clip_grad_norm_(model.parameters(), "
                         "grad_clip)")
        else:
            # One cause, one line: the trajectory without clipping (NOT_CLIPPED) says the same of the parameters.
            chk.diagnose(f"gradients not clipped to grad_clip = {grad_clip} at optimizer.step() (measured): "
                         "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip) goes between backward() and "
                         "step(), given the parameters themselves (a fresh model.parameters(), not a generator an "
                         "earlier loop has read) and grad_clip", states=[NOT_CLIPPED])


def _clamped_entries(grads, grad_clip: float) -> int:
    """How many gradient entries sit at exactly +-grad_clip when none lies beyond it (0 when one does): the mark of
    a clamp of every entry, which a gradient left alone does not leave."""
    entries = torch.cat([g.detach().flatten() for g in grads if g is not None]).double().abs()
    if float(entries.max()) > grad_clip * (1 + 1e-6):
        return 0
    return int((entries >= grad_clip * (1 - 1e-6)).sum())


def _modes_at_forward(model, seen: list):
    """A pre-hook on the model that records, at each forward pass run with the top module in train mode, its
    submodules then in eval mode and its Dropout layers among them: the flags the forward pass really ran with."""
    def hook(module, args):
        if module.training:
            parts = list(module.modules())[1:]
            off = [m for m in parts if not m.training]
            seen.append((len(off), len(parts), sum(isinstance(m, torch.nn.Dropout) for m in off)))
    return model.register_forward_pre_hook(hook)


EVAL_LEFT_ON = "eval mode left on: call model.train() at the start of a step (dropout must be on while training)"
EVAL_LEFT_ON_MEASURED = ("eval mode left on (measured: your losses and parameters are those of steps taken in the mode "
                         "each step was handed, dropout off in step 1, which got the model in eval mode): call "
                         "model.train() at the start of a step (dropout must be on while training)")
ALL_IN_EVAL_MEASURED = ("every step ran in eval mode (measured: your losses and parameters are those of steps with "
                        "dropout off, step 2 too, which got the model in train mode): set model.train() at the start "
                        "of a step")


def _body_train_step(train_step, seed, batch, seq, dropout, grad_clip, lr, n_steps) -> Check:
    chk = Check("train_step", expects="the loss of the batch, as a Python float (loss.item())", gradients=NEEDS)
    x = torch.randint(23, (batch, seq), generator=seeded(seed))
    y = torch.randint(23, (batch, seq), generator=seeded(seed + 1))

    def trajectory(handed=False, **kw):
        """The reference's steps (with a known bug's settings kw); handed: each step trains in the mode the check
        hands it the model in (eval, then train)."""
        model, opt = _setup(seed, dropout, lr)
        out = []
        for i in range(n_steps):
            between_steps(model, seed, i)
            torch.manual_seed(seed + i)
            loss = _ref_step(model, opt, x, y, grad_clip, **(dict(kw, train=i % 2 == 1) if handed else kw))
            out.append((loss, flat_parameters(model)))
        return out

    want = trajectory()
    variants = {
        EVAL_LEFT_ON: dict(train=False),
        "missing zero_grad before the backward pass: gradients already in .grad (the previous step's, or any left "
        "before this call) are added to this step's; call optimizer.zero_grad() before loss.backward()":
            dict(zero_grad=False),
        "zero_grad after optimizer.step() instead of before loss.backward(): the gradients already in .grad when "
        "the step is called (left by an evaluation with autograd on, a gradient check) are added to this batch's; "
        "call optimizer.zero_grad() first": dict(zero_grad=False, zero_after_step=True),
        NOT_CLIPPED: dict(clip_on=False),
        "loss averaged wrongly: summed over tokens instead of the mean": dict(reduction="sum"),
        "the loss compares the logits with x, the inputs: the targets are y": dict(targets=x),
        "the targets are shifted once more (measured: your losses and parameters follow those of logits[:, t] scored "
        "against y[:, t + 1], the token two ahead): y already holds the next token at each position; score model(x) "
        "against y as they are": dict(shift_again=True),
        "the returned loss is computed again after optimizer.step(): it is the updated model's loss on the batch, "
        "not the loss the step was taken on; return loss.item() of the loss you called backward on":
            dict(loss_after=True),
    }
    rechecked = getattr(train_step, "recheck_trace", None) is not None
    if rechecked:
        # The forward passes' modes are not observed there (below): the steps' numbers say what they ran with.
        variants[EVAL_LEFT_ON_MEASURED] = dict(handed=True)
        variants[ALL_IN_EVAL_MEASURED] = variants.pop(EVAL_LEFT_ON)
    trajectories = {bug: (lambda kw=kw: trajectory(**kw)) for bug, kw in variants.items()}
    cache: dict = {}

    def variant_at(i, k):
        return {bug: (lambda bug=bug: cache.setdefault(bug, trajectories[bug]())[i][k]) for bug in trajectories}

    model, opt = _setup(seed, dropout, lr)
    log = ForwardLog(model)
    modes: list = []  # per forward pass in train mode: (submodules in eval, submodules, Dropout layers in eval)
    # In the grader's recheck the model goes to the learner's sandbox: a hook of the check's own does not travel,
    # and the submodules' modes are not read there (the rows still fail such a step).
    mode_handle = None if rechecked else _modes_at_forward(model, modes)
    returned_floats = True
    entries = []  # (step, handed over in train mode, its forward calls in eval mode, its forward calls)
    try:
        for i in range(n_steps):
            between_steps(model, seed, i)
            torch.manual_seed(seed + i)
            before = flat_parameters(model)
            # Both entry states: the first step meets a model the caller left in eval mode (after an evaluation),
            # the next one a model in train mode; each must train with dropout on.
            model.train(i % 2 == 1)
            start, seen = len(log.calls), len(modes)
            try:
                got = call_with_hints(chk, train_step, model, opt, x, y, grad_clip, hints=NO_GRAPH)
            finally:
                calls = log.calls[start:]
                entries.append((i + 1, i % 2 == 1, sum(not c["training"] for c in calls), len(calls),
                                model.training and mode_split(model) is None))
                half_set = [m for m in modes[seen:] if m[0]]
                if half_set and not i % 2 and not chk.diagnoses:
                    off, parts, drop = half_set[0]
                    among = f", {drop} Dropout layers among them" if drop else ""
                    chk.diagnose(f"only the top module is switched to train mode (measured: step {i + 1} was handed "
                                 f"the model in eval mode; at its forward pass model.training was True, yet {off} of "
                                 f"its {parts} submodules{among}, were still in eval mode): the flag of a module is "
                                 "its own; model.train() sets it on every submodule")
            problem = python_number_problem(got, float)
            if problem and returned_floats:
                returned_floats = False
                chk.require(f"step {i + 1}: returns a Python float", False, f"returned {problem}",
                            diagnosis=f"train_step returned {problem}: return loss.item(), a Python float; a tensor "
                                      "keeps the whole graph of the step alive and breaks the loss plots")
            got_t = torch.tensor(float(got), dtype=torch.float32) if isinstance(got, (int, float)) else got
            if isinstance(got_t, torch.Tensor):
                got_t = got_t.detach()
            chk.compare(f"step {i + 1}: returned loss", got_t, want[i][0], atol=1e-5, variants=variant_at(i, 0))
            if not chk.compare(f"step {i + 1}: parameters after the step", flat_parameters(model), want[i][1],
                               variants=variant_at(i, 1)):
                # only the first step starts where the reference's does, so its unclipped gradients are known
                _measure_step(chk, model, before, grad_clip, unclipped=None if i else
                              lambda: _unclipped_gradients(seed, dropout, lr, x, y))
    finally:
        log.close()
        if mode_handle is not None:
            mode_handle.remove()
    for step, came_training, in_eval, total, left_training in entries:
        if not in_eval:
            continue
        if not came_training and left_training:
            passes = "its only forward pass" if total == 1 else f"{in_eval} of its {total} forward passes"
            chk.diagnose(f"the model is switched to train mode only after the forward pass (measured: step {step} was "
                         f"handed the model in eval mode; {passes} ran in eval mode, and the model is in train mode "
                         "when the step returns): call model.train() at the start of a step, before model(x) (dropout "
                         "must be on while training)", states=(EVAL_LEFT_ON,))
        elif not came_training:
            chk.diagnose(EVAL_LEFT_ON)
        else:
            passes = "its only forward pass" if total == 1 else f"{in_eval} of its {total} forward passes"
            chk.diagnose(f"your train_step switches a model that came in train mode to eval mode (measured: step {step} "
                         f"was handed the model in train mode, and {passes} ran in eval mode): set the mode, "
                         "model.train(), at the start of a step, whatever mode it came in")
        break
    if not chk.passed and not chk.diagnoses and not chk.named_variants():
        seeds_itself(chk, train_step, lambda: _setup(seed, dropout, lr), lambda m, o, train: _ref_step(
            m, o, x, y, grad_clip, train=train), flat_parameters, NO_GRAPH, x, y, grad_clip)
    if not chk.passed and not chk.diagnoses and not chk.named_variants():
        explain_step(chk, train_step, lambda: _setup(seed, dropout, lr)[0], lambda m: between_steps(m, seed, 1), x, y,
                     seed, grad_clip)
    if chk.passed:
        _below_the_clip(chk, train_step, seed, dropout, lr, x, y)
    if chk.passed:
        _inside_no_grad(chk, train_step, seed, dropout, lr, x, y, grad_clip)
    if chk.passed:
        _two_parameter_groups(chk, train_step, seed, dropout, lr, x, y, grad_clip)
    return chk


def _two_parameter_groups(chk: Check, train_step, seed: int, dropout: float, lr: float, x, y, grad_clip: float) -> None:
    """One step with an optimizer of two parameter groups: the clip bounds the gradients' global norm, over every
    parameter of the model, whatever groups the optimizer keeps."""
    model, opt = _setup(seed, dropout, lr, two_groups=True)
    torch.manual_seed(seed)
    _ref_step(model, opt, x, y, grad_clip)
    want = flat_parameters(model)
    model, opt = _setup(seed, dropout, lr, two_groups=True)
    model.train()
    torch.manual_seed(seed)
    call_with_hints(chk, train_step, model, opt, x, y, grad_clip, hints=NO_GRAPH,
                    row_label="an optimizer with two parameter groups")
    if chk.compare("an optimizer with two parameter groups (decay on matrices only): parameters after the step",
                   flat_parameters(model), want):
        return
    groups = [[p.grad for p in group["params"] if p.grad is not None] for group in opt.param_groups]
    if not all(groups):
        return
    norms = [_grad_norm(g) for g in groups]
    overall = _grad_norm(g for group in groups for g in group)
    if overall > grad_clip * (1 + 1e-3) and all(n <= grad_clip * (1 + 1e-3) for n in norms):
        chk.diagnose(f"each parameter group is clipped on its own (measured: after your step the gradients' global "
                     f"norm is {overall:.4g}, above grad_clip = {grad_clip:g}, while the two groups' own norms are "
                     f"{norms[0]:.4g} and {norms[1]:.4g}, each within it): the bound is on the norm over every "
                     "parameter at once, torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)")


INSIDE_NO_GRAD = "a caller inside torch.no_grad()"


def _inside_no_grad(chk: Check, train_step, seed: int, dropout: float, lr: float, x, y, grad_clip: float) -> None:
    """The other grad-mode entry state: a caller inside torch.no_grad() (an
    evaluation loop that trains a step). The exercise does not promise a
    step there: raising (backward() finds no graph) says it cannot, training
    (with torch.enable_grad()) is right too. What it may not do is come back
    without training, or leave grad mode switched on for the caller.
    Skipped under the grader's recheck: the call runs in the learner's
    process, where the check's torch.no_grad() does not reach."""
    if getattr(train_step, "recheck_trace", None) is not None:
        return
    model, opt = _setup(seed, dropout, lr)
    model.train()
    torch.manual_seed(seed)
    before = flat_parameters(model)
    left: list[str] = []
    try:
        with torch.no_grad():
            got = guarded_call(train_step, (model, opt, x, y, grad_clip), left=left, gradients=NEEDS)
        raised = False
    except Exception:  # noqa: BLE001: saying it cannot, by an error, is an answer the exercise allows
        raised, got = True, None
    trained = not raised and not torch.equal(flat_parameters(model), before)
    chk.require(f"{INSIDE_NO_GRAD}: trains, or raises", raised or trained,
                "returned without changing any parameter",
                diagnosis=f"called inside torch.no_grad(), your train_step returns {describe(got)} and changes no "
                          "parameter (measured: every parameter is equal before and after the call): the step is "
                          "silently skipped; train under torch.enable_grad(), or let the error of loss.backward() "
                          "reach the caller")
    chk.require(f"{INSIDE_NO_GRAD}: grad mode given back", not left, "changed by the call")
    for text in left:
        chk.diagnose(text)


def _below_the_clip(chk: Check, train_step, seed: int, dropout: float, lr: float, x, y, grad_clip: float = 1e3) -> None:
    """A step whose gradients' global norm is far below grad_clip: clipping leaves them as they are (it only ever
    scales down, by min(1, grad_clip / norm)), so the step is the unclipped one."""
    model, opt = _setup(seed, dropout, lr)
    torch.manual_seed(seed)
    _ref_step(model, opt, x, y, grad_clip)
    want = flat_parameters(model)
    norm = _grad_norm(p.grad for p in model.parameters())
    right_grads = [p.grad.detach().clone() for p in model.parameters()]
    model, opt = _setup(seed, dropout, lr)
    torch.manual_seed(seed)
    call_with_hints(chk, train_step, model, opt, x, y, grad_clip, hints=NO_GRAPH)
    if chk.compare(f"grad_clip = {grad_clip:g}, far above the gradients' norm: parameters after the step",
                   flat_parameters(model), want):
        return
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    left = _grad_norm(grads) if grads else None
    if left is not None and math.isclose(left, grad_clip, rel_tol=1e-3):
        chk.diagnose(f"your step scales the gradients up to norm grad_clip = {grad_clip:g} (measured: their global "
                     f"norm at optimizer.step() is {left:.6g}, where this batch's gradients have norm {norm:.3g}): "
                     "clipping only ever scales down, by min(1, grad_clip / norm); a gradient below the bound is "
                     "left as it is. torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip) does that")
    else:
        _gradients_scaled(chk, model, right_grads)


def _gradients_scaled(chk: Check, model, right_grads: list) -> None:
    """The gradients a step left in .grad, one factor from the reference step's on every parameter: said with the
    factor and the sizes of the call it equals (below the clip, the update is made from them unchanged)."""
    grads = [p.grad for p in model.parameters()]
    if any(g is None for g in grads) or len(grads) != len(right_grads):
        return
    fit = fit_scale(torch.cat([g.detach().flatten() for g in grads]), torch.cat([g.flatten() for g in right_grads]))
    if fit is None or fit[1] > 1e-4 or abs(fit[0] - 1) < 1e-3:
        return
    factor = f"{fit[0]:.4g} times"
    size = next(((n, where) for n, where in chk.sizes_named().items() if math.isclose(fit[0], n, rel_tol=1e-3)), None)
    if size is not None:
        factor += f" ({size[0]} is {' and '.join(size[1])} in this call)"
    chk.candidates(f"the gradients your step leaves in .grad are {factor} the reference step's, on every "
                   f"parameter (measured after the call: one factor fits them all), and the clip leaves gradients "
                   "this far below it as they are; candidates: a loss scaled before backward (summed over the batch "
                   "or the positions where the mean belongs, or multiplied by a size), or gradients scaled or added "
                   "to after backward")


def check_train_step(train_step, *, seed: int = 0, batch: int = 3, seq: int = 6, dropout: float = 0.2,
                     grad_clip: float = 0.1, lr: float = 1e-2, n_steps: int = 2) -> None:
    """Two calls of train_step(model, optimizer, x, y, grad_clip), the first
    on a model handed over in eval mode, the second in train mode, against
    the same steps written out (same dropout random state); the parameters,
    their gradients and the return type are measured. The mode a step
    leaves is not part of its contract (the next step sets its own). A
    failure caused by lm_loss (exercise 2) says so."""
    __tracebackhide__ = True
    finish_with_upstream("train_step", lambda: _body_train_step(train_step, seed, batch, seq, dropout, grad_clip, lr, n_steps),
                         train_step, {"lm_loss": ref_lm_loss}, {"lm_loss": "exercise 2"})


# -- contracts: the regimes each exercise promises, and its step-by-step reference ---------------
def lm_loss_steps(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    flat = logits.flatten(0, 1)                                  # (B*T, V)
    tgt = targets.flatten()                                      # (B*T,)
    logp = flat.log_softmax(dim=-1)
    keep = tgt != -100
    picked = logp.gather(-1, tgt.clamp(min=0)[:, None])[:, 0]    # log p of each target
    return -(picked * keep).sum() / keep.sum()


def _lm_loss_cases():
    p = defaults(check_lm_loss)
    b, t, v = p["batch"], p["seq"], p["vocab"]
    logits = randn(b, t, v, seed=p["seed"], dtype=p["dtype"]) * 2
    targets = torch.randint(v, (b, t), generator=seeded(p["seed"]))
    for row in range(b):
        targets[row, t - row:] = -100
    return [("with -100 padding", (logits, targets), {})]


LM_LOSS = Contract("lm_loss", lm_loss_steps, _lm_loss_cases, names=("logits", "targets"), batch=("logits", "targets"),
                   views=("logits", "targets"), cast=("logits",), grad=("logits",), shift=("logits",), scale=("logits",))


def get_batch_steps(data: torch.Tensor, batch_size: int, seq_len: int, generator=None):
    starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator)   # (B,)
    windows = data[starts[:, None] + torch.arange(seq_len + 1)].long()              # (B, T + 1)
    return windows[:, :-1], windows[:, 1:]


def _get_batch_cases():
    p = defaults(check_get_batch)
    data = torch.randperm(p["n_data"], generator=seeded(p["seed"]))
    return [("windows", (data, p["batch"], p["seq"], None), {})]


# Random by contract: only the generator's promises are judged (another right way to draw gives other windows), and
# the corpus stays on the CPU (the batches move to the model's device after), so no device regime either.
GET_BATCH = Contract("get_batch", get_batch_steps, _get_batch_cases, names=("data", "batch_size", "seq_len", "generator"),
                     dtypes=(), locate=False, generator="generator", elsewhere=False,
                     fixed=(("batch_size", "random by contract: a regime has no reference draw to compare with"),
                            ("seq_len", "random by contract: a regime has no reference draw to compare with")))
