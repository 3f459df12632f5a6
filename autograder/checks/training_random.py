"""train_step and torch's global random state: a step draws its dropout masks from the state its caller left,
and leaves seeding to the caller."""
from __future__ import annotations

from typing import Callable

import torch

from .framework.check import Check
from .references.hints import call_with_hints


def seeds_itself(chk: Check, train_step, setup: Callable, ref_step: Callable, flat: Callable, hints, x, y,
                 grad_clip: float) -> None:
    """A step whose loss and parameters do not depend on the global random state it is called with, while
    dropout draws other masks from each state, and that are not the step without dropout: its masks come from a
    state the step sets itself. setup() -> a fresh (model, optimizer); ref_step(model, opt, train=...) -> the
    reference step's loss in that mode; flat(model) -> its parameters."""
    runs = []
    for state in (7, 8):
        model, opt = setup()
        model.train()
        torch.manual_seed(state)
        loss = call_with_hints(chk, train_step, model, opt, x, y, grad_clip, hints=hints,
                               row_label=f"a step after torch.manual_seed({state})")
        if not isinstance(loss, (int, float)):
            return
        runs.append((float(loss), flat(model)))
    (loss_a, params_a), (loss_b, params_b) = runs
    if loss_a != loss_b or not torch.equal(params_a, params_b):
        return
    references = []
    for state, train in ((7, True), (8, True), (7, False)):
        model, opt = setup()
        torch.manual_seed(state)
        references.append(float(ref_step(model, opt, train=train)))
    with_dropout_a, with_dropout_b, without_dropout = references
    if with_dropout_a == with_dropout_b or abs(loss_a - without_dropout) <= 1e-6 * max(1.0, abs(without_dropout)):
        return  # dropout draws nothing here, or the step runs without it (a mode, not a seed)
    chk.diagnose(f"your train_step draws the same dropout masks whatever random state it is called in (measured: "
                 f"started after torch.manual_seed(7) and after torch.manual_seed(8), it gives the same loss, "
                 f"{loss_a:.6g}, and the same parameters, with dropout on: the reference's step gives {with_dropout_a:.6g} "
                 f"and {with_dropout_b:.6g}): it seeds the random state itself (torch.manual_seed inside the step), so "
                 "every step draws the same masks; leave seeding to the caller")
