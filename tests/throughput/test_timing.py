import itertools

import pytest

from torch_perf_suite.throughput import timing
from torch_perf_suite.throughput.timing import Throughput, measure_throughput, steps_per_round


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
    assert t.median == 32.0 and t.spread_pct == 0.0 and t.extended == 0


class FakeClock:
    """Time advances only by the steps run: each step takes the next duration of `durations`."""

    def __init__(self, durations):
        self.now, self.durations = 0.0, itertools.cycle(durations)

    def step(self):
        self.now += next(self.durations)

    def __call__(self):
        return self.now


def test_steps_grow_to_fill_the_round_in_whole_cycles():
    clock = FakeClock([0.01])
    t = measure_throughput(clock.step, lambda: None, batch_size=2, warmup=0, rounds=2, steps=3, cycle=4, round_s=0.25,
                           clock=clock)
    # a probe of one cycle (4 steps, 0.04 s) says 25 steps fill 0.25 s: rounded up to whole cycles, 28
    assert t.samples_per_round == 28 * 2
    assert t.durations_s == pytest.approx((0.28, 0.28))


@pytest.mark.parametrize("probe_s, steps, cycle, round_s, expected", [
    (0.1, 10, 1, 0.0, 10),  # no least duration: the least steps
    (0.1, 10, 8, 0.0, 16),  # ... in whole cycles
    (0.01, 1, 1, 1.0, 100),  # 10 ms steps, 1 s rounds
    (1.0, 5, 1, 0.5, 5),  # slow steps: the least steps rule
])
def test_steps_per_round(probe_s, steps, cycle, round_s, expected):
    assert steps_per_round(probe_s, 1, steps=steps, cycle=cycle, round_s=round_s) == expected


def test_noisy_rounds_are_extended_up_to_the_cap():
    clock = FakeClock([1.0, 1.0, 1.5, 1.0, 0.7])  # one step a round: 5 different round times
    t = measure_throughput(clock.step, lambda: None, batch_size=1, warmup=0, rounds=5, steps=1, max_rounds=9, ci_pct=1.0,
                           clock=clock)
    assert len(t.rounds) == 9 and t.extended == 4


def test_quiet_rounds_are_not_extended():
    clock = FakeClock([1.0])
    t = measure_throughput(clock.step, lambda: None, batch_size=1, warmup=0, rounds=5, steps=1, max_rounds=9, ci_pct=1.0,
                           clock=clock)
    assert len(t.rounds) == 5 and t.extended == 0


def test_median_spread_and_interval():
    t = Throughput(samples_per_round=100, durations_s=(1.0, 0.5, 2.0))
    assert t.rounds == (100.0, 200.0, 50.0)
    assert t.median == 100.0
    assert t.spread_pct == pytest.approx(100 * 76.376 / 116.667, rel=1e-4)
    assert t.ci_pct == pytest.approx(50 * 150 / 100)  # 3 rounds: the interval is the whole range


def test_a_single_round_has_no_spread():
    assert Throughput(samples_per_round=10, durations_s=(1.0,)).spread_pct is None


def test_runner_that_times_nothing_is_an_error():
    with pytest.raises(RuntimeError, match="no round was timed"):
        measure_throughput(lambda: None, lambda: None, batch_size=1, warmup=0, rounds=1, steps=1,
                           runner=lambda fn, setup, rounds: None)


def test_a_probe_too_fast_to_time_keeps_the_least_steps():
    # a clock that did not move over the probe: no pace to size by, so not a division by zero
    assert steps_per_round(0.0, 4, steps=6, cycle=4, round_s=0.5) == 8


def test_without_a_cycle_the_steps_are_not_rounded():
    clock = FakeClock([0.5])
    t = measure_throughput(clock.step, lambda: None, batch_size=1, warmup=0, rounds=2, steps=3, clock=clock)
    assert t.samples_per_round == 3 and t.durations_s == (1.5, 1.5)


def test_the_probe_is_timed_from_its_own_start():
    """5 warm-up steps first (0.05 s on the clock); the probe's 4 steps take 0.04 s: 25 steps fill 0.25 s, 28 in cycles."""
    clock = FakeClock([0.01])
    t = measure_throughput(clock.step, lambda: None, batch_size=1, warmup=5, rounds=1, steps=1, cycle=4, round_s=0.25,
                           clock=clock)
    assert t.samples_per_round == 28


def test_extension_adds_one_round_at_a_time_up_to_the_cap():
    clock = FakeClock([1.0, 1.0, 1.5, 1.0, 0.7])
    t = measure_throughput(clock.step, lambda: None, batch_size=1, warmup=0, rounds=5, steps=1, max_rounds=6, ci_pct=1.0,
                           clock=clock)
    assert len(t.rounds) == 6 and t.extended == 1


@pytest.mark.parametrize("ci_pct, extended", [(0.99, 0), (0.97, 4)])
def test_extension_follows_the_interval_of_the_throughput_not_of_the_durations(ci_pct, extended):
    """Rounds of 1.0 s x 4 and 1.02 s: throughput 1 and 0.98039 per s, a half-width of 50 x 0.01961 = 0.98% (the
    durations' own would be 1.0%): not wider than 0.99%; wider than 0.97%, and up to 8 rounds the interval is the
    whole range, so it stays that wide until the cap of 9."""
    clock = FakeClock([1.0, 1.0, 1.0, 1.0, 1.02])
    t = measure_throughput(clock.step, lambda: None, batch_size=1, warmup=0, rounds=5, steps=1, max_rounds=9,
                           ci_pct=ci_pct, clock=clock)
    assert t.extended == extended


def test_an_interval_exactly_as_wide_as_wanted_is_not_extended():
    """12 samples in 3, 3, 3, 3 and 4 s: 4 and 3 samples/s, a half-width of 50 x 1 / 4 = 12.5% of the median."""
    clock = FakeClock([3.0, 3.0, 3.0, 3.0, 4.0])
    t = measure_throughput(clock.step, lambda: None, batch_size=12, warmup=0, rounds=5, steps=1, max_rounds=9, ci_pct=12.5,
                           clock=clock)
    assert t.extended == 0


def test_window_is_the_wall_time_of_the_whole_measurement_and_warm_up_its_start(monkeypatch):
    wall = iter([100.0, 101.25, 103.5])  # start, warm-up done, window done
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(wall))
    clock = FakeClock([1.0])
    t = measure_throughput(clock.step, lambda: None, batch_size=1, warmup=0, rounds=1, steps=1, clock=clock)
    assert t.window_s == 3.5 and t.warmup_s == 1.25


def test_runner_message_says_what_to_check():
    with pytest.raises(RuntimeError, match=r"^no round was timed: is pytest-benchmark disabled \(--benchmark-disable\)\?$"):
        measure_throughput(lambda: None, lambda: None, batch_size=1, warmup=0, rounds=1, steps=1,
                           runner=lambda fn, setup, rounds: None)


def test_power_is_the_energy_of_the_timed_rounds_over_their_time():
    clock = FakeClock([0.01])
    reads = []

    def energy():  # a 500 W device
        reads.append(clock.now)
        return 500 * clock.now

    t = measure_throughput(clock.step, lambda: None, batch_size=1, warmup=6, rounds=3, steps=2, clock=clock, energy=energy)
    assert reads[0] == pytest.approx(0.06) and len(reads) == 2 * 3  # around each round, after the warm-up
    assert t.watts == pytest.approx(500.0) and t.energy_j == pytest.approx(500 * 0.06)


def test_no_energy_counter_no_power():
    clock = FakeClock([0.01])
    assert measure_throughput(clock.step, lambda: None, batch_size=1, warmup=0, rounds=2, steps=1, clock=clock).watts is None
    unknown = measure_throughput(clock.step, lambda: None, batch_size=1, warmup=0, rounds=2, steps=1, clock=clock,
                                 energy=lambda: None)
    assert unknown.watts is None and unknown.energy_j is None


def test_the_workers_cpu_time_is_read_around_each_round():
    clock = FakeClock([0.01])
    reads = []

    def cpu():  # three workers busy all the while
        reads.append(clock.now)
        return 3 * clock.now

    t = measure_throughput(clock.step, lambda: None, batch_size=5, warmup=4, rounds=3, steps=2, clock=clock, cpu=cpu)
    assert reads[0] == pytest.approx(0.04) and len(reads) == 2 * 3  # around each round, after the warm-up
    assert t.cpu_s == pytest.approx((0.06,) * 3)
    per_cpu = t.per_cpu_s  # 10 samples per 0.06 CPU seconds
    assert per_cpu.rounds == pytest.approx((10 / 0.06,) * 3) and per_cpu.median == pytest.approx(t.median / 3)


@pytest.mark.parametrize("reads", [[None], [0.0, 1.0, None, 2.0], [1.0]])
def test_no_workers_cpu_time_where_a_read_failed_or_no_time_passed(reads):
    clock, values = FakeClock([0.01]), itertools.chain(reads, itertools.repeat(2.0))
    t = measure_throughput(clock.step, lambda: None, batch_size=1, warmup=0, rounds=2, steps=1, clock=clock,
                           cpu=lambda: next(values))
    assert t.per_cpu_s is None


def test_no_cpu_reader_no_cpu_time():
    clock = FakeClock([0.01])
    t = measure_throughput(clock.step, lambda: None, batch_size=1, warmup=0, rounds=2, steps=1, clock=clock)
    assert t.cpu_s is None and t.per_cpu_s is None


def test_the_probe_pace_is_bounded_by_the_least_step_time():
    """A probe that ran on queued batches (1 ms a step) would size rounds of 100 steps for 0.1 s; at
    least 10 ms a step, 10 steps."""
    assert steps_per_round(0.004, 4, steps=1, cycle=1, round_s=0.1) == 100
    assert steps_per_round(0.004, 4, steps=1, cycle=1, round_s=0.1, least_step_s=0.01) == 10
    assert steps_per_round(0.08, 4, steps=1, cycle=1, round_s=0.1, least_step_s=0.01) == 5  # the probe is slower


def test_the_monitor_watches_the_timed_rounds_only_and_its_summary_is_kept():
    """Warm-up and probe run before the monitor starts; the rounds added for a wide interval run inside it."""
    events = []

    class Monitor:
        def __enter__(self):
            events.append("watch")
            return self

        def __exit__(self, *exc):
            events.append("stop")

        def summary(self):
            return "97% busy"

    durations = iter([1.0, 1.0, 1.0, 2.0, 1.0, 1.0])  # warm-up 1, 1; rounds 1, 2, 1: the interval is wide, one more
    clock = FakeClock([0.0])
    clock.step = lambda: (events.append("step"), setattr(clock, "now", clock.now + next(durations)))
    t = measure_throughput(step=clock.step, sync=lambda: None, batch_size=1, warmup=2, rounds=3, steps=1, round_s=0.0,
                           max_rounds=4, ci_pct=1.0, clock=clock, monitor=Monitor)
    assert events == ["step"] * 2 + ["watch"] + ["step"] * 4 + ["stop"]
    assert t.extended == 1 and t.util == "97% busy"
    assert measure_throughput(step=lambda: None, sync=lambda: None, batch_size=1, warmup=0, rounds=1, steps=1).util is None


def test_laps_add_each_stretch_to_its_phase_and_split_moves_a_known_share():
    from torch_perf_suite.throughput.timing import Laps

    ticks = iter([0.0, 1.0, 3.5, 4.0, 10.0])
    laps = Laps(clock=lambda: next(ticks))
    laps.lap("build")  # 0 -> 1
    laps.lap("timed")  # 1 -> 3.5
    laps.lap("build")  # 3.5 -> 4: a phase that recurs adds up
    laps.lap("timed")  # 4 -> 10
    assert laps.seconds == {"build": 1.5, "timed": 8.5}
    laps.split("timed", compile=2.0, **{"warm-up": 7.0})  # more than is left: what is left
    assert laps.seconds == {"build": 1.5, "timed": 0.0, "compile": 2.0, "warm-up": 6.5}
    assert sum(laps.seconds.values()) == 10.0


def test_split_moves_a_fraction_of_a_second_nothing_negative_and_adds_to_a_phase_already_there():
    from torch_perf_suite.throughput.timing import Laps

    laps = Laps()
    laps.seconds.update({"timed": 3.0, "compile": 1.0})
    laps.split("timed", compile=0.25, idle=-1.0)  # a share below a second; one below nothing moves nothing
    assert laps.seconds == {"timed": 2.75, "compile": 1.25, "idle": 0.0}
    laps.split("never", compile=5.0)  # out of a phase never lapped: nothing to move
    assert laps.seconds == {"timed": 2.75, "compile": 1.25, "idle": 0.0, "never": 0.0}
