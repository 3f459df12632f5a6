"""How long the checks take: every test cell (visible and hidden checks) on
the solutions, and the whole mutation benchmark (failing checks, with their
diagnoses), optionally side by side with another checkout of the course.

    python benchmarks/bench_check_time.py [--notebooks 02 05] [--repeat 5]
    python benchmarks/bench_check_time.py --baseline /path/to/other/checkout   # before/after, interleaved

Per test cell, the median of --repeat runs; each run defines the answers
again first (fresh function objects, as a re-run notebook has, so nothing a
check remembers about a function carries over) and times the test cell alone.
With --baseline, each measurement runs in its own process for each checkout,
the two alternating, so both see the same machine state; the ratio column is
this checkout's time over the baseline's. CPU only (TINYLM_DEVICE=cpu).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(root: Path, notebooks: list[str] | None, repeat: int, mutations: bool) -> dict:
    """{"cells": {"NN check_x": seconds}, "mutations": seconds or None}, measured in this process on `root`."""
    sys.path[:0] = [str(root), str(root / "benchmarks")]
    os.environ["TINYLM_DEVICE"] = "cpu"
    import contextlib
    import io
    import warnings

    import bench_diagnostics as bench
    from autograder.authoring.build import source_cells
    from autograder.notebook_format import nbg

    found: dict[str, float] = {}
    for nb in notebooks or [f"{n:02d}" for n in range(1, 11)]:
        cells = [c for c in source_cells(bench.source_file(nb)) if c.cell_type == "code"]
        setup = [c.source for c in cells if nbg(c).get("locked") and not nbg(c).get("grade")]
        answers = [c.source for c in cells if nbg(c).get("solution")]
        tests = [(nbg(c)["grade_id"], c.source) for c in cells if nbg(c).get("grade")]
        ns: dict = {"__name__": f"time_{nb}"}
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for src in setup:
                exec(compile(src, f"<{nb}:setup>", "exec"), ns)
            for gid, source in tests:
                times = []
                for _ in range(repeat):
                    for src in answers:
                        exec(compile(src, f"<{nb}:answer>", "exec"), ns)
                    start = time.perf_counter()
                    exec(compile(source, f"<{nb}:{gid}>", "exec"), ns)
                    times.append(time.perf_counter() - start)
                found[f"{nb} {gid}"] = statistics.median(times)
    total = None
    if mutations:
        with contextlib.redirect_stdout(io.StringIO()):
            start = time.perf_counter()
            bench.run(notebooks)
            total = time.perf_counter() - start
    return {"cells": found, "mutations": total}


def _in_process(root: Path, args) -> dict:
    cmd = [sys.executable, __file__, "--child", str(root), "--repeat", str(args.repeat)]
    cmd += ["--notebooks", *args.notebooks] if args.notebooks else []
    cmd += ["--mutations"] if args.mutations else []
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), PYTHONPATH=str(root))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--notebooks", nargs="*", help="notebook numbers, e.g. 02 05 (default: all)")
    p.add_argument("--repeat", type=int, default=5, help="runs per test cell (the median is kept)")
    p.add_argument("--mutations", action="store_true", help="also time the whole mutation benchmark once")
    p.add_argument("--baseline", type=Path, help="another checkout of the course to compare with")
    p.add_argument("--rounds", type=int, default=3, help="with --baseline: alternating rounds (the median is kept)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.notebooks, args.repeat, args.mutations)))
        return 0
    if not args.baseline:
        mine = _in_process(ROOT, args)
        for cell, seconds in mine["cells"].items():
            print(f"{cell:<32} {seconds * 1000:9.1f} ms")
        print(f"{'all test cells':<32} {sum(mine['cells'].values()) * 1000:9.1f} ms")
        if mine["mutations"] is not None:
            print(f"{'mutation benchmark':<32} {mine['mutations']:9.1f} s")
        return 0
    rounds = {"this": [], "baseline": []}
    for _ in range(args.rounds):
        rounds["baseline"].append(_in_process(args.baseline.resolve(), args))
        rounds["this"].append(_in_process(ROOT, args))
    cells = list(rounds["this"][0]["cells"])
    rows = {}
    for cell in cells:
        a = statistics.median(r["cells"][cell] for r in rounds["this"])
        b = statistics.median(r["cells"].get(cell, float("nan")) for r in rounds["baseline"])
        rows[cell] = (b, a)
    total_b = statistics.median(sum(r["cells"].values()) for r in rounds["baseline"])
    total_a = statistics.median(sum(r["cells"].values()) for r in rounds["this"])
    if args.json:
        print(json.dumps({"cells": rows, "total": [total_b, total_a]}))
        return 0
    print(f"{'test cell':<32} {'baseline ms':>12} {'this ms':>10} {'ratio':>7}")
    for cell, (b, a) in rows.items():
        print(f"{cell:<32} {b * 1000:12.1f} {a * 1000:10.1f} {a / b if b else float('nan'):7.2f}")
    print(f"{'all test cells':<32} {total_b * 1000:12.1f} {total_a * 1000:10.1f} {total_a / total_b:7.2f}")
    if args.mutations:
        mb = statistics.median(r["mutations"] for r in rounds["baseline"])
        ma = statistics.median(r["mutations"] for r in rounds["this"])
        print(f"{'mutation benchmark (s)':<32} {mb:12.1f} {ma:10.1f} {ma / mb:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
