"""Autograding throughput: submissions per minute with 1 and N workers.

    python benchmarks/bench_autograde.py [--submissions 8] [--workers 1 2] [--assignment 01_embeddings]
                                         [--engine warm|cold ...] [--all]

Each run grades the same batch of honest submissions from scratch in a
temporary course data folder (SQLite gradebook), with the full pipeline:
intake, sandboxed nbgrader autograde, and the out-of-process recheck.
Prints one table row per worker count, then the speed-up over 1 worker, then
the mean seconds per submission in each stage of grade_one (result["timing"]).
--all instead grades `--submissions` honest submissions of each of the ten
notebooks with the first worker count and prints seconds per submission and
the stage breakdown per notebook. --engine cold grades as before the warm
workers: an nbgrader process and a recheck process per submission;
--engine cold warm measures both, interleaved.
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
from autograder import specimens  # noqa: E402
from autograder.grading import gradebook  # noqa: E402
from autograder.grading.batch import Options, grade_all  # noqa: E402
from autograder.grading.grade import STAGES  # noqa: E402


def run(assignment: str, n: int, workers: int, recheck: bool, engine: str = "warm") -> tuple[float, float, dict]:
    """(seconds, submissions per minute, mean seconds per stage) of one batch."""
    with tempfile.TemporaryDirectory(prefix="tinylm-bench-") as tmp:
        os.environ[gradebook.DATA_ENV_VAR] = tmp
        nb = specimens.honest(assignment)
        for i in range(n):
            specimens.submit(Path(tmp), f"s{i:03d}", assignment, nb)
        # Registering the notebook in a fresh gradebook (nbgrader generate_assignment) happens once per
        # course, not per grading run: outside the timed part.
        gradebook.ensure_assignments(gradebook.db_url(None), [assignment])
        start = time.perf_counter()
        results = grade_all(Options(assignments=[assignment], workers=workers, progress=False, recheck=recheck,
                                    warm=engine == "warm"))
        elapsed = time.perf_counter() - start
        bad = [r for r in results if r["score"] != r["max_score"]]
        if bad:
            raise SystemExit(f"benchmark batch did not grade cleanly: {bad[0]}")
        stages = {k: sum(r["timing"][k] for r in results) / len(results) for k in STAGES}
        stages["graded"] = sum(r["seconds"] for r in results) / len(results)
        return elapsed, n / elapsed * 60, stages


def stage_header() -> str:
    """The stages of grade_one, then the mean of result["seconds"] (grade_one from start to end)."""
    return "  ".join(f"{k:>14}" for k in (*STAGES, "grade_one"))


def stage_row(stages: dict) -> str:
    return "  ".join(f"{stages[k]:>14.2f}" for k in (*STAGES, "graded"))


def all_notebooks(n: int, workers: int, recheck: bool, engine: str) -> None:
    print(f"seconds per honest submission of each notebook: {n} per notebook, {workers} worker(s), "
          f"engine {engine}, recheck {'on' if recheck else 'off'}, {os.cpu_count()} cores")
    print("s/sub: the batch's wall-clock time (worker start included) per submission; grade_one: grading one")
    print(f"{'notebook':<24}  {'s/sub':>6}  {stage_header()}")
    for assignment in course.assignments():
        elapsed, _, stages = run(assignment, n, workers, recheck, engine)
        print(f"{assignment:<24}  {elapsed / n:>6.1f}  {stage_row(stages)}", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--assignment", default=course.assignments()[0] if course.assignments() else "01_embeddings")
    p.add_argument("--submissions", type=int, default=8)
    p.add_argument("--workers", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    p.add_argument("--no-recheck", action="store_true", help="measure without the out-of-process recheck")
    p.add_argument("--engine", choices=("warm", "cold"), nargs="+", default=["warm"],
                   help="warm: worker processes with nbgrader and torch imported once (default); "
                        "cold: an nbgrader and a recheck process per submission; both: interleaved, "
                        "each worker count graded by each engine in turn")
    p.add_argument("--all", action="store_true", help="a table of seconds per submission for every notebook")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.all:
        for engine in args.engine:
            all_notebooks(args.submissions, args.workers[0], not args.no_recheck, engine)
        return 0
    print(f"autograde throughput: {args.submissions} honest submissions of {args.assignment}, "
          f"{os.cpu_count()} cores, recheck {'off' if args.no_recheck else 'on'}")
    print(f"{'engine':>6}  {'workers':>7}  {'seconds':>8}  {'subs/min':>8}  {'s/sub':>6}")
    rows = []
    for w in dict.fromkeys(args.workers):
        for engine in dict.fromkeys(args.engine):
            elapsed, rate, stages = run(args.assignment, args.submissions, w, not args.no_recheck, engine)
            rows.append((engine, w, rate, stages))
            print(f"{engine:>6}  {w:>7}  {elapsed:>8.1f}  {rate:>8.2f}  {elapsed / args.submissions:>6.1f}",
                  flush=True)
    for engine in dict.fromkeys(args.engine):
        rates = [(w, rate) for e, w, rate, _ in rows if e == engine]
        if len(rates) > 1:
            print(f"{engine}: speed-up of {rates[-1][0]} workers over {rates[0][0]}: {rates[-1][1] / rates[0][1]:.2f}x")
    print("mean seconds per submission in each stage (one worker's time; workers overlap):")
    print(f"{'engine':>6}  {'workers':>7}  {stage_header()}")
    for engine, w, _, stages in rows:
        print(f"{engine:>6}  {w:>7}  {stage_row(stages)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
