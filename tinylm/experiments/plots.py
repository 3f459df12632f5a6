"""One plot per kind of result: labelled axes, a legend, one message each."""
from __future__ import annotations

import math


def _axes(ax, ncols: int = 1, width: float = 6.5):
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax
    _, axes = plt.subplots(1, ncols, figsize=(width * ncols, 3.6), squeeze=False)
    return axes[0] if ncols > 1 else axes[0][0]


def _label(curves, label: str) -> str:
    step = curves.diverged_at.get(label)
    return label if step is None else f"{label} (diverged at step {step})"


def plot_curves(curves, ax=None, title: str = "same seed, same batches, same steps"):
    """Validation loss (points) over the training loss (faint) of every arm."""
    ax = _axes(ax)
    for label, h in curves.histories.items():
        train, = ax.plot(h.step, h.train_loss, alpha=0.25)
        ax.plot(h.val_step, h.val_loss, "o-", color=train.get_color(), label=_label(curves, label))
    ax.set_xlabel("step"), ax.set_ylabel("loss (nats/byte)"), ax.set_title(title)
    ax.legend()
    return ax


def plot_attention_scale(result, axes=None):
    """Left: entropy of unit-variance q·k softmaxes against head size; right: the two models' losses."""
    left, right = _axes(axes, 2, 5.5)
    for name, values in result.synthetic_entropy.items():
        left.semilogx(result.synthetic_head_dims, values, "o-", base=2, label=f"{name} q·k")
    left.axhline(result.max_entropy, ls="--", c="k", lw=1, label="uniform attention")
    left.set_xlabel("head_dim"), left.set_ylabel("mean attention entropy (nats)")
    left.set_title("random q, k with unit-variance entries"), left.legend()
    plot_curves(result.curves, right, title=f"training at head_dim {result.head_dim}")
    return left, right


def plot_positions(result, ax=None, bucket: int = 16):
    """Loss at each position (averaged over buckets of positions), with the training length marked."""
    ax = _axes(ax, width=8)
    for label, losses in result.loss_per_position.items():
        means = [sum(losses[i:i + bucket]) / len(losses[i:i + bucket]) for i in range(0, len(losses), bucket)]
        ax.plot([i + bucket / 2 for i in range(0, len(losses), bucket)], means, "o-", label=_label(result.curves, label))
    ax.axvline(result.train_len, c="k", ls=":", label=f"trained on {result.train_len} positions")
    ax.set_xlabel("position in the window"), ax.set_ylabel("validation loss (nats/byte)")
    ax.set_title(f"trained on short windows, scored on longer ones (means over {bucket} positions)")
    ax.legend(loc="upper left", fontsize=8)
    return ax


def plot_kv_heads(result, ax=None):
    """Final validation loss against the KV cache's bytes per token, one point per n_kv_heads."""
    ax = _axes(ax)
    finals = result.curves.final_val()
    xs = [result.kv_bytes_per_token[k] for k in finals]
    ax.plot(xs, list(finals.values()), "o-")
    for label, x in zip(finals, xs):
        ax.annotate(label, (x, finals[label]), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("KV cache per token (bytes, float32)"), ax.set_ylabel("final validation loss (nats/byte)")
    ax.set_title("fewer KV heads: less memory, at what loss?")
    return ax


def plot_lr_sweep(result, ax=None):
    """Final validation loss against the peak learning rate (diverged runs drawn at the top)."""
    ax = _axes(ax)
    finite = [(lr, v) for lr, v in zip(result.lrs, result.final_val) if not math.isnan(v)]
    ax.semilogx([lr for lr, _ in finite], [v for _, v in finite], "o-", label="final validation loss")
    diverged = [lr for lr, v in zip(result.lrs, result.final_val) if math.isnan(v)]
    if diverged:
        top = max((v for _, v in finite), default=1.0)
        ax.plot(diverged, [top] * len(diverged), "rx", ms=10, label="diverged")
    ax.set_xlabel("peak learning rate"), ax.set_ylabel("validation loss (nats/byte)")
    ax.set_title("learning-rate sweep, same steps"), ax.legend()
    return ax


def plot_moe(result, axes=None):
    """Left: dense vs routed losses; right: the share of tokens each expert received, per layer."""
    left, right = _axes(axes, 2, 5.5)
    plot_curves(result.curves, left, title="dense vs routed MLP, equal active weights")
    n = len(result.expert_share[0])
    width = 0.8 / len(result.expert_share)
    for layer, shares in enumerate(result.expert_share):
        right.bar([e + layer * width for e in range(n)], shares, width, label=f"layer {layer}")
    right.axhline(1 / n, c="k", ls="--", lw=1, label="perfect balance")
    # one tick per expert, under the middle of its group of bars (matplotlib's default ticks fall at 0.5, 1.5, ...)
    right.set_xticks([e + (len(result.expert_share) - 1) * width / 2 for e in range(n)], [str(e) for e in range(n)])
    right.set_xlabel("expert"), right.set_ylabel("share of routed tokens"), right.set_title("load balance")
    right.legend()
    return left, right


def plot_training_choices(result, axes=None):
    """The sweep's U, then warmup and clipping at one learning rate, side by side."""
    sweep_ax, warmup_ax, clip_ax = _axes(axes, 3, 4.6)
    plot_lr_sweep(result.sweep, sweep_ax)
    plot_curves(result.warmup, warmup_ax, title="warmup or not")
    plot_curves(result.clipping, clip_ax, title="gradient clipping or not")
    return sweep_ax, warmup_ax, clip_ax
