"""framework.measure and framework.explain: the measurement helpers, and the
explainers that say what a failing row measures (a size or constant factor,
merged or reordered axes)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from autograder import checks


# -- measurement helpers and the examples -------------------------------

def test_measurement_helpers_measure():
    from torch import nn

    from autograder.checks import core

    w = torch.rand(2, 3, 4, 5).softmax(1)                      # sums to 1 over axis 1 only
    assert core.sums_to_one_axes(w) == [1]
    want = torch.randn(10, dtype=torch.float64)
    c, residual = core.fit_scale(want / math.sqrt(48), want)
    assert residual < 1e-12 and core.describe_factor(c, {"1/sqrt(48)": 1 / math.sqrt(48)}) == "1/6.93 = 1/sqrt(48)"
    assert core.identify_activation(torch.relu) == "ReLU" and core.identify_activation(F.silu).startswith("SiLU")
    assert core.identify_activation(lambda a: a ** 3) is None
    x = torch.randn(3, 6)
    assert core.permutation_of(x.flip(-1), x) and not core.permutation_of(x, x) and not core.permutation_of(x + 1, x)
    assert core.python_number_problem(1.5, float) is None and core.python_number_problem(3, int) is None
    assert "call .item()" in core.python_number_problem(torch.tensor(1.5), float)
    assert core.python_number_problem(True, int) is not None

    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.ones(3)

    assert "not an nn.Parameter" in core.parameter_problems(Plain(), "weight")
    assert core.parameter_problems(nn.Linear(2, 2), "weight") is None
    p = nn.Parameter(torch.ones(3))
    assert core.gradient_reaches(p * 2, p) and not core.gradient_reaches(p.detach() * 2, p)


# -- the measurement explainers of a failing row (framework/explain) ------------------------------

def test_a_result_a_size_times_off_names_the_size():
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(0)) + 3
    chk = checks.core.Check("total", expects="a scalar")
    got = chk.call(lambda x: x.sum() / x.shape[0], x)
    chk.compare("sum", got, x.sum())
    # one value, one ratio: the size is offered as a candidate, said under Candidates:
    assert any("exactly 1/5 of the right value" in f and "5 is x.shape[0]" in f for f in chk.candidate_lines)
    root = checks.core.Check("total", expects="a scalar")
    root.call(lambda x: x.sum() / math.sqrt(x.shape[0]), x)
    root.compare("sum", x.sum() / math.sqrt(5), x.sum())
    assert any("exactly 1/sqrt(5) = 1/2.236 of" in f and "a division by sqrt(5)" in f for f in root.candidate_lines)
    halved = checks.core.Check("total", expects="a scalar")  # a factor 2 has too many causes to be named by a size
    halved.call(lambda x: x.sum() * 2, torch.ones(2, 4))
    halved.compare("sum", torch.ones(2, 4).sum() * 2, torch.ones(2, 4).sum())
    assert not halved.facts and len(halved.candidate_lines) == 1
    assert "exactly 2 = 2 times" in halved.candidate_lines[0] and "x.shape" not in halved.candidate_lines[0]
    assert "candidates: a term counted twice" in halved.candidate_lines[0]
    other = checks.core.Check("total", expects="a scalar")  # neither a size nor a constant: nothing said
    other.call(lambda x: x.sum() * 1.5, torch.ones(2, 4))
    other.compare("sum", torch.ones(2, 4).sum() * 1.5, torch.ones(2, 4).sum())
    assert not other.facts


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_result_off_by_a_change_of_logarithm_base_names_the_base(dtype):
    nats = torch.rand(3, 6, generator=torch.Generator().manual_seed(0)).to(dtype) + 1
    want = nats / math.log(2)  # bits
    chk = checks.core.Check("to_bits", expects="bits")
    got = chk.call(lambda nats: nats / math.log10(2), nats)  # log10(2) where ln 2 is meant
    chk.compare("bits", got, want)
    said = [f for f in chk.facts if "exactly 2.303 = ln 10 times" in f]
    assert said and "log10(2) for ln 2" in said[0] and "nats into bits" in said[0]
    scalar = checks.core.Check("to_bits", expects="bits")  # a single number: its ratio is the measurement
    scalar.compare("bits", torch.tensor(3.7 / math.log(2)), torch.tensor(3.7))
    assert any("1.443 = log2(e) = 1/ln 2 times" in f for f in scalar.facts)
    right = checks.core.Check("to_bits", expects="bits")
    assert right.compare("bits", right.call(lambda nats: nats / math.log(2), nats), want) and not right.facts
    uneven = checks.core.Check("to_bits", expects="bits")  # ln 10 on one row only: no factor common to every value
    uneven.compare("bits", torch.cat((want[:1] * math.log(10), want[1:])), want)
    assert not uneven.facts


def test_a_result_with_adjacent_axes_merged_names_the_axes():
    y = torch.randn(2, 3, 5, 4, generator=torch.Generator().manual_seed(0))
    want = y.transpose(1, 2).flatten(2)  # (B, T, d)
    chk = checks.core.Check("merge_heads", expects="(B, T, d)")
    got = chk.call(lambda y: y.transpose(1, 2).flatten(1), y)  # every axis after the batch merged
    chk.compare("merge", got, want)
    said = [d for d in chk.diagnoses if "merged into your axis 1" in d]
    assert said and "expected axes 1 and 2 (sizes 5 = y.shape[2] and 12)" in said[0] and "(2, 60)" in said[0]
    split = checks.core.Check("merge_heads", expects="(B, T, d)")
    split.compare("merge", want.unflatten(-1, (3, 4)), want)
    assert any("axis 2 (size 12) is split into your axes 2 and 3" in d for d in split.diagnoses)
    right = checks.core.Check("merge_heads", expects="(B, T, d)")
    assert right.compare("merge", right.call(lambda y: y.transpose(1, 2).flatten(2), y), want) and not right.diagnoses
    scrambled = checks.core.Check("merge_heads", expects="(B, T, d)")  # the right shape's merge of other axes
    scrambled.compare("merge", y.flatten(1), want)
    assert not scrambled.diagnoses


def test_an_angle_without_pi_is_named_and_other_factors_say_nothing():
    """An angle in turns where radians are meant is 1/(2π) of it; a factor 1.5 is no constant a formula mixes up."""
    radians = torch.tensor([2.1, 0.7, 1.3], dtype=torch.float64)
    turns = checks.core.Check("angles", expects="a tensor")
    turns.compare("angles", radians / (2 * math.pi), radians)
    assert any("1/(2π) times" in f and "turns where radians are meant" in f for f in turns.facts), turns.facts
    for got in (radians * 1.5, radians.clone()):
        quiet = checks.core.Check("angles", expects="a tensor")
        quiet.compare("angles", got, radians)
        assert not quiet.facts and not quiet.diagnoses


def test_a_result_with_its_axes_in_another_order_is_named_with_the_sizes_owners():
    x, weight = torch.randn(2, 3, 5), torch.randn(9, 5)
    chk = checks.core.Check("logits", expects="(B, T, V)")
    got = chk.call(lambda x, weight: weight @ x.transpose(-2, -1), x, weight)
    chk.compare("logits", got, x @ weight.T)
    said = [d for d in chk.diagnoses if "axes in another order" in d]
    assert said and "permute(0, 2, 1)" in said[0] and "size 9 (weight.shape[0]) is at position 1, expected at the last" in said[0]
    right = checks.core.Check("logits", expects="(B, T, V)")
    right.compare("logits", torch.randn(2, 9, 3), x @ weight.T)  # another shape, other values: nothing said
    assert not right.diagnoses


# -- a value of the notebook read where the call's is meant -----------------------

def _cell(source: str, namespace: dict) -> dict:
    """Run `source` as a notebook cell would: its functions' globals are the namespace."""
    exec(compile(source, "<notebook cell>", "exec"), namespace)
    return namespace


def test_a_notebook_name_is_said_only_when_the_call_s_value_in_its_place_gives_the_reference():
    from autograder.checks.framework.explain.notebook_names import notebook_name_read

    demo = torch.arange(6.0).reshape(2, 3)
    cell = _cell("def row_sums(x):\n    return demo.sum(-1)\n\n"
                 "def scaled(x, k):\n    return x * k * 2\n", {"demo": demo, "torch": torch})
    x = torch.randn(4, 5)
    found = notebook_name_read(cell["row_sums"], [((x,), {}, x.sum(-1))])
    assert found["name"] == "demo" and found["value_words"] == "its argument `x` standing for `demo`"
    assert found["line"] == 2 and cell["demo"] is demo  # the notebook's own name is never rebound
    # Wrong for another reason, reading no notebook value: nothing to say.
    assert notebook_name_read(cell["scaled"], [((x, 3), {}, x * 3)]) is None


def test_a_notebook_name_whose_stand_ins_do_not_give_the_reference_is_not_said():
    from autograder.checks.framework.explain.notebook_names import notebook_name_read

    cell = _cell("def shifted(x):\n    return x + offset\n", {"offset": 7})
    x = torch.randn(3)
    assert notebook_name_read(cell["shifted"], [((x,), {}, x - 1)]) is None  # no value of the call makes it x - 1
    assert notebook_name_read(cell["shifted"], [((x,), {}, x + 7)]) is None  # right as given: nothing to explain


def test_a_notebook_generator_is_said_only_when_the_draws_follow_it_and_nothing_is_advanced():
    """Draws from a generator bound in the notebook, where the call's is meant: confirmed by two runs with a copy of
    the call's generator standing for it (equal) and one with another state (different); the call's generator, the
    notebook's and torch's global state are left as they were."""
    from autograder.checks.framework.explain.notebook_names import notebook_generator_read

    gen = torch.Generator().manual_seed(0)
    cell = _cell("def draw(n, generator):\n    return torch.randint(10, (n,), generator=gen)\n\n"
                 "def draw_both(n, generator):\n    return torch.randint(10, (n,), generator=generator) + "
                 "torch.randint(10, (n,))\n\n"
                 "def draw_own(n, generator):\n    return torch.randint(10, (n,), generator=generator) + "
                 "(gen is None)\n", {"gen": gen, "torch": torch})
    call = torch.Generator().manual_seed(5)
    states = call.get_state(), gen.get_state(), torch.get_rng_state()
    found = notebook_generator_read(cell["draw"], (16, call), {})
    assert found["name"] == "gen" and found["param"] == "generator" and found["line"] == 2
    assert all(torch.equal(a, b) for a, b in zip(states, (call.get_state(), gen.get_state(), torch.get_rng_state())))
    # Random from torch's global state, no notebook generator read: nothing to say.
    assert notebook_generator_read(cell["draw_both"], (16, call), {}) is None
    # Reads the notebook's generator, but its draws do not depend on that generator's state: not confirmed.
    assert notebook_generator_read(cell["draw_own"], (16, call), {}) is None


def test_axes_in_another_order_said_for_one_row_becomes_a_measure_when_a_later_row_refutes_it():
    """A later row whose sizes are the expected ones moved, and whose values no order of axes makes right."""
    chk = checks.core.Check("f", expects="(a, b)")
    want = torch.randn(2, 3)
    chk.compare("first", want.T.clone(), want)
    assert any("axes in another order" in d for d in chk.diagnoses)
    other = torch.randn(4, 5)
    chk.compare("second", torch.randn(5, 4), other)
    assert not any("axes in another order" in d for d in chk.diagnoses)
    assert any(f.startswith("for first your result's shape is (3, 2)") and "but for second no order" in f
               for f in chk.facts), chk.facts
