"""Cached decoding must equal recomputing the whole sequence, step by step."""
import copy
import dataclasses

import pytest
import torch

from tinylm import KVCache, Transformer, apply_rope, generate

from ..helpers import BATCH


@pytest.mark.parametrize("attn_impl", ["sdpa", "reference"])
@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_cached_decoding_equals_full_recompute_at_every_step(config, gen, attn_impl, n_kv_heads):
    cfg = dataclasses.replace(config, attn_impl=attn_impl, n_kv_heads=n_kv_heads)
    model = with_random_gains(Transformer(cfg).eval(), gen)
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


def with_random_gains(model, gen):
    """Norm gains away from 1, so a gain applied in the wrong place shows."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(torch.rand(p.shape, generator=gen) + 0.5)
    return model


def decode(model, seq, prompt_len, cache):
    """Prefill, then one token at a time: the last position's logits of each call."""
    with torch.no_grad():
        steps = [model(seq[:, :prompt_len], cache=cache)[:, -1]]
        steps += [model(seq[:, t:t + 1], cache=cache)[:, -1] for t in range(prompt_len, seq.shape[1])]
    return torch.stack(steps)


def test_cache_holds_rotated_keys_and_plain_values_of_each_layer(config, gen):
    """The cache's contents, rebuilt independently from each attention
    layer's input: k_proj then RoPE at the absolute position; v_proj only."""
    model = with_random_gains(Transformer(config).eval(), gen)  # GQA: 4 query heads, 2 kv heads
    seq = torch.randint(0, 256, (BATCH, 13), generator=gen)
    inputs = {}
    for i, block in enumerate(model.blocks):
        block.attn.register_forward_pre_hook(lambda module, args, i=i: inputs.__setitem__(i, args[0]))
    cache = KVCache(config, BATCH)
    decode(model, seq, 5, cache)  # prefill 5, then 8 single steps
    with torch.no_grad():
        model(seq)  # one full pass: inputs[i] is layer i's (B, 13, d) attention input
        for i, block in enumerate(model.blocks):
            x = inputs[i]
            k = block.attn.k_proj(x).view(BATCH, 13, config.n_kv_heads, config.head_dim).transpose(1, 2)
            v = block.attn.v_proj(x).view(BATCH, 13, config.n_kv_heads, config.head_dim).transpose(1, 2)
            torch.testing.assert_close(cache.k[i, :, :, :13], apply_rope(k, model.rope_cos, model.rope_sin))
            torch.testing.assert_close(cache.v[i, :, :, :13], v)


def test_decoding_sees_every_kind_of_parameter_change(config, gen):
    """There is nothing derived to go stale: after an optimizer step,
    load_state_dict, a new Parameter, or a write through .data, generation
    equals that of a model freshly built from the same weights."""
    model = with_random_gains(Transformer(config).eval(), gen)
    prompt = torch.randint(0, 256, (BATCH, 6), generator=gen)

    def fresh_generation():
        reference = Transformer(dataclasses.replace(config, attn_impl="reference")).eval()
        reference.load_state_dict(model.state_dict())
        return generate(reference, prompt, 12, temperature=0)

    assert torch.equal(generate(model, prompt, 12, temperature=0), fresh_generation())
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    model(prompt).logsumexp(-1).mean().backward()
    optimizer.step()
    assert torch.equal(generate(model, prompt, 12, temperature=0), fresh_generation()), "after an optimizer step"
    model.load_state_dict(with_random_gains(Transformer(config), gen).state_dict())
    assert torch.equal(generate(model, prompt, 12, temperature=0), fresh_generation()), "after load_state_dict"
    block = model.blocks[1]
    block.mlp_norm.weight = torch.nn.Parameter(torch.rand(config.d_model, generator=gen) + 0.5)
    block.attn.k_proj.weight = torch.nn.Parameter(torch.randn_like(block.attn.k_proj.weight))
    assert torch.equal(generate(model, prompt, 12, temperature=0), fresh_generation()), "after new Parameters"
    seq = generate(model, prompt, 12, temperature=0)
    before = decode(model, seq, 6, KVCache(config, BATCH))  # (steps, B, V) cached-decoding logits
    block.attn.q_proj.weight.data.mul_(3.0)  # bumps no version counter
    model.norm.weight.data.copy_(torch.rand(config.d_model, generator=gen) + 0.5)
    after = decode(model, seq, 6, KVCache(config, BATCH))
    rebuilt = Transformer(config).eval()
    rebuilt.load_state_dict(model.state_dict())
    torch.testing.assert_close(after, decode(rebuilt, seq, 6, KVCache(config, BATCH)), rtol=0, atol=0)
    assert not torch.allclose(after, before), "after writes through .data"


def test_one_cache_serves_two_models_in_turn(config, gen):
    first, second = (with_random_gains(Transformer(config).eval(), gen) for _ in range(2))
    seq = torch.randint(0, 256, (BATCH, 10), generator=gen)
    cache = KVCache(config, BATCH)
    for model in (first, second, first):
        cache.reset()
        torch.testing.assert_close(decode(model, seq, 4, cache), decode(copy.deepcopy(model), seq, 4, KVCache(config, BATCH)))


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




def test_cache_writes_land_in_k_and_v_also_after_they_are_replaced(config):
    """update() writes through views of k and v taken when they are set: a
    cache whose tensors are put back (notebook 06 restores saved ones) must
    write into the tensors it now holds, not the ones it was built with."""
    cache = KVCache(config, 1)
    k = torch.ones(1, config.n_kv_heads, 2, config.head_dim)
    cache.k, cache.v = cache.k.clone(), cache.v.clone()
    cache.update(1, k, 2 * k)
    assert torch.equal(cache.k[1, :, :, :2], k) and torch.equal(cache.v[1, :, :, :2], 2 * k)
    assert not cache.k[0].any() and not cache.k[1, :, :, 2:].any()

@pytest.mark.slow
def test_compiled_decoding_gives_eager_tokens(config, gen):
    """torch.compile of the same forward (the opt-in of `python -m tinylm chat
    --compile`): a prompt's graph, then the one-token step's with the cache
    growing, give the greedy tokens of eager decoding."""
    model = with_random_gains(Transformer(config).eval(), gen)
    prompt = torch.randint(0, 256, (BATCH, 9), generator=gen)
    eager = generate(model, prompt, 12, temperature=0)
    assert torch.equal(generate(torch.compile(model), prompt, 12, temperature=0), eager)
