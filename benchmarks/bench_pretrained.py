"""SmolLM2-135M-Instruct in tinylm: conversion, cached load, memory, decoding speed.

    python benchmarks/bench_pretrained.py                    # all cores, 64 new tokens, 5 runs
    python benchmarks/bench_pretrained.py --threads 1 --new-tokens 64 --repeats 5
    python benchmarks/bench_pretrained.py --dtype float32 bfloat16       # each dtype's speed beside its own bound
    python benchmarks/bench_pretrained.py --compile                      # eager and torch.compile, taking turns

Each phase runs in a fresh child process, so its peak resident memory
(ru_maxrss) is its own: the first conversion (GGUF -> float32, into an empty
temporary TINYLM_CACHE), then a load from that cache followed by greedy
decoding with the KV cache after a chat prompt.

The bound: a decoding step of one token reads every float32 weight once
(the matrices are used once per token, far too few flops per byte to be
compute-bound), so tokens/s cannot exceed memory read bandwidth / weight
bytes. The bandwidth is measured in the same child, right after decoding,
with the same threads, as the rate of repeated sums over a tensor as large as
the weights: the same amount of memory read in the same cyclic order. That
matters where the last-level cache holds a good part of the weights (some
server CPUs have hundreds of MiB): a smaller or larger tensor would measure
another mix of cache and DRAM.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPT = "Write a long story about a lighthouse keeper and a storm."


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def phase_convert() -> dict:
    from tinylm import pretrained

    start = time.perf_counter()
    pretrained.pretrained_state_dict()
    return {"convert_s": time.perf_counter() - start, "convert_rss_mib": _peak_rss_mib()}


def read_bandwidth_gbs(n_bytes: int, repeats: int = 5) -> float:
    """Bytes per second of x.sum() over a float32 tensor of n_bytes (median).
    Read as float32 whatever the weights' dtype: the same bytes, and a sum
    in float32 is the fastest read torch has on every CPU."""
    import torch

    x = torch.ones(n_bytes // 4)
    x.sum()  # first touch of the pages
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        x.sum()
        times.append(time.perf_counter() - start)
    return x.numel() * 4 / statistics.median(times) / 1e9


def time_decoding(model, prompt, new_tokens: int) -> dict:
    """One greedy generate_stream: the prefill (to the first token), then the
    rest as tokens/s of wall time and ms of this process's CPU time per token."""
    from tinylm import generate_stream

    start = time.perf_counter()
    stream = generate_stream(model, prompt, new_tokens, temperature=0)  # no stop token: exactly new_tokens
    tokens = [next(stream)]
    first, first_cpu = time.perf_counter(), time.process_time()
    tokens += list(stream)
    end, end_cpu = time.perf_counter(), time.process_time()
    rest = len(tokens) - 1
    return {"prefill_s": first - start, "tok_s": rest / (end - first),
            "cpu_ms": (end_cpu - first_cpu) / rest * 1e3, "tokens": tokens}


def matrix_products_alone(model, rounds: int) -> float:
    """CPU ms of one token's matrix products and nothing else: F.linear on
    the model's own weights, in the order a decoding step uses them, on a
    one-token input. What a token would cost if everything between the
    products were free."""
    import torch
    import torch.nn.functional as F

    weights = [w for block in model.blocks for w in (
        block.attn.q_proj.weight, block.attn.k_proj.weight, block.attn.v_proj.weight, block.attn.o_proj.weight,
        block.mlp.gate_proj.weight, block.mlp.up_proj.weight, block.mlp.down_proj.weight)] + [model.lm_head.weight]
    inputs = {w.shape[1]: torch.randn(1, 1, w.shape[1], dtype=w.dtype) for w in weights}
    start = time.process_time()
    with torch.inference_mode():
        for _ in range(rounds):
            for w in weights:
                F.linear(inputs[w.shape[1]], w)
    return (time.process_time() - start) / rounds * 1e3


def operations_per_token(model, prompt) -> int:
    """torch operations dispatched by one cached decoding step (the third
    token), counted below autograd, as the kernels see them."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from tinylm import generate_stream

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    stream = generate_stream(model, prompt, 4, temperature=0)
    next(stream), next(stream)
    with Count():
        next(stream)
    stream.close()
    return Count.n


def phase_load_and_decode(new_tokens: int, repeats: int, bandwidth_mib: int, dtype: str = "float32",
                          compiled: bool = False) -> dict:
    import torch

    from tinylm import generate_stream, pretrained

    start = time.perf_counter()
    model, tok = pretrained.load_pretrained(dtype=getattr(torch, dtype))
    load_s = time.perf_counter() - start
    load_rss = _peak_rss_mib()
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())  # tied head counted once
    prompt = torch.tensor(tok.chat_ids(PROMPT))
    list(generate_stream(model, prompt, 4, temperature=0))  # warm up kernels and the allocator
    ways = {"eager": model}
    result = {}
    if compiled:
        # The same model and forward, compiled by inductor (C++ kernels for the
        # element-wise work between the matrix products). The parent points
        # TORCHINDUCTOR_CACHE_DIR at an empty folder: this is a cold compile,
        # of the prompt's graph and of the one-token step's.
        ways["compiled"] = torch.compile(model)
        start, start_cpu = time.perf_counter(), time.process_time()
        list(generate_stream(ways["compiled"], prompt, 4, temperature=0))
        result.update(compile_s=time.perf_counter() - start, compile_cpu_s=time.process_time() - start_cpu)
    runs = {way: [] for way in ways}
    alone = []
    for _ in range(repeats):
        for way, m in ways.items():  # interleaved: each repeat decodes every way in turn
            runs[way].append(time_decoding(m, prompt, new_tokens))
        alone.append(matrix_products_alone(model, new_tokens - 1))
    result.update(matmul_cpu_ms=statistics.median(alone), ops_per_token=operations_per_token(model, prompt))
    decode_rss = _peak_rss_mib()  # before the bandwidth tensor adds its own
    bandwidth = read_bandwidth_gbs(bandwidth_mib * 2**20 if bandwidth_mib else weight_bytes)
    reference = runs["eager"][0]["tokens"]
    result.update({"load_s": load_s, "load_rss_mib": load_rss, "weight_mib": weight_bytes / 2**20,
                   "prompt_tokens": len(prompt), "bandwidth_gbs": bandwidth,
                   "bound_tok_s": bandwidth * 1e9 / weight_bytes, "peak_rss_mib": decode_rss,
                   "ways": {way: {"prefill_s": statistics.median(r["prefill_s"] for r in rs),
                                  "decode_tok_s": statistics.median(r["tok_s"] for r in rs),
                                  "decode_runs": [r["tok_s"] for r in rs],
                                  "cpu_ms_per_token": statistics.median(r["cpu_ms"] for r in rs),
                                  "same_tokens": all(r["tokens"] == reference for r in rs)}
                            for way, rs in runs.items()}})
    return result


def run_phase(args: argparse.Namespace, phase: str, cache: str, dtype: str = "float32") -> dict:
    env = dict(os.environ, TINYLM_CACHE=cache, OMP_NUM_THREADS=str(args.threads))
    if args.compile:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(Path(cache) / f"inductor-{dtype}")  # empty: a cold compile
    cmd = [sys.executable, __file__, "--phase", phase, "--threads", str(args.threads),
           "--new-tokens", str(args.new_tokens), "--repeats", str(args.repeats),
           "--bandwidth-mib", str(args.bandwidth_mib), "--dtype", dtype] + (["--compile"] if args.compile else [])
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"phase {phase} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads (default: all cores)")
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5, help="decoding runs; the median is reported")
    p.add_argument("--bandwidth-mib", type=int, default=0,
                   help="size of the tensor the bandwidth is read from (default 0: the weights' size)")
    p.add_argument("--dtype", nargs="+", choices=("float32", "bfloat16"), default=["float32"],
                   help="weights' dtype(s) for decoding; several are decoded in turn, each beside its own bound")
    p.add_argument("--compile", action="store_true",
                   help="also decode with torch.compile(model) (needs a C++ compiler), taking turns with eager "
                        "decoding in every repeat; prints the cold compile's time")
    p.add_argument("--phase", choices=("convert", "decode"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.new_tokens < 2 or args.repeats < 1 or args.bandwidth_mib < 0:
        p.error("--new-tokens must be at least 2, --repeats at least 1, --bandwidth-mib at least 0")
    if args.phase:
        import torch

        torch.set_num_threads(args.threads)
        result = phase_convert() if args.phase == "convert" else phase_load_and_decode(
            args.new_tokens, args.repeats, args.bandwidth_mib, args.dtype[0], args.compile)
        print(json.dumps(result))
        return

    from tinylm import pretrained

    reason = pretrained.why_unavailable()
    if reason:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory(prefix="tinylm-bench-cache-") as cache:
        c = run_phase(args, "convert", cache)
        decoded = {dtype: run_phase(args, "decode", cache, dtype) for dtype in args.dtype}
    size = pretrained.gguf_path().stat().st_size
    print(f"{pretrained.PRETRAINED_NAME} in tinylm, {args.threads} thread(s), GGUF file {size / 1e6:.0f} MB, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"  {'first conversion (cold cache)':<42}{c['convert_s']:8.1f} s    peak RSS {c['convert_rss_mib']:6.0f} MiB")
    for dtype, d in decoded.items():
        print(f"  {dtype} weights, {d['weight_mib']:.0f} MiB")
        print(f"  {'load from the cache':<42}{d['load_s']:8.1f} s    peak RSS {d['load_rss_mib']:6.0f} MiB")
        if "compile_s" in d:
            print(f"  {'torch.compile, cold (both graphs)':<42}{d['compile_s']:8.1f} s    CPU {d['compile_cpu_s']:.1f} s")
        summed = f"{args.bandwidth_mib} MiB" if args.bandwidth_mib else "weight-sized tensor"
        print(f"  {'read bandwidth (sum, ' + summed + ')':<42}{d['bandwidth_gbs']:8.1f} GB/s")
        print(f"  {'bound: bandwidth / weight bytes':<42}{d['bound_tok_s']:8.1f} tokens/s")
        for way, w in d["ways"].items():
            label = "" if len(d["ways"]) == 1 else f"{way}: "
            print(f"  {label + 'prefill (' + str(d['prompt_tokens']) + '-token chat prompt)':<42}{w['prefill_s']:8.2f} s")
            print(f"  {label + 'greedy decoding, KV cache':<42}{w['decode_tok_s']:8.1f} tokens/s (median of {args.repeats}: "
                  + ", ".join(f"{r:.1f}" for r in w["decode_runs"]) + f"), CPU {w['cpu_ms_per_token']:.1f} ms/token")
            print(f"  {label + 'decoding / bound':<42}{w['decode_tok_s'] / d['bound_tok_s']:8.2f}")
            if way != "eager":
                print(f"  {label + 'tokens identical to eager':<42}{'yes' if w['same_tokens'] else 'NO':>8}")
        print(f"  {'the matrix products alone':<42}{d['matmul_cpu_ms']:8.1f} CPU ms/token (taking turns with decoding)")
        print(f"  {'torch operations per eager token':<42}{d['ops_per_token']:8d}")
        print(f"  {'peak RSS, load + decoding':<42}{d['peak_rss_mib']:8.0f} MiB")


if __name__ == "__main__":
    main()
