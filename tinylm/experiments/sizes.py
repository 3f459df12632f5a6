"""The small model and training run every experiment starts from. A module of
its own so that both the runs and their pacing (which needs the default step
count) read it without importing each other."""
from __future__ import annotations

from ..config import ModelConfig
from ..training import TrainConfig

# About 40 ms a step on one busy CPU core: 150 steps of an arm take seconds.
SMALL_SIZES = dict(d_model=64, n_layers=2, n_heads=4, max_seq_len=64)
SMALL_MODEL = ModelConfig(**SMALL_SIZES)
SMALL_TRAIN = TrainConfig(steps=150, batch_size=8, seq_len=64, lr=1e-2, min_lr=1e-3, warmup_steps=15,
                          eval_every=50, eval_tokens=8192)
