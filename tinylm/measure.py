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


def timed_ms(run: Callable[[], object], repeats: int = 7, device=None) -> tuple[float, float]:
    """(median, spread) of run()'s wall time over `repeats` runs, in ms; the spread is the range of the middle
    runs (the fastest and the slowest left out), so one run disturbed by another program does not decide."""
    if repeats < 3:
        raise ValueError(f"timed_ms: repeats={repeats}; at least 3 runs are needed to leave out the fastest and "
                         "the slowest")
    run()                                                         # warm-up, not timed
    times = []
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        run()
        _synchronize(device)
        times.append(1e3 * (time.perf_counter() - start))
    times.sort()
    return times[len(times) // 2], times[-2] - times[1]


def clearly_more(small: tuple[float, float], large: tuple[float, float]) -> bool:
    """True when the (median, spread) `large` exceeds `small` by more than both spreads together."""
    return large[0] - small[0] > small[1] + large[1]


def rate(amount: float, ms: tuple[float, float]) -> tuple[float, float]:
    """`amount` per second from a (median, spread) time in ms: (median rate, spread of the rate), the spread
    being the rates at the two ends of the time's spread."""
    median, spread = ms
    fast, slow = max(median - spread / 2, 1e-9), median + spread / 2
    return amount / (median / 1e3), amount / (fast / 1e3) - amount / (slow / 1e3)


def matmul_throughput(device=None, size: int = 512, dtype: torch.dtype = torch.float32,
                      repeats: int = 7) -> tuple[float, float]:
    """(median, spread) FLOP/s of a (size, size) @ (size, size) matmul on `device`: 2·size³ FLOPs each (a
    multiply and an add per term). The peak that measured model FLOPs are held against on this machine."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=gen).to(device=device, dtype=dtype)
    return rate(2 * size ** 3, timed_ms(lambda: a @ b, repeats, device))


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
