"""The held-out mistakes (benchmarks/mutations/heldout.py) still apply to the
solution cells, and each one is a real bug: benchmarks/verify_heldout.py's
probes see it differ from the solution (tinylm as the reference)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "benchmarks"))
import verify_heldout  # noqa: E402


def test_every_heldout_mutation_is_a_real_bug(capsys):
    assert verify_heldout.main() == 0, capsys.readouterr().out


def test_heldout_set_is_separate_from_the_default_set():
    from benchmarks.mutations import SETS

    default, heldout = SETS["default"](), SETS["heldout"]()
    assert 20 <= sum(map(len, heldout.values())) <= 30
    # The learner-reports mutations were written at the same time by the checks'
    # author, independently: two people writing the same natural mistake is
    # allowed there. Copying one of the mutations the checks were first
    # measured on is not.
    first_edits = {(nb, m.cell, m.old, m.new) for nb, ms in default.items() for m in ms if not m.added}
    assert not first_edits & {(nb, m.cell, m.old, m.new) for nb, ms in heldout.items() for m in ms}
