"""How long the checks take: every test cell (visible and hidden checks) on
the solutions, the first time it runs in a fresh kernel and again after
that, and optionally the whole mutation benchmark (failing checks, with
their diagnoses), optionally side by side with another checkout.

    python benchmarks/bench_check_time.py [--notebooks 02 05] [--repeat 5] [--clock cpu]
    python benchmarks/bench_check_time.py --baseline /path/to/other/checkout --rounds 3   # before/after, interleaved

Each notebook runs in a fresh process, as a fresh kernel runs it: its setup
cell (timed: it imports torch, tinylm and the checks), its answers, then
each test cell in the notebook's order. *first* is a test cell's first run
(what a learner waits for the first time: it pays whatever the process has
not loaded or measured yet); *again* is the median of --repeat runs after
it, each preceded by defining the answers again (fresh function objects, as
a re-run notebook has, so nothing a check remembers about a function carries
over). A notebook's other cells (prose, demos, experiments) are not run, so
a *first* here can only be higher than in the notebook, never lower.
--clock cpu times with the process's CPU time (one thread: OMP_NUM_THREADS=1
and the setup cells' use_threads), which a machine busy with other jobs
inflates far less than the wall clock; on an idle machine the two agree.
With --baseline, the two checkouts alternate notebook by notebook, so both
see the same machine state; the ratio columns are this checkout's time over
the baseline's, the median over --rounds. CPU only (TINYLM_DEVICE=cpu).
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
NOTEBOOKS = [f"{n:02d}" for n in range(1, 11)]


def measure_notebook(root: Path, nb: str, repeat: int, clock) -> dict:
    """{"setup": seconds, "cells": {grade id: [first, again]}} for notebook `nb` of the checkout at `root`,
    measured in this process, which must not have imported torch or the course yet."""
    sys.path[:0] = [str(root)]
    os.environ["TINYLM_DEVICE"] = "cpu"
    import contextlib
    import io
    import warnings

    from autograder.authoring.build import source_cells, source_files
    from autograder.notebook_format import nbg

    (source,) = source_files([nb])
    cells = [c for c in source_cells(source) if c.cell_type == "code"]
    setup = [c.source for c in cells if nbg(c).get("locked") and not nbg(c).get("grade")]
    answers = [compile(c.source, f"<{nb}:answer>", "exec") for c in cells if nbg(c).get("solution")]
    tests = [(nbg(c)["grade_id"], compile(c.source, f"<{nb}:{nbg(c)['grade_id']}>", "exec"))
             for c in cells if nbg(c).get("grade")]
    ns: dict = {"__name__": f"time_{nb}"}
    found: dict[str, list[float]] = {}
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = clock()
        for src in setup:
            exec(compile(src, f"<{nb}:setup>", "exec"), ns)
        setup_time = clock() - start
        for code in answers:
            exec(code, ns)
        for gid, test in tests:
            times = []
            for _ in range(repeat + 1):
                for code in answers:
                    exec(code, ns)
                start = clock()
                exec(test, ns)
                times.append(clock() - start)
            found[gid] = [times[0], statistics.median(times[1:])]
    return {"setup": setup_time, "cells": found}


def measure_mutations(root: Path, notebooks: list[str]) -> float:
    """Seconds of one run of the whole mutation benchmark (bench_diagnostics) on `root`, in this process."""
    sys.path[:0] = [str(root), str(root / "benchmarks")]
    os.environ["TINYLM_DEVICE"] = "cpu"
    import contextlib
    import io

    import bench_diagnostics as bench
    with contextlib.redirect_stdout(io.StringIO()):
        start = time.perf_counter()
        bench.run(notebooks)
        return time.perf_counter() - start


def _child(root: Path, args, what: list[str]) -> dict | float:
    cmd = [sys.executable, __file__, "--child", str(root), "--repeat", str(args.repeat), "--clock", args.clock, *what]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), PYTHONPATH=str(root))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _one_round(roots: dict[str, Path], args) -> dict[str, dict]:
    """{label: {"NN setup": s, "NN check_x": [first, again], ...}} for each checkout, alternating notebook by notebook."""
    found: dict[str, dict] = {label: {} for label in roots}
    for nb in args.notebooks or NOTEBOOKS:
        for label, root in roots.items():
            got = _child(root, args, ["--notebook", nb])
            found[label][f"{nb} setup"] = got["setup"]
            found[label].update({f"{nb} {gid}": times for gid, times in got["cells"].items()})
    return found


def _medians(rounds: list[dict]) -> dict:
    keys = rounds[0]
    return {k: (statistics.median(r[k] for r in rounds) if k.endswith(" setup") else
                [statistics.median(r[k][i] for r in rounds) for i in (0, 1)]) for k in keys}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--notebooks", nargs="*", help="notebook numbers, e.g. 02 05 (default: all)")
    p.add_argument("--repeat", type=int, default=5, help="runs of each test cell after its first (the median is kept)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall: time.perf_counter; cpu: the process's CPU time (time.process_time)")
    p.add_argument("--mutations", action="store_true", help="also time the whole mutation benchmark once per round")
    p.add_argument("--baseline", type=Path, help="another checkout of the course to compare with")
    p.add_argument("--rounds", type=int, default=1, help="rounds (each checkout alternating); the median is kept")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--notebook", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        found = (measure_notebook(args.child, args.notebook, args.repeat, clock) if args.notebook else
                 measure_mutations(args.child, args.notebooks))
        print(json.dumps(found))
        return 0
    roots = {"baseline": args.baseline.resolve()} if args.baseline else {}
    roots["this"] = ROOT
    load_before = _load()
    rounds = [_one_round(roots, args) for _ in range(args.rounds)]
    table = {label: _medians([r[label] for r in rounds]) for label in roots}
    mutations = ({label: statistics.median(_child(root, args, ["--notebooks", *(args.notebooks or [])])
                                           for _ in range(args.rounds)) for label, root in roots.items()}
                 if args.mutations else {})
    load = f"load average {load_before} before, {_load()} after; clock {args.clock}; {args.rounds} round(s)"
    if args.json:
        print(json.dumps({"table": table, "mutations": mutations, "load": load}))
        return 0
    print(_report(table, mutations, load))
    return 0


def _report(table: dict, mutations: dict, load: str) -> str:
    """The printed table: one row per setup and test cell, first and again (ms), with ratios when two checkouts ran."""
    labels = list(table)
    this = table["this"]
    pair = len(labels) == 2
    head = "  first ms: base   this  ratio   again ms: base   this  ratio" if pair else "  first ms  again ms"
    lines = [f"{'cell':<34}{head}"]

    def ms(x):
        return f"{x * 1000:7.1f}" if x == x else "    n/a"

    def ratio(a, b):
        return f"{a / b:6.2f}" if b and b == b else "   n/a"

    totals = {label: [0.0, 0.0] for label in labels}
    for key, value in this.items():
        firsts = [table[label].get(key, float("nan")) for label in labels]
        if key.endswith(" setup"):
            agains = [float("nan")] * len(labels)
        else:
            agains = [v[1] if isinstance(v, list) else float("nan") for v in firsts]
            firsts = [v[0] if isinstance(v, list) else float("nan") for v in firsts]
            for label, f, a in zip(labels, firsts, agains):
                totals[label][0] += f
                totals[label][1] += a
        if pair:
            (fb, ft), (ab, at) = firsts, agains
            lines.append(f"{key:<34}     {ms(fb)} {ms(ft)} {ratio(ft, fb)}         {ms(ab)} {ms(at)} {ratio(at, ab)}")
        else:
            lines.append(f"{key:<34}{ms(firsts[0])}   {ms(agains[0])}")
    if pair:
        (fb, ab), (ft, at) = totals["baseline"], totals["this"]
        lines.append(f"{'all test cells':<34}     {ms(fb)} {ms(ft)} {ratio(ft, fb)}         {ms(ab)} {ms(at)} {ratio(at, ab)}")
    else:
        lines.append(f"{'all test cells':<34}{ms(totals['this'][0])}   {ms(totals['this'][1])}")
    slowest = max((v[0], k) for k, v in this.items() if not k.endswith(" setup"))
    lines.append(f"slowest test cell on its first run: {slowest[1]} ({slowest[0] * 1000:.0f} ms)")
    if mutations:
        lines.append("mutation benchmark (s): " + ", ".join(f"{label} {s:.1f}" for label, s in mutations.items()))
    lines.append(load)
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
