"""One function per experiment of the course: each builds its arms, trains
them with train_side_by_side and returns a plain dataclass of results.
`EXPERIMENTS` maps the CLI's names to (function, plot)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from ..config import ModelConfig
from ..model import Transformer
from . import plots
from .runs import (SMALL_MODEL, SMALL_TRAIN, Arm, Curves, attention_entropy, entropy_vs_head_dim,
                   kv_bytes_per_token, loss_per_position, small_model, train_side_by_side, uniform_causal_entropy, with_steps)
from .variants import (with_gelu_mlp, with_layer_norm, with_learned_positions, with_moe, with_post_norm,
                       with_unscaled_attention, without_norm, without_positions)

Builder = Callable[[ModelConfig], nn.Module]

__all__ = ["ScaleResult", "PositionResult", "KVResult", "SweepResult", "MoEResult", "attention_scale",
           "positions", "norms", "block_order", "mlp", "moe", "kv_heads", "learning_rates", "warmup",
           "clipping", "TrainingChoices", "training_choices", "EXPERIMENTS"]


def _arms(config: ModelConfig, swaps: dict[str, Callable | None]) -> dict[str, Arm]:
    """label -> Arm of Transformer(config) with a swap applied (None: tinylm's model as it is)."""
    return {label: Arm(lambda swap=swap: (swap or (lambda m: m))(Transformer(config))) for label, swap in swaps.items()}


@dataclass
class ScaleResult:
    curves: Curves
    head_dim: int
    entropy_at_init: dict[str, float]   # mean attention entropy (nats) of each arm before training
    entropy_trained: dict[str, float]   # ... and after
    max_entropy: float                  # the uniform causal softmax's
    synthetic_head_dims: list[int]
    synthetic_entropy: dict[str, list[float]]  # unit-variance q, k: "scaled" / "unscaled" per head size


def attention_scale(corpus, steps: int | None = None, d_model: int = 64, n_heads: int = 1, seed: int = 0,
                    progress: bool = False) -> ScaleResult:
    """softmax(q kᵀ / sqrt(hd)) against softmax(q kᵀ) at a large head size."""
    config = small_model(d_model=d_model, n_heads=n_heads)
    tc = with_steps(SMALL_TRAIN, steps)
    arms = _arms(config, {"scaled 1/sqrt(head_dim)": None, "unscaled": with_unscaled_attention})
    probe = corpus.val[: 8 * tc.seq_len].long().view(8, tc.seq_len)  # (8, T) validation windows
    at_init = {}
    for label, arm in arms.items():
        torch.manual_seed(seed)
        at_init[label] = attention_entropy(arm.build(), probe)
    curves = train_side_by_side(arms, corpus, tc, seed, progress)
    dims = [8, 16, 32, 64, 128, 256]
    return ScaleResult(curves, config.head_dim, at_init,
                       {label: attention_entropy(m, probe) for label, m in curves.models.items()},
                       uniform_causal_entropy(tc.seq_len), dims,
                       {"scaled": entropy_vs_head_dim(dims, tc.seq_len, True, seed),
                        "unscaled": entropy_vs_head_dim(dims, tc.seq_len, False, seed)})


@dataclass
class PositionResult:
    curves: Curves
    train_len: int
    loss_per_position: dict[str, list[float]]  # per arm, positions 0 .. eval_len - 1


def positions(corpus, steps: int | None = None, train_len: int = 64, factor: int = 4,
              thetas: tuple[float, ...] = (10000.0, 100.0), n_windows: int = 32, seed: int = 0,
              progress: bool = False) -> PositionResult:
    """RoPE (several thetas), no position information and learned absolute
    positions, trained on windows of train_len and scored at every position
    of windows factor times longer."""
    config = small_model(max_seq_len=train_len * factor)
    tc = dataclasses.replace(with_steps(SMALL_TRAIN, steps), seq_len=train_len)
    arms = {f"RoPE theta={t:g}": _arms(small_model(max_seq_len=train_len * factor, rope_theta=t), {"": None})[""] for t in thetas}
    arms |= _arms(config, {"no positions (NoPE)": without_positions, "learned absolute": with_learned_positions})
    curves = train_side_by_side(arms, corpus, tc, seed, progress)
    return PositionResult(curves, train_len, {label: loss_per_position(m, corpus.val, config.max_seq_len, n_windows)
                                              for label, m in curves.models.items()})


def norms(corpus, steps: int | None = None, lr: float | None = None, seed: int = 0, progress: bool = False) -> Curves:
    """Pre-norm blocks with RMSNorm, with LayerNorm, and with no norm at all."""
    tc = with_steps(SMALL_TRAIN, steps)
    tc = tc if lr is None else dataclasses.replace(tc, lr=lr, min_lr=lr / 10)
    return train_side_by_side(_arms(small_model(n_layers=4),
                                    {"RMSNorm": None, "LayerNorm": with_layer_norm, "no norm": without_norm}),
                              corpus, tc, seed, progress)


def block_order(corpus, steps: int | None = None, lr: float = 3e-2, n_layers: int = 4, seed: int = 0,
                progress: bool = False) -> Curves:
    """Pre-norm (x + f(norm(x))) against post-norm (norm(x + f(x))) blocks."""
    tc = dataclasses.replace(with_steps(SMALL_TRAIN, steps), lr=lr, min_lr=lr / 10)
    return train_side_by_side(_arms(small_model(n_layers=n_layers),
                                    {"pre-norm": None, "post-norm": with_post_norm}), corpus, tc, seed, progress)


def mlp(corpus, steps: int | None = None, seed: int = 0, progress: bool = False) -> Curves:
    """SwiGLU against a GELU MLP with as many weights."""
    return train_side_by_side(_arms(SMALL_MODEL, {"SwiGLU": None, "GELU MLP": with_gelu_mlp}),
                              corpus, with_steps(SMALL_TRAIN, steps), seed, progress)


@dataclass
class MoEResult:
    curves: Curves
    expert_share: list[list[float]]  # per layer, the share of routed tokens each expert received in training


def moe(corpus, steps: int | None = None, n_experts: int = 4, top_k: int = 1, seed: int = 0,
        progress: bool = False) -> MoEResult:
    """A top-k routed mixture of SwiGLU experts against the dense SwiGLU, at
    equal active MLP weights per token."""
    curves = train_side_by_side(_arms(SMALL_MODEL, {"dense SwiGLU": None,
                                                    f"MoE {n_experts} experts, top-{top_k}":
                                                        lambda m: with_moe(m, n_experts, top_k)}),
                                corpus, with_steps(SMALL_TRAIN, steps), seed, progress)
    routed = list(curves.models.values())[1]
    shares = [(b.mlp.counts / b.mlp.counts.sum().clamp(min=1)).tolist() for b in routed.blocks]
    return MoEResult(curves, shares)


@dataclass
class KVResult:
    curves: Curves
    n_kv_heads: dict[str, int]
    kv_bytes_per_token: dict[str, int]  # float32 keys and values, every layer


def kv_heads(corpus, steps: int | None = None, n_heads: int = 8, kv: tuple[int, ...] = (8, 4, 2, 1),
             seed: int = 0, progress: bool = False) -> KVResult:
    """n_kv_heads swept from MHA (= n_heads) to MQA (1)."""
    configs = {f"{'MHA' if n == n_heads else 'MQA' if n == 1 else 'GQA'} n_kv_heads={n}":
               small_model(n_heads=n_heads, n_kv_heads=n) for n in kv}
    arms = {label: _arms(cfg, {"": None})[""] for label, cfg in configs.items()}
    curves = train_side_by_side(arms, corpus, with_steps(SMALL_TRAIN, steps), seed, progress)
    return KVResult(curves, {k: c.n_kv_heads for k, c in configs.items()},
                    {k: kv_bytes_per_token(c) for k, c in configs.items()})


# --- training options (notebook 09): `build` may be the learner's model ---

def _same_model(build: Builder, trains: dict[str, object]) -> dict[str, Arm]:
    return {label: Arm(lambda: build(SMALL_MODEL), tc) for label, tc in trains.items()}


@dataclass
class SweepResult:
    curves: Curves
    lrs: list[float]
    final_val: list[float]  # nan where the run diverged


def learning_rates(corpus, steps: int | None = None, lrs: tuple[float, ...] = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1),
                   build: Builder = Transformer, seed: int = 0, progress: bool = False) -> SweepResult:
    """The same model and schedule at several peak learning rates."""
    tc = with_steps(SMALL_TRAIN, steps)
    arms = _same_model(build, {f"lr={lr:g}": dataclasses.replace(tc, lr=lr, min_lr=lr / 10) for lr in lrs})
    curves = train_side_by_side(arms, corpus, tc, seed, progress)
    return SweepResult(curves, list(lrs), list(curves.final_val().values()))


def warmup(corpus, steps: int | None = None, lr: float = 3e-2, build: Builder = Transformer, seed: int = 0,
           progress: bool = False) -> Curves:
    """Linear warmup against none, at one (high) peak learning rate."""
    tc = dataclasses.replace(with_steps(SMALL_TRAIN, steps), lr=lr, min_lr=lr / 10)
    return train_side_by_side(_same_model(build, {f"warmup {tc.warmup_steps} steps": tc,
                                                  "no warmup": dataclasses.replace(tc, warmup_steps=0)}),
                              corpus, tc, seed, progress)


def clipping(corpus, steps: int | None = None, lr: float = 3e-2, build: Builder = Transformer, seed: int = 0,
             progress: bool = False) -> Curves:
    """Gradient-norm clipping at 1.0 against none, at one (high) peak learning rate."""
    tc = dataclasses.replace(with_steps(SMALL_TRAIN, steps), lr=lr, min_lr=lr / 10)
    return train_side_by_side(_same_model(build, {f"clip at {tc.grad_clip:g}": tc,
                                                  "no clipping": dataclasses.replace(tc, grad_clip=None)}),
                              corpus, tc, seed, progress)


@dataclass
class TrainingChoices:
    sweep: SweepResult
    warmup: Curves    # with and without warmup, at the sweep's learning rate `lr`
    clipping: Curves  # with and without clipping, at the same learning rate


def training_choices(corpus, steps: int | None = None, lrs: tuple[float, ...] = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1),
                     lr: float = 3e-2, build: Builder = Transformer, seed: int = 0,
                     progress: bool = False) -> TrainingChoices:
    """learning_rates, warmup and clipping in one go: the sweep's run at `lr`
    is the baseline of the other two, so it is trained once."""
    if lr not in lrs:
        raise ValueError(f"training_choices: lr={lr} must be one of lrs={lrs}, its baseline is the sweep's run")
    tc = with_steps(SMALL_TRAIN, steps)
    at = {x: dataclasses.replace(tc, lr=x, min_lr=x / 10) for x in lrs}
    arms = _same_model(build, {**{f"lr={x:g}": c for x, c in at.items()},
                               "no warmup": dataclasses.replace(at[lr], warmup_steps=0),
                               "no clipping": dataclasses.replace(at[lr], grad_clip=None)})
    curves = train_side_by_side(arms, corpus, tc, seed, progress)
    base = f"lr={lr:g}"
    sweep = curves.select({f"lr={x:g}": f"lr={x:g}" for x in lrs})
    return TrainingChoices(SweepResult(sweep, list(lrs), list(sweep.final_val().values())),
                           curves.select({base: f"warmup {tc.warmup_steps} steps", "no warmup": "no warmup"}),
                           curves.select({base: f"clip at {tc.grad_clip:g}", "no clipping": "no clipping"}))


EXPERIMENTS = {
    "attention_scale": (attention_scale, plots.plot_attention_scale),
    "positions": (positions, plots.plot_positions),
    "norms": (norms, plots.plot_curves),
    "block_order": (block_order, plots.plot_curves),
    "mlp": (mlp, plots.plot_curves),
    "moe": (moe, plots.plot_moe),
    "kv_heads": (kv_heads, plots.plot_kv_heads),
    "learning_rates": (learning_rates, plots.plot_lr_sweep),
    "warmup": (warmup, plots.plot_curves),
    "clipping": (clipping, plots.plot_curves),
    "training_choices": (training_choices, plots.plot_training_choices),
}
