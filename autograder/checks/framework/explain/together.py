"""Rows of one check that show the same finding are said in one line: the
row named first carries it, and a later row takes that line back and says
it again for them all."""
from __future__ import annotations


def rows_together(chk, finding: str, name: str) -> list[str]:
    """The rows that show `finding`, row `name` added, with the line said for
    the earlier ones (a fact or candidates, led by the first row's name)
    taken back: the caller says one line for them all."""
    rows = chk.ratio_rows.setdefault(finding, [])
    if rows:
        first = f"`{rows[0]}`"
        chk.facts = [f for f in chk.facts if not f.startswith(first)]
        chk.candidate_lines = [c for c in chk.candidate_lines if not c.startswith(first)]
    rows.append(name)
    return rows
