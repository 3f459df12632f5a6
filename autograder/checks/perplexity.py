"""Checks for notebook 10: summed NLL and token count, evaluation (mean NLL,
perplexity, bits per byte); the bigram baseline's are in perplexity_bigram.py.

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
from ..learner_values import describe
from .framework.calling import WITHOUT, measuring_call, quiet_call
from .framework.check import Check
from .framework.measure import LOG_BASE_CONSTANTS, close_to, python_number_problem, randn, seeded
from .references.generation import (ForwardLog, eval_flag_alone, flag_line, mode_calls_watched, mode_given_back,
                                    mode_not_a_flag, modes_mixed, tiny_model, train_mode_restored)
from .references.hints import finish_with_upstream
from .spies import first_call_arguments


def as_float_tensor(value) -> torch.Tensor | None:
    """A number the learner's function returned (a one-element tensor or a Python number) as a float64 scalar
    tensor; None for anything else."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.detach().double().reshape(())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return torch.tensor(float(value), dtype=torch.float64)
    return None


def require_number(chk: Check, label: str, value, kind: type, fix: str, swapped: bool = False) -> None:
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
        total, count = (as_float_tensor(v) for v in out)
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
            "cross_entropy handed probabilities (a softmax taken before it; measured: your sum is the NLL of "
            "softmax(logits) read as logits): F.cross_entropy takes the logits and applies log_softmax itself; hand "
            "it the logits": lambda: F.cross_entropy(flat[valid].softmax(-1), tgt[valid], reduction="sum"),
        })
        chk.compare(f"{label}: token count", count if count is not None else out[1], n_valid, atol=0, rtol=0, variants={
            "padding counted: count only the targets != ignore_index (the argument, not a hard-coded -100), on the "
            "targets as they were handed in (padding overwritten in place first counts as scored)":
                torch.tensor(float(tgt.numel()), dtype=torch.float64),
        })
        if total is not None and not close_to(total, want_total, 1e-4, 1e-5):
            _sum_in_low_precision(chk, total, want_total)
        if count is not None and not close_to(count, n_valid, 0, 0) and ig != 0:
            _id_zero_left_out(chk, nll_sum_and_count, logits, targets, ig, count, n_valid)
        if ig == ignore_index:
            swapped = total is not None and count is not None and not torch.equal(total, count) and \
                close_to(total, n_valid, 0, 0) and close_to(count, want_total, 1e-4, 1e-5)
            require_number(chk, "the NLL sum", out[0], float, "return nll.item()", swapped)
            require_number(chk, "the count", out[1], int, "return int(count)", swapped)
    _half_logits_row(chk, nll_sum_and_count, logits, targets, ig)
    _many_targets_in_half_row(chk, nll_sum_and_count, seed, vocab, ignore_index)
    run_contract(chk, nll_sum_and_count, NLL_SUM_AND_COUNT)
    chk.finish()


def _sum_in_low_precision(chk: Check, total: torch.Tensor, want_total: torch.Tensor) -> None:
    """A wrong NLL sum that is a number of a lower precision (bfloat16, else float16), which the reference's is
    not: it went through that dtype on the way. Said once."""
    value = total.double().reshape(-1)[:1]
    if not bool(torch.isfinite(value).all()) or any("went through" in f for f in chk.facts):
        return
    want = want_total.double().reshape(-1)[:1]
    for dtype in (torch.bfloat16, torch.float16):
        def held(v):
            return bool(v.to(dtype).double() == v)
        spacing = float(want.abs()) * torch.finfo(dtype).eps  # that dtype's distance between numbers near the sum
        # near the reference, within that dtype's rounding of a sum: an unrelated number (a count) is not said
        if held(value) and not held(want) and float((value - want).abs()) <= 8 * spacing:
            name = str(dtype).removeprefix("torch.")
            chk.measured(f"your NLL sum, {float(value):g}, is a {name} number (measured: {name} holds it exactly, and "
                         f"not the reference's, {float(want_total):.6g}): it went through {name} on the way, which "
                         f"keeps about {3 if dtype is torch.float16 else 2} significant digits; compute the loss and "
                         "its sum in float32 (logits.float())")
            return


def _id_zero_left_out(chk: Check, nll_sum_and_count, logits, targets, ignore_index, count, n_valid) -> None:
    """A count short by exactly the targets of id 0, confirmed on the learner's function: with those targets given
    another real id (not ignore_index), the count it returns is right. Said once."""
    zeros = int((targets == 0).sum())
    if not zeros or not close_to(count, n_valid - zeros, 0, 0) or any("id 0" in d for d in chk.diagnoses):
        return
    other = 1 if ignore_index != 1 else 2
    again = quiet_call(nll_sum_and_count, logits.clone(), targets.masked_fill(targets == 0, other), ignore_index)
    try:  # a measurement: its printing silenced, a run that raises (None) confirms nothing
        confirmed = int(again[1]) == int(n_valid)
    except (TypeError, IndexError, ValueError, RuntimeError):
        return
    if confirmed:
        chk.diagnose(f"the targets of id 0 are not counted, as if 0 were padding (measured: your count is {int(count)}, "
                     f"the {int(n_valid)} scored targets less the {zeros} of id 0; with those {zeros} given id {other}, "
                     "your count is right): 0 is a real token id; count the targets != ignore_index")


def _half_logits_row(chk: Check, nll_sum_and_count, logits, targets, ignore_index) -> None:
    """bfloat16 logits (what a half-precision model returns): the sum must be
    as exact as float32 arithmetic on those logits allows (float64 reference)."""
    __tracebackhide__ = True
    half = logits.to(torch.bfloat16)
    out = chk.call(nll_sum_and_count, half, targets, ignore_index)
    total = as_float_tensor(out[0]) if isinstance(out, (tuple, list)) and len(out) == 2 else None
    flat, tgt = half.flatten(0, 1), targets.flatten()
    want = F.cross_entropy(flat.double(), tgt, ignore_index=ignore_index, reduction="sum")
    chk.compare("bfloat16 logits: NLL sum (float64 reference)", total if total is not None else out, want,
                atol=1e-3, rtol=1e-5, variants={
                    "the NLL is summed in the logits' own half precision (bfloat16 keeps ~3 digits, so the sum is "
                    "off): upcast first, logits.float(), then cross_entropy":
                    lambda: F.cross_entropy(flat, tgt, ignore_index=ignore_index, reduction="sum").double(),
                    SHIFTED_AGAIN: lambda: _shifted_again(half, targets, ignore_index)})
    if not chk.rows[-1].ok and not chk.named_variants():
        _right_from_float32(chk, nll_sum_and_count, half, targets, ignore_index, float(want))


def _right_from_float32(chk: Check, nll_sum_and_count, half, targets, ignore_index: int, want: float) -> None:
    """The same bfloat16 values handed over as float32: a sum that is right then differs only by arithmetic done
    in bfloat16 before the values reach float32 (measured on the learner's function)."""
    try:
        out = measuring_call(nll_sum_and_count, (half.float(), targets, ignore_index))
    except Exception:  # noqa: BLE001: a call that raises measures nothing here; the rows said why
        return
    total = as_float_tensor(out[0]) if isinstance(out, (tuple, list)) and len(out) == 2 else None
    if total is not None and math.isclose(float(total), want, rel_tol=1e-5, abs_tol=1e-3):
        chk.measured(f"the same logits handed over as float32 give your function an NLL sum of {float(total):.6g}, the "
                     f"float64 reference's {want:.6g}: what differs for bfloat16 logits is arithmetic done in "
                     "bfloat16 before the values reach float32 (a log-softmax, softmax or exp taken in the logits' "
                     "dtype); upcast the logits first, logits.float()")


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
    count = as_float_tensor(out[1]) if isinstance(out, (tuple, list)) and len(out) == 2 else None
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
    count = as_float_tensor(again[1]) if isinstance(again, (tuple, list)) and len(again) == 2 else None
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
            f"each batch's mean NLL weighted by its number of rows or of target positions (every row here holds "
            f"{seq}, so the two weigh alike), not of scored tokens (they differ where rows are padded): add the NLL "
            "sums and the token counts, divide once":
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
    log = ForwardLog(model, submodules=True)  # the submodules' flags too: the top one alone may say eval mode
    try:
        with mode_calls_watched(model, evaluate) as mode_calls:
            got = chk.call(evaluate, model, batches, bytes_per_token,
                           on_error=lambda err: mode_not_a_flag(model, mode_calls)
                           or _ignore_index_handed(evaluate, model, batches, bytes_per_token))
    finally:
        log.close()
    if not (isinstance(got, dict) and set(want) <= set(got)):
        chk._stop(f"evaluate returned {describe(got)}; it should return a dict with keys {sorted(want)}")
    flag_alone = eval_flag_alone(log.calls, "evaluate")
    dropout_on = any(c["training"] for c in log.calls) or flag_alone is not None
    for key in want:
        value = as_float_tensor(got[key])
        if not chk.compare(key, value if value is not None else got[key], want[key], atol=1e-5, rtol=1e-5,
                           variants=variants[key]) and key == "loss" and value is not None and not dropout_on:
            said = _ignore_index_handed(evaluate, model, batches, bytes_per_token)
            if said:
                chk.diagnose(said)
            _which_batches(chk, float(value), rows)
            _implied_count(chk, float(value), rows, batches)
        if key != "loss" and value is not None and not chk.rows[-1].ok:
            _measure_conversion(chk, key, float(value), as_float_tensor(got["loss"]), bytes_per_token)
            if key == "bits_per_byte" and not chk.facts:
                _measure_bytes_per_token(chk, evaluate, model, batches, float(loss))
        require_number(chk, f'"{key}"', got[key], float, "convert with .item() or float(...)")
    chk.require("dropout off (eval mode)", log.calls and not dropout_on,
                "some forward passes ran in train mode" if flag_alone is None else
                "submodules ran in train mode under a model flagged eval",
                diagnosis=flag_alone or
                (f"dropout on during evaluation: {mixed}" if (mixed := modes_mixed(log.calls)) else
                 "dropout on during evaluation: call model.eval() first, or the loss is that of a randomly "
                 "damaged network and changes from run to run"))
    if flag_alone:
        chk.locate_with(lambda: flag_line(evaluate, model, (batches, bytes_per_token)))
    chk.require("no autograd graph (torch.no_grad)", log.calls and not any(c["grad"] for c in log.calls),
                "forward passes recorded gradients",
                diagnosis="evaluation records an autograd graph: wrap the loop in torch.no_grad() (memory would grow "
                          "with every batch)")
    train_mode_restored(chk, model, mode_calls, "evaluate")
    _same_loss_regrouped(chk, evaluate, model, batches, bytes_per_token, got, dropout_on)
    _large_nll_in_eval_mode(chk, evaluate, model, batches, bytes_per_token)
    _batches_follow_the_model(chk, evaluate, model, batches, bytes_per_token)
    if chk.passed:
        _a_batch_of_padding(chk, evaluate, model, batches, bytes_per_token, float(loss))
    return chk


def _ignore_index_handed(evaluate, model, batches, bytes_per_token: float) -> str | None:
    """The ignore_index the learner's evaluate hands its nll_sum_and_count, where it is not the -100 the batches
    mark padding with (measured on its first call; not in the grader's recheck, whose calls run elsewhere)."""
    if getattr(evaluate, "recheck_trace", None) is not None:
        return None
    handed = first_call_arguments(evaluate, "nll_sum_and_count", lambda: evaluate(
        copy.deepcopy(model), copy.deepcopy(batches), bytes_per_token))
    index = handed.get("ignore_index", -100) if handed else -100
    if isinstance(index, bool) or not isinstance(index, int) or index == -100:
        return None
    return (f"your evaluate calls nll_sum_and_count with ignore_index={index} (measured: its first call), where the "
            f"batches mark padding with -100: real targets equal to {index} are left out, and the padding's -100 is "
            "read as a class (cross_entropy raises on it); pass ignore_index=-100, the default")


def _a_batch_of_padding(chk: Check, evaluate, model, batches, bytes_per_token: float, loss: float) -> None:
    """The same batches with one more whose every target is the ignore index (-100), as the padded tail of a
    validation set can be: it scores nothing, so the loss is the same."""
    x, y = batches[0]
    padded = [*batches, (x.clone(), torch.full_like(y, -100))]
    label = "one more batch whose every target is padding (-100): the same loss"
    got = chk.call(evaluate, model, padded, bytes_per_token, row_label=label)
    model.train()
    value = as_float_tensor(got.get("loss")) if isinstance(got, dict) else None
    chk.compare(label, value if value is not None else got, torch.tensor(loss, dtype=torch.float64), atol=1e-5,
                rtol=1e-5)


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
    mine = as_float_tensor(first.get("loss"))
    one_loss = as_float_tensor(one.get("loss")) if isinstance(one, dict) else None
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
    mode_given_back(chk, "evaluate", sharp, False, "a model handed over in eval mode, under torch.no_grad()")
    value = as_float_tensor(got.get("perplexity")) if isinstance(got, dict) else None
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
            mine, bits = as_float_tensor(out["loss"]), as_float_tensor(out["bits_per_byte"])
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
    if math.isclose(got, count / total, rel_tol=1e-6):
        chk.measured(f"your loss is {got:.6g}, the scored tokens over the summed NLL ({count} / {total:.6g}, measured): "
                     f"the reciprocal of the loss, which is the summed NLL over the tokens ({total / count:.6g})")
        return
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
