"""The learner's wrong line, found by measurement (autograder/checks/trace/),
and the regimes every exercise declares (autograder/checks/contracts/).

Each wrong function here is written as a learner would, in a "cell" whose
source is registered with linecache as IPython registers a notebook cell's;
the located line must be the one that is wrong, and where two lines could
each be wrong the tracer must say nothing."""
from __future__ import annotations

import contextlib
import io
import linecache
import math

import pytest
import torch
import torch.nn.functional as F

import tinylm
from autograder.checks import CheckFailed, check_causal_attention, check_layer_norm, check_rms_norm, check_top_k_filter
from autograder.checks import contracts, core, trace
from autograder.checks.framework import calling
from autograder.checks.attention import attention_steps
from autograder.checks.core import independent_copy, randn
from autograder.checks.norms import rms_norm_steps

from ..helpers import define_in_cell


def cell(source: str, name: str):
    """Define `name` from `source` as a notebook cell would (its lines readable by the tracer)."""
    return define_in_cell(source, name)


def located(fn, reference, *args):
    mine = trace.record(fn, args, learner=True)
    theirs = trace.record(reference, args, learner=False)
    return trace.locate(mine, theirs)


X, W = randn(2, 3, 5, 8, seed=0), 1 + 0.5 * randn(8, seed=1)


@pytest.mark.parametrize("wrong_line, source, beside", [
    (3, "def f(x, weight, eps):\n    x32 = x.float()\n    ms = x32.abs().mean(dim=-1, keepdim=True)\n"
        "    return weight * (x32 * torch.rsqrt(ms + eps)).to(x.dtype)\n", None),
    (3, "def f(x, weight, eps):\n    x32 = x.float()\n    ms = x32.pow(2).mean(dim=1, keepdim=True)\n"
        "    return weight * (x32 * torch.rsqrt(ms + eps)).to(x.dtype)\n", "the reference's mean"),
    (4, "def f(x, weight, eps):\n    x32 = x.float()\n    ms = x32.pow(2).mean(dim=-1, keepdim=True)\n"
        "    inv = torch.rsqrt(ms + eps * eps)\n    return weight * (x32 * inv).to(x.dtype)\n", "the reference's add"),
])
def test_the_first_wrong_value_is_located_on_its_line(wrong_line, source, beside):
    """A reference call is set beside the learner's line only where the tracer aligned them by value (a
    call of the same kind); abs, a call the reference never makes, is said alone."""
    found = located(cell(source, "f"), rms_norm_steps, X, W, 0.5)  # an eps large enough that eps² differs
    assert found is not None and found.line == wrong_line, found
    assert found.code == linecache.getline(found.file, wrong_line).strip()
    shown = [f for f in found.facts if "the reference" in f]
    assert (any(beside in f for f in shown) if beside else not shown), found.facts


def test_a_step_missing_at_the_end_points_at_the_value_returned():
    source = ("def f(x, weight, eps):\n    x32 = x.float()\n    y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)\n"
              "    return y.to(x.dtype)\n")
    found = located(cell(source, "f"), rms_norm_steps, X, W, 1e-6)
    assert found is not None and found.kind == "output" and {found.line, found.also} & {3, 4}


def test_a_value_spoiled_by_overflow_is_placed_where_it_overflows_not_at_the_return():
    """exp of logits past 88 is inf, inf / inf is nan, and a comparison with nan is False: the nucleus mask drops
    nothing, so the output equals the input logits, a value the reference has. The route through nan is no right
    route: the line whose exp overflowed is the place."""
    from autograder.checks.sampling import top_p_steps
    source = ("def f(logits, p):\n    sorted_logits, order = logits.sort(dim=-1, descending=True)\n"
              "    probs = sorted_logits.exp() / sorted_logits.exp().sum(dim=-1, keepdim=True)\n"
              "    before = probs.cumsum(dim=-1) - probs\n    drop = (before >= p).scatter(-1, order, before >= p)\n"
              "    return logits.masked_fill(drop, float('-inf'))\n")
    logits = randn(3, 11, seed=1) * 2
    assert located(cell(source, "f"), top_p_steps, logits, 0.5) is None  # right for logits of ordinary size
    found = located(cell(source, "f"), top_p_steps, logits + 1000, 0.5)
    assert found is not None and found.line == 3 and "not finite" in found.facts[0], found


def test_another_right_route_is_not_blamed_and_two_suspects_give_no_line():
    right = cell("def f(x, weight, eps):\n    s = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n"
                 "    y = x / s\n    return y * weight\n", "f")
    assert located(right, rms_norm_steps, X, W, 1e-6) is None
    # weight * x is a value the reference never has, and so is rsqrt(mean) without eps: either line may be the bug
    two = cell("def f(x, weight, eps):\n    wx = weight * x\n    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True))\n"
               "    return wx * r\n", "f")
    assert located(two, rms_norm_steps, X, W, 1e-6) is None


def test_a_skipped_step_and_a_value_in_another_role_name_both_lines():
    q, k, v = (randn(2, 3, 6, 4, seed=s) for s in (1, 2, 3))
    unscaled = cell("def f(q, k, v):\n    scores = q @ k.transpose(-2, -1)\n"
                    "    mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()\n"
                    "    scores = scores.masked_fill(~mask, float('-inf'))\n    return scores.softmax(-1) @ v\n", "f")
    found = located(unscaled, attention_steps, q, k, v)
    assert found is not None and found.kind == "missing" and {found.line, found.also} == {2, 4}
    keys_as_values = cell("def f(q, k, v):\n    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                          "    mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()\n"
                          "    weights = scores.masked_fill(~mask, float('-inf')).softmax(-1)\n"
                          "    return weights @ k\n", "f")
    found = located(keys_as_values, attention_steps, q, k, v)
    assert found is not None and found.line == 5 and found.kind == "role_read"  # k is an argument: no line made it


def test_a_split_in_the_wrong_order_is_wrong_where_it_is_made():
    x = randn(2, 5, 12, seed=4)
    swapped = cell("def f(x, n_heads):\n    B, T, d = x.shape\n    x = x.view(B, T, d // n_heads, n_heads)\n"
                   "    return x.transpose(1, 2)\n", "f")
    from autograder.checks.attention import split_heads_steps
    found = located(swapped, split_heads_steps, x, 3)
    assert found is not None and found.line == 3


def test_a_table_row_read_for_every_position_is_located_where_it_is_sliced():
    """cos[start_pos] is one row broadcast over every position; at start_pos 0 it is a row of ones (sin's of zeros),
    so the rotation gives x back, a value the reference has: a step returning a value it read proves nothing about
    its other operand. cos and sin are sliced alike on two lines: the first is the place."""
    from autograder.checks.rope import apply_rope_steps, ref_tables
    cos, sin = ref_tables(8, 12)
    source = ("def f(x, cos, sin, start_pos=0):\n    cos = cos[{rows}].to(x.dtype)\n    sin = sin[{rows}].to(x.dtype)\n"
              "    x1, x2 = x.chunk(2, dim=-1)\n    return x * cos + torch.cat((-x2, x1), dim=-1) * sin\n")
    one_row = cell(source.format(rows="start_pos"), "f")
    for start_pos in (0, 3):
        found = located(one_row, apply_rope_steps, X, cos, sin, start_pos)
        assert found is not None and found.line == 2 and found.kind == "value", found
        assert any("(8,)" in f and "(5, 8)" in f for f in found.facts)
    right = cell(source.format(rows="start_pos:start_pos + x.shape[-2]"), "f")
    assert all(located(right, apply_rope_steps, X, cos, sin, s) is None for s in (0, 3))


def test_a_normalisation_over_another_axis_is_located_although_the_reference_reads_its_input_reshaped():
    from autograder.checks.training import lm_loss_steps
    logits, targets = randn(3, 5, 7, seed=2), torch.randint(7, (3, 5), generator=torch.Generator().manual_seed(0))
    source = ("def f(logits, targets):\n    logp = F.log_softmax(logits, dim={dim})\n"
              "    return F.nll_loss(logp.flatten(0, 1), targets.flatten(), ignore_index=-100)\n")
    found = located(cell(source.format(dim=1), "f"), lm_loss_steps, logits, targets)
    assert found is not None and found.line == 2, found
    assert "over axis 1 (size 5)" in found.facts[0] and "over axis -1 (size 7)" in found.facts[-1]
    assert not any("_stacklevel" in f for f in found.facts)  # torch's own argument, not the learner's
    assert located(cell(source.format(dim=-1), "f"), lm_loss_steps, logits, targets) is None


def test_the_values_match_up_to_layout_but_not_up_to_a_scramble():
    values = trace.Values(trace.record(lambda t: t.transpose(1, 2).reshape(2, 5, 12), (randn(2, 3, 5, 4, seed=0),),
                                       learner=False))
    ref = randn(2, 3, 5, 4, seed=0)
    assert values.owners(ref.transpose(1, 2))                    # a permutation of a reference value
    assert values.owners(ref.transpose(1, 2).reshape(10, 12))    # then merged
    assert not values.owners(ref.reshape(2, 5, 3, 4))            # the same numbers in a scrambled layout
    assert not values.owners(ref.transpose(1, 2) * 1.01)


def test_a_mask_over_two_axes_of_one_size_is_not_matched_transposed():
    """tril() transposed is triu(): for 0/1 values a swap of two axes of one size is another mask, while floating
    values (scores read k @ q^T) are matched transposed and go wrong at the softmax that reads them."""
    values = trace.Values(trace.record(lambda n: torch.ones(n, n, dtype=torch.bool).tril(), (5,), learner=False))
    assert values.owners(torch.ones(5, 5, dtype=torch.bool).tril())
    assert not values.owners(torch.ones(5, 5, dtype=torch.bool).triu())
    scores = randn(2, 5, 5, seed=1)
    values = trace.Values(trace.record(lambda t: t * 2, (scores,), learner=False))
    assert values.owners((scores * 2).transpose(-2, -1))
    wide = trace.Values(trace.record(lambda n: torch.ones(n, n + 2, dtype=torch.bool).tril(), (5,), learner=False))
    assert wide.owners(torch.ones(5, 7, dtype=torch.bool).tril().T)  # axes of two sizes: a layout change


# -- regimes -------------------------------------------------------------------------
def _failure(check, fn, **kw) -> CheckFailed:
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(CheckFailed) as err:
        check(fn, **kw)
    return err.value


def test_a_float32_only_answer_fails_in_float64_with_the_line():
    fixed = cell("def rms_norm(x, weight, eps=1e-6):\n    x32 = x.float()\n"
                 "    inv = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)\n"
                 "    return (weight * x32 * inv).to(torch.float32)\n", "rms_norm")
    d = _failure(check_rms_norm, fixed).diagnosis
    assert d.regime is None or "float" in d.regime["text"]
    assert any("float32" in b for b in d.likely_bugs)


def test_a_squeeze_fails_for_a_batch_of_one():
    squeezed = cell("def top_k_filter(logits, k):\n    kth = logits.topk(min(k, logits.shape[-1]), dim=-1).values[..., -1:]\n"
                    "    return logits.masked_fill(logits < kth, float('-inf')).squeeze()\n", "top_k_filter")
    d = _failure(check_top_k_filter, squeezed).diagnosis
    assert d.regime is not None and d.regime["text"].startswith("right for batch") and "batch 1" in d.regime["text"]


def test_a_view_fails_on_a_non_contiguous_input_and_the_line_is_shown():
    viewing = cell("def layer_norm(x, weight, bias, eps=1e-5):\n    flat = x.view(-1, x.shape[-1])\n"
                   "    y = F.layer_norm(flat, (flat.shape[-1],), weight, bias, eps)\n    return y.view(x.shape)\n",
                   "layer_norm")
    d = _failure(check_layer_norm, viewing).diagnosis
    assert d.regime["name"] == "non-contiguous x" and "raises" in d.regime["text"]
    assert d.located["line"] == 2 and "x.view" in d.located["code"]


def test_a_gradient_cut_off_a_branch_is_located():
    cut = cell("def causal_attention(q, k, v):\n    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
               "    mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril(k.shape[-2] - q.shape[-2])\n"
               "    weights = scores.masked_fill(~mask, float('-inf')).softmax(-1).detach()\n"
               "    return weights @ v\n", "causal_attention")
    d = _failure(check_causal_attention, cut).diagnosis
    assert d.regime["name"].startswith("gradient") and d.located["line"] == 4 and d.located["kind"] == "grad"


def test_a_parameter_with_no_effect_is_named():
    contract = contracts.Contract("scale", lambda x, factor=2.0: x * factor, lambda: [("x", (torch.ones(3), 2.0), {})],
                                  names=("x", "factor"), dtypes=(), params=(("factor", 3.0),))
    chk = core.Check("scale")
    contracts.run_contract(chk, lambda x, factor=2.0: x * 2.0, contract)
    assert not chk.passed and any("`factor` has no effect" in b for b in chk.diagnoses)


def test_correct_answers_pass_every_regime():
    """tinylm's implementations, as answers, in float32, float64 and bfloat16 (the regimes) and on CPU."""
    with contextlib.redirect_stdout(io.StringIO()):
        for check, name in ((check_rms_norm, "rms_norm"), (check_causal_attention, "causal_attention"),
                            (check_top_k_filter, "top_k_filter")):
            check(independent_copy(getattr(tinylm, name)))
        check_rms_norm(independent_copy(tinylm.rms_norm), dtype=torch.float64, seed=3)


# -- what a learner function may do to a check --------------------------------------------
def test_a_hanging_function_is_stopped_with_its_line(monkeypatch):
    monkeypatch.setattr(calling, "CALL_TIME_LIMIT", 0.3)
    hang = cell("def rms_norm(x, weight, eps=1e-6):\n    while True:\n        try:\n            pass\n"
                "        except Exception:\n            pass\n", "rms_norm")
    err = _failure(check_rms_norm, hang)
    assert "LearnerTimeout" in str(err) and "did not return within" in str(err)
    assert err.diagnosis.kind == "raised" and err.diagnosis.located["line"] in (2, 3, 4)


def test_a_flood_of_printing_is_cut():
    chatty = cell("def rms_norm(x, weight, eps=1e-6):\n    print('x' * 100000)\n    x32 = x.float()\n"
                  "    return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)\n",
                  "rms_norm")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check_rms_norm(chatty)
    assert len(out.getvalue()) < 30000 and "more characters printed" in out.getvalue()


def test_the_tracers_own_failure_is_never_the_learners(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("the tracer broke")
    monkeypatch.setattr(trace, "locate", broken)
    wrong = cell("def rms_norm(x, weight, eps=1e-6):\n    return weight * x * torch.rsqrt(x.abs().mean(-1, keepdim=True) + eps)\n",
                 "rms_norm")
    err = _failure(check_rms_norm, wrong)
    assert "tracer broke" not in str(err) and err.diagnosis.located is None
    assert err.diagnosis.kind == "failed"


def test_a_module_that_ignores_norm_eps_is_named_with_the_norm():
    from torch import nn

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.attn_norm = tinylm.RMSNorm(config.d_model, config.norm_eps)
            self.attn = tinylm.Attention(config)
            self.mlp_norm = tinylm.RMSNorm(config.d_model)  # the default eps, whatever config.norm_eps says
            self.mlp = tinylm.SwiGLU(config)

        def forward(self, x, cos, sin, cache=None, layer_idx=0):
            x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer_idx)
            return x + self.mlp(self.mlp_norm(x))
    from autograder.checks import check_block
    d = _failure(check_block, Block).diagnosis
    assert d.regime["name"] == "config.norm_eps=0.25"
    assert any("`mlp_norm` uses an eps" in b and "config.norm_eps" in b for b in d.likely_bugs)
    assert not any("attn_norm" in b for b in d.likely_bugs)
