"""Seed 003, advice 4: tune the DataLoader's workers. The loader alone of the ladder's compile step
(PIL resize to 224 on the CPU, uint8, pinned, to the GPU) at a quarter of the cores, all of them and
the default; the default must be within 10% of the best. A file of its own: it shares no measurement
with the ladder, so a sharded run (-n) may give it to another worker.
"""

from dataclasses import replace

import pytest

from fixtures.recipes import ladder
from torch_perf_suite import Chart
from torch_perf_suite.settings import cpu_count, default_workers


def sweep_points(workers: int, cores: int) -> list[int]:
    """A quarter of the cores, all of them, and the default (docs/loader.md says why no more)."""
    return sorted({max(cores // 4, 1), cores, workers})


def pytest_generate_tests(metafunc):
    if "sweep_workers" in metafunc.fixturenames:
        workers = metafunc.config.getoption("--perf-workers") or default_workers()
        metafunc.parametrize("sweep_workers", sweep_points(workers, cpu_count()), ids=lambda n: f"workers_{n}")


# Rounds of 3 s, not 0.5: a round of a few bursts of batches is timed from one burst to another, and short
# rounds vary with the bursts' jitter (docs/loader.md): the sweep is the suite's loader-bound gate on the machine
# that recorded it. Seven rounds from the start: host-bound windows are not extended.
@pytest.mark.perf(round_s=3, rounds=7)
def test_worker_sweep(perf, measure, sweep_workers):
    """Seed 003, advice 4: tune the DataLoader's workers. The loader alone of the compile step's recipe
    (PIL resize to 224 on the CPU, uint8, pinned, to the GPU), which the GPU outruns."""
    result = measure(replace(ladder(perf.workers)["compile"], num_workers=sweep_workers), parts=("loader",))
    perf.assert_baseline(result)


def test_default_workers_near_best(perf_session):
    """The default worker count is within 10% of the best one in the sweep."""
    default = perf_session.settings.workers
    sweep = {
        int(test.rsplit("workers_", 1)[1].rstrip("]")): r.samples_per_s
        for test, r in perf_session.results.items()
        if "::test_worker_sweep[" in test
    }
    if perf_session.settings.smoke:
        pytest.skip("a smoke run measures nothing to compare")
    if default not in sweep:
        left_out = f"perf_tests/test_worker_sweep.py::test_worker_sweep[workers_{default}]" in perf_session.deselected
        reason = f"the sweep did not measure the default ({default} workers) on a GPU in this run"
        if left_out:  # -k or -m chose a subset: not a failure, even under --perf-strict
            pytest.skip(f"{reason}: deselected")
        perf_session.skip(reason)
    best = max(sweep, key=sweep.get)
    title = "Worker sweep (loader alone, compile step's recipe)"
    perf_session.sections[title] = [
        {"workers": n, "samples_per_s": sps, "of_best": sps / sweep[best]} for n, sps in sorted(sweep.items())
    ]
    perf_session.charts[title] = Chart(x="workers", lines=("samples_per_s",))
    assert sweep[default] >= 0.9 * sweep[best], (
        f"the default, {default} workers, gives {sweep[default]:,.0f} samples/s, {sweep[default] / sweep[best]:.0%} "
        f"of the best ({best} workers: {sweep[best]:,.0f}); change the default"
    )
