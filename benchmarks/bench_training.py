"""tinylm vs a GPT-2-style baseline of equal size: one run, interleaved, eager mode.

    python benchmarks/bench_training.py            # notebook-09 preset, 60 s each, 1 thread
    python benchmarks/bench_training.py --time-limit 30 --steps 800 --threads 2

    python benchmarks/bench_training.py --compile-cost 60   # tinylm eager vs torch.compile, 60 steps each

Both models see the same batches (same seed), the same optimizer, schedule
and evaluation. They train in alternating chunks of steps, so a change in
machine load hits both alike. Time is training time only (evaluation is
excluded). Prints a table and saves artifacts/bench_training.png.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpt2_baseline import gpt2_like  # noqa: E402

from tinylm import Transformer, course_corpus, evaluate  # noqa: E402
from tinylm.presets import NB09_MODEL, NB09_TIME_LIMIT, NB09_TRAIN  # noqa: E402
from tinylm.training import Trainer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--time-limit", type=float, default=NB09_TIME_LIMIT, help="training seconds per model")
    p.add_argument("--steps", type=int, default=NB09_TRAIN.steps, help="max steps (schedule length)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--chunk", type=int, default=1, help="steps per turn when interleaving")
    p.add_argument("--time-marks", type=float, default=10.0, help="evaluate every this many seconds")
    p.add_argument("--plot", type=Path, default=ROOT / "artifacts" / "bench_training.png", help="where to save the figure")
    p.add_argument("--compile-cost", type=int, metavar="STEPS",
                   help="instead: tinylm eager vs train(compile=True), STEPS steps each; prints the time before "
                        "the first step and the median step time after it")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    corpus = course_corpus()
    if args.compile_cost:
        return compile_cost(corpus, args.compile_cost, args.threads)
    config = dataclasses.replace(NB09_TRAIN, steps=args.steps)
    models = {}
    torch.manual_seed(0)
    models["tinylm"] = Transformer(NB09_MODEL)
    torch.manual_seed(0)
    models["gpt2"] = gpt2_like(NB09_MODEL)
    trainers = {k: Trainer(m, corpus.train, corpus.val, config) for k, m in models.items()}
    # Evaluations at equal wall-clock: the first step past each time mark.
    by_time = {k: {} for k in trainers}
    next_mark = {k: args.time_marks for k in trainers}
    # CPU seconds (all threads) per model: less sensitive than wall-clock to
    # other processes on a shared machine, reported next to tokens/s.
    cpu = {k: 0.0 for k in trainers}
    # Seconds of each step, to compare the two models step by step: a burst of
    # load hits one step of one model, so the median of the per-pair ratios
    # is the estimate least moved by it (the tokens/s ratio uses the totals).
    step_seconds = {k: [] for k in trainers}

    def active(k):
        t = trainers[k]
        return not t.done and t.elapsed < args.time_limit

    load_before = os.getloadavg()
    wall0 = time.perf_counter()
    while any(active(k) for k in trainers):
        for k, t in trainers.items():
            for _ in range(args.chunk):
                if not active(k):
                    break
                c0, t0 = time.process_time(), t.elapsed
                t.step()
                cpu[k] += time.process_time() - c0
                step_seconds[k].append(t.elapsed - t0)
                if config.eval_every and t.step_count % config.eval_every == 0:
                    t.evaluate()
                if t.elapsed >= next_mark[k]:
                    by_time[k][next_mark[k]] = t.evaluate()
                    next_mark[k] += args.time_marks
        if sys.stdout.isatty():  # a progress line, not thousands of lines in a log file
            print(" | ".join(f"{k}: step {t.step_count} {t.elapsed:5.1f}s" for k, t in trainers.items()),
                  end="\r", flush=True)
    print()
    final = {k: evaluate(t.model, corpus.val, seq_len=config.seq_len) for k, t in trainers.items()}
    load_after = os.getloadavg()

    # ---- table ----
    floor = corpus.floor
    rows = [("parameters", lambda k, t: f"{t.model.num_parameters():,}"),
            ("steps trained", lambda k, t: f"{t.step_count}"),
            ("training seconds", lambda k, t: f"{t.elapsed:.1f}"),
            ("tokens/s", lambda k, t: f"{t.step_count * config.batch_size * config.seq_len / t.elapsed:,.0f}"),
            ("tokens per CPU-second", lambda k, t: f"{t.step_count * config.batch_size * config.seq_len / cpu[k]:,.0f}")]
    # Step marks only (the time-mark evaluations also land in val_step).
    common_steps = sorted({s for s in trainers["tinylm"].history.val_step if s % config.eval_every == 0}
                          & set(trainers["gpt2"].history.val_step)) if config.eval_every else []
    for s in common_steps:
        rows.append((f"val @ step {s}", lambda k, t, s=s: f"{t.history.val_loss[t.history.val_step.index(s)]:.4f}"))
    common_marks = sorted(set(by_time["tinylm"]) & set(by_time["gpt2"]))
    for m in common_marks:
        rows.append((f"val @ {m:.0f} s", lambda k, t, m=m: f"{by_time[k][m]:.4f}"))
    rows.append(("final val (whole split)", lambda k, t: f"{final[k].loss:.4f}"))
    rows.append(("final - floor", lambda k, t: f"{final[k].loss - floor:+.4f}"))
    print(f"\ncorpus {corpus}\nfloor {floor:.4f} nats/byte; baselines " +
          ", ".join(f"{n} {v:.4f}" for n, v in corpus.baselines().items() if n != "floor"))
    print(f"config: {NB09_MODEL}\ntrain: {config}")
    print(f"torch {torch.__version__}, {args.threads} threads, {platform.processor() or platform.machine()}, "
          f"load average {load_before[0]:.2f} before / {load_after[0]:.2f} after, "
          f"wall {time.perf_counter() - wall0:.0f} s\n")
    print(f"{'':28}{'tinylm':>14}{'gpt2-style':>14}")
    for name, fn in rows:
        print(f"{name:28}{fn('tinylm', trainers['tinylm']):>14}{fn('gpt2', trainers['gpt2']):>14}")
    tok = {k: t.step_count * config.batch_size * config.seq_len / t.elapsed for k, t in trainers.items()}
    cpu_tok = {k: t.step_count / cpu[k] for k, t in trainers.items()}
    pairs = [t / g for t, g in zip(step_seconds["tinylm"], step_seconds["gpt2"])]
    print(f"\nstep time ratio tinylm / gpt2-style (target <= 1.30): {tok['gpt2'] / tok['tinylm']:.2f} from the totals; "
          f"{cpu_tok['gpt2'] / cpu_tok['tinylm']:.2f} in CPU time; "
          f"median over {len(pairs)} step pairs: {statistics.median(pairs):.2f}")
    print(f"tinylm within 0.15 nats/byte of the floor: {final['tinylm'].loss - floor <= 0.15} "
          f"(gap {final['tinylm'].loss - floor:.4f}, {trainers['tinylm'].elapsed:.1f} s of training)")
    if common_marks:
        m = common_marks[-1]
        print(f"lower val loss at equal time ({m:.0f} s): "
              f"{'tinylm' if by_time['tinylm'][m] < by_time['gpt2'][m] else 'gpt2-style'}")
    _plot(trainers, floor, args.plot)


def compile_cost(corpus, steps: int, threads: int) -> None:
    """The notebook-09 model trained eagerly and through torch.compile, in
    turn, from the same weights and batches: seconds of the first step
    (tracing and code generation for the compiled one) and median seconds of
    the steps after the first ten."""
    config = dataclasses.replace(NB09_TRAIN, steps=steps + 1)
    trainers = {}
    for name, compile in (("eager", False), ("compiled", True)):
        torch.manual_seed(0)
        trainers[name] = Trainer(Transformer(NB09_MODEL), corpus.train, None, config, compile=compile)
    first, step_seconds = {}, {k: [] for k in trainers}
    for name, t in trainers.items():
        t0 = time.perf_counter()
        t.step()
        first[name] = time.perf_counter() - t0
    load_before = os.getloadavg()
    for _ in range(steps):  # interleaved after the first step: machine load hits both alike
        for name, t in trainers.items():
            t0 = t.elapsed
            t.step()
            step_seconds[name].append(t.elapsed - t0)
    print(f"torch {torch.__version__}, {threads} thread(s), {platform.processor() or platform.machine()}, "
          f"load average {load_before[0]:.2f} before / {os.getloadavg()[0]:.2f} after")
    print(f"model {NB09_MODEL}\nbatch {config.batch_size} x {config.seq_len} tokens, {steps} interleaved steps each\n")
    print(f"{'':10}{'first step s':>14}{'median step ms':>16}")
    for name in trainers:
        print(f"{name:10}{first[name]:>14.2f}{1000 * statistics.median(step_seconds[name][10:]):>16.1f}")
    saved = statistics.median(step_seconds["eager"][10:]) - statistics.median(step_seconds["compiled"][10:])
    extra = first["compiled"] - first["eager"]
    verdict = (f"compiling pays off after {extra / saved:,.0f} steps" if saved > 0
               else "the compiled step is not faster: compiling never pays off here")
    print(f"\n{verdict} (notebook 09 trains {NB09_TRAIN.steps} steps)")


def _plot(trainers, floor, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tinylm.training import plot_history

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for i, (k, t) in enumerate(trainers.items()):
        for ax, x in zip(axes, ("step", "time")):
            plot_history(t.history, floor=floor if i == 0 else None, ax=ax, label=k, x=x)
    axes[0].set_ylim(floor - 0.05, 1.5)
    fig.suptitle("tinylm vs GPT-2-style baseline, course corpus")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
