"""The timing guards of tinylm.measure can fire: a spread that shows noise at
every number of runs, timings taken side by side, error bars that stay above
zero, and an MFU whose peak cannot fall below the step's own rate."""
from __future__ import annotations

import time

import pytest

from tinylm import measure


def _sleeps(*seconds):
    """A run that sleeps each of `seconds` in turn (the first call is timed_ms's untimed warm-up)."""
    delays = iter(seconds)
    return lambda: time.sleep(next(delays))


def test_three_runs_show_their_noise():
    # the middle run of three alone would make a range of 0 whatever the runs were
    timing = measure.timed_ms(_sleeps(0, 0.002, 0.030, 0.060), repeats=3)
    assert timing[1] > 40 and timing.low >= 2 and timing.high >= 60 and timing.low <= timing[0] <= timing.high


def test_five_runs_still_leave_out_the_fastest_and_the_slowest():
    timing = measure.timed_ms(_sleeps(0, 0.0, 0.010, 0.010, 0.010, 0.200), repeats=5)
    assert timing[1] < 30 and timing.high < 100


def test_three_noisy_runs_make_the_cache_timing_too_noisy_to_tell():
    """Notebook 06's shortened SmolLM2 timing (3 runs per point) claims a trend only where clearly_more holds; a noisy
    run among three must widen the range enough to withhold it, where the middle run alone would not."""
    quiet_short = measure.timed_ms(_sleeps(0, 0.010, 0.010, 0.010), repeats=3)
    noisy_long = measure.timed_ms(_sleeps(0, 0.002, 0.030, 0.090), repeats=3)   # median 30 ms, one run at 2 ms
    assert noisy_long[0] > quiet_short[0] + 10
    assert not measure.clearly_more(quiet_short, noisy_long)
    steady_long = measure.timed_ms(_sleeps(0, 0.030, 0.031, 0.032), repeats=3)
    assert measure.clearly_more(quiet_short, steady_long)   # the guard still lets a clear difference through


def test_runs_timed_together_take_turns():
    calls = []
    timings = measure.timed_together({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=3)
    assert calls == ["a", "b"] * 4 and set(timings) == {"a", "b"}    # one warm-up each, then rounds
    with pytest.raises(ValueError, match="at least 3 runs"):
        measure.timed_together({"a": lambda: None}, repeats=2)


def test_error_bars_of_a_skewed_timing_stay_above_zero():
    timing = measure.timed_ms(_sleeps(0, 0.001, 0.001, 0.080), repeats=3)   # spread far larger than the median
    assert timing[1] / 2 > timing[0]                                  # median - spread / 2 would be below zero
    assert 0 < timing.low <= timing[0] and timing[0] - timing.low >= 0 and timing.high - timing[0] > 0


GFLOP = 1e9


def test_mfu_never_divides_by_a_peak_below_the_steps_own_rate():
    # a step of 4 GFLOP in 1 s ran at 4 GFLOP/s; the matmuls, slowed by other work, measured 2 and 3 GFLOP/s
    share, text = measure.model_flops_utilisation(4 * GFLOP, (1000.0, 10.0),
                                                  {"512 x 512": (2 * GFLOP, 0.1 * GFLOP), "other": (3 * GFLOP, 0.0)})
    assert share == pytest.approx(1.0) and text.startswith("MFU 100.0%")
    assert "unreliable" in text and "ran faster than every matmul" in text


def test_mfu_is_unreliable_when_the_peak_or_the_step_is_noisy():
    _, noisy_peak = measure.model_flops_utilisation(1 * GFLOP, (1000.0, 10.0), {"512 x 512": (4 * GFLOP, 2 * GFLOP)})
    _, noisy_step = measure.model_flops_utilisation(1 * GFLOP, (1000.0, 600.0), {"512 x 512": (4 * GFLOP, 0.1 * GFLOP)})
    assert "unreliable" in noisy_peak and "512 x 512" in noisy_peak.split("unreliable")[1]
    assert "unreliable" in noisy_step and "the step" in noisy_step.split("unreliable")[1]


def test_mfu_of_a_quiet_measurement_is_the_share_of_the_fastest_matmul():
    share, text = measure.model_flops_utilisation(1 * GFLOP, (1000.0, 10.0), {
        "512 x 512": (4 * GFLOP, 0.1 * GFLOP), "the weights' shape": (2 * GFLOP, 0.1 * GFLOP)})
    assert share == pytest.approx(0.25) and "unreliable" not in text and "512 x 512" in text
    with pytest.raises(ValueError, match="matmul_rates"):
        measure.model_flops_utilisation(1 * GFLOP, (1000.0, 10.0), {})
