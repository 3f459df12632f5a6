"""Which entries of one held-out set (benchmarks/mutations/NAME.py), mistakes
and SAME edits, are character for character an entry of another set: same
notebook, cell, original text and replacement. Prints only the matches (the
entry of NAME and the sets it is also in), so the other sets' entries are never
shown to whoever runs it: a helper writing a new set without reading the others
can still make sure each of its entries is new.

    python benchmarks/heldout_duplicates.py --set fresh13

Exits non-zero when any entry matches.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)] if str(ROOT) not in sys.path else []

from benchmarks.mutations import SETS, same_edits, set_names  # noqa: E402


def keys(grouped: dict) -> set:
    return {(nb, m.cell, m.old, m.new) for nb, found in grouped.items() for m in found}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the entries of one held-out set that another set also holds.")
    parser.add_argument("--set", required=True, choices=[n for n in set_names() if n != "default"],
                        help="the set whose entries are compared with every other set's")
    name = parser.parse_args(argv).set
    mine = [(nb, m) for grouped in (SETS[name](), same_edits(name)) for nb, found in grouped.items() for m in found]
    others = {other: keys(SETS[other]()) | keys(same_edits(other)) for other in set_names() if other != name}
    matches = 0
    for nb, m in mine:
        found_in = [other for other, entries in others.items() if (nb, m.cell, m.old, m.new) in entries]
        if found_in:
            matches += 1
            print(f"{nb} {m.cell}: {m.why[:70]} -- also in {', '.join(found_in)}")
    print(f"{matches} of {len(mine)} {name} entries are also in another set")
    return 1 if matches else 0


if __name__ == "__main__":
    raise SystemExit(main())
