"""Cold vs warm start of a jailed process, to its first executed `import torch`.

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_warm_jail.py [--rounds 3] [--cell CODE]

For each round, interleaved: a jailed recheck child (autograder.grading.recheck's
Child, as the recheck starts it) and a jailed nbgrader kernel (the sandbox
kernelspec, started by jupyter_client as nbgrader does), each once cold and
once with a warm jail server (autograder.grading.sandbox.warm_jail). Prints seconds from
start to the reply of a cell that runs `import torch` (or --cell, e.g. the
notebooks' first imports: "import torch; import matplotlib.pyplot as plt").
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.grading.sandbox import warm_jail  # noqa: E402
from autograder.grading.gradebook import db_url  # noqa: E402
from autograder.grading.recheck.parent import Child  # noqa: E402
from autograder.grading.sandbox.jail import Jail, Limits  # noqa: E402
from autograder.grading.sandbox.kernel import hidden_paths, started_kernel  # noqa: E402

def recheck_child_start(limits: Limits, cell: str) -> float:
    with Jail.reserve(limits, hide=hidden_paths(db_url())) as jail:
        start = time.perf_counter()
        child = Child(jail, timeout=120, total=120)
        answer = child.request(("exec", "bench", cell))
        seconds = time.perf_counter() - start
        child.kill("measured")
    assert answer == ("ok", []), answer
    return seconds


def kernel_start(limits: Limits, cell: str) -> float:
    with Jail.reserve(limits, hide=hidden_paths(db_url())) as jail:
        start = time.perf_counter()
        with started_kernel(jail, {**os.environ, "OMP_NUM_THREADS": "1"}) as (_, client):
            reply = client.execute_interactive(cell, timeout=120)
            seconds = time.perf_counter() - start
    assert reply["content"]["status"] == "ok", reply["content"]
    return seconds


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cell", default="import torch", help="the code of the first cell")
    args = p.parse_args()
    limits = Limits(memory_mb=4096, cpu_s=300)
    times: dict[str, list[float]] = {}
    server = warm_jail.WarmJailServer()
    server.wait_ready()
    try:
        for _ in range(args.rounds):
            for what, measure in (("recheck child", recheck_child_start), ("kernel", kernel_start)):
                for mode in ("cold", "warm"):
                    if mode == "warm":
                        os.environ.update(server.env())
                    else:
                        os.environ.pop(warm_jail.ENV_VAR, None)
                    times.setdefault(f"{what}, {mode}", []).append(measure(limits, args.cell))
    finally:
        server.close()
    print(f"seconds from start to a reply of `{args.cell}` ({args.rounds} rounds, interleaved; median, min, max)")
    for key, values in times.items():
        print(f"  {key:22s} {statistics.median(values):6.2f} {min(values):6.2f} {max(values):6.2f}")


if __name__ == "__main__":
    main()
