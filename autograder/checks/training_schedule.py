"""Checks for notebook 09's learning-rate schedule: warmup then cosine decay,
against the closed-form formula, with its edges (no warmup, one step after
the warmup, steps past the end) as rows of the check itself."""
from __future__ import annotations

import math

import torch

from .contracts import Contract, defaults, run_contract
from ..diagnosis_record import candidates
from ..learner_values import describe
from .framework.check import Check


def ref_lr(step: int, warmup: int, total: int, max_lr: float, min_lr: float) -> float:
    if step < warmup:
        return max_lr * (step + 1) / warmup
    # Both the raw progress (above 1 past the last step) and the clamped one are bound: a right answer may
    # clamp on either line, and the numbers locator compares the numbers each line binds.
    progress = (step - warmup) / max(1, total - 1 - warmup)
    clamped = min(1.0, progress)
    return min_lr + 0.5 * (1 + math.cos(math.pi * clamped)) * (max_lr - min_lr)


def check_lr_schedule(lr_schedule, *, warmup: int = 10, total: int = 50, max_lr: float = 3e-3, min_lr: float = 3e-4) -> None:
    """lr_schedule(step, warmup_steps, total_steps, max_lr, min_lr) at every step."""
    __tracebackhide__ = True
    chk = Check("lr_schedule", expects="a float: the learning rate at that step")
    steps = range(total)
    got = [chk.call(lr_schedule, s, warmup, total, max_lr, min_lr) for s in steps]
    try:
        got_t = torch.tensor([float(v) for v in got], dtype=torch.float64)
    except (TypeError, ValueError):
        chk._stop(f"lr_schedule returned {type(got[0]).__name__}; it should return a number")
    curve = lambda f: torch.tensor([f(s) for s in steps], dtype=torch.float64)  # noqa: E731
    want = curve(lambda s: ref_lr(s, warmup, total, max_lr, min_lr))
    variants = {
        "warmup starts at 0: step 0 would not move the weights; use max_lr * (step + 1) / warmup_steps":
            curve(lambda s: max_lr * s / warmup if s < warmup else ref_lr(s, warmup, total, max_lr, min_lr)),
        "cosine does not reach min_lr at the last step: decay over total_steps - 1 - warmup_steps steps":
            curve(lambda s: ref_lr(s, warmup, total + 1, max_lr, min_lr)),
        "cosine decays to 0 instead of min_lr": curve(lambda s: ref_lr(s, warmup, total, max_lr, 0.0)),
        "cosine measured from step 0 instead of from the end of warmup":
            curve(lambda s: ref_lr(s, warmup, total, max_lr, min_lr) if s < warmup else
                  min_lr + 0.5 * (1 + math.cos(math.pi * s / (total - 1))) * (max_lr - min_lr)),
        "no warmup": curve(lambda s: ref_lr(s, 0, total, max_lr, min_lr)),
        "cosine term scaled by max_lr instead of (max_lr - min_lr): lr = min_lr + 0.5 (1 + cos) (max_lr - min_lr)":
            curve(lambda s: ref_lr(s, warmup, total, max_lr, min_lr) if s < warmup else
                  ref_lr(s, warmup, total, max_lr + min_lr, min_lr)),
        "warmup ramps from 0 at step 0 to max_lr at step warmup_steps - 1, max_lr * step / (warmup_steps - 1): step 0 "
        "would not move the weights; use max_lr * (step + 1) / warmup_steps":
            curve(lambda s: max_lr * s / max(1, warmup - 1) if s < warmup else
                  ref_lr(s, warmup, total, max_lr, min_lr)),
        "a cosine that decays to 0 floored at min_lr, max(min_lr, 0.5 (1 + cos) max_lr): the rate reaches min_lr "
        "before the last step and stays flat; decay from max_lr to min_lr, min_lr + 0.5 (1 + cos) (max_lr - min_lr)":
            curve(lambda s: ref_lr(s, warmup, total, max_lr, min_lr) if s < warmup else
                  max(min_lr, ref_lr(s, warmup, total, max_lr, 0.0))),
        "warmup runs one step too long (step <= warmup_steps): warmup covers steps 0 .. warmup_steps - 1":
            curve(lambda s: max_lr * (s + 1) / warmup if s <= warmup else ref_lr(s, warmup, total, max_lr, min_lr)),
    }
    if not chk.compare(f"all {total} steps (warmup {warmup})", got_t, want, atol=1e-12, rtol=1e-9, variants=variants) \
            and not chk.diagnoses:
        _phases_read_apart(chk, got_t, want, variants, warmup)
    _schedule_edges(chk, lr_schedule, warmup, total, max_lr, min_lr)
    run_contract(chk, lr_schedule, LR_SCHEDULE)
    chk.finish()


def _phases_read_apart(chk: Check, got: torch.Tensor, want: torch.Tensor, variants: dict, warmup: int) -> None:
    """When no known mistake gives the whole curve: the warmup's steps and the decay's read apart, each wrong one
    against the known mistakes on its own steps (two slips, one in each phase, each named where it shows)."""
    close = lambda a, b: bool(torch.allclose(a, b, atol=1e-12, rtol=1e-9))  # noqa: E731
    phases = [(f"steps 0 to {warmup - 1} (the warmup)", slice(0, warmup)),
              (f"steps {warmup} to {len(want) - 1} (the decay)", slice(warmup, len(want)))]
    read = []
    for label, steps in phases:
        if steps.start >= steps.stop or close(got[steps], want[steps]):
            continue
        fits = [bug for bug, curve in variants.items() if not close(curve[steps], want[steps])
                and close(got[steps], curve[steps])]
        if len(fits) != 1:
            return  # a wrong phase no known mistake, or more than one, gives: nothing read for certain
        read.append(f"{label}: {fits[0]}")
    if len(read) > 1:
        chk.diagnose("two phases are wrong, each exactly as a known mistake gives it (measured on your rates, "
                     "phase by phase): " + "; and ".join(read))


def _unclamped(step: int, warmup: int, total: int, max_lr: float, min_lr: float) -> float:
    progress = (step - warmup) / max(1, total - 1 - warmup)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


def _schedule_edges(chk: Check, lr_schedule, warmup: int, total: int, max_lr: float, min_lr: float) -> None:
    """Rows at the schedule's edges, each against the closed form: its first step, no warmup, a single step after
    the warmup (no decay steps to divide by), and steps past the end (the rate stays at min_lr)."""
    no_warmup = max(4, total // 5)
    past = (total, total + 1, total + total // 2, 2 * total)
    edges = [
        (f"step 0 (warmup {warmup}): max_lr / warmup_steps", [(0, warmup, total)], {
            "warmup starts at 0: step 0 would not move the weights; use max_lr * (step + 1) / warmup_steps": [0.0]}),
        (f"warmup_steps 0, total_steps {no_warmup}: every step", [(s, 0, no_warmup) for s in range(no_warmup)], {}),
        (f"total_steps {warmup + 1} = warmup_steps + 1: every step", [(s, warmup, warmup + 1) for s in range(warmup + 1)],
         {}),
        (f"steps {', '.join(map(str, past))} (past total_steps {total}): min_lr", [(s, warmup, total) for s in past], {
            # said of the bound that is missing: a clamp from below (max(progress, 1.0)) leaves the same rates here
            "the cosine's progress is not clamped from above: past the last step it passes 1 and the rate climbs "
            "back toward max_lr; progress needs an upper bound, min(progress, 1.0), so that the rate stays at "
            "min_lr":
                [_unclamped(s, warmup, total, max_lr, min_lr) for s in past],
            "the rate drops to 0 past the last step: it stays at min_lr there (a run trained on, or resumed, keeps "
            "learning at min_lr)": [0.0] * len(past)}),
    ]

    def on_error(args):
        step, w, t = args
        def hint(err):
            if not isinstance(err, ZeroDivisionError):
                return None
            if w == 0 and chk.passed:  # the warmup rows are right: the branch is, so the division is outside it
                return ("a division by warmup_steps runs when warmup_steps = 0 (measured: ZeroDivisionError at step "
                        f"{step} with warmup_steps 0, while every step with warmup_steps {warmup} is right): with no "
                        "warmup, step < warmup_steps is never true, so keep the warmup's division inside that branch")
            if w == 0:
                return candidates("a division by warmup_steps runs when warmup_steps = 0 (measured: ZeroDivisionError "
                                  f"at step {step} with warmup_steps 0); candidates: the warmup's division outside "
                                  "its branch, or a branch that runs at step 0 with no warmup (step <= warmup_steps "
                                  "where step < warmup_steps is never true)")
            if t == w + 1:
                return ("the cosine divides by its number of decay steps, total_steps - 1 - warmup_steps, which is 0 "
                        f"when total_steps = warmup_steps + 1 (measured: ZeroDivisionError at step {step}, total_steps "
                        f"{t}, warmup_steps {w}): divide by max(1, total_steps - 1 - warmup_steps); the single step "
                        "after the warmup then runs at max_lr")
            return None
        return hint

    for name, calls, variants in edges:
        got = []
        for args in calls:
            value = chk.call(lr_schedule, *args, max_lr, min_lr, on_error=on_error(args),
                             row_label=f"{name}: step {args[0]}")
            try:
                got.append(float(value))
            except (TypeError, ValueError):
                chk._stop(f"lr_schedule returned {describe(value)} at step {args[0]}; it should return a number")
        want = torch.tensor([ref_lr(*args, max_lr, min_lr) for args in calls], dtype=torch.float64)
        chk.compare(name, torch.tensor(got, dtype=torch.float64), want, atol=1e-12, rtol=1e-9,
                    variants={bug: torch.tensor(v, dtype=torch.float64) for bug, v in variants.items()})


def _lr_cases():
    p = defaults(check_lr_schedule)
    return [(f"step {s}", (s, p["warmup"], p["total"], p["max_lr"], p["min_lr"]), {}) for s in range(p["total"])]


# The schedule's edges (no warmup, one step after the warmup, steps past the end) are rows of the check itself.
LR_SCHEDULE = Contract("lr_schedule", ref_lr, _lr_cases, names=("step", "warmup_steps", "total_steps", "max_lr", "min_lr"),
                       dtypes=(), numbers=True,
                       params=(("max_lr", 1.0), ("min_lr", 0.0, lambda a: {**a, "step": a["total_steps"] - 1}),
                               ("warmup_steps", 3), ("total_steps", 200, lambda a: {**a, "step": a["warmup_steps"] + 5})))
