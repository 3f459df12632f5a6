"""Temperature, top-k, top-p and sampling, on hand-made distributions."""
import dataclasses
import math

import pytest
import torch

from tinylm import ModelConfig, Transformer, apply_temperature, generate, generate_stream, sample_next, top_k_filter, top_p_filter

INF = float("inf")


def kept(logits):
    return (logits > -INF).nonzero().flatten().tolist()


def test_temperature_divides_logits():
    logits = torch.tensor([[1.0, 2.0, 4.0]])
    torch.testing.assert_close(apply_temperature(logits, 0.5), logits * 2)
    # T -> large flattens toward uniform; T small sharpens toward one-hot
    assert apply_temperature(logits, 100).softmax(-1).max() < 0.35
    assert apply_temperature(logits, 0.05).softmax(-1)[0, 2] > 0.999
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="temperature"):
            apply_temperature(logits, bad)


def test_top_k_keeps_exactly_the_k_largest():
    logits = torch.tensor([0.3, 2.0, -1.0, 1.5, 0.9, 1.7])
    assert kept(top_k_filter(logits, 1)) == [1]
    assert kept(top_k_filter(logits, 3)) == [1, 3, 5]
    assert kept(top_k_filter(logits, 6)) == list(range(6))
    assert torch.equal(top_k_filter(logits, 50), logits)
    out = top_k_filter(logits, 2)
    assert out[1] == 2.0 and out[5] == 1.7  # kept logits are untouched


def test_top_k_keeps_ties_at_the_boundary_and_works_per_row():
    logits = torch.tensor([[1.0, 3.0, 2.0, 2.0], [5.0, 0.0, 1.0, 4.0]])
    out = top_k_filter(logits, 2)
    assert kept(out[0]) == [1, 2, 3]  # 2.0 twice ties for second place
    assert kept(out[1]) == [0, 3]
    with pytest.raises(ValueError, match="k"):
        top_k_filter(logits, 0)


def logits_from(probs):
    return torch.tensor(probs, dtype=torch.float64).log()


def test_top_p_keeps_the_token_that_crosses_p():
    logits = logits_from([0.1, 0.5, 0.15, 0.25])  # sorted: 0.5, 0.25, 0.15, 0.1
    assert kept(top_p_filter(logits, 0.4)) == [1]          # 0.5 alone crosses 0.4
    assert kept(top_p_filter(logits, 0.6)) == [1, 3]       # 0.5 < 0.6, +0.25 crosses
    assert kept(top_p_filter(logits, 0.8)) == [1, 2, 3]
    assert kept(top_p_filter(logits, 0.95)) == [0, 1, 2, 3]
    assert kept(top_p_filter(logits, 0.01)) == [1]         # never empty


def test_top_p_exact_boundaries():
    logits = logits_from([0.5, 0.25, 0.125, 0.125])
    assert kept(top_p_filter(logits, 0.75 - 1e-9)) == [0, 1]
    assert kept(top_p_filter(logits, 0.75 + 1e-9)) == [0, 1, 2]
    assert kept(top_p_filter(logits, 0.5 + 1e-9)) == [0, 1]
    assert torch.equal(top_p_filter(logits, 1.0), logits)
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="p must"):
            top_p_filter(logits, bad)


def test_top_p_applies_per_row_in_vocabulary_order():
    logits = torch.stack((logits_from([0.7, 0.2, 0.1]), logits_from([0.1, 0.2, 0.7])))
    out = top_p_filter(logits, 0.8)
    assert kept(out[0]) == [0, 1] and kept(out[1]) == [1, 2]


def test_greedy_is_argmax():
    logits = torch.randn(5, 50, generator=torch.Generator().manual_seed(3))
    assert torch.equal(sample_next(logits, temperature=0), logits.argmax(-1))


def expected_distribution(logits, temperature, top_k, top_p):
    """Closed form, by sorting in Python: softmax(logits / T), keep the k most
    likely, keep the most likely until mass >= p, renormalise."""
    scaled = [x / temperature for x in logits]
    probs = [math.exp(x) for x in scaled]
    probs = [x / sum(probs) for x in probs]
    order = sorted(range(len(probs)), key=lambda i: -probs[i])[:top_k]
    mass = sum(probs[i] for i in order)
    nucleus, acc = [], 0.0
    for i in order:
        nucleus.append(i)
        acc += probs[i] / mass
        if acc >= top_p:
            break
    total = sum(probs[i] for i in nucleus)
    return [probs[i] / total if i in nucleus else 0.0 for i in range(len(probs))]


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, 10, 1.0), (0.7, 4, 1.0), (1.6, 10, 0.8), (0.8, 5, 0.7)])
def test_sampling_frequencies_match_the_closed_form(temperature, top_k, top_p):
    """N = 40000 seeded draws; every frequency within 5 standard errors
    sqrt(p(1-p)/N) (< 0.0125) of its target, and filtered tokens never drawn."""
    logits = [2.0, 1.2, 0.9, 0.0, -0.3, 1.5, -1.0, 0.4, 0.1, -2.0]
    target = expected_distribution(logits, temperature, top_k, top_p)
    n = 40_000
    batch = torch.tensor([logits]).expand(n, -1).contiguous()
    draws = sample_next(batch, temperature, top_k, top_p if top_p < 1 else None, torch.Generator().manual_seed(7))
    freq = torch.bincount(draws, minlength=len(logits)).double() / n
    for i, p in enumerate(target):
        if p == 0:
            assert freq[i] == 0, f"token {i} was filtered out but drawn"
        else:
            assert abs(freq[i] - p) < 5 * math.sqrt(p * (1 - p) / n), (i, freq[i].item(), p)


def test_transforms_come_before_the_draw():
    """Top-k=1 must make sampling deterministic: filtering after drawing would not."""
    logits = torch.tensor([[0.0, 0.1, 0.2, 0.05]]).expand(500, -1)
    draws = sample_next(logits, 1.0, top_k=1, generator=torch.Generator().manual_seed(0))
    assert (draws == 2).all()


def test_sample_next_is_reproducible_with_a_generator():
    logits = torch.randn(4, 30, generator=torch.Generator().manual_seed(1))
    a = sample_next(logits, 0.9, 10, 0.9, torch.Generator().manual_seed(5))
    b = sample_next(logits, 0.9, 10, 0.9, torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


# --- generate ---------------------------------------------------------------

def test_generate_returns_prompt_then_new_tokens(config, gen):
    model = Transformer(config)
    prompt = torch.randint(0, 256, (2, 5), generator=gen)
    out = generate(model, prompt, 8, temperature=0.8, top_k=20, generator=torch.Generator().manual_seed(0))
    assert out.shape == (2, 13) and torch.equal(out[:, :5], prompt)
    one = generate(model, prompt[0], 4, temperature=0)
    assert one.shape == (9,) and torch.equal(one[:5], prompt[0])


def test_generate_with_and_without_cache_agree(config, gen):
    model = Transformer(config)
    prompt = torch.randint(0, 256, (2, 5), generator=gen)
    kw = dict(temperature=1.0, top_p=0.9)
    with_cache = generate(model, prompt, 12, generator=torch.Generator().manual_seed(4), **kw)
    without = generate(model, prompt, 12, generator=torch.Generator().manual_seed(4), use_cache=False, **kw)
    assert torch.equal(with_cache, without)


def test_generate_turns_dropout_off_and_restores_the_mode(config, gen):
    model = Transformer(dataclasses.replace(config, dropout=0.5))
    prompt = torch.randint(0, 256, (2, 5), generator=gen)
    model.train()
    a = generate(model, prompt, 10, temperature=0)
    assert model.training, "generate must restore train mode"
    model.eval()
    assert torch.equal(a, generate(model, prompt, 10, temperature=0))
    assert not model.training


def test_generate_rejects_bad_requests(config):
    model = Transformer(config)
    prompt = torch.zeros(1, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="max_seq_len"):
        generate(model, prompt, config.max_seq_len)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, prompt, -1)
    with pytest.raises(TypeError, match="integer"):
        generate(model, prompt.float(), 3)
    with pytest.raises(ValueError, match="temperature"):
        generate(model, prompt, 3, temperature=-0.5)


def test_generated_tokens_can_be_used_as_training_data(config, gen):
    """generate decodes under inference_mode; its output must still be an
    ordinary tensor that autograd accepts (e.g. as the next training batch)."""
    model = Transformer(config)
    out = generate(model, torch.randint(0, 256, (2, 4), generator=gen), 6, temperature=0)
    model(out).sum().backward()
    assert model.tok_emb.weight.grad is not None


@pytest.mark.parametrize("bad_value, cause", [(-INF, "every logit is -inf"), (float("nan"), "NaN")])
def test_sample_next_names_the_row_that_cannot_be_sampled(bad_value, cause):
    logits = torch.zeros(3, 5)
    if bad_value != bad_value:  # NaN: one entry is enough to spoil the row
        logits[1, 2] = bad_value
    else:
        logits[1] = bad_value
    with pytest.raises(ValueError, match=f"row 1 .*{cause}"):
        sample_next(logits)
    with pytest.raises(ValueError, match=f"row 1 .*{cause}"):  # greedy too: argmax of such a row is arbitrary
        sample_next(logits, temperature=0)


def test_sample_next_filters_that_leave_nothing_are_named():
    logits = torch.tensor([[0.0, 1.0], [-INF, -INF]])
    with pytest.raises(ValueError, match="row 1 .*every logit is -inf"):
        sample_next(logits, top_k=1)


def _greedy_model():
    torch.manual_seed(0)
    return Transformer(ModelConfig(vocab_size=32, d_model=32, n_layers=1, n_heads=2, max_seq_len=40)).eval()


def test_generate_stops_once_every_row_has_produced_the_stop_token():
    model = _greedy_model()
    prompts = torch.tensor([[1, 2, 3], [4, 5, 6]])
    free = generate(model, prompts, 12, temperature=0).tolist()  # no stop token: 3 + 12 ids per row
    stop = free[0][3 + 2]  # the third new token of row 0
    ends = [row[3:].index(stop) + 1 if stop in row[3:] else 12 for row in free]  # new tokens up to the stop
    length = 3 + max(ends)
    expected = [(row[: 3 + end] + [stop] * length)[:length] for row, end in zip(free, ends)]
    assert generate(model, prompts, 12, temperature=0, stop_token=stop).tolist() == expected


def test_generate_stream_yields_what_generate_returns():
    model = _greedy_model()
    prompt = torch.tensor([1, 2, 3])
    assert list(generate_stream(model, prompt, 9, temperature=0)) == generate(model, prompt, 9, temperature=0)[3:].tolist()
    with pytest.raises(ValueError, match="stop_token"):
        generate(model, prompt, 2, stop_token=32)
    with pytest.raises(ValueError, match="one sequence"):
        list(generate_stream(model, prompt[None], 2))

