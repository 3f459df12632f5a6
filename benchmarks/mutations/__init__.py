"""Beginner mistakes as substitutions on the solution cells, one module per
notebook (nbNN.py, each with a MUTATIONS list), run by
benchmarks/bench_diagnostics.py against the exercise's visible check.
heldout.py is a separate set ({notebook: mutations}), written without
reading the checks, run only when asked for (`--set heldout`); heldout_unseen.py
is a second such set (`--set unseen`), heldout_offlist.py a third, of mistakes
in none of the other lists (`--set offlist`)."""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    """One mistake: in answer cell `cell`, `old` (which must occur exactly
    once) becomes `new`; `extra` is appended to the cell (e.g. a hand-written
    wrong helper). The check's diagnosis must contain one of `expect`
    (case-insensitive). `why` says, in words, what the learner did.
    `added` names the issue whose checks a mutation was written after
    (e.g. "issue-25"), so its named rate can be reported on its own; empty
    for the mutations the checks were first measured on."""

    cell: str
    old: str
    new: str
    expect: tuple[str, ...]
    why: str
    extra: str = ""
    added: str = ""

    def apply(self, source: str) -> str:
        count = source.count(self.old)
        if count != 1:
            raise ValueError(f"mutation of {self.cell!r} ({self.why}): {self.old!r} occurs {count} times in the "
                             "solution cell, expected exactly once; update the mutation")
        return source.replace(self.old, self.new) + (f"\n\n{self.extra}" if self.extra else "")


def all_mutations() -> dict[str, list[Mutation]]:
    """{notebook number '01'..: its mutations}, for every nbNN module found."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("nb") and info.name[2:].isdigit():
            found[info.name[2:]] = list(importlib.import_module(f"{__name__}.{info.name}").MUTATIONS)
    return found


def _by_notebook(module: str) -> dict[str, list[Mutation]]:
    """{notebook number: its mutations} of a held-out set, the MUTATIONS dict of benchmarks/mutations/<module>.py."""
    found = importlib.import_module(f"{__name__}.{module}").MUTATIONS
    return {nb: list(mutations) for nb, mutations in sorted(found.items())}


def heldout_mutations() -> dict[str, list[Mutation]]:
    """{notebook number: its held-out mutations} (benchmarks/mutations/heldout.py)."""
    return _by_notebook("heldout")


def unseen_mutations() -> dict[str, list[Mutation]]:
    """{notebook number: its mutations} of the second held-out set (benchmarks/mutations/heldout_unseen.py)."""
    return _by_notebook("heldout_unseen")


def offlist_mutations() -> dict[str, list[Mutation]]:
    """{notebook number: its mutations} of the third held-out set, in none of the other lists
    (benchmarks/mutations/heldout_offlist.py)."""
    return _by_notebook("heldout_offlist")


SETS = {"default": all_mutations, "heldout": heldout_mutations, "unseen": unseen_mutations,
        "offlist": offlist_mutations}
