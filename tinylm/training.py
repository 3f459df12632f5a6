"""Training: random batches, AdamW, warmup + cosine schedule, checkpoints.

    history = train(model, corpus.train, corpus.val, steps=600, lr=3e-3)
    plot_history(history, floor=corpus.floor)

`train` is a thin wrapper around `Trainer`, which runs one step at a time so
that a benchmark can interleave two models. A checkpoint holds everything
that decides the future of a run (weights, optimizer moments, step, the
batch sampler's random state, the history), so a resumed run produces the
same losses as one that was never interrupted.

Speed comes from torch: AdamW's fused kernel where the device has one, and
`compile=True` (opt-in) runs the model through torch.compile.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from .evaluation import check_data, evaluate
from .validation import check_token_ids

__all__ = ["TrainConfig", "History", "Trainer", "TrainingDiverged", "get_batch", "train", "lr_at",
           "train_step_accumulated", "plot_history", "load_model"]


def get_batch(data: torch.Tensor, batch_size: int, seq_len: int,
              generator: torch.Generator | None = None, device=None):
    """`batch_size` random windows of `data`: inputs x and targets y, both (B, T).

    y is x shifted left by one: y[b, t] = data[start_b + t + 1], the token
    that follows x[b, t]. Windows start anywhere in [0, len(data) - seq_len - 1].
    """
    data = check_data(data)
    for name, value in (("batch_size", batch_size), ("seq_len", seq_len)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if len(data) < seq_len + 1:
        raise ValueError(f"data has {len(data)} tokens, too few for one window of seq_len="
                         f"{seq_len} (+1 target); use a shorter seq_len or more text")
    starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator)  # (B,)
    idx = starts[:, None] + torch.arange(seq_len + 1)  # (B, T+1) positions in data
    window = data[idx].long()  # (B, T+1)
    x, y = window[:, :-1], window[:, 1:]  # (B, T) each: y is x shifted by one
    if device is not None:
        x, y = x.to(device), y.to(device)
    return x, y


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 1000
    batch_size: int = 16
    seq_len: int = 128
    lr: float = 3e-3  # peak learning rate, reached at the end of warmup
    min_lr: float | None = None  # the cosine decays to this at the last step; None = lr / 10
    warmup_steps: int = 50
    weight_decay: float = 0.1  # applied to matrices only (see _param_groups)
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float | None = 1.0  # max global gradient norm; None = no clipping
    eval_every: int = 100  # steps between evaluations; 0 = only at the end
    eval_tokens: int = 32_768  # evaluate on this prefix of val_data (None: all of it)
    seed: int = 0  # seeds the batch sampler

    def __post_init__(self):
        for name in ("steps", "batch_size", "seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"TrainConfig.{name} must be a positive int, got {value!r}")
        for name in ("warmup_steps", "eval_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"TrainConfig.{name} must be an int >= 0, got {value!r}")
        if not (self.lr > 0 and (self.min_lr is None or 0 <= self.min_lr <= self.lr)):
            raise ValueError(f"TrainConfig needs lr > 0 and 0 <= min_lr <= lr, got lr={self.lr}, "
                             f"min_lr={self.min_lr}")
        if self.weight_decay < 0:
            raise ValueError(f"TrainConfig.weight_decay must be >= 0, got {self.weight_decay}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"TrainConfig.grad_clip must be > 0 or None, got {self.grad_clip}")
        # A list (e.g. from a JSON or checkpoint round trip) becomes a tuple again.
        object.__setattr__(self, "betas", tuple(self.betas))


def lr_at(step: int, config: TrainConfig) -> float:
    """Learning rate for optimizer step `step` (0-based).

    Linear warmup from lr/warmup_steps to lr (Adam's moment estimates are
    noisy in the first steps, large updates then can derail training), then a
    half cosine from lr down to min_lr (default lr / 10) at the last step.
    """
    c = config
    min_lr = c.lr / 10 if c.min_lr is None else c.min_lr
    if step < c.warmup_steps:
        return c.lr * (step + 1) / c.warmup_steps
    decay_steps = max(1, c.steps - 1 - c.warmup_steps)
    progress = min(1.0, (step - c.warmup_steps) / decay_steps)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (c.lr - min_lr)


def train_step_accumulated(model: nn.Module, optimizer: torch.optim.Optimizer, micro_batches, grad_clip: float | None = 1.0,
                     ignore_index: int = -100) -> float:
    """One optimizer step on a batch given as micro-batches [(x, y), ...]
    (each (b, T); y may hold ignore_index), with the gradients of the whole
    batch: returns the mean loss over every target token of every micro-batch.

    Each micro-batch's summed loss is divided by the number of target tokens in
    the whole batch, so the gradients that add up in .grad are those of one
    big batch, whatever the micro-batches' token counts; zero_grad, clipping
    and the step happen once, around the loop.
    """
    micro_batches = list(micro_batches)
    if not micro_batches:
        raise ValueError("train_step_accumulated needs at least one micro-batch")
    n_tokens = sum(int((y != ignore_index).sum()) for _, y in micro_batches)
    if n_tokens == 0:
        raise ValueError(f"every target of the batch is ignore_index={ignore_index}: there is no loss to train on")
    model.train()
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for x, y in micro_batches:
        logits = model(x)  # (b, T, V)
        summed = nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=ignore_index,
                                             reduction="sum")
        (summed / n_tokens).backward()  # adds this micro-batch's share of the batch's gradient to .grad
        total += summed.item()
    if grad_clip is not None:
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # the norm of the whole batch's gradient
    optimizer.step()
    return total / n_tokens


@dataclass
class History:
    """What happened, one entry per step (train_*) or per evaluation (val_*).

    time is cumulative seconds spent in training steps (evaluation excluded),
    so two models can be compared at equal wall-clock time.
    """

    step: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    time: list[float] = field(default_factory=list)
    val_step: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    val_time: list[float] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Decay matrices (linear and embedding weights), not vectors (norm gains,
    biases): shrinking a gain toward 0 only fights the normalisation."""
    params = [p for p in model.parameters() if p.requires_grad]  # tied weights appear once
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def _fused_adamw_available(model: nn.Module) -> bool:
    """AdamW's fused kernel (one kernel for every parameter's update) exists
    for CUDA, MPS and the CPU in torch >= 2.4, for floating-point parameters."""
    params = list(model.parameters())
    return (bool(params) and all(p.dtype.is_floating_point for p in params)
            and params[0].device.type in ("cuda", "mps", "cpu", "xpu"))


def _unwrapped(model: nn.Module) -> nn.Module:
    """The model inside a DistributedDataParallel / DataParallel wrapper (whose
    state_dict names carry a `module.` prefix and which has no config), or the model."""
    while isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
        model = model.module
    return model


def _refuse_float16(model: nn.Module) -> None:
    half = [name for name, p in model.named_parameters() if p.dtype == torch.float16]
    if half:
        raise TypeError(
            f"Trainer: the model's parameters are float16 ({half[0]}, ...); training them directly diverges to NaN "
            f"within a few steps (AdamW's eps=1e-8 rounds to 0 in float16, small gradients underflow, and there is "
            f"no loss scaling). Train in bfloat16 (model.to(torch.bfloat16)) or float32 instead.")


class TrainingDiverged(FloatingPointError):
    """The loss or the gradient norm of a step was NaN or infinite."""


class Trainer:
    """Holds a model, its optimizer and the batch sampler; advances one step at a time.

    `model` may be wrapped in DistributedDataParallel: the wrapper runs the
    steps, the module inside it is what checkpoints save and load."""

    def __init__(self, model: nn.Module, data: torch.Tensor, val_data: torch.Tensor | None = None,
                 config: TrainConfig | None = None, *, compile: bool = False, **overrides):
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
        config = config or TrainConfig()
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        unknown = set(overrides) - {f.name for f in dataclasses.fields(TrainConfig)}
        if unknown:
            raise TypeError(f"unknown training option(s) {sorted(unknown)}; "
                            f"valid: {[f.name for f in dataclasses.fields(TrainConfig)]}")
        self.config = dataclasses.replace(config, **overrides)
        _refuse_float16(model)
        self.module = _unwrapped(model)
        max_len = getattr(getattr(self.module, "config", None), "max_seq_len", None)
        if max_len is not None and self.config.seq_len > max_len:
            raise ValueError(f"seq_len={self.config.seq_len} exceeds the model's max_seq_len="
                             f"{max_len}; lower seq_len or build a longer model")
        self.model = model
        self.data = check_data(data, "data", self.config.seq_len + 1)
        self.val_data = None if val_data is None else check_data(val_data, "val_data")
        vocab_size = getattr(getattr(self.module, "config", None), "vocab_size", None)
        if vocab_size is not None:  # every id checked once, with a message naming it
            check_token_ids(self.data, vocab_size, "data")
        self.device = next(model.parameters()).device
        self.optimizer = torch.optim.AdamW(_param_groups(model, self.config.weight_decay),
                                           lr=self.config.lr, betas=self.config.betas,
                                           fused=_fused_adamw_available(model))
        # torch.compile traces the model on the first step (seconds to minutes)
        # and runs generated kernels afterwards; the module and its parameters
        # stay the same objects, so checkpoints and evaluate() are unchanged.
        self.forward = torch.compile(model) if compile else model
        self.generator = torch.Generator().manual_seed(self.config.seed)
        self.history = History()
        self.step_count = 0  # optimizer steps done so far
        self.elapsed = 0.0  # seconds spent in training steps

    def step(self) -> float:
        """One optimizer step on a fresh random batch; returns its training loss."""
        c, model = self.config, self.model
        t0 = time.perf_counter()
        lr = lr_at(self.step_count, c)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if not model.training:  # evaluate() restores the mode it found; train() walks every module
            model.train()
        x, y = get_batch(self.data, c.batch_size, c.seq_len, self.generator, self.device)
        logits = self.forward(x)  # (B, T, V)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if c.grad_clip is not None:
            norm = nn.utils.clip_grad_norm_(model.parameters(), c.grad_clip).item()
        else:
            norm = math.sqrt(sum(p.grad.pow(2).sum().item() for p in model.parameters()
                                 if p.grad is not None))
        loss_value = loss.item()  # .item() waits for the device: the timing is honest
        self._check_finite(loss_value, norm, lr)  # before the update, so the weights stay usable
        self.optimizer.step()
        self.elapsed += time.perf_counter() - t0
        self.step_count += 1
        h = self.history
        h.step.append(self.step_count)
        h.train_loss.append(loss_value)
        h.lr.append(lr)
        h.grad_norm.append(norm)
        h.time.append(self.elapsed)
        return loss_value

    def _check_finite(self, loss: float, grad_norm: float, lr: float) -> None:
        if math.isfinite(loss) and math.isfinite(grad_norm):
            return
        what = f"loss {loss}" if not math.isfinite(loss) else f"gradient norm {grad_norm} (loss {loss:.4f})"
        dtype = next(self.module.parameters()).dtype
        raise TrainingDiverged(
            f"training diverged at step {self.step_count + 1}: {what}, at lr={lr:.3g}. The weights are those "
            f"before this step (not updated). Likely causes: a learning rate too high (try lr={self.config.lr / 10:.3g}, "
            f"or more warmup_steps), half precision overflowing (parameters are {dtype}; float32 or bfloat16 are "
            f"safe), or weights that already hold NaN/inf (a diverged checkpoint).")

    def evaluate(self) -> float:
        """Validation loss (nats/token) on the first eval_tokens of val_data, recorded."""
        if self.val_data is None:
            raise ValueError("no val_data was given to the Trainer")
        n = self.config.eval_tokens
        data = self.val_data if n is None else self.val_data[: n + 1]
        loss = evaluate(self.module, data, seq_len=self.config.seq_len).loss
        self.history.val_step.append(self.step_count)
        self.history.val_loss.append(loss)
        self.history.val_time.append(self.elapsed)
        return loss

    @property
    def done(self) -> bool:
        return self.step_count >= self.config.steps

    def run(self, steps: int | None = None, time_limit: float | None = None, quiet: bool = False,
            checkpoint_path=None, checkpoint_every: int | None = None) -> History:
        """Train until config.steps (or `steps` more steps, or `time_limit`
        seconds of training), evaluating every eval_every steps and at the end."""
        from tqdm.auto import tqdm

        c = self.config
        stop = c.steps if steps is None else min(c.steps, self.step_count + steps)
        bar = tqdm(total=stop, initial=self.step_count, disable=quiet, desc="train",
                   unit="step", dynamic_ncols=True)
        try:
            while self.step_count < stop:
                loss = self.step()
                bar.update(1)
                last = self.step_count == stop or (time_limit is not None and self.elapsed >= time_limit)
                if self.val_data is not None and (
                        last or (c.eval_every and self.step_count % c.eval_every == 0)):
                    self.evaluate()
                if checkpoint_path is not None and (
                        last or (checkpoint_every and self.step_count % checkpoint_every == 0)):
                    self.save(checkpoint_path)
                postfix = {"loss": f"{loss:.3f}", "lr": f"{self.history.lr[-1]:.1e}"}
                if self.history.val_loss:
                    postfix["val"] = f"{self.history.val_loss[-1]:.3f}"
                bar.set_postfix(postfix, refresh=False)
                if last:
                    break
        finally:
            bar.close()
        return self.history

    # --- checkpoints: plain containers only, loadable with weights_only=True ---

    def state_dict(self) -> dict:
        return {
            "model": self.module.state_dict(),  # without a DDP wrapper's `module.` prefix
            "model_config": dataclasses.asdict(self.module.config) if hasattr(self.module, "config") else None,
            "optimizer": self.optimizer.state_dict(),
            "train_config": dataclasses.asdict(self.config),
            "step": self.step_count,
            "elapsed": self.elapsed,
            "generator": self.generator.get_state(),
            "torch_rng": torch.get_rng_state(),  # dropout, if any, draws from it
            "history": self.history.as_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.config = TrainConfig(**state["train_config"])
        self.step_count = state["step"]
        self.elapsed = state["elapsed"]
        self.generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        self.history = History(**state["history"])

    def save(self, path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        torch.save(self.state_dict(), tmp)
        tmp.replace(path)  # a crash mid-save leaves the previous checkpoint intact

    def load(self, path) -> None:
        self.load_state_dict(_load(path))

    def resume(self, path, **overrides) -> None:
        """load(path), then change the saved training options given as keywords:
        more `steps` continue the run (the cosine is stretched to the new
        length from the current step on), a new `lr`/`min_lr` sets the
        schedule's levels from here on. The history is kept as saved."""
        self.load(path)
        if not overrides:
            return
        if overrides.get("seed", self.config.seed) != self.config.seed:
            raise ValueError("seed cannot change when resuming: the batch sampler continues from its saved state; "
                             "start a new run (without resume) for another seed")
        config = dataclasses.replace(self.config, **overrides)
        if config.steps < self.step_count:
            raise ValueError(f"steps={config.steps} is fewer than the {self.step_count} steps already done "
                             f"in the checkpoint; pass steps > {self.step_count} to train further")
        self.config = config
        for group in self.optimizer.param_groups:  # lr is set each step; the rest lives in the groups
            group["betas"] = config.betas
            if group["weight_decay"]:
                group["weight_decay"] = config.weight_decay


def _load(path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}; train one with "
                                f"`python -m tinylm train --out {path}`")
    # weights_only=True: a checkpoint is data, never code that runs on load.
    return torch.load(path, map_location="cpu", weights_only=True)


def load_model(path, map_location=None):
    """Rebuild the Transformer saved in a checkpoint (in eval mode)."""
    from .config import ModelConfig
    from .model import Transformer

    state = _load(path)
    if state.get("model_config") is None:
        raise ValueError(f"{path} holds no model_config; it was not saved by tinylm.train")
    model = Transformer(ModelConfig(**state["model_config"]))
    model.load_state_dict(state["model"])
    if map_location is not None:
        model.to(map_location)
    return model.eval()


def train(model: nn.Module, data: torch.Tensor, val_data: torch.Tensor | None = None,
          config: TrainConfig | None = None, *, resume_from=None, checkpoint_path=None,
          checkpoint_every: int | None = None, time_limit: float | None = None,
          quiet: bool = False, compile: bool = False, **overrides) -> History:
    """Train `model` on the token stream `data`; returns the History.

    Options are TrainConfig fields, given as `config` and/or keywords
    (train(model, corpus.train, corpus.val, steps=300, lr=1e-3)).
    resume_from: a checkpoint to continue from. Its saved training config is
    used, so the schedule continues where it stopped, except for options given
    here as keywords, which win (e.g. steps=2000 to train further; see
    Trainer.resume). time_limit: stop after this many seconds of training
    steps. compile: run the model through torch.compile (off by default: see
    docs/benchmarks.md for what it costs and gains).
    """
    trainer = Trainer(model, data, val_data, config, compile=compile, **overrides)
    if resume_from is not None:
        trainer.resume(resume_from, **overrides)
    return trainer.run(time_limit=time_limit, quiet=quiet, checkpoint_path=checkpoint_path,
                       checkpoint_every=checkpoint_every)


def plot_history(history: History, floor: float | None = None, ax=None, label: str = "",
                 x: str = "step"):
    """Training and validation loss against step (x="step") or seconds (x="time")."""
    import matplotlib.pyplot as plt

    if x not in ("step", "time"):
        raise ValueError(f"x must be 'step' or 'time', got {x!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    prefix = f"{label} " if label else ""
    xs, val_xs = (history.step, history.val_step) if x == "step" else (history.time, history.val_time)
    train_line, = ax.plot(xs, history.train_loss, alpha=0.35, label=f"{prefix}train")
    if history.val_loss:
        ax.plot(val_xs, history.val_loss, "o-", color=train_line.get_color(), label=f"{prefix}val")
    if floor is not None:
        ax.axhline(floor, color="k", ls="--", lw=1, label=f"floor {floor:.3f}")
    ax.set_xlabel("step" if x == "step" else "training seconds")
    ax.set_ylabel("loss (nats/byte)")
    ax.legend()
    return ax
