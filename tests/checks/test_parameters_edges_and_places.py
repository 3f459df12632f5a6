"""Every number argument of an exercise at another value, the exact edges of
a domain, results autograd would refuse or one axis apart, counts off by a
measured set of parameters, and the tracer's places for results unpacked in
another order, a value made in another layout and a count made a float.
Right implementations are written from torch built-ins; wrong ones differ
from them by one mistake."""
from __future__ import annotations

import importlib
import math
import pkgutil

import pytest
import torch

import tinylm
import autograder.checks as checks
from autograder.checks import check_layer_norm, check_lr_schedule, check_top_p_filter
from autograder.checks import contracts, trace
from autograder.checks.accounting import SMOLLM2_135M, kv_cache_nbytes, positions_counted, roles_apart
from autograder.checks.core import Check
from autograder.checks.gqa import GQA_ATTENTION
from autograder.checks.norms import LAYER_NORM
from autograder.checks.perplexity_bigram import BIGRAM_NLL
from autograder.checks.rope import ROPE_CACHE

from ..helpers import check_failure, diagnosis_texts


def _contracts() -> list:
    found = {}
    for info in pkgutil.iter_modules(checks.__path__):
        for value in vars(importlib.import_module(f"autograder.checks.{info.name}")).values():
            if isinstance(value, contracts.Contract):
                found[value.exercise] = value
    return sorted(found.values(), key=lambda c: c.exercise)


# -- number arguments ----------------------------------------------------------------------
@pytest.mark.parametrize("contract", _contracts(), ids=lambda c: c.exercise)
def test_every_number_argument_is_varied_or_declared_fixed(contract):
    assert contracts.unvaried_numbers(contract) == [], \
        "give it a parameter regime (Contract.params), vary it over the cases, or say in Contract.fixed why not"


def layer_norm_right(x, weight, bias, eps=1e-5):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps)


def layer_norm_own_eps(x, weight, bias, eps=1e-5):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, 1e-5)


def test_a_right_layer_norm_passes_another_eps_and_a_written_in_one_is_named():
    assert check_failure(check_layer_norm, layer_norm_right) is None
    err = check_failure(check_layer_norm, layer_norm_own_eps)
    assert err is not None and "`eps` has no effect" in diagnosis_texts(err) and "eps=0.25" in diagnosis_texts(err)


# -- exact edges of a domain -----------------------------------------------------------------
def _top_p(logits, p, strict: bool):
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs
    drop = before > p if strict else before >= p
    return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))


def test_a_nucleus_whose_mass_before_a_token_is_exactly_p_keeps_two_tokens_only():
    assert check_failure(check_top_p_filter, lambda logits, p: _top_p(logits, p, strict=False)) is None
    err = check_failure(check_top_p_filter, lambda logits, p: _top_p(logits, p, strict=True))
    assert err is not None and err.diagnosis.regime["name"] == "mass exactly p"


def _schedule(step, warmup_steps, total_steps, max_lr, min_lr, guard: bool):
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    decay = total_steps - 1 - warmup_steps
    progress = min(1.0, (step - warmup_steps) / (max(1, decay) if guard else decay))
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


def test_a_schedule_with_one_step_after_the_warmup_divides_by_nothing():
    assert check_failure(check_lr_schedule, lambda *a: _schedule(*a, guard=True)) is None
    err = check_failure(check_lr_schedule, lambda *a: _schedule(*a, guard=False))
    assert err is not None and "total_steps 11 = warmup_steps + 1" in err.diagnosis.failed_rows[0]
    assert any("max(1, total_steps - 1 - warmup_steps)" in bug for bug in err.diagnosis.likely_bugs)


# -- what a result is used for next, and its shape ---------------------------------------------
def test_an_inference_tensor_fails_its_row_with_the_measurement():
    chk = Check("generate", expects="ids")
    want = torch.arange(6).view(2, 3)
    with torch.inference_mode():
        got = torch.arange(6).view(2, 3)
    assert not chk.compare("ids", got, want)
    assert "inference tensor" in chk.facts[0] and "no_grad" in chk.facts[0]
    assert Check("generate").compare("ids", want.clone(), want)


@pytest.mark.parametrize("got_shape, want_shape, words", [((4, 1), (4,), "an extra axis of size 1 at position 1"),
                                                          ((5, 7), (1, 5, 7), "the axis of size 1 at position 0 is missing")])
def test_a_result_one_size_one_axis_apart_is_measured(got_shape, want_shape, words):
    chk = Check("f", expects="a tensor")
    chk.compare("row", torch.zeros(got_shape), torch.zeros(want_shape))
    assert any(words in fact for fact in chk.facts)


# -- counts off by measured parameters ---------------------------------------------------------
def test_a_count_without_the_blocks_norm_gains_names_them():
    config = tinylm.ModelConfig(d_model=64, n_layers=3, n_heads=4)
    gains = 2 * config.n_layers * config.d_model          # attn_norm and mlp_norm, one d_model gain each per block
    said = roles_apart(config, -gains)
    assert "attn_norm.weight in every block" in said and "mlp_norm.weight in every block" in said
    assert "missing" in said and roles_apart(config, 0) is None
    assert roles_apart(config, -7) is None                 # no set of parameters has 7 numbers


def test_a_count_with_the_rope_buffers_names_them_and_a_missing_buffer_is_never_said():
    config = tinylm.ModelConfig(d_model=64, n_layers=3, n_heads=4)
    tables = 2 * config.max_seq_len * config.head_dim   # rope_cos and rope_sin, (max_seq_len, head_dim) each
    said = roles_apart(config, tables)
    assert said is not None and "buffers rope_cos and rope_sin are counted as weights" in said
    assert "model.parameters() only" in said
    assert roles_apart(config, -tables) is None or "buffer" not in roles_apart(config, -tables)  # never counted: never missing


def test_a_cache_counted_for_max_seq_len_positions_is_measured():
    config = SMOLLM2_135M
    kv_heads, head_dim = config.n_kv_heads, config.d_model // config.n_heads
    per_position = 2 * config.n_layers * kv_heads * head_dim * 4   # K and V, float32
    assert kv_cache_nbytes(config, 1, 1, torch.float32) == per_position
    said = positions_counted(config, per_position * config.max_seq_len, 1000, torch.float32)
    assert said is not None and "config.max_seq_len positions" in said
    assert positions_counted(config, per_position * 1000, 1000, torch.float32) is None


# -- the tracer's places ----------------------------------------------------------------------
def _place(fn, contract, args):
    mine, theirs = contracts.traces(fn, contract, args, {})
    return trace.locate_raise(mine, theirs) if mine.error is not None else trace.locate(mine, theirs)


def layer_norm_unpacked_in_another_order(x, weight, bias, eps=1e-5):
    mean, var = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    centred = x - mean
    return weight * centred * torch.rsqrt(var + eps) + bias


def test_results_of_one_call_unpacked_in_another_order_are_placed_at_that_call():
    _, args, _ = LAYER_NORM.cases()[0]
    found = _place(layer_norm_unpacked_in_another_order, LAYER_NORM, args)
    assert found is not None and found.kind == "swapped" and "var_mean" in found.code and found.also == found.line + 1


def rope_cache_angles_transposed(head_dim, max_seq_len, theta=10000.0):
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(inv_freq, torch.arange(max_seq_len, dtype=torch.float32))
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def test_a_value_made_in_another_layout_is_placed_where_it_is_made():
    _, args, _ = ROPE_CACHE.cases()[0]
    found = _place(rope_cache_angles_transposed, ROPE_CACHE, args)
    assert found is not None and found.kind == "layout" and "torch.outer" in found.code and "cat" in found.also_code


def bigram_pairs_backwards(train, val, alpha=0.5):
    train, val = train.long(), val.long()
    counts = torch.bincount(train[:-1] + 256 * train[1:], minlength=256 * 256).view(256, 256).double()
    probs = (counts + alpha) / (counts.sum(dim=1, keepdim=True) + 256 * alpha)
    return -probs.log()[val[:-1], val[1:]].mean().item()


def test_a_table_laid_out_transposed_is_placed_where_it_is_made():
    _, args, _ = BIGRAM_NLL.cases()[0]
    found = _place(bigram_pairs_backwards, BIGRAM_NLL, args)
    assert found is not None and found.kind == "layout" and "bincount" in found.code


def gqa_with_a_float_count(q, k, v):
    n_rep = q.shape[1] / k.shape[1]
    k = k[:, :, None].expand(k.shape[0], k.shape[1], n_rep, *k.shape[2:]).flatten(1, 2)
    v = v[:, :, None].expand(v.shape[0], v.shape[1], n_rep, *v.shape[2:]).flatten(1, 2)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_a_count_made_a_float_by_true_division_is_placed_at_the_division():
    _, args, _ = GQA_ATTENTION.cases()[0]
    found = _place(gqa_with_a_float_count, GQA_ATTENTION, args)
    assert found is not None and found.kind == "sizes" and "/" in found.code and "//" in found.facts[0]
