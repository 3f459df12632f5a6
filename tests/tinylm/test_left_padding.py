"""A batch of prompts of different lengths, padded on the left: each row must
decode as that prompt alone (its RoPE positions from 0 at its first real
token, its padding never attended to, at the prompt and at every cached
step). The reference is each prompt run alone, with no mask and no padding."""
import pytest
import torch

from ..helpers import left_padded
from tinylm import KVCache, ModelConfig, Transformer, generate, top_p_filter

CONFIG = ModelConfig(vocab_size=37, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48, max_seq_len=40)
LENGTHS = (3, 8, 5)


@pytest.fixture(scope="module")
def model():
    # Weights at 1/sqrt(fan_in) rather than 0.02, so the next token depends on the context
    # (at the default init a tiny model's argmax mostly repeats the last token, whatever came before).
    torch.manual_seed(4)
    m = Transformer(CONFIG).eval()
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 2:
                p.normal_(0, p.shape[1] ** -0.5)
    return m


@pytest.fixture(scope="module")
def prompts():
    g = torch.Generator().manual_seed(9)
    return [torch.randint(1, CONFIG.vocab_size, (n,), generator=g) for n in LENGTHS]


def alone(model, prompts, n):
    return [generate(model, p, n, temperature=0)[len(p):] for p in prompts]


@pytest.mark.parametrize("use_cache", [True, False])
def test_each_row_decodes_as_its_prompt_alone(model, prompts, use_cache):
    ids, mask, _ = left_padded(prompts)
    got = generate(model, ids, 12, temperature=0, attention_mask=mask, use_cache=use_cache)[:, ids.shape[1]:]
    for row, want in zip(got, alone(model, prompts, 12)):
        assert torch.equal(row, want)


def test_the_padding_matters_without_the_mask(model, prompts):
    # The check above can fail: the same batch without its mask decodes the padded rows differently.
    ids, _, _ = left_padded(prompts)
    got = generate(model, ids, 12, temperature=0)[:, ids.shape[1]:]
    differs = [not torch.equal(row, want) for row, want in zip(got, alone(model, prompts, 12))]
    assert differs == [n < max(LENGTHS) for n in LENGTHS]


def test_prefill_logits_at_real_tokens_equal_the_prompt_alone(model, prompts):
    ids, mask, positions = left_padded(prompts)
    with torch.no_grad():
        logits = model(ids, positions=positions, attention_mask=mask)
        for b, p in enumerate(prompts):
            torch.testing.assert_close(logits[b, mask[b]], model(p[None])[0], rtol=1e-5, atol=1e-5)
        # Positions counted from the padded start (the default) shift a whole row: RoPE scores depend on
        # differences of positions only, so the prompt's logits agree up to rounding.
        shifted = model(ids, attention_mask=mask)
    torch.testing.assert_close(shifted[mask], logits[mask], rtol=1e-4, atol=1e-4)


def test_a_step_positioned_at_the_padded_length_changes_the_padded_rows(model, prompts):
    # What does break a row: the prompt counted per row, then a new token given the padded length as its position.
    ids, mask, positions = left_padded(prompts)
    nxt = torch.tensor([[1]] * len(prompts))
    grown = torch.cat((mask, mask.new_ones(len(prompts), 1)), 1)
    logits = {}
    with torch.no_grad():
        for name, step_positions in (("per row", positions[:, -1:] + 1), ("padded length", None)):
            cache = KVCache(CONFIG, len(prompts))
            model(ids, cache=cache, positions=positions, attention_mask=mask)
            logits[name] = model(nxt, cache=cache, positions=step_positions, attention_mask=grown)[:, -1]
    moved = [not torch.allclose(a, b, atol=1e-4) for a, b in zip(logits["per row"], logits["padded length"])]
    assert moved == [n < max(LENGTHS) for n in LENGTHS]


def test_reference_attention_gives_the_same_masked_result(model, prompts):
    ids, mask, positions = left_padded(prompts)
    with torch.no_grad():
        fused = model(ids, positions=positions, attention_mask=mask)
        for block in model.blocks:
            block.attn.attn_impl = "reference"
        try:
            explicit = model(ids, positions=positions, attention_mask=mask)
        finally:
            for block in model.blocks:
                block.attn.attn_impl = "sdpa"
    assert explicit.isfinite().all()  # a pad query's softmax row is never empty
    torch.testing.assert_close(explicit, fused, rtol=1e-5, atol=1e-5)


def test_mask_must_cover_the_cached_positions(model, prompts):
    ids, mask, _ = left_padded(prompts)
    cache = KVCache(CONFIG, len(prompts))
    with torch.no_grad():
        model(ids, cache=cache, attention_mask=mask)
        with pytest.raises(ValueError, match="cover every position so far"):
            model(ids[:, -1:], cache=cache, attention_mask=mask[:, -1:])


def test_generate_refuses_a_right_padded_mask(model, prompts):
    ids, mask, _ = left_padded(prompts)
    with pytest.raises(ValueError, match="pad prompts on the left"):
        generate(model, ids, 2, temperature=0, attention_mask=mask.flip(-1))


def test_positions_are_checked(model, prompts):
    ids, mask, _ = left_padded(prompts)
    with pytest.raises(ValueError, match="positions must be"):
        model(ids, positions=torch.zeros(len(prompts), 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"positions must lie in \[0, max_seq_len"):
        model(ids, positions=torch.full_like(ids, CONFIG.max_seq_len))


def test_top_p_keeps_at_least_one_token_in_every_row():
    # Row 0: the top token alone holds more than p; row 1: p tiny on a flat row; row 2: a tie at the top.
    logits = torch.tensor([[6.0, 0.0, 0.0, 0.0], [0.1, 0.0, 0.2, 0.0], [2.0, 2.0, 0.0, -1.0]])
    for p in (1e-6, 0.3):
        kept = top_p_filter(logits, p).isfinite()
        assert kept.sum(-1).min() >= 1
        # each row is filtered as if it were alone
        for r in range(len(logits)):
            assert torch.equal(kept[r], top_p_filter(logits[r], p).isfinite())
    assert top_p_filter(logits, 0.3).isfinite().tolist()[0] == [True, False, False, False]
    assert top_p_filter(logits, 1e-6).isfinite().sum(-1).tolist() == [1, 1, 1]
