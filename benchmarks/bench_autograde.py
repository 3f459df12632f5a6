"""Autograding throughput: submissions per minute with 1 and N workers.

    python benchmarks/bench_autograde.py [--submissions 8] [--workers 1 2] [--assignment 01_embeddings]
                                         [--engine warm|cold ...] [--all]
    python benchmarks/bench_autograde.py --setup [--rounds 3] [--workers 2] [--assignments 3]

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

--setup measures what a grading run pays besides its submissions, each
row in --rounds interleaved rounds (medians): a new gradebook, made by
nbgrader's own Gradebook (which asks an `alembic heads` process for the
schema's revision) and by gradebook.open_gradebook; registering the first
--assignments notebooks, with an `nbgrader generate_assignment` process per
notebook and with gradebook.ensure_assignments; and a warm pool of the first
--workers count: how much longer its first round of one honest submission
per worker takes than its second (the workers' and the jail server's
start), and its close.
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


def _seconds(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def _new_gradebooks(folder: Path, k: int) -> tuple[float, float]:
    from nbgrader.api import Gradebook

    def theirs():
        Gradebook(f"sqlite:///{folder / f'nbgrader-{k}.db'}", course_id=gradebook.COURSE_ID).close()

    def ours():
        with gradebook.open_gradebook(f"sqlite:///{folder / f'ours-{k}.db'}"):
            pass
    return _seconds(theirs), _seconds(ours)


def _registrations(folder: Path, k: int, assignments: list[str]) -> tuple[float, float]:
    theirs, ours = f"sqlite:///{folder / f'nbgrader-{k}.db'}", f"sqlite:///{folder / f'ours-{k}.db'}"

    def by_command():
        for a in assignments:
            course.nbgrader_cli("generate_assignment", a, "--force", f"--CourseDirectory.db_url={theirs}",
                                f"--CourseDirectory.release_directory={folder / 'release'}")
    return _seconds(by_command), _seconds(lambda: gradebook.ensure_assignments(ours, assignments))


def _pool(folder: Path, k: int, assignment: str, workers: int) -> tuple[float, float]:
    """(extra seconds of the pool's first round over its second, seconds to close it)."""
    from concurrent.futures import ThreadPoolExecutor

    from autograder.grading.engines.warm_pool import WarmPool
    from autograder.grading.records import Submission

    nb = specimens.honest(assignment)
    students = [f"p{k}-{i}" for i in range(2 * workers)]
    for student in students:
        specimens.submit(folder, student, assignment, nb)
    opts = Options(assignments=[assignment], workers=workers, progress=False)
    opts.db_url = f"sqlite:///{folder / f'ours-{k}.db'}"
    gradebook.ensure_assignments(opts.db_url, [assignment])

    def one_round(pool, names):
        with ThreadPoolExecutor(max_workers=workers) as threads:
            results = list(threads.map(lambda s: pool.grade(Submission(s, assignment), opts), names))
        if any(r["score"] != r["max_score"] for r in results):
            raise SystemExit(f"benchmark pool did not grade cleanly: {results}")
    start = time.perf_counter()
    pool = WarmPool(workers)
    one_round(pool, students[:workers])
    first = time.perf_counter() - start
    second = _seconds(lambda: one_round(pool, students[workers:]))
    return first - second, _seconds(pool.close)


def setup_costs(rounds: int, workers: int, assignments: list[str]) -> None:
    import statistics
    print(f"fixed costs of a grading run: median of {rounds} interleaved round(s), {os.cpu_count()} cores, "
          f"{len(assignments)} notebook(s) registered, a pool of {workers} worker(s)")
    os.environ["PATH"] = course.path_with_interpreter_bin(os.environ.get("PATH", ""))  # nbgrader's `alembic`
    rows = {"new gradebook": [], f"register {len(assignments)} notebook(s)": [], "pool": []}
    for k in range(rounds):
        with tempfile.TemporaryDirectory(prefix="tinylm-bench-") as tmp:
            os.environ[gradebook.DATA_ENV_VAR] = tmp
            rows["new gradebook"].append(_new_gradebooks(Path(tmp), k))
            rows[f"register {len(assignments)} notebook(s)"].append(_registrations(Path(tmp), k, assignments))
            rows["pool"].append(_pool(Path(tmp), k, assignments[0], workers))
    print(f"{'':<26}  {'nbgrader (s)':>12}  {'autograder (s)':>14}  {'ratio':>6}")
    for name in list(rows)[:2]:
        theirs, ours = (statistics.median(col) for col in zip(*rows[name]))
        print(f"{name:<26}  {theirs:>12.2f}  {ours:>14.2f}  {theirs / ours:>5.1f}x")
    start, close = (statistics.median(col) for col in zip(*rows["pool"]))
    print(f"warm pool of {workers}: its first round took {start:.1f} s longer than its second (the workers' and "
          f"the jail server's start); closing it took {close:.1f} s")


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
    p.add_argument("--setup", action="store_true", help="the fixed costs of a grading run (see the docstring)")
    p.add_argument("--rounds", type=int, default=3, help="--setup: interleaved rounds (default 3)")
    p.add_argument("--assignments", type=int, default=3, help="--setup: notebooks registered (default 3)")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.setup:
        setup_costs(args.rounds, args.workers[0], course.assignments()[:args.assignments])
        return 0
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
