"""One training step of tinylm against nanoGPT's model (or the GPT-2-style baseline), op by op.

    python benchmarks/bench_step.py --nanogpt /tmp/nanogpt          # against karpathy/nanoGPT's model.py
    python benchmarks/bench_step.py                                  # against benchmarks/gpt2_baseline.py (CI)
    python benchmarks/bench_step.py --steps 300 --profile 20         # plus torch.profiler tables of 20 steps each

--nanogpt names a folder holding nanoGPT's `model.py` (a checkout of
github.com/karpathy/nanoGPT; nothing of it is copied here). Both models get
nanoGPT's shakespeare_char sizes, 4 layers, 4 heads, d_model 128, 64-token
windows, batch 12, and a 256-entry byte vocabulary (tinylm: 836,736
parameters; nanoGPT with its default biases: 834,304; the GPT-2-style
baseline: 836,360). They go through one training loop: the same batches, AdamW with tinylm's settings (fused kernel,
decay on matrices only), gradient clipping at 1.0; only the call that turns
(inputs, targets) into the loss differs, because nanoGPT's model computes its
loss itself. The models alternate step by step, so a change in machine load
hits both. Steps are timed on the process's CPU clock, which another job on a
shared machine slows far less than the wall clock (that it preempts); the
figure is the median of the per-step CPU-time ratios, printed with the load
average before and after, and the wall-clock ratio beside it.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpt2_baseline import gpt2_like  # noqa: E402

from tinylm import ModelConfig, Transformer  # noqa: E402
from tinylm.training import _fused_adamw_available, _param_groups, get_batch  # noqa: E402

# nanoGPT's config/train_shakespeare_char.py at CPU size (its README's "baby GPT" for a laptop).
CONFIG = ModelConfig(vocab_size=256, d_model=128, n_layers=4, n_heads=4, max_seq_len=64)
BATCH_SIZE = 12
OPTIMIZER_IMPLS = ("fused", "foreach", "for-loop")


def load_nanogpt(folder: Path, config: ModelConfig) -> nn.Module:
    """nanoGPT's GPT from folder/model.py, at config's sizes (dropout 0, biases on: its defaults)."""
    path = Path(folder) / "model.py"
    if not path.is_file():
        raise SystemExit(f"--nanogpt {folder}: no model.py there; pass the folder of a nanoGPT checkout "
                         f"(git clone https://github.com/karpathy/nanoGPT).")
    spec = importlib.util.spec_from_file_location("nanogpt_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    gpt_config = module.GPTConfig(block_size=config.max_seq_len, vocab_size=config.vocab_size,
                                  n_layer=config.n_layers, n_head=config.n_heads, n_embd=config.d_model,
                                  dropout=0.0)
    return module.GPT(gpt_config)


def logits_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Loss of a model that returns logits (tinylm, the GPT-2-style baseline): Trainer's own line."""
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def nanogpt_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """nanoGPT's model returns (logits, loss) when given targets."""
    return model(x, y)[1]


class Contestant:
    """A model, its optimizer and its loss call, stepped by the one loop below."""

    def __init__(self, name: str, model: nn.Module, loss_of, optimizer_impl: str, compiled: bool = False):
        self.name, self.model, self.loss_of = name, model.train(), loss_of
        # torch.compile wraps the same module (its parameters, its one forward path): only the kernels differ.
        self.forward_model = torch.compile(self.model) if compiled else self.model
        flags = {"fused": {"fused": _fused_adamw_available(model)}, "foreach": {"foreach": True},
                 "for-loop": {"foreach": False}}[optimizer_impl]
        self.optimizer = torch.optim.AdamW(_param_groups(model, 0.1), lr=1e-3, betas=(0.9, 0.95), **flags)
        self.seconds: list[float] = []      # CPU seconds of each step (all threads)
        self.wall_seconds: list[float] = []

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        start, cpu_start = time.perf_counter(), time.process_time()
        loss = self.loss_of(self.forward_model, x, y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        value = loss.item()
        self.seconds.append(time.process_time() - cpu_start)
        self.wall_seconds.append(time.perf_counter() - start)
        return value


def contestants(nanogpt: Path | None, optimizer_impl: str, compiled: bool = False) -> list[Contestant]:
    torch.manual_seed(0)
    ours = Contestant("tinylm", Transformer(CONFIG), logits_loss, optimizer_impl, compiled)
    torch.manual_seed(0)
    if nanogpt is None:
        return [ours, Contestant("gpt2-style", gpt2_like(CONFIG), logits_loss, optimizer_impl, compiled)]
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # its constructor prints the parameter count
        theirs = load_nanogpt(nanogpt, CONFIG)
    return [ours, Contestant("nanoGPT", theirs, nanogpt_loss, optimizer_impl, compiled)]


def batch(data: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """tinylm's get_batch, made contiguous: nanoGPT's model views its targets (as its own loader stacks them)."""
    x, y = get_batch(data, BATCH_SIZE, CONFIG.max_seq_len, generator)
    return x.contiguous(), y.contiguous()


def run(models: list[Contestant], steps: int, warmup: int, data: torch.Tensor) -> None:
    """Alternate the models step by step on the same batches; the first `warmup` steps are not kept."""
    generator = torch.Generator().manual_seed(0)
    for i in range(warmup + steps):
        x, y = batch(data, generator)
        order = models if i % 2 == 0 else models[::-1]  # neither always runs right after the other
        for c in order:
            c.step(x, y)
        if i + 1 == warmup:
            for c in models:
                c.seconds.clear()
                c.wall_seconds.clear()


def profile_table(c: Contestant, steps: int, data: torch.Tensor, rows: int) -> str:
    from torch.profiler import ProfilerActivity, profile

    generator = torch.Generator().manual_seed(1)
    batches = [batch(data, generator) for _ in range(steps)]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for x, y in batches:
            c.step(x, y)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nanogpt", type=Path, help="folder of a nanoGPT checkout (its model.py is imported); "
                                                "default: the GPT-2-style baseline of benchmarks/gpt2_baseline.py")
    p.add_argument("--steps", type=int, default=300, help="timed steps per model")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps per model first")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--optimizer", choices=OPTIMIZER_IMPLS, default="fused", help="AdamW's implementation, for both")
    p.add_argument("--profile", type=int, default=0, metavar="STEPS",
                   help="also print torch.profiler's op table of STEPS steps of each model")
    p.add_argument("--rows", type=int, default=18, help="rows of each profile table")
    p.add_argument("--compile", action="store_true",
                   help="both models through torch.compile (inductor's fused CPU kernels; compiled in the warm-up)")
    args = p.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.profile < 0 or args.threads < 1:
        p.error("--steps and --threads must be at least 1, --warmup and --profile at least 0")

    torch.set_num_threads(args.threads)
    # Random bytes: the step's cost does not depend on what the text says.
    data = torch.randint(0, CONFIG.vocab_size, (200_000,), generator=torch.Generator().manual_seed(0),
                         dtype=torch.uint8)
    models = contestants(args.nanogpt, args.optimizer, args.compile)
    load_before = os.getloadavg()
    wall = time.perf_counter()
    run(models, args.steps, args.warmup, data)
    load_after = os.getloadavg()
    ours, theirs = models
    print(f"torch {torch.__version__}, {args.threads} thread(s), {platform.processor() or platform.machine()}, "
          f"load average {load_before[0]:.2f} before / {load_after[0]:.2f} after, wall {time.perf_counter() - wall:.0f} s")
    print(f"d_model {CONFIG.d_model}, {CONFIG.n_layers} layers, {CONFIG.n_heads} heads, batch {BATCH_SIZE} x "
          f"{CONFIG.max_seq_len} tokens, AdamW {args.optimizer}, {'compiled, ' if args.compile else ''}"
          f"{args.steps} interleaved steps each "
          f"after {args.warmup} warm-up steps\n")
    print(f"{'':14}{'parameters':>12}{'median CPU ms':>15}{'p10-p90':>13}{'median wall ms':>16}")
    for c in models:
        deciles = statistics.quantiles(c.seconds, n=10) if len(c.seconds) > 1 else [c.seconds[0]] * 9
        print(f"{c.name:14}{sum(q.numel() for q in c.model.parameters()):>12,}"
              f"{1000 * statistics.median(c.seconds):>15.2f}{f'{1000 * deciles[0]:.1f}-{1000 * deciles[-1]:.1f}':>13}"
              f"{1000 * statistics.median(c.wall_seconds):>16.2f}")
    cpu_pairs = [a / b for a, b in zip(ours.seconds, theirs.seconds)]
    wall_pairs = [a / b for a, b in zip(ours.wall_seconds, theirs.wall_seconds)]
    print(f"\nstep time ratio {ours.name} / {theirs.name}: {statistics.median(cpu_pairs):.3f} on the CPU clock "
          f"(median of {len(cpu_pairs)} step pairs); {statistics.median(wall_pairs):.3f} on the wall clock")
    if args.profile:
        for c in models:
            print(f"\n{c.name}: torch.profiler, {args.profile} steps, sorted by self CPU time\n")
            print(profile_table(c, args.profile, data, args.rows))


if __name__ == "__main__":
    main()
