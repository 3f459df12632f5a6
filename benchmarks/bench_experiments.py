"""The long experiment cells of the notebooks, each at its full size (all its
seeds), timed on this machine: the seconds a cell states for the stated
machine (tinylm.experiments.pacing.STATED_S) come from this table, run on an
idle 2-core machine.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_experiments.py            # every cell
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_experiments.py norms mlp  # some

Wall seconds are what a learner waits; CPU seconds (this process, one
thread) are what a loaded machine inflates least. Both include building the
models and the measurements after training, as the cell does.
"""
from __future__ import annotations

import argparse
import time

import torch

import tinylm
from tinylm import experiments
from tinylm.experiments import pacing

# experiment -> the seeds its notebook cell runs
CELLS = {"norms": (0, 1), "attention_scale": (0, 1), "positions": (0, 1), "block_order": (0, 1), "mlp": (0, 1),
         "moe": (0, 1), "kv_heads": (0, 1), "training_choices": (0, 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cells", nargs="*", metavar="CELL", help=f"some of {', '.join(CELLS)} (default: all)")
    args = p.parse_args()
    unknown = [c for c in args.cells if c not in CELLS]
    if unknown:
        p.error(f"unknown cell {', '.join(unknown)}: choose from {', '.join(CELLS)}")
    torch.set_num_threads(1)
    corpus = tinylm.course_corpus()
    print(f"{'cell':<18} {'seeds':>5} {'wall s':>8} {'CPU s':>8} {'stated s':>9}")
    for name in args.cells or CELLS:
        run, _ = experiments.EXPERIMENTS[name]
        wall, cpu = time.perf_counter(), time.process_time()
        for seed in CELLS[name]:
            run(corpus, seed=seed)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"{name:<18} {len(CELLS[name]):>5} {wall:8.1f} {cpu:8.1f} {pacing.STATED_S.get(name, float('nan')):9.0f}",
              flush=True)


if __name__ == "__main__":
    main()
