"""Regimes at the edges of an exercise's domain and measured facts about a
wrong answer: each new regime passes correct implementations written from
torch built-ins (and the notebooks' own solutions, float64 hidden tests
included) and fails the wrong behaviour with the measured text; the tracer
places a view that cannot merge strides, a call that reads an input before a
step the learner takes later, and an input read where the learner made the
value the reference reads."""
from __future__ import annotations

import contextlib
import io
import math
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import tinylm
from autograder.checks import (check_bigram_nll, check_causal_attention, check_embed, check_evaluate, check_generate,
                               check_generate_greedy, check_get_batch, check_layer_norm, check_swiglu, check_swiglu_hidden,
                               check_top_k_filter, check_train_step)
from autograder.checks import contracts, trace
from autograder.checks.core import Check, independent_copy, seeded
from autograder.checks.references.attention_step import _measure_cache_length
from autograder.checks.references.generation import tiny_model
from autograder.checks.model_shapes import list_lengths as _list_lengths
from autograder.checks.mlp import SWIGLU
from autograder.checks.perplexity import _measure_conversion
from autograder.checks.sampling import TIES, TOPK_MINUS, TOPK_PLUS, TOP_P_FILTER
from autograder.checks.spies import crossed_arguments, first_call_arguments

from ..helpers import check_failure, diagnosis_texts, greedy_with_cache

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_diagnostics  # noqa: E402


# -- causal attention: scores far below zero, inputs on another device -------------------
def _allowed(q, k):
    return torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril(k.shape[-2] - q.shape[-2])


def attention_sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=_allowed(q, k))


def attention_finfo_min(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return scores.masked_fill(~_allowed(q, k), torch.finfo(q.dtype).min).softmax(-1) @ v


def attention_asserting_finite(q, k, v):
    """Right, and reads a number from its inputs: the meta device cannot run it, which is not a mistake."""
    assert bool(torch.isfinite(q).all())
    return attention_sdpa(q, k, v)


def attention_finite_fill(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return scores.masked_fill(~_allowed(q, k), -1e4).softmax(-1) @ v


def attention_mask_on_cpu(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril(k.shape[-2] - q.shape[-2])
    return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v


@pytest.mark.parametrize("fn", [attention_sdpa, attention_finfo_min, attention_asserting_finite])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_right_attention_passes_the_far_below_zero_and_other_device_regimes(fn, dtype):
    assert check_failure(check_causal_attention, fn, dtype=dtype) is None


def test_a_finite_mask_fails_when_every_allowed_score_lies_far_below_zero():
    err = check_failure(check_causal_attention, attention_finite_fill)
    assert err is not None and err.diagnosis.regime["name"] == "scores far below zero"


def test_a_mask_left_on_the_cpu_fails_on_the_meta_device_with_the_measurement():
    err = check_failure(check_causal_attention, attention_mask_on_cpu)
    assert err is not None and err.diagnosis.regime["name"] == contracts.elsewhere_regime()
    assert contracts.on_a_gpu() or "meta device it raises" in diagnosis_texts(err)


# -- swiglu: pre-activations in the hundreds ---------------------------------------------
def swiglu_with(activation):
    return lambda x, w_gate, w_up, w_down: (activation(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


@pytest.mark.parametrize("activation", [F.silu, lambda a: a * torch.sigmoid(a), lambda a: a / (1 + torch.exp(-a))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_right_swiglu_passes_values_in_the_hundreds(activation, dtype):
    assert check_failure(check_swiglu, swiglu_with(activation), dtype=dtype) is None


@pytest.mark.parametrize("fn", [swiglu_with(F.silu), lambda x, g, u, d: F.linear(F.silu(F.linear(x, g)) * F.linear(x, u), d),
                                independent_copy(tinylm.swiglu)])
def test_right_swiglu_passes_half_precision(fn):
    assert check_failure(check_swiglu, fn) is None


def swiglu_gate_in_float32(x, w_gate, w_up, w_down):
    gate = F.silu((x @ w_gate.T).float())
    return (gate * (x @ w_up.T)) @ w_down.T


def test_a_gate_left_in_float32_fails_in_bfloat16_at_its_line():
    err = check_failure(check_swiglu, swiglu_gate_in_float32)
    assert err is not None and err.diagnosis.regime["text"] == "right in float32, raises in bfloat16"
    assert err.diagnosis.located["code"] == "gate = F.silu((x @ w_gate.T).float())"


def test_a_sigmoid_from_exp_of_a_positive_number_fails_values_in_the_hundreds():
    err = check_failure(check_swiglu, swiglu_with(lambda a: a * a.exp() / (1 + a.exp())))
    assert err is not None and err.diagnosis.regime["name"] == "x × 200"
    assert "inf or nan" in diagnosis_texts(err)


# -- swiglu_hidden: swept over every small width and power-of-two multiple ----------------
@pytest.mark.parametrize("hidden", [
    lambda d, m: m * math.ceil(8 * d / 3 / m),
    lambda d, m: m * -(-8 * d // (3 * m)),
    lambda d, m: (math.ceil(8 * d / 3) + m - 1) // m * m,
], ids=["float ceil", "integer ceil", "ceil then round up"])
def test_right_swiglu_hidden_passes_the_sweep(hidden):
    assert check_failure(check_swiglu_hidden, hidden) is None


def test_a_width_truncated_before_rounding_up_is_measured_on_the_sweep():
    # Meta's int(2 * 4d / 3), then up to the multiple: right with 32, one short with multiple 1 or 2
    err = check_failure(check_swiglu_hidden, lambda d, m: m * ((int(8 * d / 3) + m - 1) // m))
    said = diagnosis_texts(err)
    assert "first at swiglu_hidden(1, 1), where" in said and "wrong with multiple 1, 2, right for every d_model" in said
    assert "only where 8/3 · d_model has a fraction" in said and "each time one multiple short" in said
    assert "truncated to an int" in said, said


def test_a_sweep_failure_no_intermediate_rounding_explains_names_none():
    # right but for multiple 256, where it is one multiple more: measured, and no rounding of 8/3 · d_model named
    err = check_failure(check_swiglu_hidden, lambda d, m: m * math.ceil(8 * d / 3 / m) + (m if m == 256 else 0))
    said = diagnosis_texts(err)
    assert "wrong with multiple 256" in said and "truncated to an int" not in said and "nearest int" not in said, said


# -- top_k_filter: the law the kept count follows, at every k and batch size ---------------
def top_k_with(threshold, compare=lambda logits, kth: logits < kth):
    def top_k_filter(logits, k):
        kth = threshold(logits, k)
        return logits.masked_fill(compare(logits, kth), float("-inf"))
    return top_k_filter


top_k_right = top_k_with(lambda logits, k: logits.topk(min(k, logits.shape[-1]), dim=-1).values[..., -1:])
top_k_clamped_by_batch = top_k_with(lambda logits, k: logits.topk(min(k, logits.size(0)), dim=-1).values[..., -1:])
top_k_drops_the_kth = top_k_with(lambda logits, k: logits.topk(k, dim=-1).values[..., -1:], lambda l, kth: l <= kth)
top_k_second_to_last = top_k_with(lambda logits, k: logits.topk(k, dim=-1).values[..., -2:-1])
top_k_one_more = top_k_with(lambda logits, k: logits.sort(dim=-1, descending=True).values[..., k:k + 1])


def top_k_exactly_k(logits, k):
    top = logits.topk(k, dim=-1)
    return torch.full_like(logits, float("-inf")).scatter(-1, top.indices, top.values)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_right_top_k_passes(dtype):
    assert check_failure(check_top_k_filter, top_k_right, dtype=dtype) is None


def test_k_clamped_by_the_batch_size_is_read_off_the_counts_not_called_an_off_by_one():
    err = check_failure(check_top_k_filter, top_k_clamped_by_batch)
    texts = diagnosis_texts(err)
    assert "min(k, batch size)" in texts and "only its argmax" in texts
    assert "k=5: 1, 2, 3, 5" in texts  # the measured counts: batches of 1, 2, 3, 5 rows
    assert TOPK_MINUS not in texts and TOPK_PLUS not in texts


@pytest.mark.parametrize("fn, bug", [(top_k_drops_the_kth, TOPK_MINUS), (top_k_second_to_last, TOPK_MINUS),
                                     (top_k_one_more, TOPK_PLUS), (top_k_exactly_k, TIES)])
def test_an_off_by_one_or_dropped_ties_is_named_when_every_k_and_batch_size_shows_it(fn, bug):
    err = check_failure(check_top_k_filter, fn)
    named = set(err.diagnosis.likely_bugs)
    assert bug in named and not named & ({TOPK_MINUS, TOPK_PLUS, TIES} - {bug})


def test_a_count_one_short_for_batches_only_is_measured_and_not_named_an_off_by_one():
    """k - 1 tokens for a batch of several rows, k for a batch of one: every failing row of the visible check
    looks like k - 1, the batch of one refutes it."""
    err = check_failure(check_top_k_filter, top_k_with(lambda logits, k: logits.topk(
        max(k - 1, 1) if logits.dim() > 1 and logits.size(0) > 1 else k, dim=-1).values[..., -1:]))
    texts = diagnosis_texts(err)
    assert TOPK_MINUS not in err.diagnosis.likely_bugs and "k=5: 5, 4, 4, 4" in texts


# -- get_batch: more rows than windows ---------------------------------------------------
def batch_without_replacement(data, batch_size, seq_len, generator=None):
    starts = torch.randperm(len(data) - seq_len, generator=generator)[:batch_size]
    windows = data[starts[:, None] + torch.arange(seq_len + 1)].long()
    return windows[:, :-1], windows[:, 1:]


def batch_with_replacement(data, batch_size, seq_len, generator=None):
    starts = torch.randint(0, len(data) - seq_len, (batch_size,), generator=generator)
    x = torch.stack([data[s:s + seq_len] for s in starts.tolist()]).long()
    y = torch.stack([data[s + 1:s + seq_len + 1] for s in starts.tolist()]).long()
    return x, y


def test_a_batch_larger_than_the_windows_keeps_batch_size_rows():
    err = check_failure(check_get_batch, batch_without_replacement)
    assert err is not None and "your x has 8 rows, expected 2000" in diagnosis_texts(err)
    assert check_failure(check_get_batch, batch_with_replacement) is None


def test_a_generator_seeded_again_inside_is_one_of_the_candidates():
    def seeded_inside(data, batch_size, seq_len, generator=None):
        generator.manual_seed(0)
        return batch_with_replacement(data, batch_size, seq_len, generator)
    texts = diagnosis_texts(check_failure(check_get_batch, seeded_inside))
    assert "the windows do not depend on the generator (measured: generators seeded 2 and 3 gave the same windows)" \
        in texts and "or the generator is seeded again inside get_batch" in texts, texts


# -- measured facts ----------------------------------------------------------------------
def test_a_wrong_conversion_is_said_as_a_map_of_the_learners_loss():
    chk = Check("evaluate", expects="a dict")
    _measure_conversion(chk, "bits_per_byte", math.log2(3.0) / 1.5, torch.tensor(3.0, dtype=torch.float64), 1.5)
    assert chk.facts and "equals log2(loss) / bytes_per_token" in chk.facts[0]
    chk = Check("evaluate", expects="a dict")
    _measure_conversion(chk, "bits_per_byte", 0.123456, torch.tensor(3.0, dtype=torch.float64), 1.5)
    assert not chk.facts  # no elementary map of 3.0 gives it: nothing is claimed
    chk = Check("evaluate", expects="a dict")  # a base change by the wrong logarithm's constant
    _measure_conversion(chk, "bits_per_byte", 3.0 / math.log10(2) / 1.5, torch.tensor(3.0, dtype=torch.float64), 1.5)
    assert chk.facts and "equals loss / log10(2) / bytes_per_token" in chk.facts[0] and "divide by ln 2" in chk.facts[0]


def test_a_module_list_of_another_length_is_counted_with_the_config_fields():
    config = tinylm.ModelConfig(d_model=32, n_heads=4, n_layers=2, vocab_size=29, max_seq_len=16)
    theirs = {n: tuple(p.shape) for n, p in tinylm.Transformer(config).state_dict().items()}
    four = tinylm.Transformer(tinylm.ModelConfig(d_model=32, n_heads=4, n_layers=4, vocab_size=29, max_seq_len=16))
    text = _list_lengths(theirs, {n: tuple(p.shape) for n, p in four.state_dict().items()}, config)
    assert text.startswith("you built 4 entries in `blocks`") and "config.n_layers = 2" in text
    assert "equals config.n_heads = 4" in text
    assert _list_lengths(theirs, theirs, config) is None


def test_a_cache_of_the_new_positions_only_is_measured():
    chk = Check("attention_step", expects="a tuple")
    new_only = torch.zeros(2, 2, 3, 4)
    _measure_cache_length(chk, "step 1: 3 new after 5", {"k_all": new_only, "v_all": torch.zeros(2, 2, 8, 4)}, 5, 3)
    assert chk.facts == ["step 1: 3 new after 5: your k_all holds 3 positions (the new positions only: the cached "
                         "ones are not in it); expected past + new = 5 + 3 = 8"]


def _sampler(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return logits.argmax(-1)


def _generate_crossed(logits, temperature, top_k, top_p, generator=None):
    return sample_next(logits, temperature, top_p, top_k, generator)  # noqa: F821 (bound below, as in a notebook)


def _generate_right(logits, temperature, top_k, top_p, generator=None):
    return sample_next(logits, temperature, top_k=top_k, top_p=top_p, generator=generator)  # noqa: F821


def test_arguments_handed_over_under_the_other_name_are_measured():
    globals()["sample_next"] = _sampler
    logits = torch.randn(2, 5)
    given = {"logits": logits, "temperature": 1.0, "top_k": 8, "top_p": 0.9, "generator": None}
    texts = []
    for fn in (_generate_crossed, _generate_right):
        received = first_call_arguments(fn, "sample_next", lambda: fn(logits, 1.0, 8, 0.9))
        assert received is not None and globals()["sample_next"] is _sampler  # the stand-in is gone again
        texts.append(crossed_arguments("generate", given, "sample_next", received))
    assert "its top_p (0.9) to sample_next's top_k and its top_k (8) to sample_next's top_p" in texts[0]
    assert texts[1] is None


# -- the tracer --------------------------------------------------------------------------
def _place(fn, contract, args):
    mine, theirs = contracts.traces(fn, contract, args, {})
    return trace.locate_raise(mine, theirs) if mine.error is not None else trace.locate(mine, theirs)


def repeat_by_view(x, n_rep):
    B, n_kv, T, hd = x.shape
    x = x[:, :, None].expand(B, n_kv, n_rep, T, hd)
    return x.view(B, n_kv * n_rep, T, hd)


def test_a_view_that_cannot_merge_an_expanded_layout_is_placed_at_the_view():
    reference = lambda x, n_rep: x.repeat_interleave(n_rep, dim=1)  # noqa: E731
    found = _place(repeat_by_view, contracts.Contract("repeat_kv", reference, list, ("x", "n_rep")),
                   (torch.randn(2, 3, 5, 4), 2))
    assert found is not None and found.kind == "view" and "x.view(" in found.code


def swiglu_silu_first(x, w_gate, w_up, w_down):
    gate = F.silu(x) @ w_gate.T
    return (gate * (x @ w_up.T)) @ w_down.T


def gate_without_projection(x, w):
    return torch.sigmoid(x) * 2


def test_a_step_taken_later_places_the_line_that_reads_the_input_too_early():
    _, named, _ = contracts.split_case(SWIGLU, SWIGLU.cases()[0])
    args = contracts.positional_args(SWIGLU, named)
    found = _place(swiglu_silu_first, SWIGLU, args)
    assert found is not None and found.kind == "value" and "F.silu(x) @ w_gate.T" in found.code
    # a step never taken has no line of the learner's: nothing is claimed
    reference = lambda x, w: torch.sigmoid(x @ w) * 2  # noqa: E731
    found = _place(gate_without_projection, contracts.Contract("gate", reference, list, ("x", "w")),
                   (torch.randn(3, 4), torch.randn(4, 4)))
    assert found is None


def top_p_unsorted(logits, p):
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = logits.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs
    drop_sorted = before >= p
    return logits.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))


def test_an_input_read_where_the_learner_made_the_reference_value_is_placed():
    _, named, _ = contracts.split_case(TOP_P_FILTER, TOP_P_FILTER.cases()[0])
    found = _place(top_p_unsorted, TOP_P_FILTER, contracts.positional_args(TOP_P_FILTER, named))
    assert found is not None and found.kind == "read" and "logits.softmax" in found.code
    assert "reads the value its sort makes, a value your line" in found.facts[0]



def keys_cached_unrotated(k, cos, sin, past_k):
    rotated = tinylm.apply_rope(k, cos, sin, start_pos=past_k.shape[2])  # noqa: F841: made, then never read
    return torch.cat((past_k, k), dim=2)


def test_the_reference_value_read_is_named_by_the_references_own_operation():
    # tinylm's apply_rope rotates with an addcmul; the reference adds two products: the same numbers, two names
    from autograder.checks.references.rope import apply_rope_steps
    reference = lambda k, cos, sin, past_k: torch.cat((past_k, apply_rope_steps(k, cos, sin, past_k.shape[2])), 2)  # noqa: E731
    cos, sin = tinylm.rope_cache(4, 16)
    found = _place(keys_cached_unrotated, contracts.Contract("append", reference, list, ("k", "cos", "sin", "past_k")),
                   (torch.randn(2, 3, 5, 4), cos, sin, torch.randn(2, 3, 4, 4)))
    assert found is not None and found.kind == "read" and "torch.cat((past_k, k)" in found.code
    assert "the reference's cat reads the value its add makes, a value your line" in found.facts[0]

# -- the notebooks' own solutions, hidden tests included ---------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("notebook, cell", [("03", "causal_attention"), ("05", "swiglu"), ("05", "Transformer"),
                                            ("06", "attention_step"), ("08", "generate"), ("08", "top_p_filter"),
                                            ("09", "get_batch"), ("10", "evaluate")])
def test_the_solution_passes_its_whole_check_cell(notebook, cell):
    setup, answers, checks = bench_diagnostics.notebook_cells(notebook, hidden=True)
    ns: dict = {"__name__": f"solution_{notebook}"}
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for src in [*setup, *answers.values()]:
            exec(compile(src, f"<{notebook}>", "exec"), ns)
        exec(compile(checks[cell], f"<{notebook}:check {cell}>", "exec"), ns)


def _step_zeroing(when: str):
    def train_step(model, optimizer, x, y, grad_clip=1.0):
        model.train()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        if when == "before":
            optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        if when == "after":
            optimizer.zero_grad()
        return loss.item()
    return train_step


def test_gradients_left_before_a_step_are_not_added_to_it():
    """Between the two steps something leaves gradients in .grad (an evaluation with autograd on): a step that
    zeroes after optimizer.step() adds them to its own and is named; zeroing first passes."""
    err = check_failure(check_train_step, _step_zeroing("after"))
    assert err is not None and "zero_grad after optimizer.step()" in diagnosis_texts(err)
    assert check_failure(check_train_step, _step_zeroing("before")) is None


# -- decoding in bfloat16, plain sampling -------------------
def greedy_own_cache(model, prompt, n, cache):
    cache = tinylm.KVCache(model.config, prompt.shape[0])  # nothing stale in a new one
    return greedy_with_cache(model, prompt, n, cache)


def test_a_bfloat16_model_decodes_with_the_callers_cache_and_a_cache_of_its_own_is_named_and_placed():
    assert check_failure(check_generate_greedy, greedy_with_cache) is None
    err = check_failure(check_generate_greedy, greedy_own_cache)
    assert err is not None and err.diagnosis.kind == "raised"
    assert "a cache of its own, not the one it was given" in err.diagnosis.likely_bugs[0]
    assert "holding torch.float32 on cpu" in err.diagnosis.likely_bugs[0]
    assert err.diagnosis.located["code"].startswith("cache = tinylm.KVCache(model.config, prompt.shape[0])")


def greedy_capped(model, prompt, n, cache):
    return greedy_with_cache(model, prompt, min(n, model.config.max_seq_len - prompt.shape[1]), cache)


def greedy_feeding_the_last_token(model, prompt, n, cache):
    return greedy_with_cache(model, prompt, n, cache, feed_last=True)


def test_a_request_at_the_caches_edge_comes_back_whole_or_not_at_all():
    """T + max_new_tokens = max_seq_len + 1: a decoder that caps the new tokens comes back one short and is named by
    the count; one that also feeds the last token runs the model once more than needed, which its forward calls
    show before the cache's edge is reached (the edge would find the cache full)."""
    capped = check_failure(check_generate_greedy, greedy_capped)
    assert capped is not None and "returns 7 new tokens for max_new_tokens = 8" in capped.diagnosis.likely_bugs[0]
    assert "no cap of max_seq_len - T" in capped.diagnosis.likely_bugs[0]
    fed = check_failure(check_generate_greedy, greedy_feeding_the_last_token)
    assert fed is not None and "the last new token is fed back to the model" in fed.diagnosis.likely_bugs[0]
    assert "7 forward calls for max_new_tokens = 6" in fed.diagnosis.likely_bugs[0]


_GENERATE = independent_copy(tinylm.generate)


def generate(model, prompt, n, temperature, top_k, top_p, generator):
    return _GENERATE(model, prompt, n, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)


def generate_greedy_without_filters(model, prompt, n, temperature, top_k, top_p, generator):
    sampling = top_k is not None or top_p is not None  # a library's default: sample only when asked to filter
    return generate(model, prompt, n, temperature if sampling else 0.0, top_k, top_p, generator)


def test_plain_sampling_is_measured_against_the_softmax_and_greedy_decoding_without_filters_is_named():
    assert check_failure(check_generate, generate) is None
    err = check_failure(check_generate, generate_greedy_without_filters)
    assert err is not None and err.diagnosis.failed_rows == ["plain sampling (temperature 1, no filter) draws from the softmax"]
    assert "decodes greedily when no filter is set" in err.diagnosis.likely_bugs[0]
    assert "128 of 128 draws are the most likely token" in err.diagnosis.likely_bugs[0]
    err = check_failure(check_generate, generate_from_probabilities)
    assert err is not None and "as flat as a softmax taken of the probabilities" in err.diagnosis.likely_bugs[0]


def generate_from_probabilities(model, prompt, n, temperature, top_k, top_p, generator):
    """The sampling loop with the softmax taken before sample_next, which takes its own."""
    was = model.training
    model.eval()
    idx = prompt
    with torch.no_grad():
        for _ in range(n):
            probs = model(idx)[:, -1, :].softmax(-1)
            idx = torch.cat((idx, tinylm.sample_next(probs, temperature, top_k, top_p, generator)[:, None]), dim=1)
    model.train(was)
    return idx


def test_a_right_sampler_fails_the_plain_sampling_row_with_probability_below_one_in_a_million():
    """The exact distribution of the row's count (a sum of independent Bernoulli draws, by dynamic programming) for
    the check's own model: both tails beyond 6 standard deviations hold less than 1e-6."""
    model = tiny_model(3, dropout=0.5)
    prompt = torch.randint(model.config.vocab_size, (2, 4), generator=seeded(3))
    with torch.no_grad():
        model.norm.weight.mul_(8.0)
        p = model.eval()(prompt.repeat(64, 1))[:, -1].double().softmax(-1).max(-1).values
    dist = torch.zeros(len(p) + 1, dtype=torch.float64)
    dist[0] = 1.0
    for q in p:
        dist = torch.cat((dist[:1] * (1 - q), dist[1:] * (1 - q) + dist[:-1] * q))
    mean, sd = float(p.sum()), float((p * (1 - p)).sum().sqrt())
    outside = [k for k in range(len(dist)) if abs(k - mean) > 6 * sd]
    assert float(dist[outside].sum()) < 1e-6 and 0 in outside and len(p) in outside


def test_an_id_past_the_table_must_raise_and_the_row_read_for_it_is_named():
    def clamped(ids, weight):
        return weight[ids.clamp(0, weight.shape[0] - 1)]

    def wrapped(ids, weight):
        return weight[ids % weight.shape[0]]

    assert "row 10, the last row: the id was clamped" in diagnosis_texts(check_failure(check_embed, clamped))
    assert "row 0, the first row: the id wrapped around modulo vocab" in diagnosis_texts(check_failure(check_embed, wrapped))
    assert check_failure(check_embed, lambda ids, weight: weight[ids]) is None


def _bigram_nll(counting: str):
    def bigram_nll(train, val, alpha=0.5):
        t, v = train.long(), val.long()
        counts = torch.zeros(256, 256, dtype=torch.float64)
        if counting == "indexed +=":
            counts[t[:-1], t[1:]] += 1  # a repeated index is written once
        else:
            counts.index_put_((t[:-1], t[1:]), torch.ones(len(t) - 1, dtype=torch.float64), accumulate=True)
        probs = (counts + alpha) / (counts.sum(1, keepdim=True) + 256 * alpha)
        return -probs.log()[v[:-1], v[1:]].mean().item()
    return bigram_nll


def test_a_table_that_counts_each_distinct_pair_once_is_measured():
    said = diagnosis_texts(check_failure(check_bigram_nll, _bigram_nll("indexed +=")))
    assert "'ab': count 1 of a row total 2, train has 20 of 21" in said and "counted once" in said, said
    assert check_failure(check_bigram_nll, _bigram_nll("accumulate")) is None


def _evaluate(bits_per_byte):
    @torch.no_grad()
    def evaluate(model, batches, bytes_per_token):
        was = model.training
        model.eval()
        total, count = 0.0, 0
        for x, y in batches:
            total += F.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum").item()
            count += int((y != -100).sum())
        model.train(was)
        loss = total / count
        return {"loss": loss, "perplexity": math.exp(loss), "bits_per_byte": bits_per_byte(loss, bytes_per_token)}
    return evaluate


def test_bits_per_byte_is_measured_at_several_bytes_per_token():
    merged = check_failure(check_evaluate, _evaluate(lambda loss, b: loss / math.log(2 * b)))
    assert merged is not None and "grows as 1 : 2 : 3 where it must grow as 1 : 2 : 4" in diagnosis_texts(merged)
    assert check_failure(check_evaluate, _evaluate(lambda loss, b: loss / math.log(2) / b)) is None


def _clipping(scale_up: bool):
    def train_step(model, optimizer, x, y, grad_clip):
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        if scale_up:  # clipping by hand, without min(1, ...)
            norm = torch.cat([p.grad.flatten() for p in model.parameters()]).norm()
            for p in model.parameters():
                p.grad.mul_(grad_clip / norm)
        else:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        return loss.item()
    return train_step


def test_clipping_that_scales_small_gradients_up_is_measured():
    said = diagnosis_texts(check_failure(check_train_step, _clipping(scale_up=True)))
    assert "scales the gradients up to norm grad_clip = 1000" in said, said
    assert check_failure(check_train_step, _clipping(scale_up=False)) is None


def test_an_eps_added_twice_is_read_off_the_output():
    def layer_norm(x, weight, bias, eps=1e-5):
        centred = x - x.mean(-1, keepdim=True)
        var = centred.pow(2).mean(-1, keepdim=True) + eps
        return weight * centred / torch.sqrt(var + eps) + bias

    assert "sqrt(variance + 2·eps)" in diagnosis_texts(check_failure(check_layer_norm, layer_norm))
    assert check_failure(check_layer_norm, lambda x, w, b, eps=1e-5: F.layer_norm(x, x.shape[-1:], w, b, eps)) is None


def test_a_result_cut_to_a_fixed_length_names_the_entries_dropped():
    chk = Check("cache_update", expects="(B, H, T_past + T_new, hd)")
    want = torch.randn(2, 3, 8, 4, generator=torch.Generator().manual_seed(0))
    chk.compare("k_all", want[:, :, 3:], want)
    assert any("holds the last 5 of the 8 entries" in d and "the first 3 are missing" in d for d in chk.diagnoses)
    chk.compare("v_all", want[:, :, 3:], want)
    assert len(chk.diagnoses) == 1  # the second row would say the same
    other = Check("cache_update", expects="(B, H, T_past + T_new, hd)")
    other.compare("k_all", torch.randn(2, 3, 5, 4), want)
    assert not other.diagnoses
