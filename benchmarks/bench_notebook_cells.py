"""Wall time of each cell of a notebook, run as the build runs it (a fresh
kernel, from the notebook's folder): which cells a notebook's stated run time
is spent on.

    OMP_NUM_THREADS=1 python benchmarks/bench_notebook_cells.py 07
    OMP_NUM_THREADS=1 python benchmarks/bench_notebook_cells.py 03 05 06 07 09 --grep flop --grep bytes_per
    OMP_NUM_THREADS=1 python benchmarks/bench_notebook_cells.py 09 --grading      # as nbgrader runs it

The notebook is built from its source in autograder/authoring/notebook_src/
(not the committed solution), executed with nbclient, and each code cell's
time is read from nbclient's own timestamps (from the kernel's "busy" to its
reply). Printed: the total, then every cell above --min seconds and every
cell whose source contains a --grep text, slowest first. Nothing is written.
A machine busy with other jobs inflates every figure: measure on an idle one.
"""
from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime

from autograder.authoring.build import new_notebook, source_cells, source_files
from autograder.course import SOURCE_DIR
from autograder.selfcheck import private_kernel_config


def cell_seconds(cell) -> float | None:
    """Seconds between the kernel starting the cell and its reply, from nbclient's timestamps."""
    stamps = cell.metadata.get("execution", {})
    start, end = stamps.get("iopub.status.busy"), stamps.get("shell.execute_reply")
    if not (start and end):
        return None
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def time_cells(name: str, grading: bool) -> tuple[str, list[tuple[float, str, str]]]:
    """The notebook's full name, and [(seconds, the cell's first line, its source)] for each of its code cells."""
    from nbclient import NotebookClient

    [src] = source_files([name])
    nb = new_notebook(source_cells(src))
    if grading:
        os.environ["NBGRADER_EXECUTION"] = "autograde"  # the kernel inherits it: heavy cells shrink
    try:
        with private_kernel_config() as config:
            NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=True, config=config,
                           resources={"metadata": {"path": str(SOURCE_DIR / src.stem)}}).execute()
    finally:
        if grading:
            os.environ.pop("NBGRADER_EXECUTION", None)
    rows = []
    for cell in nb.cells:
        seconds = cell_seconds(cell) if cell.cell_type == "code" else None
        if seconds is not None:
            first = next((line for line in cell.source.splitlines() if line.strip() and not line.startswith("#")), "")
            rows.append((seconds, first[:90], cell.source))
    return src.stem, rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="+", help="notebook prefixes, e.g. 03 07_gqa")
    p.add_argument("--grep", action="append", default=[], help="always list the cells whose source contains this")
    p.add_argument("--min", type=float, default=1.0, help="list cells that take at least this many seconds")
    p.add_argument("--grading", action="store_true", help="run with NBGRADER_EXECUTION set, as nbgrader does")
    args = p.parse_args(argv)
    for name in args.names:
        stem, rows = time_cells(name, args.grading)
        print(f"{stem}: {sum(s for s, _, _ in rows):.1f} s in {len(rows)} code cells"
              f"{' (as graded)' if args.grading else ''}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
        for seconds, first, source in sorted(rows, reverse=True):
            if seconds >= args.min or any(g in source for g in args.grep):
                print(f"  {seconds:6.2f} s  {first}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
