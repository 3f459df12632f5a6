"""Beginner mistakes as substitutions on the solution cells, one module per
notebook (nbNN.py, each with a MUTATIONS list), run by
benchmarks/bench_diagnostics.py against the exercise's visible check.

Any other module here is a further set of its own, named after the module
and run only when asked for (`--set NAME`), with MUTATIONS either a dict
{notebook: [Mutation, ...]} or a list of (notebook, Mutation) pairs:
heldout.py, unseen.py, offlist.py and fresh.py to fresh9.py (the last ten:
mistakes in none of the other lists) were written without reading the checks; causes.py holds
mistakes whose numbers another mistake also gives, each with the cause it was once told
(Mutation.untrue), entry_states.py mistakes that only a caller's other mode, grad mode or
generator shows, and collisions.py mistakes written reading the checks, each giving a listed cause's
signature from another cause. A new set needs no code change: drop NAME.py here. A set may also hold SAME, a list of (notebook, Mutation)
edits that are no mistake (the cell computes the same another way): the check must pass them."""
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
    `added` names the occasion a mutation was written after the checks
    (e.g. "learner-reports"), so its named rate can be reported on its own; empty
    for the mutations the checks were first measured on. `untrue` holds
    words of a cause this mistake is not, though another mistake gives the
    same numbers: a cause printed as certain ("Likely bug:") that holds one
    is an untrue line."""

    cell: str
    old: str
    new: str
    expect: tuple[str, ...]
    why: str
    extra: str = ""
    added: str = ""
    untrue: tuple[str, ...] = ()

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


def set_mutations(name: str) -> dict[str, list[Mutation]]:
    """{notebook number: mutations} of the set in module `name`."""
    found = importlib.import_module(f"{__name__}.{name}").MUTATIONS
    if isinstance(found, dict):
        return {str(nb): list(ms) for nb, ms in sorted(found.items())}
    grouped: dict[str, list[Mutation]] = {}
    for nb, mutation in found:
        grouped.setdefault(str(nb), []).append(mutation)
    return dict(sorted(grouped.items()))


def same_edits(name: str) -> dict[str, list[Mutation]]:
    """{notebook number: edits} of the set's SAME list: edits that compute what
    the solution computes another way, which a check must pass (none when the
    module has no SAME)."""
    grouped: dict[str, list[Mutation]] = {}
    if name == "default":
        return grouped
    for nb, edit in getattr(importlib.import_module(f"{__name__}.{name}"), "SAME", ()):
        grouped.setdefault(str(nb), []).append(edit)
    return dict(sorted(grouped.items()))


def heldout_mutations() -> dict[str, list[Mutation]]:
    """{notebook number: its held-out mutations} (benchmarks/mutations/heldout.py)."""
    return set_mutations("heldout")


def set_names() -> list[str]:
    """"default" and the name of every further set module found here."""
    return ["default"] + sorted(info.name for info in pkgutil.iter_modules(__path__)
                                if not (info.name.startswith("nb") and info.name[2:].isdigit()))


class _Sets(dict):
    """name -> loader; a further set module is found by its name on first use."""

    def __missing__(self, name: str):
        if name not in set_names():
            raise KeyError(name)
        return lambda: set_mutations(name)


SETS = _Sets({"default": all_mutations, "heldout": heldout_mutations})
