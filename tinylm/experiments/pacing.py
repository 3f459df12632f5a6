"""Long cells that know the machine they run on.

A notebook states its run times for one machine (STATED_MACHINE). A cell
whose work can take more than about 20 s there first times a slice of that
work here and prints what it expects; where the full work would take more
than SLOW_FACTOR times its stated time, it says so and runs an announced
shorter variant instead, and its conclusions are worded for what ran. While
it runs it says how far it is at least every REPORT_EVERY_S seconds, so
nobody waits a minute without a word.

    experiments.use_threads()                                       # once per notebook
    run = experiments.paced(experiments.norms, corpus, stated_s=20, short_steps=50, seeds=(0, 1))
    run.results          # one result per seed
    run.ran              # "2 seeds x 150 steps", or the shorter variant, said as such

A cell with its own loop (notebook 09's training run) times its own slice
and calls choose(). Tests pass a fake clock.
"""
from __future__ import annotations

import contextlib
import os
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from .sizes import SMALL_TRAIN

__all__ = ["STATED_MACHINE", "SLOW_FACTOR", "REPORT_EVERY_S", "STATED_S", "use_threads", "per_call", "choose", "paced",
           "PacedRun", "Pacer", "announce", "duration"]

STATED_MACHINE = "an idle 2-core machine with one thread"
SLOW_FACTOR = 3.0        # the full work is replaced by the shorter variant beyond this many times its stated time
REPORT_EVERY_S = 30.0    # the longest silence while a paced cell runs
PROBE_STEPS = 3          # timed training steps of each model in the slice (after one untimed step)
ALWAYS_FULL = False      # True: a slow machine still runs the full work (after saying how long it will take)
# Seconds each notebook's experiment cell takes at its full size (all its
# seeds) on STATED_MACHINE: the wall column of `benchmarks/bench_experiments.py`
# on an idle 2-core machine (2026-12-03, load average under 1), rounded up;
# training_choices is twice its one seed's 17 s since its cell runs two seeds.
STATED_S = {"norms": 28, "attention_scale": 9, "positions": 21, "block_order": 18, "mlp": 10, "moe": 11,
            "kv_heads": 23, "training_choices": 34}
FULL_HINT = "to run the full one anyway: tinylm.experiments.pacing.ALWAYS_FULL = True, then rerun this cell"


def duration(seconds: float) -> str:
    """'40 s', '3.5 min': how a cell says how long something takes."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def use_threads(threads: int | None = None, *, say: Callable[[str], None] = print) -> int:
    """Set torch's CPU threads on purpose and say so: `threads`, else
    $TINYLM_THREADS, else 1. The course's models are small: a second thread
    gains little on their matrix products, and on a machine busy with other
    work extra threads wait for each other (one notebook measured 20 times
    slower with torch's default threads than with one). The run times the
    notebooks state were measured with one thread."""
    if threads is None:
        text = os.environ.get("TINYLM_THREADS", "1")
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"TINYLM_THREADS must be a positive whole number of threads, got {text!r}")
        threads = int(text)
    elif not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"use_threads: threads must be a positive int, got {threads!r}")
    torch.set_num_threads(threads)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    say(f"torch computes with {threads} CPU thread{'s' if threads > 1 else ''} ({cores} cores here); the times this "
        f"notebook states are for {STATED_MACHINE} (set TINYLM_THREADS before starting Jupyter to change it)")
    return threads


def announce(what: str, stated_s: float, *, say: Callable[[str], None] = print) -> None:
    """The first line of a long cell that has no shorter variant: what it does and how long it takes on
    STATED_MACHINE, said before it starts (a busy machine takes longer, and the line says so)."""
    say(f"{what}: about {duration(stated_s)} on {STATED_MACHINE}, longer on a busy one ...")


def per_call(fn: Callable[[], object], repeats: int = 1, clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per call of fn over `repeats` calls: a timed slice (call fn once before, untimed,
    where its first call pays for allocations)."""
    start = clock()
    for _ in range(repeats):
        fn()
    return (clock() - start) / repeats


def choose(full: int, short: int, expected_full_s: float, stated_s: float, *, what: str, unit: str = "steps",
           expected_short_s: float | None = None, short_note: str = "", say: Callable[[str], None] = print) -> int:
    """`full`, unless it would take more than SLOW_FACTOR times `stated_s`
    here: then `short`, announced with its expected time and `short_note`
    (what the shorter variant changes in the result). Says which, either way."""
    stated = f"about {stated_s:.0f} s on {STATED_MACHINE}"
    if ALWAYS_FULL or short >= full or expected_full_s <= SLOW_FACTOR * stated_s:
        say(f"{what}: {full} {unit}, expected to take about {duration(expected_full_s)} on this machine ({stated}).")
        return full
    short_s = expected_full_s * short / full if expected_short_s is None else expected_short_s
    say(f"{what}: the full {full} {unit} would take about {duration(expected_full_s)} on this machine, more than "
        f"{SLOW_FACTOR:g} times the {stated}. Running the shorter variant instead: {short} {unit}, about "
        f"{duration(short_s)}{'; ' + short_note if short_note else ''} ({FULL_HINT}).")
    return short


# --- what train_side_by_side consults while a paced cell runs ---

@dataclass
class Pacer:
    """In a probe, each model trains PROBE_STEPS timed steps (after one
    untimed) and one timed evaluation, and the full run's training time is
    extrapolated from them; in a run, progress lines are printed."""

    clock: Callable[[], float]
    say: Callable[[str], None]
    probing: bool
    expected_s: float = 0.0          # a run: the whole cell's expected time
    started: float = 0.0
    last_report: float = 0.0
    measured_s: float = 0.0          # a probe: time spent in its timed steps and evaluations
    steps_s: float = 0.0             # ... the full run's steps, extrapolated
    evals_s: float = 0.0             # ... and its evaluations
    context: str = ""                # e.g. "seed 1"

    def probe(self, trainer) -> None:
        """A slice of one model's training: returns with the trainer a few steps in."""
        from ..training import TrainingDiverged

        c = trainer.config
        try:
            trainer.step()                                       # allocations and first-call costs: not timed
            per_step = per_call(trainer.step, PROBE_STEPS, self.clock)
        except TrainingDiverged:
            return                                               # the run reports it; its time is what the others say
        per_eval = per_call(trainer.evaluate, 1, self.clock)
        self.measured_s += per_step * PROBE_STEPS + per_eval
        self.steps_s += c.steps * per_step
        self.evals_s += evaluations(c.steps, c.eval_every) * per_eval

    def tick(self, label: str, step: int, steps: int) -> None:
        """Called after every training step of a run: a line when REPORT_EVERY_S has passed since the last."""
        now = self.clock()
        if now - self.last_report < REPORT_EVERY_S:
            return
        self.last_report = now
        elapsed = now - self.started
        left = self.expected_s - elapsed
        when = f"about {duration(left)} left" if left > 0 else "taking longer than expected"
        where = f", {self.context}" if self.context else ""
        self.say(f"  ... {label}{where}: step {step} of {steps}; {duration(elapsed)} so far, {when}")


def evaluations(steps: int, eval_every: int) -> int:
    """How many evaluations train_side_by_side makes in a run of `steps`: every eval_every steps and at the end."""
    periodic = steps // eval_every if eval_every else 0
    return periodic + (0 if eval_every and steps % eval_every == 0 else 1)


_ACTIVE: ContextVar[Pacer | None] = ContextVar("tinylm_pacer", default=None)


def active() -> Pacer | None:
    return _ACTIVE.get()


@contextlib.contextmanager
def _pacing(pacer: Pacer) -> Iterator[Pacer]:
    token = _ACTIVE.set(pacer)
    try:
        yield pacer
    finally:
        _ACTIVE.reset(token)


@dataclass
class PacedRun:
    results: list                  # the experiment's result, one per seed
    seeds: tuple[int, ...]
    steps: int                     # training steps of each model, as run
    full_steps: int                # the full variant's
    expected_s: float              # what this machine was expected to take for what ran
    seconds: float = 0.0           # what it took

    @property
    def short(self) -> bool:
        return self.steps < self.full_steps

    @property
    def ran(self) -> str:
        """What ran, for the sentences that report its result."""
        seeds = f"{len(self.seeds)} seeds" if len(self.seeds) > 1 else f"seed {self.seeds[0]}"
        if self.short:
            return f"{seeds} x {self.steps} steps (the shorter variant; the full run is {self.full_steps} steps)"
        return f"{seeds} x {self.steps} steps"


def paced(experiment: Callable, corpus, *, stated_s: float, short_steps: int, seeds: tuple[int, ...] = (0,),
          steps: int | None = None, what: str | None = None, short_note: str = "its losses end higher, and "
          "differences that need the full run may not show", clock: Callable[[], float] = time.perf_counter,
          say: Callable[[str], None] = print, **kwargs) -> PacedRun:
    """experiment(corpus, steps=..., seed=s, **kwargs) for each seed in `seeds`,
    at its full steps (`steps`, default SMALL_TRAIN's) or, where this machine
    would take more than SLOW_FACTOR x `stated_s` for all seeds, at `short_steps`.

    First a slice: the experiment once with every model cut after a few
    steps, which times the steps, the evaluations and everything around them
    (building the models, the measurements after training) here."""
    full = SMALL_TRAIN.steps if steps is None else steps
    what = what or f"{experiment.__name__} ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})"
    say(f"{what}: about {duration(stated_s)} on {STATED_MACHINE}; timing a few steps of each model first, to say "
        "how long here ...")
    probe = Pacer(clock, say, probing=True)
    start = clock()
    with _pacing(probe):
        experiment(corpus, steps=full, seed=seeds[0], **kwargs)
    around = max(0.0, clock() - start - probe.measured_s)      # building, measuring, plotting data: per seed
    per_seed = {n: around + probe.steps_s * n / full + probe.evals_s for n in (full, short_steps)}
    chosen = choose(full, short_steps, per_seed[full] * len(seeds), stated_s, what=what,
                    unit=f"steps per model{' and seed' if len(seeds) > 1 else ''}",
                    expected_short_s=per_seed[short_steps] * len(seeds), short_note=short_note, say=say)
    expected = per_seed[chosen] * len(seeds)
    run = Pacer(clock, say, probing=False, expected_s=expected)
    run.started = run.last_report = clock()
    results = []
    with _pacing(run):
        for seed in seeds:
            run.context = f"seed {seed}" if len(seeds) > 1 else ""
            results.append(experiment(corpus, steps=chosen, seed=seed, **kwargs))
    seconds = clock() - run.started
    say(f"{what}: done in {duration(seconds)} (expected about {duration(expected)}).")
    return PacedRun(results, tuple(seeds), chosen, full, expected, seconds)

