"""What every exercise promises, checked the same way everywhere.

Two promises hold for every tensor exercise: the function leaves its inputs
as they were (no `x -= mean`, no `masked_fill_` on the caller's logits), and
its result keeps the inputs' dtype. Beyond them, each exercise declares its
contract once (a Contract): the dtypes it promises, which arguments carry a
batch axis (so a batch of one must work) or take extra leading axes, which
may arrive as non-contiguous views (as a caller's transpose or slice gives
them), which a gradient must reach, and a step-by-step reference. Besides
its table rows, a check then runs that grid of regimes (run_contract) on its
visible inputs against the reference, one regime at a time, and a failure
names the regime in words a learner can act on ("right in float32, wrong in
float64", "right for batch 2, wrong for batch 1"), plus the learner's line
where the first wrong value is made (trace.locate).

    got = call_keeping_inputs(chk, rms_norm, x, weight, eps)
    ...
    run_contract(chk, rms_norm, RMS_NORM)

A changed input is measured (the argument's values differ after the call
from a copy taken before it), so it is named as the bug it is; every call
through Check.call measures that, and the grid's calls also give back
torch's settings (grad mode, default dtype and device) and their modules'
requires_grad flags, naming what a call left changed."""
from __future__ import annotations

# In layers, each importing only those before it: calls (one call in a regime), locate (the learner's line for a
# failure), regimes (Contract and the regimes it implies), run (the grid and the inputs-unchanged row).
from ..framework.calling import fresh  # noqa: F401
from .calls import is_number, positional_args, same_result, split_case  # noqa: F401
from .locate import locate_call, locate_cases, traced_pair, traces  # noqa: F401
from .regimes import (LARGE_WORDS, META_WORDS, SCALE_WORDS, SHIFT_WORDS, Contract, Edge, Regime, defaults,  # noqa: F401
                      elsewhere_regime, noncontiguous, on_a_gpu, regimes, stays_on_device, unvaried_numbers)
from .run import apply_outcome, call_keeping_inputs, remembered, run_contract  # noqa: F401
