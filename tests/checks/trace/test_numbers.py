"""A wrong Python number on one line, whose first wrong tensor is made on a
later one (autograder/checks/trace/numbers.py): the line binding the number
is named only where running the learner's function again with another number
bound there gives the reference's result, and only one number does.

Each function here is written as a learner would, in a "cell" whose source
linecache holds, as IPython registers a notebook cell's."""
from __future__ import annotations

import time

import pytest
import torch

from autograder.checks import trace
from autograder.checks.trace import numbers
from autograder.checks.core import randn
from ...helpers import define_in_cell


def cell(source: str, name: str = "f"):
    """Define `name` from `source` as a notebook cell would (its lines readable by the tracer)."""
    return define_in_cell(source, name)


def tensor_line(fn, reference, *args):
    """The tensor tracer's line for fn against the reference, on these inputs."""
    mine = trace.record(fn, args, learner=True)
    theirs = trace.record(reference, args, learner=False)
    return trace.locate_raise(mine, theirs) if mine.error is not None else trace.locate(mine, theirs)


def number_line(fn, reference, *args):
    return trace.locate_bound_number(tensor_line(fn, reference, *args), fn, reference, args)


REPEAT = cell("def repeat(q, k):\n"
              "    n_rep = q.shape[1] // k.shape[1]\n"
              "    kr = k.repeat_interleave(n_rep, dim=1)\n"
              "    return q * kr\n", "repeat")
Q, K = randn(2, 6, 3, 4, seed=0), randn(2, 2, 3, 4, seed=1)


def test_a_group_size_computed_wrong_is_named_on_its_own_line_with_the_number_that_makes_it_right():
    # k heads // q heads = 0: repeat_interleave(0) gives no heads; the first wrong tensor is on line 3
    wrong = cell("def f(q, k):\n"
                 "    n_rep = k.shape[1] // q.shape[1]\n"
                 "    kr = k.repeat_interleave(n_rep, dim=1)\n"
                 "    return q * kr\n")
    assert tensor_line(wrong, REPEAT, Q, K).line == 3
    found = number_line(wrong, REPEAT, Q, K)
    assert (found.line, found.also, found.kind) == (2, 3, "number")
    assert found.facts[0] == "the number this line binds is 0, read at line 3"
    assert found.facts[1].startswith("with 3 in its place your function returns the reference's result")
    assert "n_rep" not in " ".join(found.facts)  # the learner's names are not said back


def test_of_several_numbers_bound_on_one_line_the_wrong_one_is_told_by_its_place():
    # the number of groups (2) taken for their size (3): start is right, the second number is not
    reference = cell("def step(x, past, n_heads, n_kv):\n"
                     "    start = past.shape[2]\n"
                     "    y = torch.cat((past, x), dim=2)\n"
                     "    return y.repeat_interleave(n_heads // n_kv, dim=1) * start\n", "step")
    wrong = cell("def f(x, past, n_heads, n_kv):\n"
                 "    start, n_rep = past.shape[2], n_kv\n"
                 "    y = torch.cat((past, x), dim=2)\n"
                 "    return y.repeat_interleave(n_rep, dim=1) * start\n")
    x, past = randn(1, 2, 3, 4, seed=2), randn(1, 2, 5, 4, seed=3)
    found = number_line(wrong, reference, x, past, 6, 2)
    assert (found.line, found.also) == (2, 4)
    assert found.facts[0] == "the second of the 2 values this line binds is 2, read at line 4"
    assert found.facts[1].startswith("with 3 in its place")


def test_a_number_right_for_some_inputs_is_named_on_the_inputs_it_is_wrong_for():
    # the group count taken for the group size: right for 4 heads over 2, wrong for 6 over 2
    reference = cell("def group(q, k, n_heads, n_kv):\n"
                     "    return k.repeat_interleave(n_heads // n_kv, dim=1) * q\n", "group")
    wrong = cell("def f(q, k, n_heads, n_kv):\n"
                 "    n_rep = n_kv\n"
                 "    return k.repeat_interleave(n_rep, dim=1) * q\n")
    q4 = randn(2, 4, 3, 4, seed=4)
    assert number_line(wrong, reference, q4, K, 4, 2) is None  # right there: nothing to locate
    found = number_line(wrong, reference, Q, K, 6, 2)  # raises: 4 heads against 6
    assert (found.line, found.also) == (2, 3)
    assert found.facts[0].endswith("is 2, read at line 3") and found.facts[1].startswith("with 3 in its place")


def test_a_scale_multiplied_where_the_reference_divides_is_named_with_the_reciprocal():
    reference = cell("def scores(q, k):\n"
                     "    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n", "scores")
    wrong = cell("def f(q, k):\n"
                 "    scale = q.shape[-1] ** 0.5\n"
                 "    return (q @ k.transpose(-2, -1)) * scale\n")
    q, k = randn(2, 3, 5, 8, seed=5), randn(2, 3, 5, 8, seed=6)
    found = number_line(wrong, reference, q, k)
    assert (found.line, found.also) == (2, 3)
    assert found.facts[0] == "the number this line binds is 2.82843, read at line 3"
    assert found.facts[1].startswith("with 0.353553 in its place")


def test_a_start_position_one_short_is_named_where_it_is_computed():
    reference = cell("def window(table, past, x):\n"
                     "    start = past.shape[1]\n"
                     "    return table[start:start + x.shape[1]] + x\n", "window")
    wrong = cell("def f(table, past, x):\n"
                 "    start = past.shape[1] - 1\n"
                 "    return table[start:start + x.shape[1]] + x\n")
    table, past, x = randn(10, 4, seed=7), randn(1, 5, 4, seed=8), randn(1, 3, 4, seed=9)
    assert tensor_line(wrong, reference, table, past, x).line == 3
    found = number_line(wrong, reference, table, past, x)
    assert (found.line, found.also) == (2, 3)
    assert found.facts[0] == "the number this line binds is 4, read at line 3"
    assert found.facts[1].startswith("with 5 in its place")


def test_a_number_already_shown_beside_the_line_that_reads_it_keeps_that_place_and_gets_the_measured_fix():
    # the slice's sizes are read on line 2: the tensor tracer shows both lines already, with the slices measured
    reference = cell("def rope(x, table, start):\n"
                     "    T = x.shape[-2]\n"
                     "    cos = table[start:start + T]\n"
                     "    return x * cos\n", "rope")
    wrong = cell("def f(x, table, start):\n"
                 "    T = x.shape[-1]\n"
                 "    cos = table[start:start + T]\n"
                 "    return x * cos\n")
    x, table = randn(2, 5, 8, seed=13), randn(20, 8, seed=14)
    shown = tensor_line(wrong, reference, x, table, 0)
    assert (shown.line, shown.also, shown.kind) == (3, 2, "sizes")
    found = number_line(wrong, reference, x, table, 0)
    assert (found.line, found.also, found.kind) == (3, 2, "sizes")
    assert found.facts[-1].startswith("with 5 in place of 8, the number line 2 binds, your function returns the "
                                      "reference's result")


@pytest.mark.parametrize("after", ["", "    return x.reshape(B, n_kv * n_rep, T, hd)\n"])
def test_a_right_number_read_where_another_belongs_is_not_blamed_on_its_line(after):
    # n_kv is the number of kv heads, rightly; the line reads it where n_rep belongs, which no line that runs
    # reads (a line after the return never runs): either line may be the one to change, so neither is named
    reference = cell("def repeat_kv(x, n_rep):\n"
                     "    return x.repeat_interleave(n_rep, dim=1)\n", "repeat_kv")
    wrong = cell("def f(x, n_rep):\n"
                 "    B, n_kv, T, hd = x.shape\n"
                 "    return x.repeat_interleave(n_kv, dim=1)\n" + after)
    x = randn(2, 3, 5, 4, seed=15)
    shown = tensor_line(wrong, reference, x, 2)
    assert shown is not None and shown.line == 3
    assert trace.locate_bound_number(shown, wrong, reference, (x, 2)) is None


def test_a_right_number_computed_another_way_adds_nothing_to_a_later_mistake():
    # n_rep is 3 here too, computed otherwise; the mistake is the factor on line 4, which no number on line 2 undoes
    wrong = cell("def f(q, k):\n"
                 "    n_rep = len(range(q.size(1))) // k.size(1)\n"
                 "    kr = k.repeat_interleave(n_rep, dim=1)\n"
                 "    return q * kr * 2\n")
    found = tensor_line(wrong, REPEAT, Q, K)
    assert found is not None and found.line == 4
    assert trace.locate_bound_number(found, wrong, REPEAT, (Q, K)) is None


def test_two_numbers_that_each_make_the_result_right_name_neither():
    # x·2·2 where the reference has x·3·2: a = 3 or b = 3 each give it, so which is wrong cannot be told
    reference = cell("def twice(x):\n"
                     "    f = 3\n"
                     "    return x * f * 2\n", "twice")
    wrong = cell("def f(x):\n"
                 "    a = 2\n"
                 "    b = 2\n"
                 "    return x * a * b\n")
    x = randn(4, 5, seed=10)
    assert tensor_line(wrong, reference, x) is not None
    assert number_line(wrong, reference, x) is None


def test_a_number_bound_in_a_loop_is_not_run_again_with_another():
    # the same name bound anew at each step: one number in its place would be another program, not a fix
    reference = cell("def walk(x):\n"
                     "    for i in range(3):\n"
                     "        x = x * 2\n"
                     "    return x\n", "walk")
    wrong = cell("def f(x):\n"
                 "    for i in range(3):\n"
                 "        step = i + 1\n"
                 "        x = x * step\n"
                 "    return x\n")
    x = randn(4, 5, seed=11)
    found = tensor_line(wrong, reference, x)
    assert trace.locate_bound_number(found, wrong, reference, (x,)) is None


def test_the_runs_again_leave_the_random_state_as_they_found_it():
    reference = cell("def noisy(x, g):\n"
                     "    scale = 2.0\n"
                     "    return x * scale + torch.rand(x.shape, generator=g)\n", "noisy")
    wrong = cell("def f(x, g):\n"
                 "    scale = 3.0\n"
                 "    return x * scale + torch.rand(x.shape, generator=g)\n")
    x = randn(4, 5, seed=12)
    g = torch.Generator().manual_seed(0)
    located = tensor_line(wrong, reference, x, g)
    before, global_before = g.get_state(), torch.get_rng_state()
    found = trace.locate_bound_number(located, wrong, reference, (x, g))
    assert torch.equal(g.get_state(), before) and torch.equal(torch.get_rng_state(), global_before)
    # each run draws what the reference drew: the scale alone differs, and 2 in its place gives the result
    assert found is not None and found.line == 2 and found.facts[1].startswith("with 2 in its place")


def test_a_function_run_in_the_graders_process_is_not_run_again():
    wrong = cell("def f(q, k):\n"
                 "    n_rep = k.shape[1] // q.shape[1]\n"
                 "    kr = k.repeat_interleave(n_rep, dim=1)\n"
                 "    return q * kr\n")
    found = tensor_line(wrong, REPEAT, Q, K)
    wrong.recheck_trace = lambda args, kwargs: None  # as the grader's proxy for code run in the jailed process
    assert trace.locate_bound_number(found, wrong, REPEAT, (Q, K)) is None


def test_a_number_that_makes_a_loop_run_long_stops_the_runs_and_says_nothing():
    # 4000 (a number the reference holds) bound in place of 3 makes the loop 4000³ steps long: the runs stop at
    # their deadline, and since that run could have been right too, nothing is said
    reference = cell("def times(x):\n"
                     "    big = 4000\n"
                     "    n = x.shape[0]\n"
                     "    return x * n\n", "times")
    wrong = cell("def f(x):\n"
                 "    n = x.shape[0] - 1\n"
                 "    for _ in range(n ** 3):\n"
                 "        pass\n"
                 "    return x * n\n")
    x = randn(4, 5, seed=16)
    found = tensor_line(wrong, reference, x)
    assert found is not None and found.line == 5
    started = time.perf_counter()
    assert trace.locate_bound_number(found, wrong, reference, (x,)) is None
    assert time.perf_counter() - started < numbers.MAX_SECONDS + numbers.MAX_SECONDS_PER_RUN + 2


def test_a_function_handed_an_object_it_may_change_is_not_run_again():
    # a cache object is no copy a run can have of its own: each run would grow it for the next and for the check
    class Store:
        def __init__(self):
            self.calls = 0
    wrong = cell("def f(q, k, store):\n"
                 "    store.calls += 1\n"
                 "    n_rep = k.shape[1] // q.shape[1]\n"
                 "    kr = k.repeat_interleave(n_rep, dim=1)\n"
                 "    return q * kr\n")
    reference = cell("def ref(q, k, store):\n"
                     "    n_rep = q.shape[1] // k.shape[1]\n"
                     "    return q * k.repeat_interleave(n_rep, dim=1)\n", "ref")
    store = Store()
    found = tensor_line(wrong, reference, Q, K, store)
    calls = store.calls
    assert found is not None and trace.locate_bound_number(found, wrong, reference, (Q, K, store)) is None
    assert store.calls == calls
