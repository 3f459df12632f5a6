"""Small models trained side by side: same seed, same batches, same steps.

    curves = train_side_by_side({"a": Arm(build_a), "b": Arm(build_b)}, corpus, SMALL_TRAIN)

Every arm starts from torch.manual_seed(seed) and draws its batches from a
generator seeded the same way, so two arms differ only in what their builder
(or their TrainConfig) changes, and a rerun on the same machine gives the
same numbers. Sizes are in steps, never in seconds.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from ..attention import repeat_kv
from ..config import ModelConfig
from ..data import bigram_nll, unigram_nll
from ..model import Transformer
from ..rope import apply_rope
from ..training import History, TrainConfig, Trainer, TrainingDiverged
from . import pacing
from .sizes import SMALL_MODEL, SMALL_SIZES, SMALL_TRAIN
from .verdicts import Yardsticks

__all__ = ["SMALL_MODEL", "SMALL_TRAIN", "small_model", "Arm", "Curves", "train_side_by_side", "attention_entropy",
           "entropy_vs_head_dim", "loss_per_position", "kv_bytes_per_token", "yardsticks"]



@dataclass
class Arm:
    """One model of a comparison: how to build it, and (optionally) its own training options."""

    build: Callable[[], nn.Module]
    train: TrainConfig | None = None  # None: the comparison's config


@dataclass
class Curves:
    """What each arm did: its History, parameter count and, if its loss became
    inf or nan, the step where training stopped."""

    histories: dict[str, History]
    parameters: dict[str, int]
    diverged_at: dict[str, int]
    models: dict[str, nn.Module] = field(default_factory=dict, repr=False, compare=False)

    def final_val(self) -> dict[str, float]:
        """Last validation loss of each arm (nan for an arm that diverged)."""
        return {k: (h.val_loss[-1] if h.val_loss and k not in self.diverged_at else math.nan)
                for k, h in self.histories.items()}

    def select(self, labels: dict[str, str]) -> "Curves":
        """The arms named by the keys of `labels`, renamed to its values."""
        return Curves(*({new: getattr(self, f)[old] for old, new in labels.items() if old in getattr(self, f)}
                        for f in ("histories", "parameters", "diverged_at", "models")))

    def summary(self) -> str:
        """One line per arm: final validation loss, parameters, divergence."""
        lines = []
        for label, loss in self.final_val().items():
            end = (f"diverged at step {self.diverged_at[label]}" if label in self.diverged_at
                   else f"validation loss {loss:.3f} nats/byte")
            lines.append(f"  {label:<28} {end}   ({self.parameters[label]:,} parameters)")
        return "\n".join(lines)


def train_side_by_side(arms: dict[str, Arm], corpus, config: TrainConfig, seed: int = 0,
                       progress: bool = False) -> Curves:
    """Train each arm for its steps on corpus.train, evaluating on the first
    eval_tokens of corpus.val every eval_every steps and at the end. An arm
    whose training loss is not finite stops there (and is reported)."""
    from tqdm.auto import tqdm

    pacer = pacing.active()  # inside experiments.paced: a timed slice only, or progress lines
    curves = Curves({}, {}, {})
    for label, arm in arms.items():
        torch.manual_seed(seed)
        model = arm.build()
        trainer = Trainer(model, corpus.train, corpus.val, arm.train or config, seed=seed)
        c = trainer.config
        probing = pacer is not None and pacer.probing
        if probing:
            pacer.probe(trainer)
        bar = tqdm(total=c.steps, desc=label, unit="step", disable=not progress, dynamic_ncols=True)
        while not probing and not trainer.done:
            try:
                trainer.step()
            except TrainingDiverged:  # a diverging arm is a result of the experiment, not an error
                curves.diverged_at[label] = trainer.step_count + 1
                break
            if pacer is not None:
                pacer.tick(label, trainer.step_count, c.steps)
            bar.update(1)
            if trainer.done or (c.eval_every and trainer.step_count % c.eval_every == 0):
                trainer.evaluate()
                bar.set_postfix(val=f"{trainer.history.val_loss[-1]:.3f}", refresh=False)
        bar.close()
        curves.histories[label] = trainer.history
        curves.parameters[label] = sum(p.numel() for p in model.parameters())
        curves.models[label] = model.eval()
    return curves


# --- measurements on a model ---

@torch.no_grad()
def attention_entropy(model: Transformer, idx: torch.Tensor) -> float:
    """Mean entropy (nats) of the attention distributions of every head, layer
    and query position of `model` on the ids idx (B, T). The uniform causal
    distribution has entropy ln(t + 1) at query t."""
    inputs = []
    hooks = [block.attn.register_forward_pre_hook(lambda _m, args: inputs.append(args[0])) for block in model.blocks]
    try:
        model.eval()(idx)
    finally:
        for h in hooks:
            h.remove()
    entropies = []
    for block, x in zip(model.blocks, inputs):
        attn = block.attn
        q = apply_rope(attn._heads(attn.q_proj(x), attn.n_heads), model.rope_cos, model.rope_sin)     # (B, nh, T, hd)
        k = apply_rope(attn._heads(attn.k_proj(x), attn.n_kv_heads), model.rope_cos, model.rope_sin)  # (B, n_kv, T, hd)
        k = repeat_kv(k, attn.n_heads // attn.n_kv_heads)                                              # (B, nh, T, hd)
        entropies.append(_causal_entropy(q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim)))
    return float(torch.stack(entropies).mean())


def _causal_entropy(scores: torch.Tensor) -> torch.Tensor:
    """Mean entropy of the causal softmax of scores (..., T, T)."""
    T = scores.shape[-1]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    logp = scores.masked_fill(~mask, float("-inf")).log_softmax(dim=-1)  # (..., T, T)
    p = logp.exp()
    return -(p * logp.masked_fill(~mask, 0.0)).sum(-1).mean()            # masked keys: 0 · log 0 = 0


def entropy_vs_head_dim(head_dims, seq_len: int = 64, scaled: bool = True, seed: int = 0) -> list[float]:
    """Mean causal attention entropy for queries and keys with independent unit-
    variance entries (the seed's assumption), per head size: q·k has variance
    head_dim, so without the scale the softmax sharpens as heads grow."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for hd in head_dims:
        q, k = torch.randn(2, 16, seq_len, hd, generator=gen)  # (16, T, hd) each
        scores = q @ k.transpose(-2, -1)                           # (16, T, T), variance hd
        out.append(float(_causal_entropy(scores / math.sqrt(hd) if scaled else scores)))
    return out


def uniform_causal_entropy(seq_len: int) -> float:
    """The largest mean entropy a causal softmax can have: the mean of ln(t + 1)."""
    return sum(math.log(t + 1) for t in range(seq_len)) / seq_len


@torch.no_grad()
def loss_per_position(model: nn.Module, data: torch.Tensor, seq_len: int, n_windows: int = 32) -> list[float]:
    """Mean next-byte loss at each position 0..seq_len-1 over the first n_windows
    consecutive windows of data (each window starts without context)."""
    need = n_windows * seq_len + 1
    if len(data) < need:
        raise ValueError(f"loss_per_position needs {need} tokens of data for n_windows={n_windows} windows of "
                         f"seq_len={seq_len}, got {len(data)}; lower n_windows.")
    data = data[:need].long()
    x = data[:-1].view(n_windows, seq_len)  # (W, T)
    y = data[1:].view(n_windows, seq_len)   # (W, T)
    logits = model.eval()(x)                # (W, T, V)
    nll = nn.functional.cross_entropy(logits.transpose(1, 2), y, reduction="none")  # (W, T)
    return nll.mean(0).tolist()


def yardsticks(corpus, eval_tokens: int = SMALL_TRAIN.eval_tokens) -> Yardsticks:
    """The unigram's and the bigram's loss (fit on corpus.train) on the validation bytes that
    train_side_by_side scores: the first eval_tokens + 1 of corpus.val."""
    scored = corpus.val[: eval_tokens + 1]
    return Yardsticks(unigram_nll(corpus.train, scored), bigram_nll(corpus.train, scored))


def small_model(**changes) -> ModelConfig:
    """SMALL_MODEL with some sizes changed; n_kv_heads and d_ff follow the
    new sizes unless given (dataclasses.replace would keep the old ones)."""
    return ModelConfig(**{**SMALL_SIZES, **changes})


def kv_bytes_per_token(config: ModelConfig, bytes_per_value: int = 4) -> int:
    """KV-cache memory one token costs: keys and values of every layer and KV head."""
    return 2 * config.n_layers * config.n_kv_heads * config.head_dim * bytes_per_value


def with_steps(config: TrainConfig, steps: int | None) -> TrainConfig:
    """config with `steps` (None: unchanged); the warmup and evaluation
    spacing scale with it, so a longer rerun keeps the run's shape."""
    if steps is None or steps == config.steps:
        return config
    ratio = steps / config.steps
    return dataclasses.replace(config, steps=steps, warmup_steps=round(config.warmup_steps * ratio),
                               eval_every=max(1, round(config.eval_every * ratio)))
