"""Each mistake of the "unseen" held-out set (benchmarks/mutations/unseen.py),
of the "offlist" set (offlist.py, mistakes in none of the other lists) and
of the "fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7",
"fresh8", "fresh9", "fresh10", "fresh11", "fresh12", "fresh13", "fresh14", "fresh15", "fresh16", "fresh17", "fresh18", "fresh19", "fresh20", "fresh21", "fresh22", "fresh23", "fresh24", "fresh25", "fresh26", "fresh27", "fresh28", "fresh29", "fresh30", "fresh31", "fresh32", "fresh33", "fresh34" and "fresh35" sets
(fresh.py to fresh35.py), and of the white-box "collisions" set (collisions.py), is a real
bug: probes run the solution and the mutated answer on the situation the
mistake is about (a batch of one, a KV cache after a prefill, a non-default config
value, float16 or uint8 input, non-contiguous logits, a model in train mode
or in eval mode, another device, padding, temperature 0, a caller's eps,
long sequences, logits tied at the k-th, a generation interrupted by an
exception, the gradient that reaches a weight or an input, ...) and compare
with tinylm, with PyTorch built-ins (the FLOP counter and autograd among
them) or with closed forms. A mutation that leaves every probe as the
solution has it would be no mistake at all. No check of the course is run.

    python benchmarks/verify_unseen.py               # the unseen set
    python benchmarks/verify_unseen.py --set offlist
    python benchmarks/verify_unseen.py --set fresh
    python benchmarks/verify_unseen.py --set fresh2
    python benchmarks/verify_unseen.py --set fresh3
    python benchmarks/verify_unseen.py --set fresh4
    python benchmarks/verify_unseen.py --set fresh5
    python benchmarks/verify_unseen.py --set fresh6
    python benchmarks/verify_unseen.py --set fresh7
    python benchmarks/verify_unseen.py --set fresh8
    python benchmarks/verify_unseen.py --set fresh9
    python benchmarks/verify_unseen.py --set fresh10
    python benchmarks/verify_unseen.py --set fresh11
    python benchmarks/verify_unseen.py --set fresh12
    python benchmarks/verify_unseen.py --set fresh13
    python benchmarks/verify_unseen.py --set fresh14
    python benchmarks/verify_unseen.py --set fresh15
    python benchmarks/verify_unseen.py --set fresh16
    python benchmarks/verify_unseen.py --set fresh17
    python benchmarks/verify_unseen.py --set fresh18
    python benchmarks/verify_unseen.py --set fresh19
    python benchmarks/verify_unseen.py --set fresh20
    python benchmarks/verify_unseen.py --set fresh21
    python benchmarks/verify_unseen.py --set fresh22
    python benchmarks/verify_unseen.py --set fresh23
    python benchmarks/verify_unseen.py --set fresh24
    python benchmarks/verify_unseen.py --set fresh25
    python benchmarks/verify_unseen.py --set fresh26
    python benchmarks/verify_unseen.py --set fresh27
    python benchmarks/verify_unseen.py --set fresh28
    python benchmarks/verify_unseen.py --set fresh29
    python benchmarks/verify_unseen.py --set fresh30
    python benchmarks/verify_unseen.py --set fresh31
    python benchmarks/verify_unseen.py --set fresh32
    python benchmarks/verify_unseen.py --set fresh33
    python benchmarks/verify_unseen.py --set fresh34
    python benchmarks/verify_unseen.py --set fresh35
    python benchmarks/verify_unseen.py --set collisions

Prints one row per mutation (the probes it changes, `*` marks a mistake that
shows only in its regime) and exits non-zero if a mutation does not apply
(its original text is not found exactly once) or changes nothing, or if one of
the set's SAME edits (no mistake: the same result another way) changes a probe.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)] if str(ROOT) not in sys.path else []

from benchmarks.bench_diagnostics import notebook_cells  # noqa: E402
from benchmarks.mutations import SETS, same_edits  # noqa: E402
from benchmarks.unseen_probes import PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh12 import EXTRA_PROBES as FRESH12_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh13 import EXTRA_PROBES as FRESH13_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh14 import EXTRA_PROBES as FRESH14_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh15 import EXTRA_PROBES as FRESH15_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh16 import EXTRA_PROBES as FRESH16_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh17 import EXTRA_PROBES as FRESH17_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh18 import EXTRA_PROBES as FRESH18_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh19 import EXTRA_PROBES as FRESH19_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh20 import EXTRA_PROBES as FRESH20_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh21 import EXTRA_PROBES as FRESH21_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh22 import EXTRA_PROBES as FRESH22_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh23 import EXTRA_PROBES as FRESH23_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh24 import EXTRA_PROBES as FRESH24_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh25 import EXTRA_PROBES as FRESH25_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh26 import EXTRA_PROBES as FRESH26_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh27 import EXTRA_PROBES as FRESH27_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh28 import EXTRA_PROBES as FRESH28_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh29 import EXTRA_PROBES as FRESH29_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh30 import EXTRA_PROBES as FRESH30_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh31 import EXTRA_PROBES as FRESH31_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh32 import EXTRA_PROBES as FRESH32_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh33 import EXTRA_PROBES as FRESH33_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh34 import EXTRA_PROBES as FRESH34_PROBES  # noqa: E402
from benchmarks.unseen_probes_fresh35 import EXTRA_PROBES as FRESH35_PROBES  # noqa: E402
from benchmarks.verify_heldout import attempt, namespace  # noqa: E402




# probes a set adds to the shared ones, for situations only its mistakes are about
EXTRA_PROBES = {"fresh12": FRESH12_PROBES, "fresh13": FRESH13_PROBES, "fresh14": FRESH14_PROBES,
               "fresh15": FRESH15_PROBES, "fresh16": FRESH16_PROBES,
               "fresh17": FRESH17_PROBES, "fresh18": FRESH18_PROBES,
               "fresh19": FRESH19_PROBES, "fresh20": FRESH20_PROBES,
               "fresh21": FRESH21_PROBES, "fresh22": FRESH22_PROBES,
               "fresh23": FRESH23_PROBES, "fresh24": FRESH24_PROBES,
               "fresh25": FRESH25_PROBES, "fresh26": FRESH26_PROBES,
               "fresh27": FRESH27_PROBES, "fresh28": FRESH28_PROBES,
               "fresh29": FRESH29_PROBES, "fresh30": FRESH30_PROBES,
               "fresh31": FRESH31_PROBES, "fresh32": FRESH32_PROBES,
               "fresh33": FRESH33_PROBES, "fresh34": FRESH34_PROBES,
               "fresh35": FRESH35_PROBES}


def probes_of(set_name: str, notebook: str):
    """The shared probe of the notebook, with the set's own probes of it added."""
    extra = EXTRA_PROBES.get(set_name, {}).get(notebook)
    return PROBES[notebook] if extra is None else lambda ns: {**PROBES[notebook](ns), **extra(ns)}


VERIFIED_SETS = ("unseen", "offlist", "fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7", "fresh8",
                 "fresh9", "fresh10", "fresh11", "fresh12", "fresh13", "fresh14", "fresh15", "fresh16", "fresh17", "fresh18",
                 "fresh19", "fresh20", "fresh21", "fresh22", "fresh23", "fresh24", "fresh25", "fresh26",
                 "fresh27", "fresh28", "fresh29", "fresh30", "fresh31", "fresh32", "fresh33", "fresh34", "fresh35",
                 "collisions")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Prove each held-out mistake a real bug against tinylm, PyTorch or a closed form.")
    parser.add_argument("--set", choices=VERIFIED_SETS, default="unseen", help="which held-out set (default: unseen)")
    args = parser.parse_args(argv)
    chosen = SETS[args.set]()
    problems, rows = [], 0
    for notebook, mutations in chosen.items():
        _, answers, _ = notebook_cells(notebook)
        probe = probes_of(args.set, notebook)
        solution = probe(namespace(notebook))
        print(f"{notebook} solution: {solution}")
        for mutation in mutations:
            rows += 1
            found = answers[mutation.cell].count(mutation.old)
            if found != 1:
                problems.append(f"{notebook} {mutation.cell}: original text found {found} times: {mutation.why}")
                continue
            seen = attempt(lambda: probe(namespace(notebook, mutation)))
            changed = {k: v for k, v in seen.items() if solution.get(k) != v} if isinstance(seen, dict) else seen
            mark = "*" if mutation.regime else " "
            print(f"  {mark} {mutation.cell:<17} {mutation.why[:64]:<66} {changed or 'NO CHANGE'}")
            if not changed:
                problems.append(f"{notebook} {mutation.cell}: changes nothing the probes see: {mutation.why}")
    same = same_edits(args.set)
    for notebook, edits in same.items():  # no mistakes: each must leave every probe as the solution has it
        probe = probes_of(args.set, notebook)
        solution = probe(namespace(notebook))
        for edit in edits:
            seen = attempt(lambda: probe(namespace(notebook, edit)))
            changed = {k: v for k, v in seen.items() if solution.get(k) != v} if isinstance(seen, dict) else seen
            print(f"  = {edit.cell:<17} {edit.why[:64]:<66} {changed or 'same as the solution'}")
            if changed:
                problems.append(f"{notebook} {edit.cell}: an edit listed as computing the same changes a probe: {edit.why}")
    for line in problems:
        print(f"PROBLEM: {line}")
    every = [m for found in chosen.values() for m in found]
    print(f"{rows} mutations, {rows - len(problems)} apply and change a probe; "
          f"{sum(bool(m.regime) for m in every)} show only in their regime (*); "
          f"{sum(m.in_lists for m in every)} are essentially in the project's other mutation lists")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
