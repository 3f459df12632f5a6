"""evaluate(): token-weighted NLL over the whole split, independent of batching."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tinylm import ModelConfig, Transformer
from tinylm.evaluation import evaluate


def _model(max_seq_len=24, dropout=0.0):
    torch.manual_seed(7)
    return Transformer(ModelConfig(d_model=40, n_layers=2, n_heads=4, n_kv_heads=2,
                                   max_seq_len=max_seq_len, dropout=dropout))


def _data(n, seed=3):
    return torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed))


def test_one_window_equals_cross_entropy():
    model, data = _model(max_seq_len=50), _data(50)
    result = evaluate(model, data, seq_len=49)
    reference = F.cross_entropy(model(data[None, :-1])[0], data[1:])
    assert result.tokens == 49
    assert result.loss == pytest.approx(reference.item(), rel=1e-5)
    assert result.perplexity == pytest.approx(math.exp(result.loss))
    assert result.bits_per_byte == pytest.approx(result.loss / math.log(2))


def test_every_token_is_scored_once_and_weighted_equally():
    # 301 tokens, windows of 13: 23 full windows and one of 1 prediction.
    model, data, T = _model(), _data(301), 13
    total, count = 0.0, 0
    for start in range(0, len(data) - 1, T):
        x, y = data[start:start + T], data[start + 1:start + T + 1]
        x = x[: len(y)]
        total += F.cross_entropy(model(x[None])[0], y, reduction="sum").item()
        count += len(y)
    assert count == 300
    assert evaluate(model, data, seq_len=T).loss == pytest.approx(total / count, rel=1e-5)


def test_batch_size_does_not_change_the_result():
    model, data = _model(), _data(500)
    results = [evaluate(model, data, batch_size=b, seq_len=17).loss for b in (1, 3, 8, 64)]
    assert max(results) - min(results) < 1e-5


def test_a_uniform_model_scores_ln_256():
    class Uniform(nn.Module):
        config = ModelConfig(max_seq_len=16)

        def __init__(self):
            super().__init__()
            self.dummy = nn.Parameter(torch.zeros(1))

        def forward(self, idx):
            return torch.zeros(*idx.shape, 256)  # (B, T, V): equal logits

    result = evaluate(Uniform(), _data(100), seq_len=16)
    assert result.loss == pytest.approx(math.log(256))
    assert result.bits_per_byte == pytest.approx(8.0)
    assert result.perplexity == pytest.approx(256.0)


@pytest.mark.parametrize("was_training", [True, False])
def test_mode_is_restored_dropout_off_and_no_gradients(was_training):
    model = _model(dropout=0.5)
    model.train(was_training)
    data = _data(200)
    a = evaluate(model, data, seq_len=20)
    b = evaluate(model, data, seq_len=20)
    assert a.loss == b.loss  # dropout would make two runs differ
    assert model.training is was_training
    assert all(p.grad is None for p in model.parameters())


def test_bad_input():
    model = _model()
    with pytest.raises(TypeError, match="1-D torch.Tensor"):
        evaluate(model, [1, 2, 3])
    with pytest.raises(ValueError, match="1-D"):
        evaluate(model, _data(40).view(4, 10))
    with pytest.raises(TypeError, match="integer"):
        evaluate(model, torch.rand(40))
    with pytest.raises(ValueError, match="max_seq_len"):
        evaluate(model, _data(100), seq_len=25)
    with pytest.raises(ValueError, match="batch_size"):
        evaluate(model, _data(100), batch_size=0)
    with pytest.raises(ValueError, match="at least 2"):
        evaluate(model, _data(1))


def test_evaluate_after_manual_sgd_equals_a_fresh_model_with_the_same_weights():
    """p.data -= lr * p.grad (a hand-written optimizer) must be seen
    by evaluate(), exactly as by a model built from those weights."""
    model, data = _model(), _data(2000)
    x, y = data[:240].view(10, 24), data[1:241].view(10, 24)  # (10, 24) windows and their next tokens
    untrained = evaluate(model, data, seq_len=24)  # a model that caches derived weights fills its cache here
    for _ in range(20):
        model.zero_grad()
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        for p in model.parameters():
            p.data -= 0.5 * p.grad
    fresh = _model()
    fresh.load_state_dict(model.state_dict())
    trained, rebuilt = evaluate(model, data, seq_len=24), evaluate(fresh, data, seq_len=24)
    assert trained.loss == rebuilt.loss
    assert trained.loss < untrained.loss - 0.05  # the 20 steps did change the weights
