"""What grading a whole class costs: CPU seconds per graded notebook, for each of the ten notebooks.

    python benchmarks/bench_class.py [--mix 2 1 1] [--notebooks 01 09 ...] [--modes every-cell skip-tail]
                                     [--wall-sample 6 --workers 2] [--students 200] [--cores 2]

A synthetic class (per notebook: honest submissions, one with a seed bug
from benchmarks/mutations/nbNN.py, one untouched release notebook; --mix
sets the counts) is graded through the warm engine (grading/engines/warm_pool.py,
recheck on) one submission at a time, each timed in wall-clock and in CPU
seconds: user + system time of the whole process tree (the warm worker, its
nbgrader and recheck forks, the jail server's jailed kernels and children),
read from a cpuacct cgroup this script makes for itself and its children.
CPU time is what a shared machine does not inflate much; an idle 2-core
machine grades a class in about (total CPU seconds) / 2, since the two
workers of a grading run keep both cores busy. --wall-sample checks that
basis: it grades that many honest submissions per notebook with --workers
workers and compares the wall time with CPU / workers (run it when `uptime`
shows the machine idle).

--modes grades each submission in each mode in turn, interleaved:
`every-cell` runs every cell of the notebook (Options.skip_tail False, `grade
--every-cell`), `skip-tail` (the default of `python -m autograder grade`)
leaves out the cells after the last graded cell (grading/preprocessors.py's
tail_start). Prints
a table per mode (mean, spread), their ratio, and the class projection
(--students x every notebook's mean, over --cores cores). The pool's own start
(workers, jail server) is measured once and listed apart: a class run pays
it once.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder import course  # noqa: E402
from autograder import specimens  # noqa: E402
from autograder.grading import gradebook  # noqa: E402
from autograder.grading.batch import Options  # noqa: E402
from autograder.grading.grade import STAGES  # noqa: E402

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
MODES = {"every-cell": False, "skip-tail": True}


class CpuMeter:
    """CPU seconds (user + system) of this process and every process it
    starts from now on, by a cpuacct cgroup of its own (cgroup v1) or the
    cgroup v2 this process is in when it may make one below. None when
    neither can be had: the script then says so and reports wall time only."""

    def __init__(self):
        self.folder, self.v2 = None, False
        name = f"tinylm-bench-class-{os.getpid()}"
        for base, v2 in ((CPUACCT, False), (Path("/sys/fs/cgroup"), True)):
            probe = base / ("cpu.stat" if v2 else "cpuacct.usage")
            if not probe.is_file():
                continue
            try:
                folder = base / name
                folder.mkdir()
                (folder / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                continue
            self.folder, self.v2 = folder, v2
            break

    def seconds(self) -> float | None:
        if self.folder is None:
            return None
        if self.v2:
            stat = dict(line.split() for line in (self.folder / "cpu.stat").read_text().splitlines())
            return int(stat["usage_usec"]) / 1e6
        return int((self.folder / "cpuacct.usage").read_text()) / 1e9

    def close(self) -> None:
        if self.folder is None:
            return
        (self.folder.parent / "cgroup.procs").write_text(str(os.getpid()))
        for _ in range(50):  # the pool's processes may still be on their way out
            try:
                self.folder.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def bugs(assignment: str, count: int) -> list:
    """Notebooks with one mistake each from benchmarks/mutations/nbNN.py (those that apply to the solution),
    spread over its list: different exercises, not only the first."""
    import importlib
    module = importlib.import_module(f"benchmarks.mutations.nb{assignment[:2]}")
    found = []
    for m in module.MUTATIONS:
        try:
            nb = specimens.with_bugs(assignment, [(m.cell, m.old, m.new)])
        except (ValueError, KeyError):
            continue
        if m.extra:
            for cell in nb.cells:
                if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == m.cell:
                    cell.source += "\n\n" + m.extra
        found.append(nb)
    if count and not found:
        raise SystemExit(f"no mutation of {assignment} applies to its solution")
    return [found[i * len(found) // count] for i in range(count)] if count else []


def synthesise(data: Path, assignments: list[str], honest: int, buggy: int, release: int) -> list[tuple[str, str, str]]:
    """(student, assignment, kind) of every submission written under data/submitted."""
    out = []
    for a in assignments:
        kinds = {"honest": [specimens.honest(a)] * honest, "bug": bugs(a, buggy),
                 "release": [specimens.notebook(a)] * release}
        for kind, nbs in kinds.items():
            for i, nb in enumerate(nbs):
                student = f"{kind}{i:03d}"
                specimens.submit(data, student, a, nb)
                out.append((student, a, kind))
    return out


def grade_each(pool, subs, modes: list[str], meter: CpuMeter, db_url: str) -> dict:
    """{(mode, assignment): [(kind, wall s, cpu s, score, max, stages)]}, each submission graded in each mode."""
    from autograder.grading.records import Submission
    rows: dict = {}
    for student, assignment, kind in subs:
        for mode in modes:
            opts = Options(assignments=[assignment], workers=1, progress=False, db_url=db_url, force=True,
                           skip_tail=MODES[mode])
            cpu0, t0 = meter.seconds(), time.perf_counter()
            result = pool.grade(Submission(student, assignment), opts)
            wall, cpu1 = time.perf_counter() - t0, meter.seconds()
            cpu = None if cpu0 is None else cpu1 - cpu0
            rows.setdefault((mode, assignment), []).append(
                (kind, wall, cpu, result.get("score", 0.0), result.get("max_score", 0.0), result.get("timing", {})))
            print(f"  {mode:<10} {assignment:<20} {student:<10} wall {wall:6.1f} s  cpu "
                  f"{'-' if cpu is None else f'{cpu:6.1f}'} s  score {result.get('score', 0):g}/"
                  f"{result.get('max_score', 0):g}  {result.get('status')}", flush=True)
    return rows


def spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.1f}" if values else "-"
    return f"{statistics.mean(values):.1f} +- {statistics.stdev(values):.1f} [{min(values):.1f}-{max(values):.1f}]"


def report(rows: dict, assignments: list[str], modes: list[str], students: int, cores: int, fixed_cpu: float | None):
    basis = "cpu" if all(r[2] is not None for rs in rows.values() for r in rs) else "wall"
    print(f"\nper graded notebook ({basis} seconds: mean +- sd [min-max] over the sample; honest, bug and release "
          "mixed)")
    print(f"{'notebook':<20}  " + "  ".join(f"{m + ' cpu':>28}  {m + ' wall':>10}" for m in modes)
          + ("  ratio" if len(modes) == 2 else ""))
    totals = dict.fromkeys(modes, 0.0)
    for a in assignments:
        cells, means = [], {}
        for m in modes:
            rs = rows.get((m, a), [])
            cpu = [r[2] if basis == "cpu" else r[1] for r in rs]
            means[m] = statistics.mean(cpu) if cpu else 0.0
            totals[m] += means[m]
            cells.append(f"{spread(cpu):>28}  {statistics.mean([r[1] for r in rs]) if rs else 0:>10.1f}")
        ratio = f"  {means[modes[0]] / means[modes[1]]:.2f}x" if len(modes) == 2 and means[modes[1]] else ""
        print(f"{a:<20}  " + "  ".join(cells) + ratio)
    print(f"{'sum of the means':<20}  " + "  ".join(f"{totals[m]:>28.1f}  {'':>10}" for m in modes))
    print("\nmean wall seconds per stage of grade_one (result['timing'])")
    print(f"{'notebook':<20}  {'mode':<10}  " + "  ".join(f"{k:>14}" for k in STAGES))
    for a in [*assignments, "all"]:
        for m in modes:
            rs = [r for (mm, aa), v in rows.items() if mm == m and a in (aa, "all") for r in v]
            if rs:
                print(f"{a:<20}  {m:<10}  " + "  ".join(f"{statistics.mean([r[5].get(k, 0.0) for r in rs]):>14.2f}"
                                                     for k in STAGES))
    print(f"\nclass of {students} students x {len(assignments)} notebooks = {students * len(assignments)} graded "
          f"notebooks, projected on {cores} idle cores as {basis} seconds / {cores}"
          + (f" (+ the pool's start, {fixed_cpu:.1f} CPU s, once)" if fixed_cpu is not None else ""))
    for m in modes:
        seconds = (students * totals[m] + (fixed_cpu or 0.0)) / cores
        print(f"  {m:<10}: {seconds / 60:6.1f} min  ({students * totals[m] / (students * len(assignments)):.2f} "
              f"CPU s per notebook on average)")
    if len(modes) == 2 and totals[modes[1]]:
        print(f"  ratio {modes[0]} / {modes[1]}: {totals[modes[0]] / totals[modes[1]]:.2f}x")
    wrong = [(m, a, r[0], r[3], r[4]) for (m, a), rs in rows.items() for r in rs
             if (r[0] == "honest" and r[3] != r[4]) or (r[0] == "release" and r[3] != 0)]
    if wrong:
        print(f"GRADES NOT AS EXPECTED (honest must score full, release zero): {wrong}")
    scores = {}
    for (m, a), rs in rows.items():
        for r in rs:
            scores.setdefault((a, r[0]), {}).setdefault(m, []).append(r[3])
    differ = {k: v for k, v in scores.items() if len({tuple(x) for x in v.values()}) > 1}
    if len(modes) == 2:
        print("scores identical in both modes for every submission" if not differ else f"SCORES DIFFER: {differ}")


def wall_sample(assignments: list[str], per_notebook: int, workers: int, meter: CpuMeter, mode: str) -> None:
    """Grade per_notebook honest submissions of each notebook with `workers` workers in one grade_all:
    the wall time against CPU / workers."""
    from autograder.grading.batch import grade_all
    with tempfile.TemporaryDirectory(prefix="tinylm-bench-class-wall-") as tmp:
        os.environ[gradebook.DATA_ENV_VAR] = tmp
        synthesise(Path(tmp), assignments, per_notebook, 0, 0)
        gradebook.ensure_assignments(gradebook.db_url(None), assignments)
        load = os.getloadavg()[0]
        cpu0, t0 = meter.seconds(), time.perf_counter()
        results = grade_all(Options(assignments=assignments, workers=workers, progress=False,
                                    skip_tail=MODES[mode]))
        wall, cpu1 = time.perf_counter() - t0, meter.seconds()
    n = len(results)
    bad = [r for r in results if r["score"] != r["max_score"]]
    print(f"\nwall-time check ({mode}): {n} honest submissions ({per_notebook} of each notebook) in one grade_all "
          f"with {workers} workers, load {load:.2f} before")
    if cpu0 is None:
        print(f"  wall {wall:.1f} s (no CPU meter here)")
        return
    cpu = cpu1 - cpu0
    print(f"  wall {wall:.1f} s; CPU {cpu:.1f} s; CPU / {workers} = {cpu / workers:.1f} s; "
          f"wall / (CPU / {workers}) = {wall / (cpu / workers):.2f}; load after {os.getloadavg()[0]:.2f}"
          + (f"; {len(bad)} not full marks" if bad else ""))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--notebooks", nargs="+", help="NN prefixes (default: all ten)")
    p.add_argument("--mix", nargs=3, type=int, default=[2, 1, 1], metavar=("HONEST", "BUG", "RELEASE"),
                   help="submissions of each kind per notebook (default 2 1 1)")
    p.add_argument("--modes", nargs="+", choices=list(MODES), default=["every-cell", "skip-tail"])
    p.add_argument("--students", type=int, default=200)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--wall-sample", type=int, default=0, help="honest submissions per notebook in the wall check")
    p.add_argument("--workers", type=int, default=2, help="workers of the wall check")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["PATH"] = course.path_with_interpreter_bin(os.environ.get("PATH", ""))
    assignments = [a for a in course.assignments() if not args.notebooks or a[:2] in args.notebooks]
    meter = CpuMeter()
    try:
        print(f"class grading cost: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, "
              f"CPU meter: {meter.folder or 'none (wall time only)'}, modes {' / '.join(args.modes)}, "
              f"mix per notebook: {args.mix[0]} honest, {args.mix[1]} with a seed bug, {args.mix[2]} release")
        if any(args.mix):
            with tempfile.TemporaryDirectory(prefix="tinylm-bench-class-") as tmp:
                os.environ[gradebook.DATA_ENV_VAR] = tmp
                subs = synthesise(Path(tmp), assignments, *args.mix)
                db_url = gradebook.db_url(None)
                gradebook.ensure_assignments(db_url, assignments)
                from autograder.grading.engines.warm_pool import WarmPool
                cpu0, t0 = meter.seconds(), time.perf_counter()
                with WarmPool(1) as pool:
                    # the first grade pays the worker's and the jail server's start: graded once more, untimed
                    grade_each(pool, subs[:1], args.modes[:1], meter, db_url)
                    started_cpu = None if cpu0 is None else meter.seconds() - cpu0
                    print(f"pool start and first submission: {time.perf_counter() - t0:.1f} s wall, "
                          f"{started_cpu if started_cpu is None else round(started_cpu, 1)} CPU s", flush=True)
                    rows = grade_each(pool, subs, args.modes, meter, db_url)
                fixed = None
                if started_cpu is not None:
                    same = rows[(args.modes[0], subs[0][1])][0][2]
                    fixed = max(started_cpu - same, 0.0)
                report(rows, assignments, args.modes, args.students, args.cores, fixed)
        if args.wall_sample:
            wall_sample(assignments, args.wall_sample, args.workers, meter, args.modes[-1])
    finally:
        meter.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
