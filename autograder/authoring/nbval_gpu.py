"""Run nbval on every reference notebook on CUDA and print which passed.

    python -m autograder.authoring.nbval_gpu [--jobs N] [NN ...]

Uses the same `pytest --nbval-lax` as `make nbval`, with TINYLM_DEVICE=cuda
and the sanitizers in nbval_sanitize.cfg (device names, timings, progress
bars). Exits 2 with a message, running nothing, when torch sees no CUDA
device; 1 when any notebook fails. `--jobs N` runs N notebooks at once
(each in its own kernel; they share the GPU): a lent machine is paid by the
minute.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .. import course

SANITIZE = Path(__file__).resolve().parent / "nbval_sanitize.cfg"


def _run_one(assignment: str, env: dict) -> tuple[str, bool, float, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "--nbval-lax", "--nbval-sanitize-with", str(SANITIZE), str(course.source_notebook(assignment))],
                          cwd=course.ROOT, env=env, capture_output=True, text=True)
    log = "" if proc.returncode == 0 else proc.stdout[-3000:] + "\n" + proc.stderr[-1000:]
    return assignment, proc.returncode == 0, time.perf_counter() - start, log


def main(argv=None) -> int:
    import torch

    parser = argparse.ArgumentParser(prog="python -m autograder.authoring.nbval_gpu")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks run at once (default 1)")
    parser.add_argument("names", nargs="*", help="notebook number prefixes, e.g. 04 09 (default: all)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if not torch.cuda.is_available():
        print("nbval-gpu: torch sees no CUDA device (torch.cuda.is_available() is False); nothing was run. "
              "Use `make nbval` for the CPU run.")
        return 2
    gpu = torch.cuda.get_device_name(0)
    chosen = [a for a in course.assignments() if not args.names or any(a.startswith(n) for n in args.names)]
    env = dict(os.environ, TINYLM_DEVICE="cuda", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    env.pop("NBGRADER_EXECUTION", None)  # the full (not the graded, shrunk) notebooks
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda a: _run_one(a, env), chosen))
    for assignment, ok, _, log in results:
        if not ok:
            print(f"--- {assignment} ---", log, sep="\n")
    print(f"\nnbval on {gpu} (torch {torch.__version__}, CUDA {torch.version.cuda}):")
    for a, ok, secs, _ in results:
        print(f"  {'PASS' if ok else 'FAIL'}  {a:<22} {secs:6.1f} s")
    failed = [a for a, ok, _, _ in results if not ok]
    print(f"{len(results) - len(failed)} of {len(results)} notebooks passed" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
