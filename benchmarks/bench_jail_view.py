"""What the jail shows, and what keeping it resident costs: the view before (all of /usr) and now.

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 nice .venv/bin/python benchmarks/bench_jail_view.py [--cold] [--starts 3]

For each view: its files and bytes (a walk), a page-cache pass over it once
everything is cached (sandbox/page_cache.warm: one cachestat a file), the
walk of its folders that decides whether a batch's pass may be skipped
(page_cache.fingerprint), and the median start of a jailed `python -I -c pass` (the root is made of
more, smaller bind mounts now). With --cold, the new view's files are first
dropped from the page cache (fadvise DONTNEED: pages another process maps
stay) and one pass reads them back. Also: computing the new view (no kept file).
Root only (the jail's allow-list root).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.grading.sandbox import jail as jail_module  # noqa: E402
from autograder.grading.sandbox import page_cache, view  # noqa: E402
from autograder.grading.sandbox.jail import Jail, Limits  # noqa: E402
from autograder.grading.sandbox.jail_init import ETC_SHARED  # noqa: E402

# The view before it was computed: the system folders whole, the interpreter's whole prefix.
BEFORE_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def before() -> view.View:
    shown = [p for p in BEFORE_SYSTEM if os.path.lexists(p)]
    shown += [f"/etc/{name}" for name in ETC_SHARED if os.path.lexists(f"/etc/{name}")]
    shown += [os.path.realpath(sys.base_prefix), *jail_module.needed_paths()]
    return view.View(sorted(set(shown)), [], [])


def jail_start(shown: view.View, starts: int) -> float:
    saved = jail_module.job_view
    jail_module.job_view = lambda: shown
    seconds = []
    try:
        for _ in range(starts):
            with Jail.reserve(Limits(memory_mb=1024, cpu_s=60)) as jail:
                env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **jail.env()}
                began = time.perf_counter()
                subprocess.run([sys.executable, "-m", "autograder.grading.sandbox.jail", "--", sys.executable, "-I",
                                "-c", "pass"], env=env, check=True, cwd="/", capture_output=True)
                seconds.append(time.perf_counter() - began)
    finally:
        jail_module.job_view = saved
    return statistics.median(seconds)


def drop(shown: view.View) -> None:
    seen: set = set()
    for top in page_cache.top_folders(shown.shown):
        for path, _ in page_cache._files(top, seen, frozenset(shown.covered)):
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    facts = view.interpreter(sys.executable)
    began = time.perf_counter()
    now = view.compute(facts, jail_module.needed_paths())
    computed = time.perf_counter() - began
    print(f"computing the view: {computed:.1f} s; {len(now.shown)} paths shown, {len(now.links)} links made again, "
          f"covered {now.covered}; not found on this machine: {now.unresolved or 'none'}")
    rows = []
    for name, shown in (("before: /usr whole", before()), ("now: computed", now)):
        if args.cold and shown is now:
            drop(shown)
            cold = page_cache.warm(shown.shown, shown.covered)
            print(f"cold pass over the new view: read {cold.loaded_bytes / 1e9:.2f} GB of {cold.size / 1e9:.2f} GB "
                  f"in {cold.seconds:.1f} s")
        page_cache.warm(shown.shown, shown.covered)          # whatever is not cached yet
        cached = page_cache.warm(shown.shown, shown.covered)
        began = time.perf_counter()
        page_cache.fingerprint(shown.shown, shown.covered)
        walk = time.perf_counter() - began
        rows.append((name, cached.files, cached.size / 1e9, cached.loaded_bytes / 1e6, cached.seconds, walk,
                     jail_start(shown, args.starts)))
    print(f"\n| view | files | GB | MB read by a pass, all cached | pass, cached (s) "
          f"| folder walk: the batch's check (s) | jailed `python -c pass` (s, median of {args.starts}) |")
    print("|---|---|---|---|---|---|---|")
    for name, files, size, read, seconds, walk, start in rows:
        print(f"| {name} | {files:,} | {size:.2f} | {read:.0f} | {seconds:.2f} | {walk:.2f} | {start:.2f} |")


if __name__ == "__main__":
    main()
