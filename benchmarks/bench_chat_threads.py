"""How many threads `python -m tinylm chat` should decode with: SmolLM2-135M's
greedy decoding speed on 1 thread, 2 threads and torch's default, side by side.

    python benchmarks/bench_chat_threads.py                  # 3 rounds, 32 new tokens per run
    python benchmarks/bench_chat_threads.py --rounds 5 --new-tokens 64

Each measurement is bench_pretrained.py's decoding phase in a fresh child
process (the cached float32 weights, a 42-token chat prompt, greedy decoding
with the KV cache). The thread counts take turns within every round, and the
order rotates from round to round, so a change of load on a shared machine
falls on all of them alike; the table gives each count's median and its ratio
to one thread, and the load average before and after (speeds measured beside
other jobs are only comparable as ratios).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

import bench_pretrained  # the script's own folder is on sys.path


def torch_default_threads() -> int:
    """torch's thread count in a fresh process with no OMP_NUM_THREADS."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                          env=env, capture_output=True, text=True, check=True)
    return int(done.stdout)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--repeats", type=int, default=2, help="decoding runs per child process (median)")
    args = p.parse_args()
    if args.rounds < 1 or args.new_tokens < 2 or args.repeats < 1:
        p.error("--rounds and --repeats must be at least 1, --new-tokens at least 2")

    from tinylm import pretrained
    from tinylm.data import cache_dir

    reason = pretrained.why_unavailable()
    if reason:
        raise SystemExit(reason)
    pretrained.pretrained_state_dict()  # convert once here, not inside a timed child
    default = torch_default_threads()
    counts = sorted({1, 2, default})
    speeds: dict[int, list[float]] = {n: [] for n in counts}
    load_before = os.getloadavg()
    for round_index in range(args.rounds):
        order = counts[round_index % len(counts):] + counts[:round_index % len(counts)]
        for n in order:
            phase_args = argparse.Namespace(threads=n, new_tokens=args.new_tokens, repeats=args.repeats,
                                            bandwidth_mib=1, compile=False)
            result = bench_pretrained.run_phase(phase_args, "decode", str(cache_dir()))
            speeds[n].append(result["ways"]["eager"]["decode_tok_s"])
    load_after = os.getloadavg()
    print(f"{pretrained.PRETRAINED_NAME} greedy decoding, {args.rounds} rounds x {args.repeats} runs of "
          f"{args.new_tokens} tokens; torch's default here: {default} threads; {os.cpu_count()} CPUs")
    print(f"load average (1, 5, 15 min) before: {', '.join(f'{x:.1f}' for x in load_before)}; "
          f"after: {', '.join(f'{x:.1f}' for x in load_after)}")
    print(f"  {'threads':<10}{'median tokens/s':>16}{'vs 1 thread':>13}   every round")
    base = statistics.median(speeds[1])
    for n in counts:
        median = statistics.median(speeds[n])
        label = f"{n} (default)" if n == default else str(n)
        print(f"  {label:<10}{median:16.1f}{median / base:12.2f}x   " + ", ".join(f"{s:.1f}" for s in speeds[n]))


if __name__ == "__main__":
    main()
