"""Throughput: warm-up, then R rounds of N steps, each round bounded by a device synchronize."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Throughput:
    samples_per_round: int
    durations_s: tuple[float, ...]

    @property
    def rounds(self) -> tuple[float, ...]:
        """samples/s of each round"""
        return tuple(self.samples_per_round / d for d in self.durations_s)

    @property
    def median(self) -> float:
        return statistics.median(self.rounds)

    @property
    def spread_pct(self) -> float:
        """coefficient of variation of the rounds' samples/s, in percent (0 for a single round)"""
        r = self.rounds
        return 100 * statistics.stdev(r) / statistics.mean(r) if len(r) > 1 else 0.0


def plain_rounds(fn: Callable[[], None], setup: Callable[[], None], rounds: int) -> None:
    """The runner used without pytest-benchmark: call `fn` `rounds` times, `setup` before each."""
    for _ in range(rounds):
        setup()
        fn()


def measure_throughput(
    step: Callable[[], object],
    sync: Callable[[], None],
    *,
    batch_size: int,
    warmup: int,
    rounds: int,
    steps: int,
    runner=plain_rounds,
    clock: Callable[[], float] = time.perf_counter,
) -> Throughput:
    """Run `warmup` steps, then `rounds` rounds of `steps` steps; time each round.

    `runner(fn, setup, rounds)` drives the rounds; the pytest plugin passes pytest-benchmark's
    `pedantic` there, so that each round is also a benchmark round. `setup` (a sync) runs
    before each round, outside the timed region; each round ends with a sync inside it.
    """
    for _ in range(warmup):
        step()
    sync()
    durations: list[float] = []

    def one_round() -> None:
        t0 = clock()
        for _ in range(steps):
            step()
        sync()
        durations.append(clock() - t0)

    runner(one_round, sync, rounds)
    if not durations:
        raise RuntimeError("no round was timed: is pytest-benchmark disabled (--benchmark-disable)?")
    return Throughput(samples_per_round=steps * batch_size, durations_s=tuple(durations))
