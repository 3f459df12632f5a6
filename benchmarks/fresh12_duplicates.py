"""Which entries of the fresh12 set (benchmarks/mutations/fresh12.py), mistakes
and SAME edits, are character for character an entry of another set: same
notebook, cell, original text and replacement. Prints only the matches (the
fresh12 entry and the set it is also in), so the other sets' entries are never
shown to whoever runs it.

    python benchmarks/fresh12_duplicates.py
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)] if str(ROOT) not in sys.path else []

from benchmarks.mutations import SETS, same_edits, set_names  # noqa: E402

NAME = "fresh12"


def keys(grouped: dict) -> set:
    return {(nb, m.cell, m.old, m.new) for nb, found in grouped.items() for m in found}


def main() -> int:
    mine = [(nb, m) for grouped in (SETS[NAME](), same_edits(NAME)) for nb, found in grouped.items() for m in found]
    others = {name: keys(SETS[name]()) | keys(same_edits(name)) for name in set_names() if name != NAME}
    matches = 0
    for nb, m in mine:
        found_in = [name for name, entries in others.items() if (nb, m.cell, m.old, m.new) in entries]
        if found_in:
            matches += 1
            print(f"{nb} {m.cell}: {m.why[:70]} -- also in {', '.join(found_in)}")
    print(f"{matches} of {len(mine)} fresh12 entries are also in another set")
    return 1 if matches else 0


if __name__ == "__main__":
    raise SystemExit(main())
