"""A scenario's parts: the bottleneck, the efficiency, the windows that time them; and the baseline gates."""

import contextlib
from types import SimpleNamespace

import pytest

from torch_perf_suite.settings import Measure
from torch_perf_suite.throughput import gates
from torch_perf_suite.throughput.parts import LOADER_HEADROOM, TIMED, Parts, Windows, for_smoke, loader_ahead
from torch_perf_suite.throughput.timing import Throughput

HOST = {"cpu": "Xeon 8480+", "cores": 16, "machine": "m1"}


def t(sps, n=5, batch=100):
    """n rounds at exactly `sps` samples/s"""
    return Throughput(samples_per_round=batch, durations_s=(batch / sps,) * n)


def parts(pipeline=900.0, gpu=1000.0, loader=2000.0, busy_s=None):
    return Parts(batch_size=100, pipeline=t(pipeline), gpu=gpu and t(gpu), loader=loader and t(loader), gpu_busy_s=busy_s)


@pytest.mark.parametrize("kwargs, bottleneck, efficiency", [
    ({"gpu": 1000.0, "loader": 2000.0}, "GPU", 0.9),
    ({"gpu": 3000.0, "loader": 1000.0}, "loader", 0.9),
    ({"gpu": 1000.0, "loader": None}, "GPU", 0.9),
    ({"gpu": None, "loader": None}, None, None),
])
def test_bottleneck_is_the_slower_part_and_efficiency_its_share(kwargs, bottleneck, efficiency):
    p = parts(**kwargs)
    assert p.bottleneck == bottleneck
    assert p.efficiency == (None if efficiency is None else pytest.approx(efficiency))


def test_a_gpu_that_idles_between_launches_is_host_launch_overhead():
    # GPU-side 1000 samples/s at batch 100: 0.1 s a step; kernels run 0.05 s of it
    p = parts(busy_s=0.05)
    assert p.gpu_busy_pct == pytest.approx(50) and p.launch_bound
    assert p.bottleneck == "host launch overhead"
    busy = parts(busy_s=0.095)
    assert busy.gpu_busy_pct == pytest.approx(95) and not busy.launch_bound and busy.bottleneck == "GPU"


class Workload:
    """Counts calls; time is a fake clock the steps advance."""

    batch_size = 10
    warmup_steps = 7
    cycle_steps = 4  # loader-fed windows: whole bursts of 4 batches
    gpu_cycle_steps = 3  # the GPU-side window: its own period

    def __init__(self, resident=False):
        self.calls = {"step": 0, "gpu_step": 0, "loader_step": 0}
        self.now = 0.0
        if resident:
            self.gpu_step = self.loader_step = None

    def step(self):
        self.calls["step"] += 1
        self.now += 0.01

    def gpu_step(self):
        self.calls["gpu_step"] += 1
        self.now += 0.005

    def loader_step(self):
        self.calls["loader_step"] += 1
        self.now += 0.002


class Device:
    def __init__(self, workload):
        self.clock = lambda: workload.now

    def synchronize(self):
        pass


def windows(workload, smoke=False, **measure):
    return Windows(workload, Measure(**{"round_s": 0.0, **measure}), Device(workload), smoke)


def test_available_parts_follow_the_workload():
    assert windows(Workload()).available() == ("pipeline", "gpu", "loader")
    assert windows(Workload(resident=True)).available() == ("pipeline",)


def test_the_workloads_members_are_read_once_when_its_windows_are_made():
    w = Workload()
    win = windows(w, warmup=2, rounds=3, steps=5)
    w.warmup_steps, w.gpu_step = 0, None  # changed afterwards: the windows keep what they read
    assert win.available() == ("pipeline", "gpu", "loader")
    win.time("loader")
    assert w.calls["loader_step"] == 7 + 3 * 8


@pytest.mark.parametrize("part, per_step_s, warmup, steps", [
    ("pipeline", 0.01, 7, 8),  # 5 steps rounded up to 2 whole bursts of 4
    ("gpu", 0.005, 3, 6),  # ... to 2 periods of 3; GPU_WARMUP steps
    ("loader", 0.002, 7, 8),  # the loader drains the prefetch like the pipeline does
])
def test_each_part_times_its_own_step(part, per_step_s, warmup, steps):
    w = Workload()
    got = windows(w, warmup=2, rounds=3, steps=5).time(part)
    name = {"pipeline": "step"}.get(part, f"{part}_step")
    assert w.calls[name] == warmup + 3 * steps
    assert got.median == pytest.approx(10 / per_step_s)


def test_only_the_loader_window_reads_its_workers_cpu_time():
    class Loaded(Workload):
        cpu_s = 0.0

        def loader_step(self):
            super().loader_step()
            self.cpu_s += 0.004  # two workers, 0.002 s each a batch

        def loader_cpu_s(self):
            return self.cpu_s

    win = windows(Loaded(), warmup=2, rounds=3, steps=5)
    assert win.time("gpu").cpu_s is None and win.time("pipeline").cpu_s is None
    assert win.time("loader").per_cpu_s.median == pytest.approx(10 / 0.004)


def test_a_pipeline_whose_loader_is_ahead_skips_the_drain_and_the_bursts():
    w = Workload()
    win = windows(w, warmup=2, rounds=3, steps=5)
    win.gpu, win.loader = t(100.0), t(100.0 * LOADER_HEADROOM)
    assert win.loader_ahead
    got = win.time("pipeline")
    assert w.calls["step"] == 2 + 3 * 6  # the measure's warm-up; 5 steps in whole GPU-side periods of 3, not bursts of 4
    assert got.median == pytest.approx(1000)


@pytest.mark.parametrize("gpu, loader, ahead", [
    (1000.0, 1000.0 * LOADER_HEADROOM, True), (1000.0, 1000.0 * LOADER_HEADROOM - 1, False),
    (1000.0, None, False), (None, 5000.0, False),
])
def test_the_loader_is_ahead_by_the_headroom(gpu, loader, ahead):
    assert loader_ahead(gpu and t(gpu), loader and t(loader)) is ahead


def test_smoke_runs_one_round_of_two_steps():
    w = Workload()
    got = windows(w, smoke=True, warmup=5, rounds=5, steps=10).time("pipeline")
    assert w.calls["step"] == 1 + 2 and len(got.rounds) == 1


@pytest.mark.parametrize("gpu, loader, brief", [(1000.0, 800.0, True), (1000.0, None, False), (None, 800.0, False)])
def test_refs_run_only_warms_a_pipeline_whose_gpu_side_and_loader_are_timed_apart(gpu, loader, brief):
    w = Workload()
    win = Windows(w, Measure(warmup=2, rounds=3, steps=5, round_s=0.0), Device(w), smoke=False, as_ref=True)
    win.gpu, win.loader = gpu and t(gpu), loader and t(loader)
    got = win.time("pipeline")
    assert got.brief is brief
    # brief: the warm-up, then one round of the least steps, no drain nor bursts; else the whole window
    assert (w.calls["step"], len(got.rounds)) == ((2 + 5, 1) if brief else (7 + 3 * 8, 3))


@pytest.mark.parametrize("loader, brief", [(800.0, True), (1000.0 * LOADER_HEADROOM, False)])
def test_the_heads_run_against_ref_only_warms_a_loader_bound_pipeline(loader, brief):
    """Against REF a loader-fed pipeline is a reading: the head's is timed whole only where the loader is ahead (the
    pipeline is then the GPU's, which the ladder's ceiling holds to); against baselines always whole."""
    for vs_ref in (True, False):
        w = Workload()
        win = Windows(w, Measure(warmup=2, rounds=3, steps=5, round_s=0.0), Device(w), smoke=False, vs_ref=vs_ref)
        win.gpu, win.loader = t(1000.0), t(loader)
        assert win.time("pipeline").brief is (brief and vs_ref)


@pytest.mark.parametrize("as_ref, vs_ref, wanted, brief", [
    (True, False, TIMED, True), (False, True, TIMED, True), (False, False, TIMED, False),
    (False, True, ("loader",), False),  # the loader alone is the test's pipeline (a worker sweep): its claims hold to it
])
def test_against_ref_the_loader_is_timed_in_one_round_of_whole_bursts(as_ref, vs_ref, wanted, brief):
    """Against REF the loader's samples/s are a reading: one round gives its cost per sample in the workers, which is
    judged, without the prefetch queue's drain and rounds of bursts (18 s of `ladder[batch_512]`'s window)."""
    w = Workload()
    win = Windows(w, Measure(warmup=2, rounds=3, steps=5, round_s=0.0), Device(w), smoke=False, as_ref=as_ref,
                  vs_ref=vs_ref, parts=wanted)
    got = win.time("loader")
    assert got.brief is brief
    # brief: the measure's warm-up, then one round of 5 steps in whole bursts of 4; else the drain and three rounds
    assert (w.calls["loader_step"], len(got.rounds)) == ((2 + 8, 1) if brief else (7 + 3 * 8, 3))


@pytest.mark.parametrize("loader, efficiency", [(500.0, None), (2000.0, 0.9)])
def test_a_loader_timed_briefly_gives_no_efficiency_where_it_is_the_bottleneck(loader, efficiency):
    p = Parts(batch_size=100, pipeline=t(900.0), gpu=t(1000.0), loader=Throughput(100, (100 / loader,), brief=True))
    assert p.brief == ("loader",)
    assert p.efficiency == (None if efficiency is None else pytest.approx(efficiency))


class Metered(Device):
    """A GPU drawing 300 W of the workload's clock, with a utilization monitor."""

    def __init__(self, workload):
        super().__init__(workload)
        self.energy_j = lambda: 300.0 * workload.now
        self.monitor = lambda: contextlib.nullcontext(SimpleNamespace(summary=lambda: "sampled"))


@pytest.mark.parametrize("resident, part, metered, util", [
    (True, "pipeline", True, "sampled"),  # the pipeline is the GPU-side step: energy and utilization
    (False, "pipeline", False, "sampled"),  # loader-fed: what nvidia-smi shows, but no energy a sample
    (False, "gpu", True, "sampled"),
    (False, "loader", False, None),  # the GPU does not train
])
def test_the_windows_where_the_gpu_trains_read_its_energy_and_utilization(resident, part, metered, util):
    w = Workload(resident)
    got = Windows(w, Measure(warmup=1, rounds=2, steps=1, round_s=0.0), Metered(w), smoke=False).time(part)
    assert got.util == util and (got.energy_j == pytest.approx(300.0 * sum(got.durations_s)) if metered
                                 else got.energy_j is None)


def test_a_pipeline_whose_loader_is_ahead_is_monitored_and_goes_through_the_runner():
    w, seen = Workload(), []

    def runner(fn, setup, rounds):
        seen.append(rounds)
        for _ in range(rounds):
            setup()
            fn()

    win = Windows(w, Measure(warmup=1, rounds=3, steps=1, round_s=0.0), Metered(w), smoke=False)
    win.gpu, win.loader = t(100.0), t(100.0 * LOADER_HEADROOM)
    assert win.time("pipeline", runner=runner).util == "sampled" and seen == [3]


def test_an_unknown_part_is_an_error():
    with pytest.raises(ValueError, match="unknown part 'disk'"):
        windows(Workload()).time("disk")


# --- gates --------------------------------------------------------------------------------------


def entry(host=HOST, busy=95.0, parts_=("pipeline", "gpu", "loader")):
    return {"parts": {p: {"samples_per_s": 1000.0, "spread_pct": 0.1, "rounds": [999.0, 1000.0, 1001.0, 1000.0, 1000.0]}
                      for p in parts_},
            "gpu_busy_pct": busy, "env": {"gpu": "NVIDIA H200", "gpu_uuid": "GPU-1", "host": host}}


def test_gpu_side_numbers_use_the_gpu_tolerance_others_the_host_tolerance():
    m = Measure(tolerance=3, chip_tolerance=20, host_tolerance=10)
    p = parts(busy_s=0.095)
    assert gates.tolerance_for("gpu", p, entry(), m, "GPU-1") == (3, False)
    assert gates.tolerance_for("loader", p, entry(), m, "GPU-1") == (10, True)
    assert gates.tolerance_for("pipeline", p, entry(), m, "GPU-1") == (10, True)


def test_a_gpu_side_number_recorded_on_another_chip_gets_the_chip_tolerance():
    m = Measure(tolerance=3, chip_tolerance=20, host_tolerance=10)
    p = parts(busy_s=0.095)
    assert gates.tolerance_for("gpu", p, entry(), m, "GPU-2") == (20, False)
    assert gates.tolerance_for("gpu", p, entry(), m, None) == (20, False)  # this chip unknown
    old = entry()
    del old["env"]["gpu_uuid"]
    assert gates.tolerance_for("gpu", p, old, m, "GPU-1") == (20, False)  # recorded before chips were
    assert gates.chip_scope(entry()) == "recorded on chip GPU-1, not this one"
    assert gates.chip_scope(old) == "recorded before chips were (an old entry)"
    v = gates.verdict("gpu", [850.0] * 5, entry(), 20, "", gates.chip_scope(entry()))
    assert not v.failed and v.describe() == "gpu against a baseline recorded on chip GPU-1, not this one: allowed -20%"


def test_one_decision_picks_the_tolerance_the_scope_and_whether_to_compare():
    m = Measure(tolerance=3, chip_tolerance=20, host_tolerance=10)
    p = parts(pipeline=850.0, gpu=850.0, loader=850.0, busy_s=0.095)  # 15% below every part of the entry
    on = {"gpu_uuid": "GPU-1", "host": HOST}
    assert gates.part_verdict("gpu", p, entry(), m, on).failed  # this chip: 3%
    other_chip = gates.part_verdict("gpu", p, entry(), m, {**on, "gpu_uuid": "GPU-2"})
    assert not other_chip.failed and other_chip.scope == "recorded on chip GPU-1, not this one"
    assert gates.part_verdict("loader", p, entry(), m, on).failed  # this host: 10%
    elsewhere = gates.part_verdict("loader", p, entry(), m, {**on, "host": {**HOST, "machine": "m2"}})
    assert not elsewhere.compared and elsewhere.why_not.startswith("not comparable: recorded on machine m1")


def test_a_launch_bound_gpu_number_is_host_bound():
    m = Measure(tolerance=3, host_tolerance=10)
    assert gates.tolerance_for("gpu", parts(busy_s=0.05), entry(), m, "GPU-1") == (10, True)  # launch-bound now
    assert gates.tolerance_for("gpu", parts(busy_s=0.095), entry(busy=50.0), m, "GPU-1") == (10, True)  # when recorded


def test_host_bound_numbers_are_compared_on_the_same_host_class_only():
    assert gates.part_not_comparable("loader", entry(), HOST, True) == ""
    other = {"cpu": "Xeon 8480+", "cores": 16, "machine": "m2"}
    why = gates.part_not_comparable("loader", entry(host=other), HOST, True)
    assert why == "not comparable: recorded on machine m2, this is machine m1 (the same CPU class)"
    assert gates.part_not_comparable("gpu", entry(host=other), HOST, False) == ""  # the GPU model's number


def test_an_old_entry_without_host_says_what_to_do():
    why = gates.part_not_comparable("pipeline", entry(host=None), HOST, True)
    assert "without host information" in why and "--perf-update-baselines" in why


def test_a_part_missing_from_the_entry_is_not_compared():
    why = gates.part_not_comparable("loader", entry(parts_=("pipeline",)), HOST, True)
    assert why.startswith("no baseline number for this part")


@pytest.mark.parametrize("now, failed", [(950.0, True), (980.0, False), (1100.0, False)])
def test_verdict_fails_only_beyond_the_tolerance(now, failed):
    v = gates.verdict("gpu", [now] * 5, entry(), 3.0, "")
    assert v.compared and v.failed == failed and v.baseline_sps == 1000.0
    assert v.change_pct == pytest.approx(100 * (now / 1000 - 1))


def test_a_failure_not_confirmed_by_a_second_measurement_passes():
    v = gates.verdict("gpu", [950.0] * 5, entry(), 3.0, "")
    v.confirmation = gates.compare([995.0] * 5, [1000.0] * 5, 0.97)
    assert not v.failed and "not confirmed by a second measurement (-0.5%)" in v.describe()
    v.confirmation = gates.compare([951.0] * 5, [1000.0] * 5, 0.97)
    assert v.failed and "confirmed by a second measurement (-4.9%)" in v.describe()
    # the second measurement confirms by its median: one noisy round does not undo a significant failure
    v.confirmation = gates.compare([960.0, 961, 962, 1010, 1020], [1000.0] * 5, 0.97)
    assert not v.confirmation.significant and v.failed


def test_a_part_not_compared_says_why():
    v = gates.verdict("loader", [950.0] * 5, entry(), 10.0, "not comparable: recorded on elsewhere")
    assert not v.compared and not v.failed and v.describe() == "loader: not comparable: recorded on elsewhere"


def test_for_smoke_is_one_round_of_two_steps_with_nothing_grown():
    m = Measure(warmup=9, rounds=9, max_rounds=20, steps=50, round_s=2.0, profile_steps=4, tolerance=1.0)
    assert for_smoke(m) == Measure(warmup=1, rounds=1, max_rounds=1, steps=2, round_s=0.0, profile_steps=4, tolerance=1.0)


class Bare:
    """A workload with nothing optional: no warm-up steps asked for, no cycles, no GPU-side step; its loader step
    exists. Steps take 1.0, 1.0, 1.5, 1.0, 0.7 s in turn (noisy rounds)."""

    batch_size = 1

    def __init__(self):
        self.now, self.calls, self._times = 0.0, {"step": 0, "loader_step": 0}, [1.0, 1.0, 1.5, 1.0, 0.7]

    def _advance(self, name):
        self.calls[name] += 1
        self.now += self._times[(self.calls["step"] + self.calls["loader_step"] - 1) % 5]

    def step(self):
        self._advance("step")

    def loader_step(self):
        self._advance("loader_step")


def test_a_workload_without_optional_attributes():
    w = Bare()
    assert windows(w).available() == ("pipeline", "loader")
    got = windows(w, warmup=2, rounds=3, steps=1, max_rounds=3).time("loader")
    assert w.calls["loader_step"] == 3 and len(got.rounds) == 3  # no warm-up asked for: none; one step a round


def test_noisy_rounds_are_extended_up_to_max_rounds_of_the_measure():
    w = Bare()
    got = windows(w, warmup=1, rounds=5, steps=1, max_rounds=8, ci_pct=1.0).time("pipeline")
    assert len(got.rounds) == 8 and got.extended == 3
    assert w.calls["step"] == 1 + 8


def test_pipeline_rounds_go_through_the_runner():
    seen = []

    def runner(fn, setup, rounds):
        seen.append(rounds)
        for _ in range(rounds):
            setup()
            fn()

    w = Workload()
    for part in ("pipeline", "gpu", "loader"):  # whichever part a test times first (a loader-only test: the loader)
        windows(w, warmup=1, rounds=3, steps=4).time(part, runner=runner)
    assert seen == [3, 3, 3]


@pytest.mark.parametrize("part, name", [("gpu", "gpu_step"), ("loader", "loader_step")])
def test_smoke_warms_each_part_up_by_one_step(part, name):
    w = Workload()
    windows(w, smoke=True, warmup=9, rounds=5, steps=10).time(part)
    assert w.calls[name] == 1 + 2


def test_rounds_grow_to_the_round_s_of_the_measure():
    """GPU-side steps of 5 ms in periods of 3: 0.1 s takes 20 steps, 21 in whole periods."""
    got = windows(Workload(), warmup=1, rounds=2, steps=1, round_s=0.1).time("gpu")
    assert got.samples_per_round == 21 * 10


class BareFed(Bare):
    """Bare's noisy steps, with a GPU-side step: its pipeline is loader-fed, so host-bound."""

    def gpu_step(self):
        self._advance("step")


@pytest.mark.parametrize("part, extended", [("pipeline", False), ("loader", False), ("gpu", True)])
def test_only_gpu_side_numbers_are_extended(part, extended):
    got = windows(BareFed(), warmup=1, rounds=5, steps=1, max_rounds=8, ci_pct=1.0).time(part)
    assert len(got.rounds) == (8 if extended else 5)


@pytest.mark.parametrize("loader_sps, steps", [(None, 20), (250.0, 8), (5000.0, 20)])
def test_a_pipeline_round_is_sized_no_faster_than_its_loader(loader_sps, steps):
    """Pipeline steps of 10 ms (batch 10) and round_s 0.19 s: 19 steps a round at the probe's pace, 20 in
    whole bursts of 4; a loader of 250 samples/s feeds one step in 40 ms: 5 steps, 8 in whole bursts; a
    faster loader changes nothing."""
    win = windows(Workload(), warmup=1, rounds=2, steps=1, round_s=0.19)
    win.loader = loader_sps and t(loader_sps)
    assert win.time("pipeline").samples_per_round == steps * 10


class Timer:
    """A loader.Timer's stand-in: the span each cost was asked for, and whether only samples made alone were wanted."""

    def __init__(self):
        self.asked = []

    def cost(self, since, until, alone_only):
        self.asked.append((since, until, alone_only))
        return f"cost {len(self.asked)}"


@pytest.mark.parametrize("resident, smoke", [(False, False), (False, True), (True, False)])
def test_the_loaders_window_or_the_pipelines_where_it_has_none_carries_the_cost_of_a_sample(resident, smoke):
    w = Workload(resident)
    win = windows(w, smoke, warmup=1, rounds=2, steps=1)
    win.timer = Timer()
    carrier = "pipeline" if resident else "loader"
    timed = {part: win.time(part) for part in win.available()}
    assert [part for part, t in timed.items() if t.unit is not None] == [carrier] and timed[carrier].unit == "cost 1"
    [(since, until, alone_only)] = win.timer.asked
    assert 0 < since <= until and alone_only is smoke
