"""Conclusions an experiment's own numbers support, worded from them.

A notebook prints a claim only where its output backs it. Across seeds, one
arm counts as ending below another only when every seed's value lies below
every seed's value of the other, and the gap between the two ranges is wider
than the experiment's noise: the widest range any one arm's seeds spread
over. A gap narrower than that (two runs still at the unigram's level differ
by a few thousandths) is what another seed could close, and one seed
measures no noise at all. Otherwise the sentence says that this run does not
tell them apart, and gives the numbers either way.

    finals = final_losses([curves_seed0, curves_seed1])   # label -> one value per seed
    print(compare(finals, "RMSNorm", "LayerNorm").sentence())
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Comparison", "Yardsticks", "compare", "final_losses", "lowest", "largest_rise", "seed_spread",
           "values_text"]


def values_text(values: list[float]) -> str:
    """'0.612 and 0.634' ('diverged' for an arm whose loss became inf or nan)."""
    return _listed(["diverged" if not math.isfinite(v) else f"{v:.3f}" for v in values])


def _listed(words: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def final_losses(curves_per_seed: list) -> dict[str, list[float]]:
    """label -> the final validation loss of each seed's run (inf where it diverged: worse than any loss)."""
    out: dict[str, list[float]] = {}
    for curves in curves_per_seed:
        for label, loss in curves.final_val().items():
            out.setdefault(label, []).append(loss if math.isfinite(loss) else math.inf)
    return out


def seed_spread(values: dict[str, list[float]]) -> float | None:
    """The experiment's noise: the widest range over which one arm's seeds spread (finite values only: a diverged
    run is not noise). None where no arm has two finite seeds, so nothing was measured."""
    spreads = [max(v) - min(v) for v in ([x for x in vs if math.isfinite(x)] for vs in values.values()) if len(v) > 1]
    return max(spreads) if spreads else None


@dataclass
class Comparison:
    a: str
    b: str
    a_values: list[float]
    b_values: list[float]
    noise: float | None = None   # seed_spread of the experiment the two arms belong to

    @property
    def gap(self) -> float:
        """How far apart the two ranges of seeds lie (negative where they overlap)."""
        return max(min(self.b_values) - max(self.a_values), min(self.a_values) - max(self.b_values))

    @property
    def result(self) -> str:
        """'lower' or 'higher' (a against b, in every seed, the ranges further apart than the noise), else
        'unresolved'."""
        if self.noise is None or not self.gap > self.noise:
            return "unresolved"
        return "lower" if max(self.a_values) < min(self.b_values) else "higher"

    def sentence(self, quantity: str = "final validation loss", lower: str = "ends lower than",
                 higher: str = "ends higher than") -> str:
        seeds = len(self.a_values)
        numbers = f"{self.a} {values_text(self.a_values)}, {self.b} {values_text(self.b_values)}"
        apart = f"the seeds' ranges {self.gap:.3f} apart, more than the {self.noise or 0:.3f} one arm's seeds spread over"
        if self.result == "lower":
            return f"{self.a} {lower} {self.b} in every seed, {apart} ({quantity}: {numbers})"
        if self.result == "higher":
            return f"{self.a} {higher} {self.b} in every seed, {apart} ({quantity}: {numbers})"
        told = f"{self.a} and {self.b} are not told apart by {seeds} seed{'s' if seeds > 1 else ''}"
        if self.noise is None:
            return f"{told}: one seed measures no noise to hold the difference against ({quantity}: {numbers})"
        if self.gap > 0:
            return (f"{told}: their ranges of {quantity} are {self.gap:.3f} apart, no more than the {self.noise:.3f} "
                    f"one arm's seeds spread over ({numbers})")
        return f"{told}: their ranges of {quantity} overlap ({numbers})"


def compare(values: dict[str, list[float]], a: str, b: str) -> Comparison:
    """a against b, with the noise measured over every arm of `values` (the experiment's seeds)."""
    return Comparison(a, b, values[a], values[b], seed_spread(values))


def lowest(values: dict[str, list[float]]) -> str | None:
    """The label whose every seed lies below every seed of every other label, or None."""
    for label in values:
        if all(compare(values, label, other).result == "lower" for other in values if other != label):
            return label
    return None


@dataclass
class Yardsticks:
    """Two losses that need no network, on the validation bytes an experiment scores: byte frequencies alone
    (the unigram) and the previous byte (the bigram). A short run first falls to the unigram's level (it has
    learned which bytes are common), stays there a while, and only then learns to use the bytes before each one;
    a run that ends at that level has not started to use context yet."""

    unigram: float
    bigram: float

    @property
    def plateau(self) -> float:
        """Below this loss a run has come a tenth of the way from the unigram's level towards the bigram's."""
        return self.unigram - (self.unigram - self.bigram) / 10

    def sentence(self, finals: dict[str, list[float]], seeds=(0,)) -> str:
        """Two lines: the yardsticks, and the runs (label and seed) that ended still at the unigram's level."""
        stuck = []
        for label, values in finals.items():
            at = [seed for seed, v in zip(seeds, values) if math.isfinite(v) and v > self.plateau]
            if at:
                stuck.append(f"{label} (seed{'s' if len(at) > 1 else ''} {_listed([str(seed) for seed in at])})")
        names = "; ".join(stuck) if stuck else "none"
        return (f"yardsticks on the same validation bytes: byte frequencies alone (unigram) {self.unigram:.3f}, the "
                f"previous byte (bigram) {self.bigram:.3f} nats/byte\n  ended at the unigram's level (above {self.plateau:.3f}, "
                f"not a tenth of the way down to the bigram): {names}")


def largest_rise(losses: list[float], after: int) -> float:
    """How far the loss climbs back above its lowest value so far, at most, after step `after`:
    0 for a loss that never rises again."""
    best, rise = min(losses[:after + 1]), 0.0
    for loss in losses[after + 1:]:
        rise = max(rise, loss - best)
        best = min(best, loss)
    return rise
