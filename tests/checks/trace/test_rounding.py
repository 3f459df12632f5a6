"""A value rounded through float16 or bfloat16 and cast back, which the
aligner matches within its float32 tolerance, while a later step magnifies
the rounding past it (autograder/checks/trace/rounding.py): the Where line is
the line that rounds, not the later step, and says what was measured. A
float32 answer computed in another order differs by float32 rounding only
and is never blamed.

Each function is written as a learner would, in a "cell" whose source
linecache holds, as IPython registers a notebook cell's."""
from __future__ import annotations

import torch

from autograder.checks import trace
from autograder.checks.trace import rounding
from ...helpers import define_in_cell


def cell(source: str, name: str = "f"):
    """Define `name` from `source` as a notebook cell would (its lines readable by the tracer)."""
    return define_in_cell(source, name)


# cos of angles up to 63 radians: an angle error of float16's size at 63 (about 0.016) moves cos by as much,
# far past float32's tolerance, while the angles themselves still match within it relative to their scale.
REFERENCE = cell("def table(T, hd, theta):\n"
                 "    inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)\n"
                 "    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)\n"
                 "    return angles.cos()\n", "table")
ARGS = (64, 16, 10000.0)


def located(fn, args=ARGS):
    mine = trace.record(fn, args, learner=True)
    theirs = trace.record(REFERENCE, args, learner=False)
    return trace.locate(mine, theirs)


def test_angles_built_in_float16_are_blamed_on_their_own_line():
    wrong = cell("def f(T, hd, theta):\n"
                 "    inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)\n"
                 "    angles = torch.outer(torch.arange(T, dtype=torch.float16), inv_freq.half()).float()\n"
                 "    return angles.cos()\n")
    # independently: the angles differ by about float16's step at 63 (2^-5 / 2), far above float32's
    ref_angles = torch.outer(torch.arange(64.0), 10000.0 ** (-torch.arange(0, 16, 2).float() / 16))
    mine_angles = torch.outer(torch.arange(64, dtype=torch.float16), (10000.0 ** (-torch.arange(0, 16, 2).float()
                                                                                   / 16)).half()).float()
    assert float((mine_angles - ref_angles).abs().max()) > 1e-3
    found = located(wrong)
    assert found is not None and found.line == 3 and found.kind == "value", found
    said = "; ".join(found.facts)
    assert "float16" in said and "line 4 (cos)" in said, said


def test_frequencies_rounded_to_bfloat16_are_blamed_on_their_own_line():
    wrong = cell("def f(T, hd, theta):\n"
                 "    inv_freq = (theta ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)).to(torch.bfloat16).float()\n"
                 "    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)\n"
                 "    return angles.cos()\n")
    found = located(wrong)
    assert found is not None and found.line == 2 and found.kind == "value", found
    assert "bfloat16" in "; ".join(found.facts), found.facts


def test_a_float32_answer_computed_in_another_order_is_not_blamed():
    # exp(-log(theta)·2i/hd) differs from theta^(-2i/hd) by float32 rounding (about 1e-7 of the scale); the
    # positions pass through float16 exactly (integers below 2048): no rounding detour worth the name.
    other = cell("def f(T, hd, theta):\n"
                 "    inv_freq = torch.exp(-math.log(theta) * torch.arange(0, hd, 2, dtype=torch.float32) / hd)\n"
                 "    angles = torch.arange(T, dtype=torch.float16).float()[:, None] * inv_freq[None, :]\n"
                 "    return angles.cos()\n")
    assert located(other) is None  # the result is right: nothing to locate
    mine = trace.record(other, ARGS, learner=True)
    theirs = trace.record(REFERENCE, ARGS, learner=False)
    seen = trace.Analysis(mine, theirs)
    cos = next(op for op in mine.ops if op.name == "cos")
    counterpart = next(op for op in theirs.ops if op.name == "cos")
    assert rounding.rounded_before(seen, cos, counterpart) is None


def test_a_real_mistake_after_a_float16_detour_keeps_its_own_line():
    # The angles are rounded through float16, and doubled on the last line: a step the reference never takes,
    # whose values differ far beyond float16's rounding. That line keeps the blame.
    wrong = cell("def f(T, hd, theta):\n"
                 "    inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)\n"
                 "    angles = torch.outer(torch.arange(T, dtype=torch.float16), inv_freq.half()).float()\n"
                 "    return (2 * angles).cos()\n")
    found = located(wrong)
    assert found is not None and found.line == 4, found
    # The detour is not hidden: line 3's angles are the reference's only up to float16's rounding, and the
    # Where line says so beside its own line's facts.
    said = "; ".join(found.facts)
    assert "line 3" in said and "float16" in said and "differ beyond that rounding" in said, said


def test_a_real_mistake_without_a_detour_says_nothing_of_rounding():
    wrong = cell("def f(T, hd, theta):\n"
                 "    inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)\n"
                 "    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)\n"
                 "    return (2 * angles).cos()\n")
    found = located(wrong)
    assert found is not None and found.line == 4, found
    assert not any("float16" in f or "bfloat16" in f for f in found.facts), found.facts


def test_the_detour_of_a_pair_is_measured_once(monkeypatch):
    # rounded_before declines (the last line's values differ beyond the rounding) and rounded_earlier then
    # asks of the same pair: one measurement serves both, and both still answer as before.
    wrong = cell("def f(T, hd, theta):\n"
                 "    inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)\n"
                 "    angles = torch.outer(torch.arange(T, dtype=torch.float16), inv_freq.half()).float()\n"
                 "    return (2 * angles).cos()\n")
    mine = trace.record(wrong, ARGS, learner=True)
    theirs = trace.record(REFERENCE, ARGS, learner=False)
    seen = trace.Analysis(mine, theirs)
    cos = next(op for op in mine.ops if op.name == "cos")
    counterpart = next(op for op in theirs.ops if op.name == "cos")
    calls = []
    measure = rounding._measure_detour
    monkeypatch.setattr(rounding, "_measure_detour", lambda *a: calls.append(a) or measure(*a))
    assert rounding.rounded_before(seen, cos, counterpart) is None
    earlier = rounding.rounded_earlier(seen, cos, counterpart)
    assert earlier is not None and "line 3" in earlier and "float16" in earlier, earlier
    assert len(calls) == 1, calls
