"""Timed rounds: warm-up, then rounds of N steps, each round bounded by a device synchronize.

Steps per round: at least `steps`, grown so that a round lasts at least `round_s` seconds (the
duration of one probe round after the warm-up decides), in whole multiples of `cycle` steps (a
loader with 8 workers delivers 8 batches at a time). Rounds: `rounds`, then more, one at a time,
while the median's confidence interval is wider than `ci_pct` (half-width, percent of the median)
and fewer than `max_rounds` have run.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

from .stats import ci_halfwidth_pct


@dataclass(frozen=True)
class Throughput:
    samples_per_round: int
    durations_s: tuple[float, ...]
    extended: int = 0  # rounds added because the median's interval was too wide
    window_s: float = 0.0  # wall time of the whole window: warm-up, probe and rounds
    warmup_s: float = 0.0  # of which the warm-up and the probe, before the first round
    energy_j: float | None = None  # the device's energy over the timed rounds, where it has a meter
    cpu_s: tuple[float, ...] | None = None  # CPU seconds of the loader's workers in each round, where read
    util: object | None = None  # what a monitor saw over the timed rounds (nvml.Utilization on a GPU)
    unit: object | None = None  # the loader's cost per sample inside its workers over the window (loader.UnitCost)
    brief: bool = False  # one short round against REF, a reading (parts.BRIEF): kept in no baseline entry

    @property
    def per_cpu_s(self) -> Throughput | None:
        """The same rounds per CPU second of the workers instead of per second of wall time: the loader's
        cost, which waiting for the GPU does not change (the host's speed still does: docs/gates.md)."""
        if not self.cpu_s or min(self.cpu_s) <= 0:
            return None
        return Throughput(self.samples_per_round, self.cpu_s, brief=self.brief)

    @property
    def watts(self) -> float | None:
        """average power over the timed rounds"""
        return None if self.energy_j is None else self.energy_j / sum(self.durations_s)

    @property
    def rounds(self) -> tuple[float, ...]:
        """samples/s of each round"""
        return tuple(self.samples_per_round / d for d in self.durations_s)

    @property
    def median(self) -> float:
        return statistics.median(self.rounds)

    @property
    def spread_pct(self) -> float | None:
        """coefficient of variation of the rounds' samples/s, in percent; None for a single round"""
        r = self.rounds
        return 100 * statistics.stdev(r) / statistics.mean(r) if len(r) > 1 else None

    @property
    def ci_pct(self) -> float:
        """half-width of the median's confidence interval, in percent of the median"""
        return ci_halfwidth_pct(self.rounds)


def plain_rounds(fn: Callable[[], None], setup: Callable[[], None], rounds: int) -> None:
    """The runner used without pytest-benchmark: call `fn` `rounds` times, `setup` before each."""
    for _ in range(rounds):
        setup()
        fn()


def steps_per_round(probe_s: float, probe_steps: int, *, steps: int, cycle: int, round_s: float,
                    least_step_s: float = 0.0) -> int:
    """The least whole number of cycles that holds `steps` steps and lasts `round_s` at the probe's pace
    (or at `least_step_s` a step, where the probe ran faster than the steady state can)."""
    per_step = max(probe_s / probe_steps, least_step_s)
    wanted = max(steps, math.ceil(round_s / per_step) if per_step > 0 else steps)
    return -(-wanted // cycle) * cycle


def measure_throughput(
    step: Callable[[], object], sync: Callable[[], None], *, batch_size: int, warmup: int, rounds: int, steps: int,
    cycle: int = 1, round_s: float = 0.0, max_rounds: int | None = None, ci_pct: float = math.inf, runner=plain_rounds,
    clock: Callable[[], float] | None = None, energy: Callable[[], float | None] | None = None, least_step_s: float = 0.0,
    cpu: Callable[[], float | None] | None = None, monitor: Callable[[], contextlib.AbstractContextManager] | None = None,
) -> Throughput:
    """Warm up, size the rounds, time `rounds` rounds through `runner`, extend while too noisy.

    `runner(fn, setup, rounds)` drives the first rounds; the pytest plugin passes pytest-benchmark's
    `pedantic` there, so that those rounds are also benchmark rounds. `setup` (a sync) runs before
    each round, outside the timed region; each round ends with a sync inside it. `energy` (joules
    since some origin, or None) is read around each round, outside its timed region, and so is `cpu`
    (CPU seconds of the loader's workers since they started, or None). `least_step_s`
    bounds the probe's pace: a loader-fed pipeline's probe can run on batches queued in advance.
    `monitor()` gives a context manager held around the timed rounds (an NVML sampler); its
    `summary()` is kept as the result's `util`.
    """
    clock = clock or time.perf_counter
    start = time.perf_counter()  # the window's own cost, always on the wall clock
    steps = _warm_and_size(step, sync, clock, warmup=warmup, steps=steps, cycle=cycle, round_s=round_s,
                           least_step_s=least_step_s)
    warmup_s = time.perf_counter() - start
    timed = _Rounds(step, sync, clock, steps, energy, cpu)
    with monitor() if monitor else contextlib.nullcontext() as watching:
        runner(timed.one, sync, rounds)
        if not timed.durations:
            raise RuntimeError("no round was timed: is pytest-benchmark disabled (--benchmark-disable)?")
        first = len(timed.durations)
        cap = max(max_rounds or first, first)
        while len(timed.durations) < cap and ci_halfwidth_pct([steps * batch_size / d for d in timed.durations]) > ci_pct:
            plain_rounds(timed.one, sync, 1)
    energy_j = None if None in timed.joules else sum(timed.joules)
    return Throughput(steps * batch_size, tuple(timed.durations), extended=len(timed.durations) - first,
                      window_s=time.perf_counter() - start, warmup_s=warmup_s, energy_j=energy_j,
                      cpu_s=None if None in timed.cpu_s else tuple(timed.cpu_s),
                      util=watching.summary() if monitor else None)


def _warm_and_size(step, sync, clock, *, warmup: int, steps: int, cycle: int, round_s: float,
                   least_step_s: float) -> int:
    """Warm up, then the steps a round takes: whole cycles, sized by a probe of one cycle where `round_s` is set."""
    for _ in range(warmup):
        step()
    sync()
    steps = -(-steps // cycle) * cycle
    if round_s > 0:
        t0 = clock()
        for _ in range(cycle):
            step()
        sync()
        steps = steps_per_round(clock() - t0, cycle, steps=steps, cycle=cycle, round_s=round_s, least_step_s=least_step_s)
    return steps


class _Rounds:
    """Timed rounds of `steps` steps, each ended by a sync inside it; the energy and the loader's CPU seconds are read
    around each round, outside its timed region."""

    def __init__(self, step, sync, clock, steps: int, energy, cpu):
        self.step, self.sync, self.clock, self.steps, self.energy, self.cpu = step, sync, clock, steps, energy, cpu
        self.durations: list[float] = []
        self.joules: list[float | None] = []
        self.cpu_s: list[float | None] = []

    def one(self) -> None:
        step, sync, clock, steps = self.step, self.sync, self.clock, self.steps  # nothing looked up inside the timing
        e0 = self.energy() if self.energy else None
        c0 = self.cpu() if self.cpu else None
        t0 = clock()
        for _ in range(steps):
            step()
        sync()
        self.durations.append(clock() - t0)
        c1 = self.cpu() if self.cpu else None
        e1 = self.energy() if self.energy else None
        self.joules.append(None if e0 is None or e1 is None else e1 - e0)
        self.cpu_s.append(None if c0 is None or c1 is None else c1 - c0)


class Laps:
    """Where a test's seconds went: each `lap(phase)` adds the time since the last lap (or the start) to `phase`, so
    the phases of a test add up to its duration; `split` moves a known share of a phase to others."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self.last = clock()
        self.seconds: dict[str, float] = {}

    def lap(self, phase: str) -> None:
        now = self.clock()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self.last
        self.last = now

    def split(self, phase: str, **shares: float) -> None:
        """Move `shares` (phase name -> seconds, each at most what is left) out of `phase`, in the order given."""
        for name, seconds in shares.items():
            moved = min(max(seconds, 0.0), self.seconds.get(phase, 0.0))
            self.seconds[phase] = self.seconds.get(phase, 0.0) - moved
            self.seconds[name] = self.seconds.get(name, 0.0) + moved


def seconds_line(seconds: dict | None) -> str:
    """seconds: build 3.1 · warm-up 5.2 · … = 26.7 s: where a test's time went, phase by phase (0.0 left out)."""
    if not seconds:
        return ""
    shown = " · ".join(f"{phase} {s:.1f}" for phase, s in seconds.items() if round(s, 1))
    return f"seconds: {shown} = {sum(seconds.values()):.1f} s" if shown else ""


def session_line(seconds: dict, workers: int = 0) -> str:
    """session: TOTAL s (imports I s, REF R s, tests T s, ...): in all since the process started, then its parts; a
    sharded run's parts are its workers' summed, which ran side by side, so they add up to more than its total."""
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items() if k != "total")
    if parts and workers > 1:
        parts = f"its {workers} workers' parts summed, side by side: {parts}"
    return f"session: {seconds['total']:.1f} s" + (f" ({parts})" if parts else "")
