"""Grading throughput on a Dask cluster, cold vs warm: submissions per minute, in all and per worker.

    python benchmarks/bench_distributed.py [--workers 1 2] [--submissions 4] [--assignment 01_embeddings]
                                           [--db-url ADMIN_URL] [--scheduler ADDRESS]
    python benchmarks/bench_distributed.py --notebooks all --submissions 1 --engines warm   # a class sample

Each worker count is measured twice in the same run, side by side: cold
(Options.warm False: every submission starts its own `nbgrader autograde`
and recheck processes, importing nbgrader and torch afresh) and warm (the
default: each worker's grading child grades through a warm worker of
grading/engines/warm_pool.py, started at its first task, so its start is in the
time). The last column is warm's rate over cold's.

Without --scheduler, each row starts a `dask scheduler` and N `dask worker`
processes on this machine (one thread each, each with its own course data
folder: autograder.grading.engines.cluster.LocalGradingCluster) and grades a batch of
honest submissions from scratch through `grade_all(..., scheduler=...)`, the
code path of `python -m autograder grade --scheduler`. With --scheduler it
measures the cluster already running there (its workers must run this
checkout). Every row uses a fresh PostgreSQL database, created with
ADMIN_URL's role (default $TINYLM_TEST_PG_URL, else the local test server)
and dropped after. The time includes the client's work (reading the
folders, writing results and autograded notebooks), not the cluster's start.

--notebooks NN ... (or `all`) grades --submissions honest submissions of each
of those notebooks in one batch instead of --assignment's: a sample of a
class. --engines picks cold, warm or both. The CPU column is the user +
system time of this process and everything it started (client, scheduler,
workers and their grading processes; not the PostgreSQL server), from the
cpuacct cgroup of bench_class.CpuMeter, per submission: on a shared machine
it is the figure that other jobs inflate least.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager, nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder import course  # noqa: E402
from autograder import specimens  # noqa: E402
from autograder.grading import gradebook  # noqa: E402
from autograder.grading.engines.cluster import LocalGradingCluster  # noqa: E402
from autograder.grading.batch import Options, grade_all  # noqa: E402

LOCAL_PG = "postgresql+psycopg://tinylm:tinylm@127.0.0.1:5432/postgres"


@contextmanager
def scratch_database(admin_url: str):
    import psycopg
    admin = psycopg.connect(admin_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)
    name = f"tinylm_bench_{uuid.uuid4().hex[:8]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{admin_url.rsplit('/', 1)[0]}/{name}"
    finally:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.close()


def run(assignments: list[str], n: int, workers: int, admin_url: str, scheduler: str | None,
        warm: bool, meter=None, dask: bool = True) -> tuple[int, float, float | None]:
    """(workers that graded, seconds, CPU seconds or None) for n honest submissions of each assignment;
    dask False: the same batch on a warm pool of `workers` in this process, no cluster (the reference)."""
    with tempfile.TemporaryDirectory(prefix="tinylm-bench-dask-") as tmp, scratch_database(admin_url) as db:
        client_data = Path(tmp) / "client"
        os.environ[gradebook.DATA_ENV_VAR] = str(client_data)
        for assignment in assignments:
            nb = specimens.honest(assignment)
            for i in range(n):
                specimens.submit(client_data, f"s{i:03d}", assignment, nb)
        local = LocalGradingCluster(Path(tmp) / "cluster", workers) if dask and not scheduler else nullcontext()
        with local as cluster:
            address = scheduler or (cluster.address if dask else "")
            if scheduler:
                from distributed import Client
                with Client(address, timeout="30s") as client:
                    workers = len(client.nthreads())
            cpu0 = meter.seconds() if meter else None
            start = time.perf_counter()
            results = grade_all(Options(assignments=assignments, progress=False, db_url=db, scheduler=address,
                                        warm=warm, workers=workers))
            elapsed = time.perf_counter() - start
            cpu = meter.seconds() - cpu0 if cpu0 is not None else None
        bad = [r for r in results if r["score"] != r["max_score"]]
        if bad:
            raise SystemExit(f"benchmark batch did not grade cleanly: {bad[0]}")
        return workers, elapsed, cpu


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--assignment", default=course.assignments()[0] if course.assignments() else "01_embeddings")
    p.add_argument("--submissions", type=int, default=4)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="local worker processes per row")
    p.add_argument("--db-url", default=os.environ.get("TINYLM_TEST_PG_URL", LOCAL_PG),
                   help="a PostgreSQL URL whose role may CREATE DATABASE (one scratch database per row)")
    p.add_argument("--scheduler", help="measure the cluster at this address instead of starting local workers")
    p.add_argument("--notebooks", nargs="+", help="NN prefixes, or `all`: a class sample instead of --assignment")
    p.add_argument("--engines", nargs="+", choices=("cold", "warm", "pool"), default=["cold", "warm"],
                   help="cold and warm: on the Dask cluster; pool: the same batch on this machine's warm pool of "
                        "as many workers, without Dask (the reference for Dask's own cost)")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from benchmarks.bench_class import CpuMeter
    assignments = [args.assignment]
    if args.notebooks:
        assignments = [a for a in course.assignments() if "all" in args.notebooks or a[:2] in args.notebooks]
    total = args.submissions * len(assignments)
    meter = CpuMeter()
    try:
        print(f"Dask grading throughput: {total} honest submissions ({args.submissions} of each of "
              f"{', '.join(assignments)}), {os.cpu_count()} cores here, load {os.getloadavg()[0]:.2f}, recheck on, "
              f"PostgreSQL gradebook, CPU meter {meter.folder or 'none'}")
        print(f"{'workers':>7}  {'engine':>6}  {'seconds':>8}  {'subs/min':>8}  {'per worker':>10}  {'warm/cold':>9}  "
              f"{'CPU s/sub':>9}  {'CPU/pool':>8}")
        for w in dict.fromkeys([0] if args.scheduler else args.workers):
            rates, cpus = {}, {}
            for engine in args.engines:
                workers, elapsed, cpu = run(assignments, args.submissions, w, args.db_url, args.scheduler,
                                            warm=engine != "cold", meter=meter, dask=engine != "pool")
                rates[engine] = total / elapsed * 60
                cpus[engine] = cpu
                vs_pool = f"{cpu / cpus['pool']:.2f}x" if engine != "pool" and cpu and cpus.get("pool") else ""
                ratio = f"{rates['warm'] / rates['cold']:.2f}x" if engine == "warm" and "cold" in rates else ""
                per_sub = "-" if cpu is None else f"{cpu / total:.2f}"
                print(f"{workers:>7}  {engine:>6}  {elapsed:>8.1f}  {rates[engine]:>8.2f}  "
                      f"{rates[engine] / workers:>10.2f}  {ratio:>9}  {per_sub:>9}  {vs_pool:>8}", flush=True)
    finally:
        meter.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
