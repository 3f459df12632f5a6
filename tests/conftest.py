import pytest
import torch

from tinylm import ModelConfig


@pytest.fixture
def config() -> ModelConfig:
    """See helpers.py for why every size differs."""
    return ModelConfig(vocab_size=256, d_model=40, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=64)


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


@pytest.fixture
def course_dir(tmp_path, monkeypatch):
    """A course folder with mylm/ inside (the learner's saved answers); the
    kernel sits in one notebook folder at a time."""
    monkeypatch.setenv("TINYLM_MYLM", str(tmp_path / "mylm"))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    return tmp_path


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
