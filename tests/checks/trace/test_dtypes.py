"""Where a result's dtype goes wrong (autograder/checks/trace/dtypes.py):
the first step on the result's path that turns values of the wanted dtype
into the result's, read off the learner's own trace, and, through a check's
row whose values are right in another dtype, the Where line it gives. What
the line is said to read and give is what it read and gave."""
from __future__ import annotations

import pytest
import torch

from autograder.checks import CheckFailed, trace
from autograder.checks.framework.check import Check
from ...helpers import define_in_cell

ROTATE = ("def rotate(x, cos, sin, start):\n"
          "    T = x.shape[-2]\n"
          "    cos = cos[start:start + T]\n"
          "    sin = sin[start:start + T]\n"
          "    return x * cos + x.flip(-1) * sin\n")


def _x16():
    return torch.randn(2, 3, 5, 6, generator=torch.Generator().manual_seed(0)).half()


def _tables(n=12, d=6):
    angles = torch.arange(n, dtype=torch.float32)[:, None] * torch.linspace(0.1, 1.0, d)
    return angles.cos(), angles.sin()


def _recorded(source, name, *args):
    return trace.record(define_in_cell(source, name), args, learner=True)


def test_a_mixed_pair_is_placed_where_it_is_mixed_beside_the_line_making_the_other_dtype():
    found = trace.locate_promotion(_recorded(ROTATE, "rotate", _x16(), *_tables(), 2), torch.float16)
    assert found is not None and found.kind == "promoted"
    assert found.code == "return x * cos + x.flip(-1) * sin"
    assert found.also == found.line - 2 and found.also_code == "cos = cos[start:start + T]"
    fact, = found.facts
    assert fact.startswith("mul reads float16 and float32 (made on line") and "gives float32" in fact
    assert fact.endswith("every later step to your result keeps float32")


def test_a_cast_never_given_back_is_placed_on_the_result_beside_the_cast():
    source = ("def norm(x, eps):\n"
              "    x32 = x.float()\n"
              "    scale = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)\n"
              "    return x32 * scale\n")
    found = trace.locate_promotion(_recorded(source, "norm", _x16(), 1e-5), torch.float16)
    assert found is not None and found.kind == "uncast"
    assert found.code == "return x32 * scale" and found.also_code == "x32 = x.float()"
    assert found.facts == [f"float on line {found.also} turns a float16 value into float32, and no step from there "
                           "to your result casts back"]


def test_a_result_cast_back_gives_no_place():
    source = ("def norm(x, eps):\n"
              "    x32 = x.float()\n"
              "    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)\n")
    assert trace.locate_promotion(_recorded(source, "norm", _x16(), 1e-5), torch.float16) is None


def test_a_step_that_leaves_and_comes_back_is_not_said_to_keep_the_dtype():
    source = ("def f(x, w):\n"
              "    y = x * w\n"
              "    z = y.half() + 1\n"
              "    return z.float() * 2\n")
    w = torch.ones(6)
    found = trace.locate_promotion(_recorded(source, "f", _x16(), w), torch.float16)
    assert found is not None and found.code == "y = x * w"
    assert "keeps" not in found.facts[0]


def _rotate_check(fn, compare_with_another_call=False):
    cos, sin = _tables()
    x = _x16()
    chk = Check("rotate", expects="x rotated, in x's dtype")
    got = chk.call(fn, x, cos, sin, 2)
    want = (x.double() * cos[2:7].double() + x.double().flip(-1) * sin[2:7].double()).half()
    if compare_with_another_call:
        chk.call(fn, x[:1], cos, sin, 2)  # the row below reads the first call's result, not this one's
    chk.compare("float16 x, float32 tables", got, want, atol=1e-2, rtol=1e-2)
    chk.finish()


def test_a_check_row_right_in_another_dtype_gets_the_place_on_the_learners_own_call():
    with pytest.raises(CheckFailed) as err:
        _rotate_check(define_in_cell(ROTATE, "rotate"))
    located = err.value.diagnosis.located
    assert located["kind"] == "promoted" and located["code"] == "return x * cos + x.flip(-1) * sin"
    assert "the values leave the dtype the result must have here" in str(err.value)


def test_a_row_read_from_an_earlier_call_than_the_last_gets_no_place():
    with pytest.raises(CheckFailed) as err:
        _rotate_check(define_in_cell(ROTATE, "rotate"), compare_with_another_call=True)
    assert err.value.diagnosis.located is None


MADE = ("def scaled(x, table):\n"
        "    positions = torch.arange(x.shape[-1]) / 2\n"
        "    return x * table + positions\n")


def test_a_tensor_made_in_the_callers_default_dtype_is_placed_on_the_factory_that_made_it():
    x, table = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        found = trace.locate_made_in_default(_recorded(MADE, "scaled", x.float(), table.float()))
    finally:
        torch.set_default_dtype(before)
    # the division of int64 positions gives the default dtype; x * table reads float32 only and gives float32
    assert found is not None and found.kind == "dtype" and found.code == "positions = torch.arange(x.shape[-1]) / 2"
    assert found.facts == ["div here makes a float64 tensor from int64: the caller's default dtype"]


def test_a_result_in_the_inputs_dtype_has_no_line_made_in_the_default():
    recorded = _recorded(MADE, "scaled", torch.randn(3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64))
    assert trace.locate_made_in_default(recorded) is None
