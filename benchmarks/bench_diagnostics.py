"""Mutation benchmark of the checks' diagnoses (issue 12).

Each mutation (benchmarks/mutations/nbNN.py) is one beginner mistake written
as a substitution on a solution answer cell. In-process, per mutation: the
notebook's setup cell and every other answer cell (solutions) run in a fresh
namespace, then the mutated cell, then the visible part of that exercise's
check cell. Outcome:

  missed        the check passed
  named         it failed and a diagnosis line contains one of the mutation's
                expected keywords (case-insensitive)
  named wrongly it failed with a "Likely bug:" line, but no diagnosis line
                contains an expected keyword: it blames a specific other bug
  unnamed       it failed without any diagnosis

Diagnosis lines are the lines of the failure message after its summary line
("X failed N of M checks: ..."); for a failure that stops the check (an
exception in the learner's code, a wrong return type) the stop message
itself counts too.

    python benchmarks/bench_diagnostics.py [--notebooks 01 03] [--set heldout] [-v] [--json]

--set heldout runs the held-out mistakes of benchmarks/mutations/heldout.py
(written without reading the checks) instead of the nbNN.py ones, and
reports them on their own.

Exits non-zero when anything is missed or named wrongly, or when the named
rate is below 85%.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)] if str(ROOT) not in sys.path else []

from autograder.authoring.build import source_cells  # noqa: E402
from autograder.checks import CheckFailed  # noqa: E402
from autograder.course import NOTEBOOK_SOURCES  # noqa: E402
from autograder.notebook_format import nbg, visible_part  # noqa: E402
from benchmarks.mutations import SETS, Mutation  # noqa: E402

NAMED_RATE_REQUIRED = 0.85
SUMMARY = re.compile(r"^\S.* failed \d+ of \d+ checks")


@dataclass
class Outcome:
    notebook: str
    mutation: Mutation
    verdict: str  # missed | named | named wrongly | unnamed
    message: str

    @property
    def last_line(self) -> str:
        lines = [l.strip() for l in self.message.strip().splitlines() if l.strip()]
        return lines[-1] if lines else "(check passed)"


def source_file(notebook: str) -> Path:
    (path,) = sorted(Path(NOTEBOOK_SOURCES).glob(f"{notebook}_*.py"))
    return path


def notebook_cells(notebook: str):
    """(setup sources, {answer id: source}, {answer id: visible check source}), in notebook order."""
    cells = [c for c in source_cells(source_file(notebook)) if c.cell_type == "code"]
    setup, answers, checks = [], {}, {}
    for i, cell in enumerate(cells):
        meta = nbg(cell)
        if meta.get("locked") and not meta.get("grade"):
            setup.append(cell.source)
        elif meta.get("solution"):
            answers[meta["grade_id"]] = cell.source
            nxt = cells[i + 1] if i + 1 < len(cells) else None
            if nxt is not None and nbg(nxt).get("grade"):
                checks[meta["grade_id"]] = visible_part(nxt.source)
    return setup, answers, checks


def diagnosis_lines(message: str) -> list[str]:
    lines = [l.strip() for l in message.strip().splitlines() if l.strip()]
    if lines and SUMMARY.match(lines[0]):
        lines = lines[1:]
    return lines


def classify(message: str | None, expect: tuple[str, ...]) -> str:
    if message is None:
        return "missed"
    lines = diagnosis_lines(message)
    if any(k.lower() in l.lower() for l in lines for k in expect):
        return "named"
    if any(l.startswith("Likely bug:") for l in lines):
        return "named wrongly"
    return "unnamed"


def run_mutation(notebook: str, mutation: Mutation, cells) -> Outcome:
    setup, answers, checks = cells
    if mutation.cell not in answers:
        raise ValueError(f"notebook {notebook}: no answer cell {mutation.cell!r} (have {sorted(answers)})")
    if mutation.cell not in checks:
        raise ValueError(f"notebook {notebook}: answer cell {mutation.cell!r} has no check cell after it")
    mutated = mutation.apply(answers[mutation.cell])
    ns: dict = {"__name__": f"bench_{notebook}"}
    message = None
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for src in setup:
            exec(compile(src, f"<{notebook}:setup>", "exec"), ns)
        for gid, src in answers.items():  # notebook order: a later answer may use an earlier one
            code = mutated if gid == mutation.cell else src
            try:
                exec(compile(code, f"<{notebook}:{gid}>", "exec"), ns)
            except Exception as err:  # a mutation that breaks its own cell at definition time
                message = f"the cell {gid} raised {type(err).__name__}: {err}"
        if message is None:
            try:
                exec(compile(checks[mutation.cell], f"<{notebook}:check {mutation.cell}>", "exec"), ns)
            except CheckFailed as err:
                message = str(err)
    return Outcome(notebook, mutation, classify(message, mutation.expect), message or "")


def run(notebooks: list[str] | None = None, mutation_set: str = "default") -> list[Outcome]:
    import os
    os.environ.setdefault("TINYLM_DEVICE", "cpu")
    found = SETS[mutation_set]()
    outcomes = []
    for nb in sorted(found):
        if notebooks and nb not in notebooks:
            continue
        cells = notebook_cells(nb)
        outcomes += [run_mutation(nb, m, cells) for m in found[nb]]
    return outcomes


def table(outcomes: list[Outcome]) -> tuple[str, dict]:
    columns = ("mutations", "caught", "named", "named wrongly", "unnamed", "missed")
    per_nb: dict[str, dict[str, int]] = {}
    for o in outcomes:
        row = per_nb.setdefault(o.notebook, dict.fromkeys(columns, 0))
        row["mutations"] += 1
        row["caught"] += o.verdict != "missed"
        row[o.verdict] += 1
    total = {c: sum(r[c] for r in per_nb.values()) for c in columns}
    header = f"{'notebook':<9}" + "".join(f"{c:>15}" for c in columns) + f"{'named %':>10}"
    lines = [header]
    for name, r in [*per_nb.items(), ("total", total)]:
        rate = 100 * r["named"] / r["mutations"] if r["mutations"] else 0.0
        lines.append(f"{name:<9}" + "".join(f"{r[c]:>15}" for c in columns) + f"{rate:>9.1f}%")
    return "\n".join(lines), {"notebooks": per_nb, "total": total}


def problems(outcomes: list[Outcome]) -> list[str]:
    bad = [f"{o.notebook} {o.mutation.cell}: {o.verdict}: {o.mutation.why} -> {o.last_line}"
           for o in outcomes if o.verdict in ("missed", "named wrongly")]
    named = sum(o.verdict == "named" for o in outcomes)
    if outcomes and named / len(outcomes) < NAMED_RATE_REQUIRED:
        bad.append(f"named rate {named}/{len(outcomes)} = {named / len(outcomes):.1%} is below "
                   f"{NAMED_RATE_REQUIRED:.0%}")
    return bad


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--notebooks", nargs="*", help="notebook numbers, e.g. 01 03 (default: all)")
    p.add_argument("-v", "--verbose", action="store_true", help="each mutation's verdict and last message line")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--set", dest="mutation_set", choices=sorted(SETS), default="default",
                   help="which mistakes: the nbNN.py modules (default) or the held-out set")
    args = p.parse_args(argv)
    start = time.perf_counter()
    outcomes = run(args.notebooks, args.mutation_set)
    text, figures = table(outcomes)
    if args.verbose:
        for o in outcomes:
            print(f"[{o.notebook} {o.mutation.cell}] {o.verdict:<13} {o.mutation.why}\n    -> {o.last_line}")
        print()
    if args.json:
        print(json.dumps(figures | {"set": args.mutation_set, "problems": problems(outcomes)}, indent=1))
    else:
        print(f"mutation set: {args.mutation_set}")
        print(text)
        print(f"({len(outcomes)} mutations in {time.perf_counter() - start:.1f} s)")
        for line in problems(outcomes):
            print(f"PROBLEM: {line}")
    return 1 if problems(outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
