"""Every bad input gets a clear error that names the parameter and the fix."""
import pytest
import torch

from tinylm import KVCache, Transformer, device, embed, sample_next

from ..helpers import BATCH


@pytest.fixture
def model(config):
    return Transformer(config)


def test_token_ids_outside_the_vocabulary(model):
    with pytest.raises(ValueError, match=r"token id 256, outside the vocabulary \[0, 256\)"):
        model(torch.tensor([[1, 2, 256]]))
    with pytest.raises(ValueError, match="token id -1"):
        model(torch.tensor([[-1, 2]]))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        embed(torch.tensor([[300]]), torch.zeros(256, 8))


def test_wrong_dtypes_and_shapes(model):
    with pytest.raises(TypeError, match=r"idx must hold integer token ids .*idx.long\(\)"):
        model(torch.zeros(2, 5))
    with pytest.raises(TypeError, match="torch.Tensor"):
        model([[1, 2, 3]])
    with pytest.raises(ValueError, match=r"idx\[None\]"):
        model(torch.zeros(5, dtype=torch.long))
    with pytest.raises(TypeError, match="floating-point"):
        sample_next(torch.zeros(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"logits\[:, -1, :\]"):
        sample_next(torch.zeros(2, 3, 5))


def test_sequence_longer_than_max_seq_len(model, config):
    with pytest.raises(ValueError, match=f"exceeds max_seq_len={config.max_seq_len}"):
        model(torch.zeros(1, config.max_seq_len + 1, dtype=torch.long))


def test_cache_full_or_built_for_another_batch(model, config):
    cache = KVCache(config, BATCH)
    with pytest.raises(ValueError, match=f"built for batch_size={BATCH} but got a batch of {BATCH + 2}"):
        model(torch.zeros(BATCH + 2, 4, dtype=torch.long), cache=cache)
    with torch.no_grad():  # one-token decoding steps: the same checks
        model(torch.zeros(BATCH, 3, dtype=torch.long), cache=cache)
        with pytest.raises(ValueError, match=f"built for batch_size={BATCH} but got a batch of {BATCH + 2}"):
            model(torch.zeros(BATCH + 2, 1, dtype=torch.long), cache=cache)
        with pytest.raises(TypeError, match=r"KVCache stores torch.float64 .*dtype=torch.float32"):
            model(torch.zeros(BATCH, 1, dtype=torch.long), cache=KVCache(config, BATCH, dtype=torch.float64))
    cache = KVCache(config, 1)
    model(torch.zeros(1, config.max_seq_len, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match=r"KVCache is full.*cache.reset\(\)"):
        model(torch.zeros(1, 1, dtype=torch.long), cache=cache)


def test_device_override(monkeypatch, capsys):
    monkeypatch.setenv("TINYLM_DEVICE", "cpu")
    assert device() == torch.device("cpu")
    assert "TINYLM_DEVICE" in capsys.readouterr().out
    monkeypatch.setenv("TINYLM_DEVICE", "gpu-please")
    with pytest.raises(ValueError, match="TINYLM_DEVICE='gpu-please'"):
        device()
    monkeypatch.delenv("TINYLM_DEVICE")
    chosen = device(verbose=False)
    assert chosen.type in {"cuda", "mps", "cpu"}
    assert capsys.readouterr().out == ""
