"""Generation with and without the KV cache, at two model sizes, 1 thread.

    python benchmarks/bench_kv_cache.py                       # both sizes, 256 and 1024 new tokens
    python benchmarks/bench_kv_cache.py --sizes nb06 --lengths 256 1024 --repeats 3

Without the cache every new token re-runs the model over the whole sequence
(quadratic total work); with it, each step processes one token against the
stored keys and values. The arithmetic saved grows with the model, while
each cached step still pays a fixed cost per call (Python, dispatch, kernel
launches, sampling): so the notebook-06 model (d=64, 2 layers) gains less
than a wider, deeper one (d=256, 4 layers), where arithmetic dominates.

Greedy decoding, so both paths must produce the same tokens (checked). The
two runs alternate, --repeats pairs per length, and the speed-up is the
median of the per-pair ratios: a change in machine load hits both sides of a
pair alike.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from tinylm import ModelConfig, Transformer, generate
from tinylm.presets import NB06_MODEL

SIZES = {
    "nb06": NB06_MODEL,  # d=64, 2 layers, 4 heads: the notebook's model
    "d256": ModelConfig(d_model=256, n_layers=4, n_heads=8, max_seq_len=NB06_MODEL.max_seq_len),
}


def generation_seconds(model: Transformer, prompt: torch.Tensor, n_new: int, use_cache: bool) -> tuple[float, torch.Tensor]:
    """Wall-clock seconds of one greedy generation of n_new tokens, and its output."""
    start = time.perf_counter()
    out = generate(model, prompt, n_new, temperature=0, use_cache=use_cache)
    return time.perf_counter() - start, out


def measure_speedup(config: ModelConfig, n_new: int, prompt_len: int = 16, repeats: int = 3, seed: int = 0) -> dict:
    """Median seconds with and without the cache, and the median of the per-pair
    ratios (no cache / cache), for a randomly initialised model of `config`
    (speed does not depend on the weights' values)."""
    torch.manual_seed(seed)
    model = Transformer(config).eval()
    prompt = torch.randint(0, config.vocab_size, (1, prompt_len), generator=torch.Generator().manual_seed(seed))
    generate(model, prompt, 8)  # warm up kernels and the allocator
    cached, plain, ratios = [], [], []
    for _ in range(repeats):
        t_cache, with_cache = generation_seconds(model, prompt, n_new, use_cache=True)
        t_plain, without = generation_seconds(model, prompt, n_new, use_cache=False)
        if not torch.equal(with_cache, without):
            raise SystemExit(f"greedy outputs differ with and without the cache at {n_new} tokens ({config})")
        cached.append(t_cache), plain.append(t_plain), ratios.append(t_plain / t_cache)
    return {"parameters": model.num_parameters(), "cache_s": statistics.median(cached),
            "plain_s": statistics.median(plain), "speedup": statistics.median(ratios), "ratios": ratios}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["nb06", "d256"])
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 1024])
    p.add_argument("--prompt-len", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3, help="cached/uncached pairs per length")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    load_before = os.getloadavg()
    rows = [(size, n, measure_speedup(SIZES[size], n, args.prompt_len, args.repeats))
            for size in args.sizes for n in args.lengths]
    print(f"torch {torch.__version__}, {args.threads} thread(s), prompt {args.prompt_len} tokens, "
          f"{args.repeats} alternating pair(s), load average {load_before[0]:.2f} before / {os.getloadavg()[0]:.2f} after")
    for size in args.sizes:
        c = SIZES[size]
        print(f"{size}: d_model={c.d_model}, n_layers={c.n_layers}, n_heads={c.n_heads}")
    print(f"\n{'model':>6} {'params':>10} {'new tokens':>10} {'cache s':>9} {'no cache s':>11} {'tok/s cache':>12} "
          f"{'speed-up':>9} {'(range)':>14}")
    for size, n, r in rows:
        print(f"{size:>6} {r['parameters']:>10,} {n:>10} {r['cache_s']:>9.3f} {r['plain_s']:>11.3f} {n / r['cache_s']:>12,.0f} "
              f"{r['speedup']:>8.1f}x {min(r['ratios']):>6.1f}-{max(r['ratios']):.1f}x")


if __name__ == "__main__":
    main()
