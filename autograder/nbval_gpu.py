"""Run nbval on every reference notebook on CUDA and print which passed.

    python -m autograder.nbval_gpu [NN ...]

Uses the same `pytest --nbval-lax` as `make nbval`, with TINYLM_DEVICE=cuda
and the sanitizers in nbval_sanitize.cfg (device names, timings, progress
bars). Exits 2 with a message, running nothing, when torch sees no CUDA
device; 1 when any notebook fails.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

from . import course

SANITIZE = course.AUTOGRADER_DIR / "nbval_sanitize.cfg"


def main(argv=None) -> int:
    import torch

    names = list(sys.argv[1:] if argv is None else argv)
    if not torch.cuda.is_available():
        print("nbval-gpu: torch sees no CUDA device (torch.cuda.is_available() is False); nothing was run. "
              "Use `make nbval` for the CPU run.")
        return 2
    gpu = torch.cuda.get_device_name(0)
    chosen = [a for a in course.assignments() if not names or any(a.startswith(n) for n in names)]
    env = dict(os.environ, TINYLM_DEVICE="cuda", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    env.pop("NBGRADER_EXECUTION", None)  # the full (not the graded, shrunk) notebooks
    results = []
    for a in chosen:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                               "--nbval-lax", "--nbval-sanitize-with", str(SANITIZE), str(course.source_notebook(a))],
                              cwd=course.ROOT, env=env, capture_output=True, text=True)
        results.append((a, proc.returncode == 0, time.perf_counter() - start))
        if proc.returncode:
            print(proc.stdout[-3000:], proc.stderr[-1000:], sep="\n")
    print(f"\nnbval on {gpu} (torch {torch.__version__}, CUDA {torch.version.cuda}):")
    for a, ok, secs in results:
        print(f"  {'PASS' if ok else 'FAIL'}  {a:<22} {secs:6.1f} s")
    failed = [a for a, ok, _ in results if not ok]
    print(f"{len(results) - len(failed)} of {len(results)} notebooks passed" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
