"""The accounting checks against a config whose head_dim is set apart from
d_model // n_heads (Qwen3-4B's 128 on d_model 2560 with 32 heads, a course
config's 16 on 40 with 4): a count that recomputes the head width from d_model
is caught there and said as measured on the learner's own function; and a
cache sized by d_model is told from one sized by n_heads·head_dim, which give
the same numbers wherever head_dim is d_model // n_heads."""
from __future__ import annotations

import torch

from autograder.checks.accounting import (DECODE_CASES, HEAD_DIM_TRAIN_CASES, KV_CACHE_CASES, QWEN3_4B_SIZES,
                                          TRAIN_CASES, check_decode_bytes_per_token, check_kv_cache_bytes,
                                          check_train_step_costs)
from tests.helpers import check_failure, diagnosis_texts

from .test_printed_lines_true import _line, _message

QUOTIENT = "head_dim taken as d_model // n_heads"


def test_qwen3_4b_sizes_are_its_published_ones():
    # Qwen3-4B's config.json: hidden_size 2560, 32 attention heads, 8 key/value heads, head_dim 128, 36 layers
    c = QWEN3_4B_SIZES
    assert (c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.n_layers) == (2560, 32, 8, 128, 36)
    assert c.d_model // c.n_heads == 80
    # its cache: K and V, 36 layers, 8 heads of 128, bfloat16: 147,456 bytes per position
    label, (config, seq_len, batch, dtype) = KV_CACHE_CASES[-1]
    assert config is c and dtype is torch.bfloat16
    assert check_failure(check_kv_cache_bytes, lambda c, t, b=1, dt=torch.float32: 147_456 * t * b * dt.itemsize // 2,
                         cases=(KV_CACHE_CASES[-1],)) is None


def test_kv_cache_with_head_dim_recomputed_from_d_model_is_caught_and_said_as_measured():
    message = _message("fresh14", "06", "kv_cache_bytes", "config.n_kv_heads * (config.d_model // config.n_heads)  # K and V")
    likely = _line(message, "Likely bug:")
    assert QUOTIENT in likely and "head_dim 128 against d_model // n_heads = 80" in likely
    assert "called again with that head_dim, returns that same count" in likely


def test_a_cache_sized_by_d_model_is_said_as_d_model_not_as_n_heads():
    # 2·L·d_model per position: d_model is n_heads·head_dim only where head_dim is d_model // n_heads
    message = _message("fresh14", "07", "decode_bytes_per_token", "kv_cache = 2 * L * config.d_model * context_len * size")
    likely = _line(message, "Likely bug:")
    assert "kv_cache: d_model per position instead of n_kv_heads·head_dim" in likely
    assert "n_heads instead of n_kv_heads" not in message


def _kv(width):
    return lambda c, seq_len, batch_size=1, dtype=torch.float32: \
        2 * c.n_layers * width(c) * seq_len * batch_size * dtype.itemsize


def test_n_heads_and_d_model_are_told_apart_by_the_head_dim_row_and_are_candidates_without_it():
    by_heads, by_width = _kv(lambda c: c.n_heads * c.head_dim), _kv(lambda c: c.d_model)
    heads = diagnosis_texts(check_failure(check_kv_cache_bytes, by_heads))
    width = diagnosis_texts(check_failure(check_kv_cache_bytes, by_width))
    assert "n_heads instead of n_kv_heads" in heads and "d_model per position" not in heads
    assert "d_model per position" in width and "n_heads instead of n_kv_heads" not in width
    # without a config that sets head_dim apart, both give every count: neither is said as the cause
    usual = tuple(case for case in KV_CACHE_CASES if case[1][0].head_dim == case[1][0].d_model // case[1][0].n_heads)
    err = check_failure(check_kv_cache_bytes, by_width, cases=usual)
    assert not err.diagnosis.to_dict().get("likely_bugs")
    candidates = " ".join(err.diagnosis.to_dict()["candidates"])
    assert "n_heads instead of n_kv_heads" in candidates and "d_model per position" in candidates


def test_a_count_wrong_only_where_head_dim_is_apart_but_not_as_the_quotient_is_not_said_to_be():
    # right wherever head_dim is d_model // n_heads; 96 otherwise, neither 128 nor 80
    odd = _kv(lambda c: c.n_kv_heads * (c.head_dim if c.head_dim == c.d_model // c.n_heads else 96))
    assert QUOTIENT not in diagnosis_texts(check_failure(check_kv_cache_bytes, odd))


def _decode(head_dim_of):
    def decode_bytes_per_token(config, context_len, dtype=torch.bfloat16):
        d, L, hd, size = config.d_model, config.n_layers, head_dim_of(config), dtype.itemsize
        per_block = 2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd + 3 * d * config.d_ff + 2 * d
        matrices = config.vocab_size * d * (1 if config.tie_embeddings else 2)
        return {"weights": (matrices + L * per_block + d) * size,
                "kv_cache": 2 * L * config.n_kv_heads * hd * context_len * size}
    return decode_bytes_per_token


def test_decode_bytes_with_head_dim_recomputed_names_both_parts_once():
    assert check_failure(check_decode_bytes_per_token, _decode(lambda c: c.head_dim)) is None
    err = check_failure(check_decode_bytes_per_token, _decode(lambda c: c.d_model // c.n_heads))
    likely = err.diagnosis.to_dict()["likely_bugs"]
    assert len(likely) == 1 and likely[0].startswith(f"weights and kv_cache: {QUOTIENT}")
    assert "head_dim 16 against d_model // n_heads = 10" in likely[0]
    # the usual rows cannot tell: head_dim is d_model // n_heads there
    assert check_failure(check_decode_bytes_per_token, _decode(lambda c: c.d_model // c.n_heads),
                         cases=DECODE_CASES[:-1]) is None


def _train(head_dim_of):
    def train_step_costs(config, batch_size, seq_len):
        d, L, hd, V = config.d_model, config.n_layers, head_dim_of(config), config.vocab_size
        per_block = 2 * d * config.n_heads * hd + 2 * d * config.n_kv_heads * hd + 3 * d * config.d_ff
        matmul_weights = L * per_block + V * d
        tokens = batch_size * seq_len
        attention = 4 * seq_len * config.n_heads * hd * L * tokens
        n_params = matmul_weights + (2 * L + 1) * d + (0 if config.tie_embeddings else V * d)
        return {"flops": 6 * matmul_weights * tokens + 3 * attention, "weights": 4 * n_params, "grads": 4 * n_params,
                "adam_moments": 8 * n_params}
    return train_step_costs


def test_train_step_costs_with_head_dim_recomputed_is_caught_and_said_as_measured():
    every = TRAIN_CASES + HEAD_DIM_TRAIN_CASES
    assert check_failure(check_train_step_costs, _train(lambda c: c.head_dim), cases=every) is None
    err = check_failure(check_train_step_costs, _train(lambda c: c.d_model // c.n_heads), cases=every)
    likely = err.diagnosis.to_dict()["likely_bugs"]
    assert len(likely) == 1 and QUOTIENT in likely[0] and "head_dim 16 against d_model // n_heads = 10" in likely[0]
    assert all(key in likely[0].split(":")[0] for key in ("flops", "weights", "grads", "adam_moments"))
    assert check_failure(check_train_step_costs, _train(lambda c: c.d_model // c.n_heads)) is None
