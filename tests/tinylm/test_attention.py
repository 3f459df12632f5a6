"""Causal attention and GQA against torch's scaled_dot_product_attention."""
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from tinylm import Attention, causal_attention, causal_mask, repeat_kv, rope_cache

from ..helpers import BATCH, SEQ


def qkv(gen, n_heads=4, n_kv=2, q_len=SEQ, kv_len=SEQ, hd=10):
    q = torch.randn(BATCH, n_heads, q_len, hd, generator=gen)
    k = torch.randn(BATCH, n_kv, kv_len, hd, generator=gen)
    v = torch.randn(BATCH, n_kv, kv_len, hd, generator=gen)
    return q, k, v


def test_causal_mask_is_lower_triangle_and_bottom_right_aligned():
    assert torch.equal(causal_mask(5), torch.ones(5, 5).tril().bool())
    m = causal_mask(2, 5)  # two new queries at positions 3 and 4
    assert m.tolist() == [[True, True, True, True, False], [True] * 5]
    assert causal_mask(1, 7).all()  # one decoded token sees the whole cache
    with pytest.raises(ValueError, match="q_len"):
        causal_mask(4, 3)


def test_mha_matches_sdpa_is_causal(gen):
    q, k, v = qkv(gen, n_kv=4)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(causal_attention(q, k, v), ref)


def test_gqa_matches_sdpa_enable_gqa(gen):
    for n_kv in (1, 2):  # MQA and GQA
        q, k, v = qkv(gen, n_kv=n_kv)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        torch.testing.assert_close(causal_attention(q, k, v), ref)


def test_large_scores_do_not_overflow(gen):
    q, k, v = qkv(gen, n_kv=4)
    out = causal_attention(q * 30 + 100, k * 30 + 100, v)  # scores in the 1e5 range
    ref = F.scaled_dot_product_attention((q * 30 + 100).double(), (k * 30 + 100).double(), v.double(), is_causal=True)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4)


def test_queries_after_a_prefix_equal_last_rows_of_full_attention(gen):
    q, k, v = qkv(gen)
    full = causal_attention(q, k, v)
    torch.testing.assert_close(causal_attention(q[:, :, -3:], k, v), full[:, :, -3:])


def test_repeat_kv_is_repeat_interleave_not_tile(gen):
    x = torch.randn(BATCH, 2, SEQ, 10, generator=gen)
    out = repeat_kv(x, 3)
    assert out.shape == (BATCH, 6, SEQ, 10)
    assert torch.equal(out, x.repeat_interleave(3, dim=1))
    assert not torch.equal(out, x.repeat(1, 3, 1, 1))
    for h in range(6):  # query head h reads kv head h // 3
        assert torch.equal(out[:, h], x[:, h // 3])


def test_output_rows_are_convex_combinations_of_past_values(gen):
    q, k, _ = qkv(gen, n_kv=4)
    v = torch.zeros(BATCH, 4, SEQ, 10)
    v[:, :, 5:] = 1.0  # only future positions (for queries < 5) carry signal
    out = causal_attention(q, k, v)
    assert torch.equal(out[:, :, :5], torch.zeros(BATCH, 4, 5, 10))


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_reference_and_sdpa_paths_agree(config, gen, n_kv_heads):
    cfg = dataclasses.replace(config, n_kv_heads=n_kv_heads)
    cos, sin = rope_cache(cfg.head_dim, cfg.max_seq_len)
    attn = Attention(cfg)
    x = torch.randn(BATCH, SEQ, cfg.d_model, generator=gen)
    out_sdpa = attn(x, cos, sin)
    attn.attn_impl = "reference"
    torch.testing.assert_close(attn(x, cos, sin), out_sdpa)
    assert out_sdpa.shape == (BATCH, SEQ, cfg.d_model)


def test_gqa_equals_mha_with_duplicated_kv_weights(config, gen):
    """A GQA layer is an MHA layer whose kv heads come in identical groups:
    copy kv head h // n_rep into MHA head h and the outputs must agree."""
    gqa_cfg = config  # 4 query heads, 2 kv heads
    mha_cfg = dataclasses.replace(config, n_kv_heads=config.n_heads)
    gqa, mha = Attention(gqa_cfg), Attention(mha_cfg)
    hd = config.head_dim
    with torch.no_grad():
        for name in ("q_proj", "o_proj"):
            getattr(mha, name).weight.copy_(getattr(gqa, name).weight)
        for name in ("k_proj", "v_proj"):
            w = getattr(gqa, name).weight.view(gqa_cfg.n_kv_heads, hd, -1)  # (n_kv, hd, d)
            getattr(mha, name).weight.copy_(w.repeat_interleave(gqa_cfg.n_rep, dim=0).reshape(-1, config.d_model))
    cos, sin = rope_cache(hd, config.max_seq_len)
    x = torch.randn(BATCH, SEQ, config.d_model, generator=gen)
    torch.testing.assert_close(gqa(x, cos, sin), mha(x, cos, sin))


def test_attention_dropout_only_in_training(config, gen):
    cfg = dataclasses.replace(config, dropout=0.5, attn_impl="reference")
    cos, sin = rope_cache(cfg.head_dim, cfg.max_seq_len)
    attn = Attention(cfg)
    x = torch.randn(BATCH, SEQ, cfg.d_model, generator=gen)
    assert not torch.allclose(attn(x, cos, sin), attn(x, cos, sin))
    attn.eval()
    assert torch.equal(attn(x, cos, sin), attn(x, cos, sin))


def test_head_dim_apart_from_the_quotient_sets_every_width(gen):
    from tinylm import KVCache, ModelConfig, Transformer
    # 3 query heads of 14 features, 1 kv head, over a 20-wide stream: 3 · 14 = 42, 20 // 3 = 6.
    config = ModelConfig(vocab_size=50, d_model=20, n_layers=2, n_heads=3, n_kv_heads=1, head_dim=14, d_ff=40,
                         max_seq_len=16)
    model = Transformer(config).eval()
    shapes = {name: tuple(p.shape) for name, p in model.blocks[0].attn.named_parameters()}
    assert shapes == {"q_proj.weight": (42, 20), "k_proj.weight": (14, 20), "v_proj.weight": (14, 20),
                      "o_proj.weight": (20, 42)}
    # The count by hand: per block q and o 2·20·42, k and v 2·20·14, two norms and the SwiGLU; embedding and final norm.
    per_block = 2 * 20 * 42 + 2 * 20 * 14 + 2 * 20 + 3 * 20 * 40
    assert model.num_parameters() == 50 * 20 + 2 * per_block + 20
    assert tuple(model.rope_cos.shape) == (16, 14)
    cache = KVCache(config, batch_size=2)
    assert tuple(cache.k.shape) == (2, 2, 1, 16, 14)
    idx = torch.randint(0, 50, (2, 9), generator=gen)
    with torch.no_grad():
        full = model(idx)
        model(idx[:, :6], cache)
        steps = torch.cat([model(idx[:, i:i + 1], cache) for i in range(6, 9)], dim=1)
    torch.testing.assert_close(steps, full[:, 6:], atol=1e-5, rtol=1e-5)
