"""How long the class report takes for a large class.

Builds a synthetic graded class (autograder/specimens/synthetic_class.py:
the course's ten notebooks and their exercises, N students who differ in
skill, some of whom stop part-way, a known mistake per failed exercise)
straight into a fresh SQLite gradebook (or --db-url, e.g. an empty
PostgreSQL database) and result files, without grading anything; then
times the report: in-process per stage (read the gradebook and the result
files, compute the tables, draw and write the HTML page, CSV and JSON), and
`python -m autograder report` as a command (interpreter and imports included).

    python benchmarks/bench_report.py [--students 500] [--repeats 3] [--db-url URL] [--keep DIR]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)] if str(ROOT) not in sys.path else []

from autograder.specimens import synthetic_class  # noqa: E402
from autograder.grading import gradebook  # noqa: E402
from autograder.grading.publish import report  # noqa: E402


def timed(fn, *args, **kwargs):
    """fn's result, and (wall seconds, CPU seconds of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, (time.perf_counter() - wall, time.process_time() - cpu)


def stages(url: str, out: Path) -> dict[str, tuple[float, float]]:
    data, t_load = timed(report.load, url)
    tables, t_build = timed(report.build_report, data)
    _, t_write = timed(report.write_report, tables, out, url)
    total = tuple(sum(t) for t in zip(t_load, t_build, t_write))
    return {"read gradebook + results": t_load, "compute tables": t_build, "HTML + CSV + JSON": t_write,
            "in-process total": total}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--students", type=int, default=500)
    p.add_argument("--repeats", type=int, default=3, help="runs of each measurement; the median is shown")
    p.add_argument("--db-url", help="an empty gradebook database to fill (default: SQLite in the scratch folder)")
    p.add_argument("--keep", type=Path, help="build the class and the report in this folder and keep them")
    args = p.parse_args(argv)
    if args.students < 1 or args.repeats < 1:
        p.error("--students and --repeats must be at least 1")

    with tempfile.TemporaryDirectory(prefix="tinylm-bench-report-") as tmp:
        data = (args.keep or Path(tmp)).resolve()
        data.mkdir(parents=True, exist_ok=True)
        os.environ[gradebook.DATA_ENV_VAR] = str(data)
        url = args.db_url or f"sqlite:///{data / 'gradebook.db'}"
        klass = synthetic_class.random_class(args.students)
        _, t_class = timed(synthetic_class.write_class, klass, url, data)
        submissions = sum(len(w) for w in klass.work.values())
        failed = sum(m is not None for w in klass.work.values() for ans in w.values() for m in ans.values())
        print(f"synthetic class: {args.students} students, {len(klass.structure)} notebooks, {submissions} "
              f"submissions, {failed} failed exercises (written in {t_class[0]:.1f} s; not timed below)")
        print(f"gradebook {gradebook.redacted(url)}; median of {args.repeats} runs, {os.cpu_count()} CPUs\n")

        runs = [stages(url, data / "reports") for _ in range(args.repeats)]
        command = [sys.executable, "-m", "autograder", "report", "--db-url", url, "--out", str(data / "reports")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        cli = []
        for _ in range(args.repeats):
            began, children = time.perf_counter(), os.times()
            subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
            after = os.times()
            cli.append((time.perf_counter() - began,
                        after.children_user + after.children_system - children.children_user - children.children_system))

        rows = [(name, [statistics.median(r[name][i] for r in runs) for i in (0, 1)]) for name in runs[0]]
        rows.append(("`python -m autograder report` (command)", [statistics.median(c[i] for c in cli) for i in (0, 1)]))
        width = max(len(name) for name, _ in rows)
        print(f"{'stage':<{width}}  wall s   CPU s")
        for name, (wall, cpu) in rows:
            print(f"{name:<{width}}  {wall:6.2f}  {cpu:6.2f}")
        page = data / "reports" / "class_report.html"
        print(f"\nclass_report.html: {page.stat().st_size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
