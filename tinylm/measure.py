"""Measuring this machine: repeated timings with their spread, matmul
throughput, memory bandwidth, and the honest verdict on a prediction.

A single timing on a shared machine measures the other programs as much as
the code; every figure here is the median of several runs with the range of
the middle ones as its spread, and a verdict says "too noisy on this machine
to tell" when the spread is as large as the effect it would decide. Nothing
here raises on noise: a noisy measurement is reported, not failed.

    flops_per_s = matmul_throughput()          # (median, spread) in FLOP/s
    ms = timed_ms(lambda: model(ids))          # (median, spread) in ms
    print(against_prediction(predicted_ms, ms))
    print(model_flops_utilisation(flops, step_ms, {"512 x 512": matmul_throughput()})[1])
"""
from __future__ import annotations

import time
from typing import Callable

import torch

TOO_NOISY = "too noisy on this machine to tell"


def _synchronize(device) -> None:
    """Wait for queued GPU work, so a timing covers the computation, not its launch."""
    kind = torch.device(device).type if device is not None else None
    if kind == "cuda" or (kind is None and torch.cuda.is_available() and torch.cuda.is_initialized()):
        torch.cuda.synchronize()
    elif kind == "mps":
        torch.mps.synchronize()


class Timing(tuple):
    """What timed_ms returns: unpacks as (median, spread) in ms, the spread being high - low; .low and .high are
    the ends of that range. Error bars drawn from .low to .high stay where runs were (never below zero); median ±
    spread / 2 need not, since the range is not centred on the median."""

    low: float
    high: float

    def __new__(cls, median: float, low: float, high: float):
        timing = super().__new__(cls, (median, high - low))
        timing.low, timing.high = low, high
        return timing


def _timing(times: list[float]) -> Timing:
    """The median and the range of the middle runs: the fastest and the slowest left out where at least five
    ran. Of three or four runs all are kept: the middle of three is one run, whose range would always be 0."""
    times = sorted(times)
    kept = times[1:-1] if len(times) >= 5 else times
    return Timing(times[len(times) // 2], kept[0], kept[-1])


def timed_together(runs: dict[str, Callable[[], object]], repeats: int = 7, device=None) -> dict[str, Timing]:
    """timed_ms of each of `runs`, measured in turn, round by round: a change in the machine's load during the
    measurement falls on all of them alike, so their ratios hold where measurements taken one after the other
    need not."""
    if repeats < 3:
        raise ValueError(f"timed_ms: repeats={repeats}; at least 3 runs are needed to measure a spread")
    for run in runs.values():
        run()                                                     # warm-up, not timed
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            _synchronize(device)
            start = time.perf_counter()
            run()
            _synchronize(device)
            times[name].append(1e3 * (time.perf_counter() - start))
    return {name: _timing(values) for name, values in times.items()}


def timed_ms(run: Callable[[], object], repeats: int = 7, device=None) -> Timing:
    """(median, spread) of run()'s wall time over `repeats` runs, in ms; the spread is the range of the middle
    runs (the fastest and the slowest left out from five runs on), so one run disturbed by another program does
    not decide."""
    return timed_together({"run": run}, repeats, device)["run"]


def clearly_more(small: tuple[float, float], large: tuple[float, float]) -> bool:
    """True when the (median, spread) `large` exceeds `small` by more than both spreads together."""
    return large[0] - small[0] > small[1] + large[1]


def rate(amount: float, ms: tuple[float, float]) -> tuple[float, float]:
    """`amount` per second from a (median, spread) time in ms: (median rate, spread of the rate), the spread
    being the rates at the two ends of the time's spread."""
    median, spread = ms
    fast, slow = max(median - spread / 2, 1e-9), median + spread / 2
    return amount / (median / 1e3), amount / (fast / 1e3) - amount / (slow / 1e3)


def square_matmul(device=None, size: int = 512, dtype: torch.dtype = torch.float32) -> tuple[Callable[[], object], int]:
    """A (size, size) @ (size, size) matmul on `device`, as a function to time, and its FLOPs: 2·size³ (a
    multiply and an add per term)."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=gen).to(device=device, dtype=dtype)
    return (lambda: a @ b), 2 * size ** 3


def matmul_throughput(device=None, size: int = 512, dtype: torch.dtype = torch.float32,
                      repeats: int = 7) -> tuple[float, float]:
    """(median, spread) FLOP/s of a (size, size) @ (size, size) matmul on `device`. The peak that measured model
    FLOPs are held against on this machine."""
    run, flops = square_matmul(device, size, dtype)
    return rate(flops, timed_ms(run, repeats, device))


def copy_bandwidth(device=None, megabytes: int = 64, repeats: int = 7) -> tuple[float, float]:
    """(median, spread) bytes/s of copying a `megabytes` float32 tensor into another on `device`: every byte is
    read once and written once, so the traffic is twice the tensor's size. Large enough to miss the caches of a
    laptop CPU, so the figure is main memory's."""
    n = megabytes * 2**20 // 4
    src = torch.ones(n, device=device)
    dst = torch.empty_like(src)
    return rate(2 * src.nbytes, timed_ms(lambda: dst.copy_(src), repeats, device))


def against_prediction(predicted: float, measured: tuple[float, float], unit: str = "") -> str:
    """The verdict on a prediction held against a (median, spread) measurement: how many times the prediction
    the measurement is, when the difference stands out from the spread; 'agrees' when the prediction lies within
    a narrow spread (a quarter of the median at most); otherwise TOO_NOISY: the spread is as large as the
    measurement, or as large as a difference it cannot resolve."""
    median, spread = measured
    within = abs(median - predicted) <= spread
    if spread >= median or (within and spread > median / 4):
        return f"{TOO_NOISY} (the repeats spread over {spread:.3g}{unit} around {median:.3g}{unit})"
    if within:
        return "agrees within the spread of the repeats"
    return f"measured {median / predicted:.2g}x the prediction"


def model_flops_utilisation(flops: float, step_ms: tuple[float, float],
                            matmul_rates: dict[str, tuple[float, float]]) -> tuple[float, str]:
    """The share of this machine's matmul speed that a step of `flops` FLOPs in `step_ms` turns into model FLOPs,
    and the sentence that reports it. The peak is the fastest of `matmul_rates` (label -> (median, spread) FLOP/s,
    best timed beside the step with timed_together) and of the step's own rate: a peak measured while another
    program held the cores can fall below what the step achieved, and a share above 100% is no share. The
    sentence calls the figure unreliable when the step outran every matmul, or when the step's or the peak's
    repeats spread over more than a quarter of their median."""
    if not matmul_rates:
        raise ValueError("model_flops_utilisation: matmul_rates is empty; time at least one matmul beside the step")
    achieved = rate(flops, step_ms)
    label, peak = max(matmul_rates.items(), key=lambda item: item[1][0])
    share = achieved[0] / max(peak[0], achieved[0])
    text = (f"MFU {share:.1%}: {achieved[0] / 1e9:.2f} GFLOP/s against the fastest matmul measured ({label}, "
            f"{peak[0] / 1e9:.2f} GFLOP/s)")
    doubts = []
    if achieved[0] > peak[0]:
        doubts.append("the step ran faster than every matmul timed beside it, so those were slowed by other work "
                      "and the step's own rate stands in for the peak")
    noisy = [name for name, (median, spread) in (("the step", step_ms), (label, peak)) if spread > median / 4]
    if noisy:
        doubts.append(f"the repeats of {' and of '.join(noisy)} spread over more than a quarter of the median")
    if doubts:
        text += f"; unreliable: {'; '.join(doubts)} (rerun this cell when the machine is idle)"
    return share, text
