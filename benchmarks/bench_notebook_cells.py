"""Wall time of each cell of a notebook, run as the build runs it (a fresh
kernel, from the notebook's folder): which cells a notebook's stated run time
is spent on.

    OMP_NUM_THREADS=1 python benchmarks/bench_notebook_cells.py 07
    OMP_NUM_THREADS=1 python benchmarks/bench_notebook_cells.py 03 05 06 07 09 --grep flop --grep bytes_per
    OMP_NUM_THREADS=1 python benchmarks/bench_notebook_cells.py 09 --grading      # as nbgrader runs it
    OMP_NUM_THREADS=1 python benchmarks/bench_notebook_cells.py 01 02 03 04 05 06 07 08 09 10 --record

--record writes every cell's time into CELL_TIMES (with the load average and
the date), the data the test of long cells reads: every cell that can take
20 s on a busy machine must print its estimate first.

The notebook is built from its source in autograder/authoring/notebook_src/
(not the committed solution), executed with nbclient, and each code cell's
time is read from nbclient's own timestamps (from the kernel's "busy" to its
reply). Printed: the total, then every cell above --min seconds and every
cell whose source contains a --grep text, slowest first. Nothing is written.
A machine busy with other jobs inflates every figure: measure on an idle one.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

from autograder.authoring.build import new_notebook, source_cells, source_files
from autograder.course import SOURCE_DIR
from autograder.selfcheck import private_kernel_config

CELL_TIMES = Path(__file__).with_name("notebook_cell_seconds.json")


def cell_seconds(cell) -> float | None:
    """Seconds between the kernel starting the cell and its reply, from nbclient's timestamps."""
    stamps = cell.metadata.get("execution", {})
    start, end = stamps.get("iopub.status.busy"), stamps.get("shell.execute_reply")
    if not (start and end):
        return None
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def first_printed(cell, lines: int = 2) -> list[str]:
    """The first lines a code cell printed (its streams, in order): where a long cell announces its estimate."""
    text = "".join(out.get("text", "") for out in cell.get("outputs", []) if out.get("output_type") == "stream")
    return text.splitlines()[:lines]


def time_cells(name: str, grading: bool) -> tuple[str, list[tuple[float, str, str]]]:
    """The notebook's full name, and [(seconds, the cell's first line, the cell)] for each of its code cells."""
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
            rows.append((seconds, first[:90], cell))
    return src.stem, rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="+", help="notebook prefixes, e.g. 03 07_gqa")
    p.add_argument("--grep", action="append", default=[], help="always list the cells whose source contains this")
    p.add_argument("--min", type=float, default=1.0, help="list cells that take at least this many seconds")
    p.add_argument("--grading", action="store_true", help="run with NBGRADER_EXECUTION set, as nbgrader does")
    p.add_argument("--record", action="store_true", help=f"write every cell's time into {CELL_TIMES.name}")
    args = p.parse_args(argv)
    record = json.loads(CELL_TIMES.read_text()) if args.record and CELL_TIMES.is_file() else {}
    for name in args.names:
        stem, rows = time_cells(name, args.grading)
        if args.record:
            record[stem + (" (as graded)" if args.grading else "")] = {
                "measured": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "load_average": round(os.getloadavg()[0], 1),
                "cells": [{"seconds": round(seconds, 2), "source": cell.source, "printed": first_printed(cell)}
                          for seconds, _, cell in rows]}
            CELL_TIMES.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"{stem}: {sum(s for s, _, _ in rows):.1f} s in {len(rows)} code cells"
              f"{' (as graded)' if args.grading else ''}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
        for seconds, first, cell in sorted(rows, key=lambda row: row[0], reverse=True):
            if seconds >= args.min or any(g in cell.source for g in args.grep):
                print(f"  {seconds:6.2f} s  {first}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
