"""The mutation benchmark (benchmarks/bench_diagnostics.py) in-process: every
beginner mistake must fail its check, none may be blamed on a different
bug, and at least 85% must be named so that the message leads to the fix."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_diagnostics  # noqa: E402

# About two seconds in all: not marked slow, so `make test-fast` runs it too.


@pytest.mark.parametrize("mutation_set", ["default", "heldout"])
def test_every_mutation_is_caught_and_none_is_named_wrongly(mutation_set):
    """heldout: mistakes written without reading the checks (first measured
    at 16 of 28 named; the classes they exposed are fixed, so from now on
    they guard against those classes coming back)."""
    outcomes = bench_diagnostics.run(mutation_set=mutation_set)
    assert outcomes, "no mutations found in benchmarks/mutations"
    offenders = bench_diagnostics.problems(outcomes)
    assert not offenders, "\n".join(offenders)


def test_a_mutation_that_no_longer_applies_fails_loudly():
    from benchmarks.mutations import Mutation

    stale = Mutation("embed", "this text is not in the solution", "x", ("x",), "stale")
    with pytest.raises(ValueError, match="occurs 0 times"):
        stale.apply("return weight[ids]")
    twice = Mutation("embed", "w", "x", ("x",), "ambiguous")
    with pytest.raises(ValueError, match="occurs 2 times"):
        twice.apply("w + w")


def test_classification_of_messages():
    summary = "rms_norm failed 1 of 3 checks: a."
    assert bench_diagnostics.classify(None, ("eps",)) == "missed"
    assert bench_diagnostics.classify(f"{summary}\n  Likely bug: eps outside the sqrt", ("EPS",)) == "named"
    assert bench_diagnostics.classify(f"{summary}\n  Likely bug: missing gain", ("eps",)) == "named wrongly"
    assert bench_diagnostics.classify(f"{summary}\n  Measured: output RMS 2.0", ("eps",)) == "unnamed"
    assert bench_diagnostics.classify(summary, ("a",)) == "unnamed"  # the summary line never names
