"""tinylm equals Hugging Face LlamaForCausalLM: a tiny random config, no downloads."""
import dataclasses

import pytest
import torch

transformers = pytest.importorskip("transformers")

from tinylm import ModelConfig, Transformer, from_hf_llama, generate, next_token_loss, to_hf_llama  # noqa: E402

from ..helpers import left_padded  # noqa: E402

# GQA (6 query heads over 2 kv heads), tied head, every size different.
CONFIG = ModelConfig(vocab_size=256, d_model=48, n_layers=3, n_heads=6, n_kv_heads=2, d_ff=136,
                     max_seq_len=96, rope_theta=500.0, norm_eps=1e-5)


@pytest.fixture(scope="module")
def pair():
    torch.manual_seed(11)
    model = Transformer(CONFIG).eval()
    # Random norm gains, so a missing or misplaced gain cannot hide behind ones.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    return model, to_hf_llama(model)


def test_logits_match(pair, gen):
    model, hf = pair
    idx = torch.randint(0, 256, (3, 41), generator=gen)
    with torch.no_grad():
        ours, theirs = model(idx), hf(idx).logits
    assert (ours - theirs).abs().max() < 1e-5


def test_loss_matches_hf_internal_shift(pair, gen):
    model, hf = pair
    idx = torch.randint(0, 256, (3, 41), generator=gen)
    with torch.no_grad():
        ours = next_token_loss(model(idx)[:, :-1], idx[:, 1:])
        theirs = hf(idx, labels=idx).loss  # HF shifts the labels itself
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)


def test_greedy_generation_with_kv_cache_matches_for_32_steps(pair, gen):
    model, hf = pair
    prompt = torch.randint(0, 256, (2, 9), generator=gen)
    ours = generate(model, prompt, 32, temperature=0)  # uses the KV cache
    theirs = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=32,
                         do_sample=False, use_cache=True, pad_token_id=0)
    assert torch.equal(ours, theirs)


def test_conversion_round_trips_exactly(pair):
    model, hf = pair
    back = from_hf_llama(hf)
    assert back.config == CONFIG
    ours, again = model.state_dict(), back.state_dict()
    assert ours.keys() == again.keys()
    for name in ours:
        assert torch.equal(ours[name], again[name]), name
    assert back.lm_head.weight is back.tok_emb.weight


def test_untied_model_converts_both_ways(gen):
    cfg = dataclasses.replace(CONFIG, tie_embeddings=False, n_kv_heads=1)
    torch.manual_seed(3)
    hf_cfg = transformers.LlamaConfig(
        vocab_size=256, hidden_size=48, intermediate_size=136, num_hidden_layers=3, num_attention_heads=6,
        num_key_value_heads=1, max_position_embeddings=96, rope_theta=500.0, rms_norm_eps=1e-5,
        tie_word_embeddings=False)
    hf = transformers.LlamaForCausalLM(hf_cfg).eval()  # HF's own random init
    model = from_hf_llama(hf)
    assert model.config == cfg
    assert model.lm_head.weight.data_ptr() != model.tok_emb.weight.data_ptr()
    idx = torch.randint(0, 256, (2, 30), generator=gen)
    with torch.no_grad():
        assert (model(idx) - hf(idx).logits).abs().max() < 1e-5
        assert (to_hf_llama(model)(idx).logits - hf(idx).logits).abs().max() == 0


def test_unsupported_hf_configs_are_refused():
    hf_cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=4, attention_bias=True)
    with pytest.raises(ValueError, match="attention_bias"):
        from_hf_llama(transformers.LlamaForCausalLM(hf_cfg))


def test_head_dim_apart_from_the_quotient_matches_hf(gen):
    # 4 query heads of 12 features over 2 kv heads, a 40-wide stream: 4 · 12 = 48 != 40, and 40 // 4 = 10.
    hf_cfg = transformers.LlamaConfig(
        vocab_size=256, hidden_size=40, intermediate_size=72, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=12, max_position_embeddings=64, rope_theta=1000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=True)
    torch.manual_seed(5)
    hf = transformers.LlamaForCausalLM(hf_cfg).eval()  # HF's own random init and its own projection shapes
    model = from_hf_llama(hf)
    assert model.config.head_dim == 12
    attn = model.blocks[0].attn
    assert (tuple(attn.q_proj.weight.shape), tuple(attn.k_proj.weight.shape), tuple(attn.o_proj.weight.shape)) == \
        ((48, 40), (24, 40), (40, 48))
    idx = torch.randint(0, 256, (2, 23), generator=gen)
    with torch.no_grad():
        assert (model(idx) - hf(idx).logits).abs().max() < 1e-5
        assert (to_hf_llama(model)(idx).logits - hf(idx).logits).abs().max() == 0
    prompt = idx[:, :7]
    ours = generate(model, prompt, 12, temperature=0)  # the KV cache holds 2 kv heads of 12 features
    theirs = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=12,
                         do_sample=False, use_cache=True, pad_token_id=0)
    assert torch.equal(ours, theirs)


def test_left_padded_forward_matches_hf_position_ids_and_mask(pair, gen):
    # HF is told each row's positions (position_ids) and its padding (attention_mask); tinylm the same, by its names.
    model, hf = pair
    ids, mask, positions = left_padded([torch.randint(1, 256, (n,), generator=gen) for n in (5, 11, 8)])
    with torch.no_grad():
        ours = model(ids, positions=positions, attention_mask=mask)
        theirs = hf(ids, attention_mask=mask.long(), position_ids=positions).logits
    assert (ours - theirs)[mask].abs().max() < 1e-5  # real tokens only: HF and tinylm treat a pad query differently


def test_left_padded_greedy_generation_matches_hf_generate(pair, gen):
    # HF's generate derives position_ids from the attention mask itself.
    model, hf = pair
    ids, mask, _ = left_padded([torch.randint(1, 256, (n,), generator=gen) for n in (4, 9, 6)])
    ours = generate(model, ids, 20, temperature=0, attention_mask=mask)
    theirs = hf.generate(ids, attention_mask=mask.long(), max_new_tokens=20, do_sample=False, use_cache=True,
                         pad_token_id=0)
    assert torch.equal(ours, theirs)
