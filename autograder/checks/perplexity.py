"""Checks for notebook 10: summed NLL and token count, evaluation (mean NLL,
perplexity, bits per byte), and the bigram baseline.

References: F.cross_entropy(reduction="sum") and counts of non-padding
targets, math.exp of the token-weighted mean NLL, and bigram counts made
with torch.bincount on the pairs (never tinylm's own code).
"""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F

from .contracts import Contract, Edge, defaults, run_contract
from ..diagnosis_record import candidates
from ..learner_values import shown_size
from ..learner_values import describe
from .framework.calling import WITHOUT, guarded_call, measuring_call, quiet_call
from .framework.check import Check
from .framework.measure import LOG_BASE_CONSTANTS, close_to, mode_split, python_number_problem, randn, seeded
from .references.generation import ForwardLog, mode_calls_watched, mode_not_a_flag, tiny_model, train_mode_restored
from .references.hints import call_with_hints, finish_with_upstream


def _as_float_tensor(value) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.detach().double().reshape(())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return torch.tensor(float(value), dtype=torch.float64)
    return None


def _require_number(chk: Check, label: str, value, kind: type, fix: str, swapped: bool = False) -> None:
    """`swapped`: the pair came back in the other order, so the value in this
    place is the other one: its type says nothing of how the code made it."""
    problem = python_number_problem(value, kind)
    chk.require(f"{label} is a Python {kind.__name__}", problem is None, f"got {problem}",
                diagnosis=None if problem is None or swapped else
                f"{label} is {problem}; it must be a Python {kind.__name__}: {fix}")


def check_nll_sum_and_count(nll_sum_and_count, *, seed: int = 0, batch: int = 3, seq: int = 6, vocab: int = 9,
                            ignore_index: int = -100) -> None:
    """nll_sum_and_count(logits, targets, ignore_index) -> (sum of NLL over
    non-ignored targets as a float, number of non-ignored targets as an int).
    Run with the given ignore_index and with another one (a real class id),
    so that a hard-coded -100 cannot pass."""
    __tracebackhide__ = True
    chk = Check("nll_sum_and_count", expects="a pair (total NLL in nats, number of scored tokens)")
    logits = randn(batch, seq, vocab, seed=seed) * 2
    for ig in (ignore_index, 0 if ignore_index != 0 else -100):
        targets = torch.randint(vocab, (batch, seq), generator=seeded(seed + 1 + ig % 7))
        for b in range(batch):
            targets[b, seq - 2 * b:] = ig  # row b ends with 2b padding positions
        out = chk.call(nll_sum_and_count, logits, targets, ig)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            chk._stop(f"nll_sum_and_count returned {describe(out)}; it should return a pair (nll_sum, count)")
        total, count = (_as_float_tensor(v) for v in out)
        flat, tgt = logits.flatten(0, 1).double(), targets.flatten()
        valid = tgt != ig
        want_total = F.cross_entropy(flat[valid], tgt[valid], reduction="sum")
        n_valid = valid.sum().double()
        as_class = 0 <= ig < vocab
        label = f"ignore_index={ig}"
        chk.compare(f"{label}: NLL sum", total if total is not None else out[0], want_total, atol=1e-4, rtol=1e-5, variants={
            "mean instead of sum: return the summed NLL, so batches can be combined by token count":
                lambda: want_total / n_valid,
            "your sum is the mean NLL of the scored targets times the number of all target positions, padding "
            "included (measured: it equals that value): sum the scored targets' losses, reduction='sum' with "
            "ignore_index=ignore_index, rather than scaling a mean by the targets' size":
                lambda: want_total / n_valid * tgt.numel(),
            **({"the ignore_index argument is not used for the loss (hard-coded -100, or left out): the padding is "
                "scored as a class; leave out the targets equal to ignore_index (F.cross_entropy(..., "
                "ignore_index=ignore_index) does)":
                lambda: F.cross_entropy(flat, tgt, reduction="sum")} if as_class else {}),
            "NLL in bits: the course measures NLL in nats (natural log); do not divide by ln 2":
                lambda: want_total / math.log(2),
            "returns (count, nll_sum): the order is (nll_sum, count)": n_valid,
            "sign flipped: the NLL is -log p, a positive number; you return the log-likelihood": lambda: -want_total,
            SHIFTED_AGAIN: lambda: _shifted_again(logits, targets, ig),
        })
        chk.compare(f"{label}: token count", count if count is not None else out[1], n_valid, atol=0, rtol=0, variants={
            "padding counted: count only the targets != ignore_index (the argument, not a hard-coded -100), on the "
            "targets as they were handed in (padding overwritten in place first counts as scored)":
                torch.tensor(float(tgt.numel()), dtype=torch.float64),
        })
        if ig == ignore_index:
            swapped = total is not None and count is not None and not torch.equal(total, count) and \
                close_to(total, n_valid, 0, 0) and close_to(count, want_total, 1e-4, 1e-5)
            _require_number(chk, "the NLL sum", out[0], float, "return nll.item()", swapped)
            _require_number(chk, "the count", out[1], int, "return int(count)", swapped)
    _half_logits_row(chk, nll_sum_and_count, logits, targets, ig)
    _many_targets_in_half_row(chk, nll_sum_and_count, seed, vocab, ignore_index)
    run_contract(chk, nll_sum_and_count, NLL_SUM_AND_COUNT)
    chk.finish()


def _half_logits_row(chk: Check, nll_sum_and_count, logits, targets, ignore_index) -> None:
    """bfloat16 logits (what a half-precision model returns): the sum must be
    as exact as float32 arithmetic on those logits allows (float64 reference)."""
    __tracebackhide__ = True
    half = logits.to(torch.bfloat16)
    out = chk.call(nll_sum_and_count, half, targets, ignore_index)
    total = _as_float_tensor(out[0]) if isinstance(out, (tuple, list)) and len(out) == 2 else None
    flat, tgt = half.flatten(0, 1), targets.flatten()
    want = F.cross_entropy(flat.double(), tgt, ignore_index=ignore_index, reduction="sum")
    chk.compare("bfloat16 logits: NLL sum (float64 reference)", total if total is not None else out, want,
                atol=1e-3, rtol=1e-5, variants={
                    "the NLL is summed in the logits' own half precision (bfloat16 keeps ~3 digits, so the sum is "
                    "off): upcast first, logits.float(), then cross_entropy":
                    lambda: F.cross_entropy(flat, tgt, ignore_index=ignore_index, reduction="sum").double(),
                    SHIFTED_AGAIN: lambda: _shifted_again(half, targets, ignore_index)})


SHIFTED_AGAIN = ("the targets are shifted once more (measured: your NLL sum is that of logits[:, t] scored against "
                 "targets[:, t + 1], the token two ahead): the targets already hold the next token at each "
                 "position, the shift is made when the batch is cut; score logits.flatten(0, 1) against "
                 "targets.flatten() as they are")


def _shifted_again(logits, targets, ignore_index: int) -> torch.Tensor:
    """The NLL sum under the hypothesis of a second shift: position t's logits scored against targets[:, t + 1]."""
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).double(), targets[:, 1:].flatten(), ignore_index=ignore_index,
                           reduction="sum")


def _many_targets_in_half_row(chk: Check, nll_sum_and_count, seed: int, vocab: int, ignore_index: int) -> None:
    """bfloat16 logits and 299 scored targets: the count must be exact
    (bfloat16 holds whole numbers exactly only up to 256, so a count summed in
    the logits' dtype is rounded, or stops growing at 256)."""
    __tracebackhide__ = True
    targets = torch.randint(vocab, (3, 100), generator=seeded(seed + 5))
    if 0 <= ignore_index < vocab:
        targets[targets == ignore_index] = (ignore_index + 1) % vocab  # every target scored but the one padded
    targets[0, -1] = ignore_index
    logits = randn(3, 100, vocab, seed=seed + 6).to(torch.bfloat16)
    out = chk.call(nll_sum_and_count, logits, targets, ignore_index)
    count = _as_float_tensor(out[1]) if isinstance(out, (tuple, list)) and len(out) == 2 else None
    n_valid = int((targets != ignore_index).sum())
    rounded = {int(torch.tensor(float(n_valid)).to(torch.bfloat16)), 256}  # summed at once, or one by one
    got = int(count) if count is not None and float(count).is_integer() else None
    chk.compare(f"bfloat16 logits, {n_valid} scored targets: token count", count if count is not None else out,
                torch.tensor(float(n_valid), dtype=torch.float64), atol=0, rtol=0)
    if got in rounded - {n_valid}:
        _count_in_float32(chk, nll_sum_and_count, logits, targets, ignore_index, got, n_valid)


def _count_in_float32(chk: Check, nll_sum_and_count, logits, targets, ignore_index: int, got: int, n_valid: int) -> None:
    """A count that bfloat16 rounding would give is blamed on it only when
    the same call with float32 logits counts right (the learner's function,
    the dtype alone changed); a count that stays wrong is another mistake
    whose number happens to match, and is said as measured."""
    again = chk.probe(nll_sum_and_count, logits.float(), targets, ignore_index)
    count = _as_float_tensor(again[1]) if isinstance(again, (tuple, list)) and len(again) == 2 else None
    if count is not None and float(count) == n_valid:
        chk.diagnose(f"your count is {got} for {n_valid} scored targets with bfloat16 logits, and {n_valid} with the "
                     "same logits in float32 (measured: only the dtype changed): bfloat16 holds every whole number "
                     "only up to 256 (8 significant bits), so a count summed in the logits' dtype is rounded above "
                     "it; count in int64 on the bool mask, int((targets != ignore_index).sum())")
    elif count is not None:
        padded = int(targets.numel()) - n_valid
        what = (f"every target, the {'padded one' if padded == 1 else f'{padded} padded ones'} included"
                if float(count) == targets.numel() else "not the scored targets")
        chk.measured(f"your count is {got} for {n_valid} scored targets with bfloat16 logits, and {float(count):g} "
                     f"with the same logits in float32, so bfloat16 rounding is not what makes it wrong: it counts "
                     f"{what}")


# ---------------------------------------------------------------- evaluate

def _eval_case(seed: int, batch_sizes: tuple, seq: int, vocab: int):
    """Batches of different sizes; some rows end with -100 padding."""
    batches = []
    for i, b in enumerate(batch_sizes):
        x = torch.randint(vocab, (b, seq), generator=seeded(seed + 10 + i))
        y = torch.randint(vocab, (b, seq), generator=seeded(seed + 20 + i))
        y[0, seq - 1 - i:] = -100
        batches.append((x, y))
    return batches


def _ref_eval(model, batches, shifted_again: bool = False):
    """Per-batch (nll sum, count, numel), in eval mode, float64. shifted_again: each position scored against the
    target after its own (logits[:, :-1] against y[:, 1:]), a variant."""
    model.eval()
    rows = []
    with torch.no_grad():
        for x, y in batches:
            logits = model(x).double()  # (b, T, V)
            if shifted_again:
                logits, y = logits[:, :-1], y[:, 1:]
            nll = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum")
            rows.append((nll, int((y != -100).sum()), y.numel()))
    return rows


def _scored_otherwise(model, batches, shifted_again: bool = False) -> torch.Tensor:
    """The loss of the batches scored otherwise, against their own inputs (or, shifted_again, each position against
    the token two ahead), the model's mode given back (a variant is evaluated after the learner's call, and the
    mode it leaves is measured)."""
    was_training = model.training
    try:
        rows = _ref_eval(model, batches if shifted_again else [(x, x) for x, _ in batches], shifted_again)
    finally:
        model.train(was_training)
    return sum(r[0] for r in rows) / sum(r[1] for r in rows)


def ref_nll_sum_and_count(logits, targets, ignore_index=-100):
    """Correct exercise 1 of notebook 10 (for upstream attribution)."""
    nll = F.cross_entropy(logits.flatten(0, 1).double(), targets.flatten(), ignore_index=ignore_index, reduction="sum")
    return nll.item(), int((targets != ignore_index).sum())


def check_evaluate(evaluate, *, seed: int = 0, batch_sizes: tuple = (3, 1, 2), seq: int = 7,
                   bytes_per_token: float = 1.5, dropout: float = 0.3) -> None:
    """evaluate(model, batches, bytes_per_token) -> {"loss", "perplexity",
    "bits_per_byte"} (Python floats) on a model handed over in train mode
    with dropout. A failure caused by nll_sum_and_count (exercise 1) says so."""
    __tracebackhide__ = True
    finish_with_upstream("evaluate", lambda: _body_evaluate(evaluate, seed, batch_sizes, seq, bytes_per_token, dropout),
                         evaluate, {"nll_sum_and_count": ref_nll_sum_and_count}, {"nll_sum_and_count": "exercise 1"})


def _body_evaluate(evaluate, seed, batch_sizes, seq, bytes_per_token, dropout) -> Check:
    model = tiny_model(seed, dropout=dropout, vocab=19, d_model=16, n_heads=2)
    batches = _eval_case(seed, batch_sizes, seq, 19)
    rows = _ref_eval(model, batches)
    total, count = sum(r[0] for r in rows), sum(r[1] for r in rows)
    loss = total / count
    per_batch = torch.stack([r[0] / r[1] for r in rows])                     # mean NLL of each batch
    want = {"loss": loss, "perplexity": loss.exp(), "bits_per_byte": loss / math.log(2) / bytes_per_token}
    variants = {
        "loss": {
            "per-batch means averaged: batches of different sizes get equal weight; sum the NLL and the token "
            "counts over all batches, divide once": per_batch.mean(),
            "padding counted: -100 targets must not count as tokens": total / sum(r[2] for r in rows),
            "the summed NLL divided by the number of batches: divide by the number of scored tokens":
                total / len(rows),
            "each batch's NLL weighted by its token count, although nll_sum_and_count returns a sum already: add "
            "the sums as they are": sum(r[0] * r[1] for r in rows) / count,
            "each batch's mean NLL weighted by its number of rows, not of scored tokens (they differ where rows are "
            "padded): add the NLL sums and the token counts, divide once":
                sum(r[0] / r[1] * len(y) for r, (_, y) in zip(rows, batches)) / sum(len(y) for _, y in batches),
            "the loss compares the logits with x, the inputs (labels not shifted): the targets are y, each "
            "position scored on the token that follows it": lambda: _scored_otherwise(model, batches),
            "the targets shifted a second time: the batches already pair each position of x with the next token in "
            "y, so logits[:, :-1] against y[:, 1:] scores each position against the token two ahead; score model(x) "
            "against y as they are": lambda: _scored_otherwise(model, batches, shifted_again=True),
        },
        "perplexity": {
            "mean of per-batch exp: perplexity is exp of the mean NLL over all tokens, not the mean of each batch's "
            "perplexity (exp is convex, so that overestimates)": per_batch.exp().mean(),
            "perplexity is exp(mean NLL) in nats; 2 ** loss treats the loss as bits": 2 ** loss,
            "perplexity from the summed NLL: it is exp of the MEAN NLL per token": lambda: total.exp(),
        },
        "bits_per_byte": {
            "bits per byte: convert nats to bits by dividing by ln 2 (not multiplying)": loss * math.log(2) / bytes_per_token,
            "bits per byte: divide by bytes_per_token too": loss / math.log(2),
            "bits per byte: divide by bytes_per_token, not multiply (a token of 1.5 bytes spreads its bits over them)":
                loss / math.log(2) * bytes_per_token,
            "bits per byte uses log10": loss / math.log(10) / bytes_per_token,
        },
    }
    chk = Check("evaluate", expects='a dict with "loss", "perplexity" and "bits_per_byte" (floats)', gradients=WITHOUT)
    model.train()
    log = ForwardLog(model)
    try:
        with mode_calls_watched(model, evaluate) as mode_calls:
            got = chk.call(evaluate, model, batches, bytes_per_token,
                           on_error=lambda err: mode_not_a_flag(model, mode_calls))
    finally:
        log.close()
    if not (isinstance(got, dict) and set(want) <= set(got)):
        chk._stop(f"evaluate returned {describe(got)}; it should return a dict with keys {sorted(want)}")
    dropout_on = any(c["training"] for c in log.calls)
    for key in want:
        value = _as_float_tensor(got[key])
        if not chk.compare(key, value if value is not None else got[key], want[key], atol=1e-5, rtol=1e-5,
                           variants=variants[key]) and key == "loss" and value is not None and not dropout_on:
            _which_batches(chk, float(value), rows)
            _implied_count(chk, float(value), rows, batches)
        if key != "loss" and value is not None and not chk.rows[-1].ok:
            _measure_conversion(chk, key, float(value), _as_float_tensor(got["loss"]), bytes_per_token)
            if key == "bits_per_byte" and not chk.facts:
                _measure_bytes_per_token(chk, evaluate, model, batches, float(loss))
        _require_number(chk, f'"{key}"', got[key], float, "convert with .item() or float(...)")
    chk.require("dropout off (eval mode)", log.calls and not dropout_on,
                "some forward passes ran in train mode",
                diagnosis="dropout on during evaluation: call model.eval() first, or the loss is that of a randomly "
                          "damaged network and changes from run to run")
    chk.require("no autograd graph (torch.no_grad)", log.calls and not any(c["grad"] for c in log.calls),
                "forward passes recorded gradients",
                diagnosis="evaluation records an autograd graph: wrap the loop in torch.no_grad() (memory would grow "
                          "with every batch)")
    train_mode_restored(chk, model, mode_calls, "evaluate")
    _same_loss_regrouped(chk, evaluate, model, batches, bytes_per_token, got, dropout_on)
    _large_nll_in_eval_mode(chk, evaluate, model, batches, bytes_per_token)
    _batches_follow_the_model(chk, evaluate, model, batches, bytes_per_token)
    return chk


def _batches_follow_the_model(chk: Check, evaluate, model, batches, bytes_per_token: float) -> None:
    """The model on the CPU while the notebook's DEVICE names another device,
    as a model moved off DEVICE to be evaluated: the batches must reach the
    model on its own device. Without a GPU, the meta device stands in: the
    learner's global DEVICE is set to it for one call and given back in every
    case. Nothing is measured where the function's globals hold no DEVICE, in
    the grader's recheck (the call runs in another process), or where the
    model is not on the CPU."""
    scope = getattr(evaluate, "__globals__", None)
    if getattr(evaluate, "recheck_trace", None) is not None or not isinstance(scope, dict) \
            or not isinstance(scope.get("DEVICE"), (torch.device, str)) \
            or any(p.device.type != "cpu" for p in model.parameters()):
        return
    seen: list[torch.device] = []

    def note(module, args, kwargs):
        idx = args[0] if args else kwargs.get("idx")
        if isinstance(idx, torch.Tensor):
            seen.append(idx.device)

    handle = model.register_forward_pre_hook(note, with_kwargs=True)
    saved = scope["DEVICE"]
    scope["DEVICE"] = torch.device("meta")
    try:  # what the forward passes received is measured, whatever the call then raised
        with torch.random.fork_rng(devices=[]):
            quiet_call(evaluate, model, copy.deepcopy(batches), bytes_per_token)
    finally:
        scope["DEVICE"] = saved
        handle.remove()
    if not seen:
        return
    stray = [d for d in seen if d.type != "cpu"]
    chk.require("batches sent to the model's device (model on the CPU, DEVICE another device)", not stray,
                f"the model received its ids on {stray[0]}" if stray else "",
                diagnosis=f"your evaluate sends the batches to the notebook's DEVICE, not to the device its "
                          "parameters are on (measured: with every parameter on the CPU and DEVICE set by the check "
                          "to the meta device, standing in for a GPU, the forward pass received its ids on the "
                          f"{stray[0]} device): on a GPU machine, evaluating on the CPU would put the batches on the "
                          "GPU, and the forward pass raises; read the device off the parameters (the first "
                          "parameter's .device) instead of DEVICE" if stray else None)


def _same_loss_regrouped(chk: Check, evaluate, model, batches, bytes_per_token: float, first, dropout_on: bool) -> None:
    """Batch-size invariance: the same rows in one batch give the learner's
    own first loss (the reference's is compared by the rows above), so a
    loss that depends on how the rows are grouped fails here even when the
    regrouped loss is the right one. With dropout on the loss changes from
    call to call, so the row is not measured then (the dropout row says why)."""
    x_all = torch.cat([x for x, _ in batches])
    y_all = torch.cat([y for _, y in batches])
    model.train()
    log = ForwardLog(model)
    try:
        one = chk.call(evaluate, model, [(x_all, y_all)], bytes_per_token)
    finally:
        log.close()
    if dropout_on or any(c["training"] for c in log.calls):
        return
    mine = _as_float_tensor(first.get("loss"))
    one_loss = _as_float_tensor(one.get("loss")) if isinstance(one, dict) else None
    if mine is None or not math.isfinite(float(mine)):
        return
    same = one_loss is not None and math.isclose(float(one_loss), float(mine), rel_tol=1e-5, abs_tol=1e-6)
    chk.require("same loss when the same rows are batched differently", same,
                "your loss changed when the rows were regrouped into one batch")


def _large_nll_in_eval_mode(chk: Check, evaluate, model, batches, bytes_per_token: float) -> None:
    """An evaluation whose summed NLL is a thousand nats (a confident, wrong
    model: the logits scaled up), as a few hundred real tokens give: exp of
    the sum overflows (above 709 for a Python float), exp of the mean does
    not. The model comes in eval mode, under torch.no_grad(), this time, and
    must leave in eval mode with grad mode still off."""
    sharp = copy.deepcopy(model)
    with torch.no_grad():
        sharp.norm.weight.mul_(20.0)
    rows = _ref_eval(sharp, batches)  # leaves it in eval mode
    total, count = sum(float(r[0]) for r in rows), sum(r[1] for r in rows)
    loss = total / count
    label = f"a summed NLL of {total:,.0f} nats (mean {loss:.1f})"
    with torch.no_grad():  # the other entry state: eval mode and grad mode off, as after an evaluation
        got = chk.call(evaluate, sharp, batches, bytes_per_token, row_label=label, on_error=lambda err: (
            f"exp of the summed NLL overflows: the {count} tokens here sum to {total:,.0f} nats, and exp overflows a "
            "Python float above 709 (float32 above 88); perplexity is exp of the MEAN NLL, math.exp(loss)"
            if isinstance(err, OverflowError) or "overflow" in str(err).lower() else None))
    chk.require("eval mode kept when it came in eval mode", not sharp.training and mode_split(sharp) is None,
                "a model handed over in eval mode was left in train mode",
                diagnosis="a model that came in eval mode leaves in train mode: model.train() at the end switches "
                          "it whatever mode it came in; restore the mode it came in, model.train(was_training)")
    value = _as_float_tensor(got.get("perplexity")) if isinstance(got, dict) else None
    ok = value is not None and math.isfinite(float(value)) and math.isclose(float(value), math.exp(loss), rel_tol=1e-4)
    chk.require(f"perplexity for {label}", ok,
                ("another perplexity" if value is not None else f"perplexity from {describe(got)}")
                + f", expected {math.exp(loss):.6g}",
                diagnosis=None if ok or value is None or math.isfinite(float(value)) else
                f"your perplexity is {float(value)} for {label}: exp of a sum of NLLs overflows; take exp of the "
                "mean NLL, math.exp(loss)")


# The elementary maps a nats-to-other-units conversion is built from (the changes of logarithm base among them),
# named as a learner would write them.
_CONVERSIONS = (("{}", lambda v: v), ("ln({})", math.log), ("log2({})", math.log2), ("log10({})", math.log10),
                ("exp({})", math.exp), ("2 ** {}", lambda v: 2.0 ** v), ("sqrt({})", math.sqrt),
                ("({})²", lambda v: v * v),
                *((f"{{}} / {name}", lambda v, k=k: v / k) for name, k in LOG_BASE_CONSTANTS.items()),
                *((f"{{}} · {name}", lambda v, k=k: v * k) for name, k in LOG_BASE_CONSTANTS.items()))
_RIGHT = {"perplexity": "exp(loss)", "bits_per_byte": "loss / ln 2 / bytes_per_token (nats to bits: divide by ln 2, "
                                                      "0.693, the natural log of 2)"}


def _operand(expression: str, words: str) -> str:
    """`expression` as the operand of `words`, in parentheses where a power would otherwise bind tighter."""
    return f"({expression})" if words.startswith("2 **") and " " in expression else expression


def _measure_conversion(chk: Check, key: str, got: float, loss, bytes_per_token: float) -> None:
    """What a wrong `key` is, in terms of the learner's own loss: one
    elementary map of it, times or divided by bytes_per_token (or neither)
    (a measured fact: "your bits_per_byte equals log2(loss) / bytes_per_token")."""
    if loss is None or not math.isfinite(got):
        return
    loss = float(loss)
    scales = (("", 1.0), (" / bytes_per_token", 1 / bytes_per_token), (" · bytes_per_token", bytes_per_token))
    # The scale applied after the map (log2(loss) / bytes_per_token) or before it (exp(loss / bytes_per_token)).
    candidates = [(words.format("loss") + scale_words, lambda c=conversion, f=factor: c(loss) * f)
                  for words, conversion in _CONVERSIONS for scale_words, factor in scales]
    candidates += [(words.format(_operand("loss" + scale_words, words)), lambda c=conversion, f=factor: c(loss * f))
                   for words, conversion in _CONVERSIONS[1:] for scale_words, factor in scales[1:]]
    # An exponential of the loss changed to another base inside the exponent (2 ** (loss · ln 2)).
    candidates += [(words.format(_operand(f"loss {op} {name}", words)), lambda c=conversion, v=value: c(v))
                   for words, conversion in _CONVERSIONS if words in ("exp({})", "2 ** {}")
                   for name, k in LOG_BASE_CONSTANTS.items()
                   for op, value in (("·", loss * k), ("/", loss / k))]
    for said, value_of in candidates:
        try:
            value = value_of()
        except (ValueError, OverflowError):
            continue
        if math.isfinite(value) and math.isclose(got, value, rel_tol=1e-5, abs_tol=1e-7):
            given = f" and bytes_per_token = {bytes_per_token:g}" if "bytes_per_token" in said else ""
            chk.measured(f"your {key} equals {said}, with loss your own loss in nats{given}; {key} is {_RIGHT[key]}")
            return


def _measure_bytes_per_token(chk: Check, evaluate, model, batches, loss: float) -> None:
    """How a wrong bits_per_byte depends on bytes_per_token: the divisor that takes the loss to it (loss /
    bits_per_byte) at 1, 2 and 4 bytes per token, against ln 2 · bytes_per_token. Said only where the loss is
    right each time."""
    was = model.training
    divisors = []
    for per in (1.0, 2.0, 4.0):
        try:
            out = measuring_call(evaluate, (model, batches, per))
            mine, bits = _as_float_tensor(out["loss"]), _as_float_tensor(out["bits_per_byte"])
        except Exception:  # noqa: BLE001: a call that raises or returns no dict measures nothing; the rows said why
            return
        finally:
            model.train(was)
        if mine is None or bits is None or not float(bits) or not math.isclose(float(mine), loss, rel_tol=1e-5):
            return
        divisors.append(loss / float(bits))
    right = [math.log(2) * per for per in (1, 2, 4)]
    fits = ["right" if math.isclose(d, r, rel_tol=1e-5) else "wrong" for d, r in zip(divisors, right)]
    if "wrong" not in fits:
        return
    grows = " : ".join(f"{d / divisors[0]:.3g}" for d in divisors)
    if all(math.isclose(d / divisors[0], per, rel_tol=1e-5) for d, per in zip(divisors, (1, 2, 4))):
        # the division by bytes_per_token is there; only the factor that turns nats into bits differs
        tail = (f"your divisor is {divisors[0]:.4g} · bytes_per_token (it grows as 1 : 2 : 4, as it must): nats "
                f"become bits by dividing by ln 2 = {math.log(2):.4g}, not by {divisors[0]:.4g}")
    else:
        tail = (f"your divisor grows as {grows} where it must grow as 1 : 2 : 4; nats become bits by dividing by ln 2, "
                "and bits per token become bits per byte by dividing by bytes_per_token, two separate divisions")
    chk.diagnose(f"your bits_per_byte is the loss divided by {', '.join(f'{d:.4g}' for d in divisors)} at "
                 f"bytes_per_token = 1, 2 and 4 ({', '.join(fits)}; measured: loss / your bits_per_byte), where it "
                 f"is divided by ln 2 · bytes_per_token = {', '.join(f'{r:.4g}' for r in right)}: {tail}")


def _implied_count(chk: Check, got: float, rows: list, batches: list) -> None:
    """The count a wrong loss divided the right summed NLL by (total / loss),
    when it is a whole number other than the scored tokens: which count of
    the batches it is, when exactly one is."""
    total, count = sum(float(r[0]) for r in rows), sum(int(r[1]) for r in rows)
    if chk.rows[-1].note or not got or not math.isfinite(got):
        return  # a known bug already explains the row
    implied = total / got
    if abs(implied - round(implied)) > 1e-6 * implied or round(implied) == count:
        return
    counts = {"the sequences (y.shape[0], summed over the batches)": sum(int(y.shape[0]) for _, y in batches),
              "every target, padding included (y.numel())": sum(y.numel() for _, y in batches),
              "the batches": len(batches)}
    which = [words for words, n in counts.items() if n == round(implied)]
    text = (f"your loss is the right summed NLL ({total:.6g} nats) divided by {round(implied)} (measured: sum / your "
            f"loss), where the batches hold {count} scored tokens")
    if len(which) == 1:
        chk.diagnose(f"{text}: {round(implied)} counts {which[0]}; the loss is the NLL per token, so add each batch's "
                     "count of scored tokens (what nll_sum_and_count returns), not its number of sequences or targets")
    else:
        chk.measured(text)


def _which_batches(chk: Check, got: float, rows: list) -> None:
    """When the loss is the token-weighted mean over only some of the
    batches (the last one alone, the first ones...), say which: the running
    totals lost the others (reset inside the loop, or returned early)."""
    n = len(rows)
    spans = [(i, j) for i in range(n) for j in range(i + 1, n + 1) if (i, j) != (0, n)]
    for i, j in sorted(spans, key=lambda span: span[1] - span[0]):
        total, count = sum(float(r[0]) for r in rows[i:j]), sum(float(r[1]) for r in rows[i:j])
        if count and math.isclose(got, total / count, rel_tol=1e-5, abs_tol=1e-7):
            which = (f"batch {i + 1} alone" if j == i + 1 else f"batches {i + 1} to {j}") + f" of the {n}"
            chk.diagnose(f"your loss is the mean NLL of {which} (measured against each run of consecutive batches): "
                         "the running totals do not cover every batch; set them to zero once, before the loop, and add "
                         "every batch's NLL sum and token count to them")
            return


# ---------------------------------------------------------------- bigram

def ref_bigram_nll(train: torch.Tensor, val: torch.Tensor, alpha: float) -> torch.Tensor:
    """Mean over the pairs (a, b) of val of -ln (count(a, b) + alpha) / (count(a, .) + 256 alpha)."""
    train, val = train.long(), val.long()
    counts = torch.bincount(train[:-1] * 256 + train[1:], minlength=65536).view(256, 256).double()  # [prev, next]
    logp = ((counts + alpha) / (counts.sum(1, keepdim=True) + 256 * alpha)).log()
    return -logp[val[:-1], val[1:]].mean()


def _markov_bytes(n: int, seed: int) -> torch.Tensor:
    """Bytes from a small random Markov chain over 'a'..'h', so that bigrams matter."""
    gen = seeded(seed)
    trans = torch.rand(8, 8, generator=gen) ** 3 + 0.01  # (prev, next), peaked
    out = [0]
    for _ in range(n - 1):
        out.append(int(torch.multinomial(trans[out[-1]], 1, generator=gen)))
    return (torch.tensor(out) + ord("a")).to(torch.uint8)


def check_bigram_nll(bigram_nll, *, seed: int = 0, n_train: int = 3000, n_val: int = 400, alpha: float = 0.5) -> None:
    __tracebackhide__ = True
    chk = Check("bigram_nll", expects="a float: mean NLL in nats per predicted byte")
    train, val = _markov_bytes(n_train, seed), _markov_bytes(n_val, seed + 1)
    for a in (alpha, alpha / 5):
        _bigram_row(chk, bigram_nll, train, val, a, f"{n_train} train bytes, {n_val} val bytes, alpha={a:g}")
    if not chk.passed:
        _measure_counts(chk, bigram_nll, (alpha, alpha / 5))
    if chk.passed:  # the pairs of bytes train has seen are scored right: the rows below measure the one it has not
        _unseen_previous_byte_rows(chk, bigram_nll, train, val, (alpha, alpha / 5))
    if chk.passed:
        _another_training_text(chk, bigram_nll, train, _markov_bytes(n_train, seed + 2), val, alpha)
    run_contract(chk, bigram_nll, BIGRAM_NLL)
    chk.finish()


# An error about a mask is the uint8 index itself (torch reads a uint8 index as a boolean mask); other uint8
# errors may come from the arithmetic as well, so they get both candidates.
UINT8 = [(r"mask", "a uint8 tensor is used as an index, and torch reads a uint8 index as a boolean mask, not as byte "
                   "values (measured: your error is about a mask): convert every byte tensor that indexes or is "
                   "computed with to .long() before any indexing or arithmetic (uint8 arithmetic wraps around at 256 too: prev * 256 would)"),
         (r"uint8|overflow", candidates("your error is about uint8 values; candidates: arithmetic on the uint8 bytes "
                                        "wraps at 256 (prev * 256), or a uint8 tensor indexes as a boolean mask; convert "
                                        "train and val with .long() first"))]


def _bigram_row(chk: Check, bigram_nll, train, val, alpha, label) -> None:
    got = call_with_hints(chk, bigram_nll, train, val, alpha, hints=UINT8)
    value = _as_float_tensor(got)
    t, v = train.long(), val.long()
    counts = torch.bincount(t[:-1] * 256 + t[1:], minlength=65536).view(256, 256).double()

    def nll(table):
        return -table.log()[v[:-1], v[1:]].mean()

    if len(chk.rows) == 0:
        _require_number(chk, "bigram_nll's result", got, float, "return the mean with .item()")
    chk.compare(label, value if value is not None else got,
                ref_bigram_nll(train, val, alpha), atol=1e-6, rtol=1e-6, variants={
        "pairs scored backwards: p(next | prev) is probs[prev, next] = probs[val[:-1], val[1:]]":
            lambda: -((counts + alpha) / (counts.sum(1, keepdim=True) + 256 * alpha)).log()[v[1:], v[:-1]].mean(),
        "the alpha argument is not used (a constant in its place): smooth with the alpha passed in":
            lambda: ref_bigram_nll(train, val, 0.5),
        "uint8 arithmetic: prev * 256 overflows in uint8, so every pair lands in row 0; convert with .long() first":
            lambda: nll(((torch.bincount(t[1:], minlength=65536).view(256, 256).double() + alpha) /
                         (torch.bincount(t[1:], minlength=65536).view(256, 256).double().sum(1, keepdim=True) + 256 * alpha))),
        "bigram normalised over the whole table (a joint p(a, b)), not per previous byte (p(b | a))":
            lambda: nll((counts + alpha) / (counts + alpha).sum()),
        "bigram direction swapped: p(b | a) normalises over the NEXT byte b for each previous byte a":
            lambda: nll((counts + alpha) / (counts.sum(0, keepdim=True) + 256 * alpha)),
        "the denominator's smoothing is alpha once, not 256 * alpha: add alpha for each of the 256 possible next "
        "bytes, the previous byte's count + 256 * alpha":
            lambda: nll((counts + alpha) / (counts.sum(1, keepdim=True) + alpha)),
        "smoothing missing from the numerator: add alpha to every count too, (counts + alpha) / (row total + "
        "256 * alpha), or a pair train never shows gets probability 0":
            lambda: nll(counts / (counts.sum(1, keepdim=True) + 256 * alpha)),
        "log base 2: NLL in nats uses the natural log": lambda: ref_bigram_nll(train, val, alpha) / math.log(2),
    })


def _implied_counts(bigram_nll, train, pair: bytes, alphas) -> tuple[float, float] | None:
    """(count of `pair`, total of its previous byte's row) that the learner's table holds, read off the NLL of
    the one pair at two alphas: p = (c + alpha) / (n + 256·alpha) is linear in c and n. None when a call
    fails or gives no finite number."""
    val = torch.tensor(list(pair), dtype=torch.uint8)
    ps = []
    for alpha in alphas:
        try:
            value = _as_float_tensor(guarded_call(bigram_nll, (train.clone(), val.clone(), alpha)))
        except Exception:  # noqa: BLE001: a probe that raises measures nothing; the rows above said why
            return None
        if value is None or not math.isfinite(float(value)):
            return None
        ps.append(math.exp(-float(value)))
    (a1, a2), (p1, p2) = alphas, ps
    if abs(p2 - p1) < 1e-12:
        return None
    total = (a1 * (256 * p1 - 1) - a2 * (256 * p2 - 1)) / (p2 - p1)
    return a1 * (256 * p1 - 1) + p1 * total, total


def _measure_counts(chk: Check, bigram_nll, alphas) -> None:
    """What the learner's table counts, measured on a train text whose pairs repeat: 'ab' 20 times and 'ac' once
    (row 'a' totals 21), 'ba' 20 times (row 'b' totals 20). Said when the counts it implies are whole numbers
    that differ from train's."""
    train = torch.tensor(list(b"ab" * 20 + b"ac"), dtype=torch.uint8)
    truth = {b"ab": (20, 21), b"ac": (1, 21), b"ba": (20, 20)}
    read = {pair: _implied_counts(bigram_nll, train, pair, alphas) for pair in truth}
    if any(r is None or any(abs(x - round(x)) > 1e-3 or round(x) < 0 for x in r) for r in read.values()):
        return
    yours = {pair: (round(c), round(n)) for pair, (c, n) in read.items()}
    if yours == truth:
        return
    said = "; ".join(f"'{pair.decode()}': count {shown_size(yours[pair][0])} of a row total "
                     f"{shown_size(yours[pair][1])}, train has "
                     f"{truth[pair][0]} of {truth[pair][1]}" for pair in truth if yours[pair] != truth[pair])
    if all(yours[pair][0] == truth[pair][0] for pair in truth):
        _wrong_row_totals(chk, yours, truth, said)
        return
    fact = (f"your table's counts are not train's (measured on train = 'ab' * 20 + 'ac', each count read off your "
            f"NLL of one pair at two alphas, p = (count + alpha) / (row total + 256·alpha): {said})")
    other = torch.tensor(list(b"ba" * 7 + b"bb"), dtype=torch.uint8)  # no pair of the probes' rows in common
    if all(_implied_counts(bigram_nll, other, pair, alphas) == read[pair] for pair in truth):
        # the same counts whatever train holds: they come from the one pair each probe scores, val itself
        own = all(counted == (1, 1) for counted in yours.values())
        chk.diagnose(f"{fact}; another train text ('ba' * 7 + 'bb') gives the very same counts, so your table "
                     "does not depend on train" + (": each probe's val is its one pair, and 1 of 1 is that pair's "
                                                   "own count" if own else "") +
                     "; count the pairs of train, the first argument, and score val's")
        return
    if all(c == min(t, 1) for (c, _), (t, _) in zip(yours.values(), truth.values())):
        chk.diagnose(f"{fact}: each distinct pair is counted once, however often it occurs (measured for every "
                     "pair); an indexed += (counts[prev, next] += 1) writes a repeated index once: count with "
                     "torch.bincount, or index_put_(..., accumulate=True)")
    else:  # which step miscounts is not measured: the fact and what a right table holds
        chk.measured(f"{fact}: count every (previous, next) pair of train once per occurrence, and each row's "
                     "total is the sum of its counts")


def _wrong_row_totals(chk: Check, yours: dict, truth: dict, said: str) -> None:
    """Every count right, some row totals not: said as such, and the total
    of the NEXT byte's row named only when every pair reads exactly that."""
    row_total = {pair[0]: total for pair, (_, total) in truth.items()}  # previous byte -> its row's total in train
    by_next = all(yours[pair][1] == row_total.get(pair[1], 0) for pair in truth)
    fact = (f"your table's counts are train's, but the totals they are divided by are not their rows' (measured on "
            f"train = 'ab' * 20 + 'ac', each read off your NLL of one pair at two alphas, p = (count + alpha) / (row "
            f"total + 256·alpha): {said})")
    if by_next:
        chk.diagnose(f"{fact}: each pair is divided by the total of its NEXT byte's row (measured for every pair): "
                     "a row total of shape (256,) broadcasts along the last axis; keep the axis, counts.sum(1, "
                     "keepdim=True), so each row is divided by its own total")
    else:
        chk.measured(fact)


def _another_training_text(chk: Check, bigram_nll, first, other, val, alpha: float) -> None:
    """The counts come from the train of each call: after the calls above,
    another training text scores val under its own counts."""
    label = f"another training text ({len(other)} bytes), the same val, alpha={alpha:g}"
    got = _as_float_tensor(call_with_hints(chk, bigram_nll, other, val, alpha, hints=UINT8))
    if chk.compare(label, got, ref_bigram_nll(other, val, alpha), atol=1e-6, rtol=1e-6) or got is None:
        return
    if torch.allclose(got.double(), ref_bigram_nll(first, val, alpha), atol=1e-6, rtol=1e-6):
        chk.diagnose("your bigram_nll scores val under the counts of an earlier call's train (measured: handed "
                     "another training text, it gives the NLL under the counts of the text this check passed first): "
                     "what it counts is kept between calls (a default argument, a global, an attribute); count the "
                     "train it is given at every call")


def _unseen_previous_byte_rows(chk: Check, bigram_nll, train, val, alphas) -> None:
    """val with a byte train never has ('z'): its row of the table has no
    counts, so add-alpha smoothing makes it uniform, 1/256 for every next
    byte. A wrong value is measured: with every other pair scored right (the
    rows above), the total count that row's probability implies,
    alpha / p - 256·alpha, when it is the same whole number for each alpha."""
    __tracebackhide__ = True
    unseen = ord("z")
    at = len(val) // 2
    odd = torch.cat((val[:at], torch.tensor([unseen], dtype=val.dtype), val[at:]))
    pairs = len(odd) - 1
    totals = []
    for alpha in alphas:
        want = ref_bigram_nll(train, odd, alpha)
        label = f"val with a byte train never has ('z', as a previous byte), alpha={alpha:g}"
        value = call_with_hints(chk, bigram_nll, train, odd, alpha, hints=UINT8)
        got = _as_float_tensor(value)
        if chk.compare(label, got if got is not None else value, want, atol=1e-6, rtol=1e-6) or got is None:
            continue
        others = float(want) * pairs + math.log(1 / 256)  # the reference's NLL of every other pair
        log_p = others - float(got) * pairs                # the log-probability yours gives next to 'z'
        if -700 < log_p < 0:
            totals.append(alpha / math.exp(log_p) - 256 * alpha)
    if totals and len(totals) == len(alphas) and all(abs(t - round(totals[0])) < 1e-4 for t in totals):
        total = round(totals[0])
        chk.diagnose(f"a previous byte train never has gets the probabilities of a row whose total count is {total} "
                     f"(measured: with every other pair scored right, your NLL implies p(next | 'z') = alpha / ({total}"
                     f" + 256·alpha) for each alpha tried): that row has no counts, so add-alpha smoothing gives (0 + "
                     f"alpha) / (0 + 256·alpha) = 1/256, the uniform row; the 256·alpha already keeps every "
                     f"denominator above 0, so no clamp or + 1 on the row totals is needed")


# -- contracts: the regimes each exercise promises, and its step-by-step reference ---------------
def nll_steps(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100):
    flat = logits.flatten(0, 1).float()                          # (B*T, V)
    tgt = targets.flatten()
    keep = tgt != ignore_index
    logp = flat.log_softmax(dim=-1)
    picked = logp.gather(-1, tgt.masked_fill(~keep, 0)[:, None])[:, 0]
    return float(-(picked * keep).sum()), int(keep.sum())


def _pad_with_ignore_index(args: dict) -> dict:
    """The visible padding (-100) written as the ignore_index the regime passes."""
    targets = args["targets"].masked_fill(args["targets"] == -100, args["ignore_index"])
    return {**args, "targets": targets}


def _nll_cases():
    p = defaults(check_nll_sum_and_count)
    b, t, v, ig = p["batch"], p["seq"], p["vocab"], p["ignore_index"]
    logits = randn(b, t, v, seed=p["seed"]) * 2
    targets = torch.randint(v, (b, t), generator=seeded(p["seed"] + 1 + ig % 7))
    for row in range(b):
        targets[row, t - 2 * row:] = ig
    return [("padded", (logits, targets, ig), {})]


def _same_sum_and_count(got, want) -> bool:
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        return False
    try:
        total, count = float(got[0]), int(got[1])
    except (TypeError, ValueError, RuntimeError):
        return False
    return abs(total - want[0]) <= 1e-3 * max(1.0, abs(want[0])) and count == want[1]


NLL_SUM_AND_COUNT = Contract("nll_sum_and_count", nll_steps, _nll_cases, names=("logits", "targets", "ignore_index"),
                             batch=("logits", "targets"), views=("logits", "targets"), cast=("logits",),
                             same=_same_sum_and_count, locate=False, shift=("logits",), scale=("logits",),
                             params=(("ignore_index", 0, _pad_with_ignore_index),), edges=(
                                 Edge("no scored target", "for a batch with no scored target (every target is "
                                      "ignore_index, as in a batch of padding: the sum is 0 over a count of 0)",
                                      lambda a: {**a, "targets": torch.full_like(a["targets"], a["ignore_index"])}),))


def bigram_steps(train: torch.Tensor, val: torch.Tensor, alpha: float = 0.5) -> float:
    train, val = train.long(), val.long()
    pairs = train[:-1] * 256 + train[1:]                                       # prev * 256 + next
    counts = torch.bincount(pairs, minlength=256 * 256).view(256, 256).double()  # [prev, next]
    probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)   # each row sums to 1
    logp = probs.log()
    return -logp[val[:-1], val[1:]].mean().item()


def _bigram_cases():
    p = defaults(check_bigram_nll)
    return [("bytes", (_markov_bytes(p["n_train"], p["seed"]), _markov_bytes(p["n_val"], p["seed"] + 1), p["alpha"]), {})]


def _same_number(got, want) -> bool:
    try:
        return math.isclose(float(got), float(want), rel_tol=1e-6, abs_tol=1e-9)
    except (TypeError, ValueError, RuntimeError):
        return False


BIGRAM_NLL = Contract("bigram_nll", bigram_steps, _bigram_cases, names=("train", "val", "alpha"), dtypes=(),
                      same=_same_number, params=(("alpha", 2.0),), elsewhere=False)  # counts of corpus bytes, on the CPU
