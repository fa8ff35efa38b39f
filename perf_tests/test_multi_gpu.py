"""Seed 003, "go distributed", and seed 004's metrics reduced across real ranks, on two GPUs of one node.

One step: ResNet-50 at batch 256 per GPU (seed 001's ladder step `fused_optimizer`: AMP fp16 with its scaler,
channels_last, fused SGD, eager), its batches already on the GPUs; then fed by a real loader (the on-disk
images preprocessed to 224, test_storage.py's fastest storage; the node's cores shared among the ranks).
Spread four ways (fixtures/multi_gpu.py, each in processes of its own): one GPU; nn.DataParallel over two,
the outputs gathered on the first GPU for the loss; DataParallel with the loss computed inside forward (the
article's workaround); DistributedDataParallel, one process per GPU (NCCL), with its defaults and with
gradient_as_bucket_view=True (past the article: no copy of the gradients into the buckets). The article: DataParallel loads
the first GPU unevenly and DDP takes about 20% less time (on 4 GPUs). Each reports samples/s in all and per
GPU, scaling efficiency against one GPU measured in this run, peak memory per GPU and the syncs per step on
every rank's own trace. The claims are ratios within the run; each scenario is then compared with its baseline entry,
keyed by the GPUs' count and topology (torch_perf_suite/fixture/ranks.py): each rank's kernels, bytes copied and step memory
exactly, the samples/s of all GPUs within their scope, the scaling efficiency over one GPU in this run.

Skipped where fewer than two GPUs are visible (failed under --perf-strict), and in a sharded run
(`-n`), where each worker holds one GPU: run `pytest perf_tests -m multi_gpu` without -n.
"""

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch

from fixtures import multi_gpu, recipes
from torch_perf_suite import Chart

pytestmark = [
    pytest.mark.multi_gpu,
    # timed in the ranks' own processes (fixtures/multi_gpu.py), which pytest-benchmark cannot time: the figures are
    # the report's section, and pytest-benchmark's fixture (under `perf`) goes unused here by design
    pytest.mark.filterwarnings("ignore:Benchmark fixture was not used"),
]

GPUS = 2
STEP = recipes.resnet50_ladder()["fused_optimizer"]  # 0 syncs a step
FROM_DISK = dict(dataset="images", storage="preprocessed", resident=False, pin_memory=True, non_blocking=True,
                 cast_on="gpu")
SECTION = "Several GPUs (seed 003)"
CHART = Chart(x="scenario", bars=("per_gpu",), note="efficiency")


@dataclass(frozen=True)
class Expect:
    how: str  # "one_gpu", "data_parallel", "ddp"
    loss_in_forward: bool = False
    bucket_view: bool = False  # DDP's gradient_as_bucket_view
    from_disk: bool = False
    over: str | None = None  # the one-GPU scenario of this run it is compared with
    efficiency: float | None = None  # samples/s per GPU over `over`'s, at least


SCENARIOS = {
    "one_gpu": Expect("one_gpu"),
    # gradients all-reduced over NVLink during backward: held to 94%, not to the 95% that its form below clears by 2
    # points (a floor within a point of the figures, docs/multi-gpu.md, would cry wolf)
    "ddp": Expect("ddp", over="one_gpu", efficiency=0.94),
    # the gradients kept in the all-reduce buckets, no copy into them
    "ddp_gradient_as_bucket_view": Expect("ddp", bucket_view=True, over="one_gpu", efficiency=0.95),
    "data_parallel": Expect("data_parallel", over="one_gpu"),
    "data_parallel_loss_in_forward": Expect("data_parallel", loss_in_forward=True, over="one_gpu"),
    "one_gpu_from_disk": Expect("one_gpu", from_disk=True),
    "ddp_from_disk": Expect("ddp", from_disk=True, over="one_gpu_from_disk"),  # reported beside the resident figure
}
DDP_OVER_DATA_PARALLEL = 1.05  # DDP's samples/s per GPU over DataParallel's, at least
MEASURED: dict[str, multi_gpu.Spread] = {}  # this run's scenarios, for the ratios


@pytest.fixture
def gpus(perf) -> int:
    """How many GPUs the scenarios spread over; in a smoke run on a CPU, as many gloo processes."""
    if perf.sharded:
        pytest.skip("a sharded run (-n): this worker holds one GPU; run `pytest perf_tests -m multi_gpu` without -n")
    visible = torch.cuda.device_count() if perf.device == "cuda" else GPUS
    if visible < GPUS:
        reason = f"needs {GPUS} GPUs, {visible} visible"
        if perf.strict:
            pytest.fail(f"{perf.test_id}: --perf-strict: {reason}", pytrace=False)
        pytest.skip(reason)
    return GPUS


def plan_for(perf, tmp_path: Path) -> multi_gpu.Plan:
    m = perf.measure_settings
    if perf.smoke:
        return multi_gpu.Plan(warmup=1, rounds=1, steps=2, profile_steps=0, trace_dir=str(tmp_path), smoke=True)
    return multi_gpu.Plan(warmup=m.warmup, rounds=m.rounds, steps=24, profile_steps=m.profile_steps, trace_dir=str(tmp_path))


def assert_no_syncs(perf, spread: multi_gpu.Spread) -> None:
    """0 syncs per step on every rank's trace; a failure names the rank, its count and where each sync comes from."""
    if perf.smoke:
        return
    found = [r for r in spread.ranks if r.syncs.per_step]
    if found:
        each = "\n".join(f"rank {r.rank}: {r.syncs.per_step:.2f} per step ({r.syncs.total} in {r.syncs.steps} profiled steps)\n"
                         f"{r.syncs.describe()}\ntrace: {r.trace}" for r in found)
        pytest.fail(f"{perf.test_id}: host-device syncs on {len(found)} of {len(spread.ranks)} rank(s), expected 0:\n{each}",
                    pytrace=False)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_spread(perf, gpus, scenario, tmp_path, request):
    e = SCENARIOS[scenario]
    recipe = STEP
    if e.from_disk:
        recipe = replace(STEP, **FROM_DISK, data_dir=str(request.getfixturevalue("image_dataset")),
                         num_workers=max(perf.workers // gpus, 1))
    if e.how == "data_parallel":  # one process, the batch of every GPU scattered from the first
        recipe = replace(recipe, data_parallel="loss" if e.loss_in_forward else "outputs", batch_size=recipe.batch_size * gpus)
    recipe = replace(recipe, ddp=e.how == "ddp", ddp_bucket_view=e.bucket_view)
    if perf.smoke:
        recipe = multi_gpu.for_smoke(recipe)
    spread = MEASURED[scenario] = multi_gpu.train(recipe, gpus if e.how != "one_gpu" else 1, plan_for(perf, tmp_path))
    assert_no_syncs(perf, spread)
    over = MEASURED.get(e.over)
    efficiency = spread.per_gpu / over.per_gpu if over else None
    # DataParallel's one process scatters, replicates and gathers for every GPU: its rate is the host's, a pipeline
    # number judged on its host, and by its counts. So is a loader's (docs/multi-gpu.md, "Baselines of their own").
    # DDP on resident batches scales with the GPUs and the all-reduce: its scaling efficiency is a ratio that holds
    # on any host
    gpu_bound = not e.from_disk and e.how != "data_parallel"
    result = judged(perf, spread, recipe, tmp_path, resident=gpu_bound,
                    scaling=efficiency if gpu_bound and e.how == "ddp" else None)
    peak = spread.peak_gb
    perf.add_row(SECTION, chart=CHART, scenario=scenario, gpus=spread.gpus, samples_per_s=round(spread.samples_per_s),
                 per_gpu=round(spread.per_gpu), efficiency=None if efficiency is None else round(efficiency, 3),
                 peak_gb=", ".join(f"GPU{i} {gb:.2f}" for i, gb in sorted(peak.items())), syncs_per_step=spread.syncs_line())
    if perf.smoke:
        return
    perf.assert_baseline(result)  # first: a changed count names its cause before the ratios below say how much it cost
    if e.over and over is None:
        pytest.fail(f"{perf.test_id}: {e.over} was not measured in this run: run the whole file", pytrace=False)
    if e.efficiency:
        assert efficiency >= e.efficiency, (
            f"{perf.test_id}: {spread.per_gpu:,.0f} samples/s per GPU, {efficiency:.1%} of {e.over}'s "
            f"{over.per_gpu:,.0f} on one GPU, expected at least {e.efficiency:.0%}")
    if e.how == "data_parallel":
        assert peak[0] > peak[1], (
            f"{perf.test_id}: peak memory GPU0 {peak[0]:.2f} GB, GPU1 {peak[1]:.2f} GB: DataParallel's first GPU "
            "holds the whole batch, the gradients and the optimizer's state, and should need more")
        ddp = MEASURED.get("ddp")
        if ddp is not None:
            assert ddp.per_gpu >= DDP_OVER_DATA_PARALLEL * spread.per_gpu, (
                f"{perf.test_id}: DataParallel {spread.per_gpu:,.0f} samples/s per GPU, DDP {ddp.per_gpu:,.0f}: "
                f"expected DDP at least {DDP_OVER_DATA_PARALLEL}x")
    for r in spread.ranks:  # tens of MB each; a failed test's stay in its tmp_path, named in the failure
        Path(r.trace).unlink()


def judged(perf, spread: multi_gpu.Spread, recipe, tmp_path: Path, resident: bool, scaling: float | None = None):
    """The spread as one result of the perf fixture, for the report and the baseline (keyed by the GPUs' count and
    topology): each rank's counts and host side, all GPUs' samples/s, the scaling efficiency over one GPU in this
    run; a spread fed by loaders is `fed`: its host-bound pipeline is the loaders' work, which the host side is not,
    and their instructions per sample are counted (`loader_source`, test_storage's loader's count where the same)."""
    processes = len(spread.ranks)
    return perf.measured_ranks(spread.timed, again=lambda: multi_gpu.train(recipe, spread.gpus, plan_for(perf, tmp_path)).timed,
                               batch_size=recipe.batch_size * processes, ranks={r.rank: r.syncs for r in spread.ranks},
                               hosts={r.rank: r.host for r in spread.ranks}, fed=not recipe.resident,
                               loader_source=None if recipe.resident else recipes.loader_source(recipe),
                               peak_gb=spread.peak_gb, gpus=spread.gpus, resident=resident, scaling=scaling)


METRIC_STEPS, METRIC_BATCH = 4, 64


def test_metric_values_across_ranks(perf, gpus):
    """Seed 004's fixed collection, updated on each rank with its own batches, then compute(): reduced across the
    ranks (NCCL; gloo on a CPU), every rank holds the values of one process that saw all the batches."""
    ranks = multi_gpu.spawn(multi_gpu.metric_values, gpus, METRIC_STEPS, METRIC_BATCH)
    alone = multi_gpu.metric_values_one_process(gpus, METRIC_STEPS, METRIC_BATCH)
    for rank, values in enumerate(ranks):
        assert values == pytest.approx(alone, rel=1e-5), f"rank {rank} computed {values}, one process {alone}"


@pytest.mark.perf(profile_steps=8)
def test_metrics_under_ddp(perf, gpus, tmp_path):
    """Seed 004's fixed metrics in the seed-004 step under DDP at world size 2: 0 syncs per step on every rank,
    the compute phase's cross-rank reduction (every 8 steps) counted apart."""
    recipe = replace(recipes.metrics_recipe(max(perf.workers // gpus, 1), "fixed"), ddp=True)
    if perf.smoke:
        recipe = multi_gpu.for_smoke(recipe)
    spread = multi_gpu.train(recipe, gpus, plan_for(perf, tmp_path))
    assert_no_syncs(perf, spread)
    result = judged(perf, spread, recipe, tmp_path, resident=False)
    perf.add_row(SECTION, scenario="metrics_under_ddp", gpus=gpus, samples_per_s=round(spread.samples_per_s),
                 per_gpu=round(spread.per_gpu), syncs_per_step=spread.syncs_line(),
                 syncs_per_compute=", ".join(f"rank {r.rank} {sum(r.syncs.periodic.values())}" for r in spread.ranks
                                             if r.syncs is not None))
    if perf.smoke:
        return
    for r in spread.ranks:
        assert r.syncs.periodic_runs, f"rank {r.rank}: the compute phase (every 8 steps) did not run in the profiled window"
    perf.assert_baseline(result)
    for r in spread.ranks:
        Path(r.trace).unlink()
