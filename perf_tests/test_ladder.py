"""Seed 000's optimization ladder, step by step, and past it to the GPU's ceiling.

Each step is a one-field change from the one before (fixtures.recipes.ladder). Each states the
syncs it must show, and where the article claims a gain, the least gain over its predecessor
measured in the same pytest run. `ceiling` runs first: the last step's recipe with the batch
already on the GPU; every step's pipeline efficiency is its samples/s over the ceiling's.
"""

from dataclasses import dataclass, replace

import pytest

from fixtures.recipes import LADDER_STEPS, ladder
from perf_tests.harness.settings import cpu_count, default_workers


@dataclass(frozen=True)
class Expect:
    syncs: int  # per step
    gain: float | None = None  # at least this many times the predecessor's samples/s
    noise_pct: float | None = None  # or: no slower than the predecessor beyond this
    article: str = ""  # the article's own figure (V100, samples/s), for the report


# Measured on an H200 with 16 cores (see README): from compile to bf16_channels_last the GPU step is
# faster than the loader can feed it, 224x224 uint8 batches of 154 MB that the DataLoader's single
# pin-memory thread copies into pinned memory (the profile shows the step waiting in `_next_data`);
# those steps sit at the loader's cap, so they must not
# lose throughput, and gpu_resize (32x32 over the bus) lifts the cap to the ceiling.
EXPECT = {
    "baseline": Expect(2, article="400"),  # two pageable blocking copies: images, labels
    "workers": Expect(2, gain=1.5, article="865"),
    "pin_memory": Expect(0, gain=1.1, article="~1200"),
    "batch_512": Expect(0, gain=1.2, article="1584"),
    "uint8_h2d": Expect(0, gain=1.03, article="1670"),
    "set_to_none": Expect(0, noise_pct=3, article="no change"),
    "amp_fp16": Expect(1, gain=1.15, article="2477 (batch 1024)"),  # GradScaler's inf check reads the GPU
    "compile": Expect(1, noise_pct=3, article="3268"),  # the article's 1.32x; here at the loader's cap
    "fused_optimizer": Expect(0, noise_pct=3),  # the fused step keeps found_inf on the GPU: no sync
    "bf16_channels_last": Expect(0, noise_pct=3),
    "gpu_resize": Expect(0, gain=1.5),
}
assert list(EXPECT) == LADDER_STEPS, "every ladder step states its expectation"
GPU_RESIZE_EFFICIENCY = 0.95  # gpu_resize reaches this share of the ceiling
CEILING = "perf_tests/test_ladder.py::test_ceiling"


def test_ceiling(perf, measure):
    """The last step's model and step function with its batch already on the GPU."""
    result = measure(replace(ladder(perf.workers)["gpu_resize"], resident=True))
    perf.assert_syncs(result, per_step=0)
    perf.assert_baseline(result)


# batch 32 steps run 40 steps a round, not 10: their rounds would last a fraction of a second
PARAMS = [pytest.param(s, marks=pytest.mark.perf(steps=40)) if ladder(1)[s].batch_size < 512 else s for s in LADDER_STEPS]


@pytest.mark.parametrize("step", PARAMS)
def test_ladder(perf, measure, step):
    expect = EXPECT[step]
    result = measure(ladder(perf.workers)[step])
    perf.assert_syncs(result, per_step=expect.syncs)
    index = LADDER_STEPS.index(step)
    if expect.gain:
        perf.assert_faster(result, than=LADDER_STEPS[index - 1], by=expect.gain)
    if expect.noise_pct:
        perf.assert_not_slower(result, than=LADDER_STEPS[index - 1], noise_pct=expect.noise_pct)
    if step == "gpu_resize":
        perf.assert_faster(result, than=CEILING, by=GPU_RESIZE_EFFICIENCY)
    ceiling = perf.result_of(CEILING)
    perf.add_row(
        "Ladder (seed 000 and past it)",
        step=step,
        samples_per_s=result.samples_per_s,
        gain=perf.ratio(result, perf.result_of(LADDER_STEPS[index - 1])) if index else None,
        cumulative=perf.ratio(result, perf.result_of("baseline")),
        efficiency=perf.ratio(result, ceiling),
        syncs_per_step=result.syncs.per_step if result.syncs else None,
        spread_pct=result.throughput.spread_pct,
        peak_mem_gb=result.peak_mem_gb,
        article_v100=expect.article,
    )
    perf.assert_baseline(result)


def sweep_points(workers: int, cores: int) -> list[int]:
    return sorted({n for n in (0, 2, 4, 8, 16) if n <= cores} | {workers})


def pytest_generate_tests(metafunc):
    if "sweep_workers" in metafunc.fixturenames:
        workers = metafunc.config.getoption("--perf-workers") or default_workers()
        metafunc.parametrize("sweep_workers", sweep_points(workers, cpu_count()), ids=lambda n: f"workers_{n}")


@pytest.mark.perf(rounds=3, steps=5)
def test_worker_sweep(perf, measure, sweep_workers):
    """Seed 003, advice 4: tune the DataLoader's workers; the uint8_h2d step at each count."""
    result = measure(replace(ladder(perf.workers)["uint8_h2d"], num_workers=sweep_workers))
    perf.assert_syncs(result, per_step=0)
    perf.assert_baseline(result)


def test_default_workers_near_best(perf_session):
    """The default worker count is within 10% of the best one in the sweep."""
    default = perf_session.settings.workers
    sweep = {
        int(test.rsplit("workers_", 1)[1].rstrip("]")): r.samples_per_s
        for test, r in perf_session.results.items()
        if "::test_worker_sweep[" in test
    }
    if perf_session.settings.smoke or default not in sweep:
        pytest.skip(f"the sweep did not measure the default ({default} workers) on a GPU in this run")
    best = max(sweep, key=sweep.get)
    perf_session.sections["Worker sweep (uint8_h2d step)"] = [
        {"workers": n, "samples_per_s": sps, "of_best": sps / sweep[best]} for n, sps in sorted(sweep.items())
    ]
    assert sweep[default] >= 0.9 * sweep[best], (
        f"the default, {default} workers, gives {sweep[default]:,.0f} samples/s, {sweep[default] / sweep[best]:.0%} "
        f"of the best ({best} workers: {sweep[best]:,.0f}); change the default"
    )
