"""Generation with and without the KV cache on the notebook-06 model, 2 threads.

    python benchmarks/bench_kv_cache.py
    python benchmarks/bench_kv_cache.py --lengths 256 1024 --repeats 3

Without the cache every new token re-runs the model over the whole sequence
(quadratic total work); with it, each step processes one token against the
stored keys and values. Greedy decoding, so both paths must produce the same
tokens (checked). The two runs alternate, --repeats pairs per length, and the
speed-up is the median of the per-pair ratios: a change in machine load hits
both sides of a pair alike.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from tinylm import Transformer, generate
from tinylm.presets import NB06_MODEL


def _timed(fn) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 1024])
    p.add_argument("--prompt-len", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5, help="cached/uncached pairs per length")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    model = Transformer(NB06_MODEL).eval()  # speed does not depend on the weights' values
    prompt = torch.randint(0, 256, (1, args.prompt_len), generator=torch.Generator().manual_seed(0))
    generate(model, prompt, 8)  # warm up kernels and allocator
    load_before = os.getloadavg()
    rows = []
    for n in args.lengths:
        cached, plain, ratios = [], [], []
        for _ in range(args.repeats):
            t_cache, with_cache = _timed(lambda: generate(model, prompt, n, temperature=0, use_cache=True))
            t_plain, without = _timed(lambda: generate(model, prompt, n, temperature=0, use_cache=False))
            if not torch.equal(with_cache, without):
                raise SystemExit(f"greedy outputs differ with and without the cache at {n} tokens")
            cached.append(t_cache), plain.append(t_plain), ratios.append(t_plain / t_cache)
        rows.append((n, statistics.median(cached), statistics.median(plain), ratios))
    print(f"model: {NB06_MODEL} ({model.num_parameters():,} parameters)")
    print(f"torch {torch.__version__}, {args.threads} threads, prompt {args.prompt_len} tokens, "
          f"{args.repeats} alternating pairs, load average {load_before[0]:.2f} before / {os.getloadavg()[0]:.2f} after\n")
    print(f"{'new tokens':>10} {'cache s':>9} {'no cache s':>11} {'tok/s cache':>12} {'speed-up':>9} {'(range)':>14}")
    for n, t_cache, t_plain, ratios in rows:
        print(f"{n:>10} {t_cache:>9.3f} {t_plain:>11.3f} {n / t_cache:>12,.0f} {statistics.median(ratios):>8.1f}x "
              f"{min(ratios):>6.1f}-{max(ratios):.1f}x")
    print("\ntargets: >= 4x at 256 tokens, >= 10x at 1024 tokens")


if __name__ == "__main__":
    main()
