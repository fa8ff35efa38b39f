import itertools

import pytest

from perf_tests.harness.timing import Throughput, measure_throughput


def test_rounds_are_timed_between_syncs_after_warmup():
    events = []
    ticks = itertools.count()
    t = measure_throughput(
        step=lambda: events.append("step"),
        sync=lambda: events.append("sync"),
        batch_size=8, warmup=2, rounds=3, steps=4,
        clock=lambda: float(next(ticks)),
    )
    # warm-up, a sync; then per round: setup sync, 4 steps, closing sync (inside the timed region)
    assert events[:3] == ["step", "step", "sync"]
    assert events[3:] == (["sync"] + ["step"] * 4 + ["sync"]) * 3
    assert t.durations_s == (1.0, 1.0, 1.0)
    assert t.rounds == (32.0, 32.0, 32.0)
    assert t.median == 32.0 and t.spread_pct == 0.0


def test_median_and_spread():
    t = Throughput(samples_per_round=100, durations_s=(1.0, 0.5, 2.0))
    assert t.rounds == (100.0, 200.0, 50.0)
    assert t.median == 100.0
    assert t.spread_pct == pytest.approx(100 * 76.376 / 116.667, rel=1e-4)


def test_runner_that_times_nothing_is_an_error():
    with pytest.raises(RuntimeError, match="no round was timed"):
        measure_throughput(lambda: None, lambda: None, batch_size=1, warmup=0, rounds=1, steps=1,
                           runner=lambda fn, setup, rounds: None)
