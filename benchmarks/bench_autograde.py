"""Autograding throughput: submissions per minute with 1 and N workers.

    python benchmarks/bench_autograde.py [--submissions 8] [--workers 1 2] [--assignment 01_embeddings]

Each run grades the same batch of honest submissions from scratch in a
temporary course data folder (SQLite gradebook), with the full pipeline:
intake, sandboxed nbgrader autograde, and the out-of-process recheck.
Prints one table row per worker count, then the speed-up over 1 worker.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder import course  # noqa: E402
from autograder.grading import gradebook
from autograder.authoring import specimens
from autograder.grading.grade import Options, grade_all  # noqa: E402


def run(assignment: str, n: int, workers: int, recheck: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="tinylm-bench-") as tmp:
        os.environ[gradebook.DATA_ENV_VAR] = tmp
        nb = specimens.honest(assignment)
        for i in range(n):
            specimens.submit(Path(tmp), f"s{i:03d}", assignment, nb)
        start = time.perf_counter()
        results = grade_all(Options(assignments=[assignment], workers=workers, progress=False, recheck=recheck))
        elapsed = time.perf_counter() - start
        bad = [r for r in results if r["score"] != r["max_score"]]
        if bad:
            raise SystemExit(f"benchmark batch did not grade cleanly: {bad[0]}")
        return elapsed, n / elapsed * 60


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--assignment", default=course.assignments()[0] if course.assignments() else "01_embeddings")
    p.add_argument("--submissions", type=int, default=8)
    p.add_argument("--workers", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    p.add_argument("--no-recheck", action="store_true", help="measure without the out-of-process recheck")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"autograde throughput: {args.submissions} honest submissions of {args.assignment}, "
          f"{os.cpu_count()} cores, recheck {'off' if args.no_recheck else 'on'}")
    print(f"{'workers':>7}  {'seconds':>8}  {'subs/min':>8}  {'s/sub':>6}")
    rows = []
    for w in dict.fromkeys(args.workers):
        elapsed, rate = run(args.assignment, args.submissions, w, not args.no_recheck)
        rows.append((w, rate))
        print(f"{w:>7}  {elapsed:>8.1f}  {rate:>8.2f}  {elapsed / args.submissions:>6.1f}", flush=True)
    if len(rows) > 1:
        print(f"speed-up of {rows[-1][0]} workers over {rows[0][0]}: {rows[-1][1] / rows[0][1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
