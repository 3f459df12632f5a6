"""Cached decoding must equal recomputing the whole sequence, step by step."""
import dataclasses

import pytest
import torch

from tinylm import KVCache, Transformer

from .helpers import BATCH


@pytest.mark.parametrize("attn_impl", ["sdpa", "reference"])
@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_cached_decoding_equals_full_recompute_at_every_step(config, gen, attn_impl, n_kv_heads):
    cfg = dataclasses.replace(config, attn_impl=attn_impl, n_kv_heads=n_kv_heads)
    model = Transformer(cfg).eval()
    seq = torch.randint(0, 256, (BATCH, 20), generator=gen)
    cache = KVCache(cfg, BATCH)
    prompt_len = 7
    with torch.no_grad():
        logits = model(seq[:, :prompt_len], cache=cache)  # prefill
        torch.testing.assert_close(logits, model(seq[:, :prompt_len]))
        for t in range(prompt_len, seq.shape[1]):
            step = model(seq[:, t:t + 1], cache=cache)[:, -1]  # one new token
            full = model(seq[:, :t + 1])[:, -1]
            torch.testing.assert_close(step, full, msg=lambda m: f"step {t}: {m}")
    assert cache.length == seq.shape[1]


def test_chunked_prefill_equals_one_pass(config, gen):
    model = Transformer(config).eval()
    seq = torch.randint(0, 256, (BATCH, 15), generator=gen)
    cache = KVCache(config, BATCH)
    with torch.no_grad():
        first = model(seq[:, :6], cache=cache)
        second = model(seq[:, 6:], cache=cache)  # 9 queries after a 6-token prefix
        torch.testing.assert_close(torch.cat((first, second), dim=1), model(seq))


def test_cache_stores_only_kv_heads_along_the_sequence_axis(config):
    cache = KVCache(config, BATCH)
    expected = (config.n_layers, BATCH, config.n_kv_heads, config.max_seq_len, config.head_dim)
    assert cache.k.shape == cache.v.shape == expected
    # 2 (K, V) · layers · batch · kv heads · positions · head_dim · 4 bytes
    assert cache.nbytes() == 2 * config.n_layers * BATCH * config.n_kv_heads * config.max_seq_len * config.head_dim * 4
    k = torch.randn(BATCH, config.n_kv_heads, 5, config.head_dim)
    k_all, _ = cache.update(0, k, k)
    assert torch.equal(cache.k[0, :, :, :5], k) and k_all.shape == k.shape


def test_reset_between_prompts(config, gen):
    model = Transformer(config).eval()
    cache = KVCache(config, BATCH)
    a = torch.randint(0, 256, (BATCH, 9), generator=gen)
    b = torch.randint(0, 256, (BATCH, 9), generator=gen)
    with torch.no_grad():
        model(a, cache=cache)
        cache.reset()
        torch.testing.assert_close(model(b, cache=cache), model(b))


def test_full_cache_and_mismatches_are_named(config):
    cache = KVCache(config, BATCH)
    cache.advance(config.max_seq_len - 2)
    model = Transformer(config)
    with pytest.raises(ValueError, match="full"):
        model(torch.zeros(BATCH, 3, dtype=torch.long), cache=cache)
    k = torch.zeros(BATCH + 1, config.n_kv_heads, 1, config.head_dim)
    with pytest.raises(ValueError, match=f"batch_size={BATCH}"):
        KVCache(config, BATCH).update(0, k, k)
    k = torch.zeros(BATCH, config.n_heads, 1, config.head_dim)  # expanded heads
    with pytest.raises(ValueError, match="kv heads"):
        KVCache(config, BATCH).update(0, k, k)
    k = torch.zeros(BATCH, config.n_kv_heads, 1, config.head_dim, dtype=torch.float64)
    with pytest.raises(TypeError, match="dtype"):
        KVCache(config, BATCH).update(0, k, k)
    with pytest.raises(ValueError, match="batch_size"):
        KVCache(config, 0)
