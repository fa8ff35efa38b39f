"""A test spread over several GPUs judged as one (torch_perf_suite/fixture/ranks.py): its entry keyed by the GPUs' count and
topology, each rank's count against that rank's record, its scaling efficiency against the recorded one, the file
that keeps it valid. On a CPU: the ranks' counts are made here, as a profiled window would give them."""

import json
from types import SimpleNamespace

import pytest

from torch_perf_suite.counts.kernels import Kernel, KernelStats
from torch_perf_suite.findings import failures
from torch_perf_suite.fixture import ranks
from torch_perf_suite.fixture.judging import Judge
from torch_perf_suite.records import baselines
from torch_perf_suite.session.settings import Measure
from torch_perf_suite.syncs import SyncCount
from torch_perf_suite.throughput.timing import Throughput

TEST = "perf_tests/test_multi_gpu.py::test_spread[ddp]"
ENV = {"gpu": "NVIDIA H200", "gpu_uuid": "GPU-aaaa", "host": {"cpu": "x", "cores": 32}, "date": "2026-11-27"}


def counted(all_reduce: float = 4.0, peak: int = 10**9) -> SyncCount:
    kernels = [Kernel("ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevComm*)", 900.0, all_reduce, 0.1, None),
               Kernel("void cudnn::conv_kernel<float>(int)", 9000.0, 60.0, 0.9, True)]
    return SyncCount(steps=8, kernels=KernelStats(8, kernels, {}, {"DtoD": 2e6}), step_peak_bytes=peak)


def spread(rank1: SyncCount | None = None, scaling: float = 0.96, resident: bool = True):
    return ranks.result(TEST, timed=Throughput(512, (0.1, 0.1, 0.1)), batch_size=512,
                        ranks={0: counted(), 1: rank1 or counted()}, peak_gb={0: 12.2, 1: 12.1}, gpus=2,
                        resident=resident, scaling=scaling, on_gpu=False)


def test_the_entry_is_keyed_by_the_gpus_count_and_topology_and_keeps_each_ranks_count():
    r = spread()
    assert r.baseline_key == f"{TEST} on 2 GPUs (topology unknown)" == ranks.key(TEST, 2, None)
    assert ranks.key(TEST, 2, "GPU0-GPU1 NV18") == f"{TEST} on 2 GPUs (GPU0-GPU1 NV18)"
    assert ranks.key(TEST, 1, "GPU0 alone") == f"{TEST} on 1 GPU (GPU0 alone)"
    entry = r.baseline_entry(ENV)
    assert set(entry["counts"]["ranks"]) == {"0", "1"}
    assert entry["counts"]["ranks"]["1"]["kernels_per_step"]["ncclDevKernel_AllReduce_Sum_f16_RING_LL"] == 4.0
    assert entry["counts"]["ranks"]["1"]["copies_per_step"] == {"DtoD": 2000000}
    assert (entry["scaling"], entry["env"]["gpus"], entry["env"]["gpu"]) == (0.96, 2, "NVIDIA H200")
    assert entry["parts"]["gpu"] == entry["parts"]["pipeline"]  # resident batches: the step is the GPU-side one
    assert "gpu" not in spread(resident=False).baseline_entry(ENV)["parts"]  # loader-fed: a pipeline number
    assert r.extra["peak GB by GPU"] == "GPU0 12.20, GPU1 12.10"


def test_the_entry_survives_the_baseline_file_and_a_broken_rank_count_is_named(tmp_path):
    path = tmp_path / "nvidia-h200.json"
    r = spread()
    baselines.BaselineFile.load(path, "NVIDIA H200").save({r.baseline_key: r.baseline_entry(ENV)})
    assert baselines.BaselineFile.load(path, "NVIDIA H200").get(r.baseline_key)["scaling"] == 0.96
    data = json.loads(path.read_text())
    data["tests"][r.baseline_key]["counts"]["ranks"]["1"]["step_peak_bytes"] = -1
    path.write_text(json.dumps(data))
    with pytest.raises(baselines.BaselineError, match=r"rank 1: 'counts' 'step_peak_bytes' is -1"):
        baselines.BaselineFile.load(path, "NVIDIA H200")


def test_a_count_that_changed_on_one_rank_fails_naming_that_rank():
    recorded = spread().counts()
    assert failures(ranks.counted(spread().counts(), recorded, 1.0, None)) is None
    failure = failures(ranks.counted(spread(rank1=counted(all_reduce=100.0)).counts(), recorded, 1.0, None))
    assert failure.startswith("rank 1: 160 kernel launches per step, 64 recorded (+96)")
    assert "rank 0" not in failure
    assert all(line.startswith("rank 1: ") for line in failure.splitlines())
    failure = failures(ranks.counted(spread(rank1=counted(peak=2 * 10**9)).counts(), recorded, 1.0, None))
    assert failure.startswith("rank 1: the steps' peak GPU memory is 2.000 GB above what they started with, 1.000 GB")


def test_a_rank_with_no_record_fails():
    recorded = {"ranks": {"0": spread().counts()["ranks"]["0"]}}
    failure = failures(ranks.counted(spread().counts(), recorded, 1.0, None, "REF HEAD"))
    assert failure == "rank 1: REF HEAD recorded no count for it"


@pytest.mark.parametrize("now, fails", [(0.96, False), (0.935, False), (0.92, True)])
def test_scaling_efficiency_within_the_tolerance_of_the_recorded_one(now, fails):
    failure = failures(ranks.scaling(now, 0.96, 3.0, "the baseline"))
    assert (failure is not None) == fails
    if fails:
        assert failure.startswith("scaling efficiency 92.0% (samples/s per GPU over one GPU's, in this run), 96.0% "
                                  "recorded by the baseline (-4.2%; allowed -3%)")
    assert failures(ranks.scaling(now, None, 3.0, "the baseline")) is None


def judge(entry: dict) -> Judge:
    records = SimpleNamespace(baseline=lambda key: entry if key == f"{TEST} on 2 GPUs (topology unknown)" else None,
                              loaders_file=None, loader_record=lambda test_id: None)
    settings = SimpleNamespace(strict=False, smoke=False, update_baselines=False, workers=4, worker_start=None)
    session = SimpleNamespace(ref=None, settings=settings, records=records, against_label="the baseline",
                              reference="baselines/nvidia-h200.json", device=SimpleNamespace(env=ENV))
    return Judge(session, TEST, Measure(), confirm=lambda result, part: result.parts.get(part))


def test_the_judge_finds_the_entry_by_its_key_and_fails_on_a_ranks_count_and_on_scaling():
    entry = spread().baseline_entry(ENV)
    failed, found = judge(entry).baseline(spread(), ())
    assert (failed, found) == ([], entry)
    failed, _ = judge(entry).baseline(spread(rank1=counted(all_reduce=5.0), scaling=0.90), ())
    failure = failures(failed)
    assert "rank 1: 65 kernel launches per step, 64 recorded (+1)" in failure
    assert "scaling efficiency 90.0%" in failure


def test_without_an_entry_the_missing_baseline_names_the_gpus_and_their_topology():
    with pytest.warns(UserWarning, match=r"no baseline for GPU 'NVIDIA H200' on 2 GPUs \(topology unknown\) in baselines"):
        failed, found = judge_without_entry().baseline(spread(), ())
    assert (failed, found) == ([], None)


def judge_without_entry() -> Judge:
    j = judge({})
    j.session.records.baseline = lambda key: None
    j.session.records.baseline_file = SimpleNamespace(path="baselines/nvidia-h200.json")
    j.session.sharded = False
    return j


def test_the_reports_main_row_of_a_spread_test_shows_the_most_syncs_of_any_rank():
    from collections import Counter

    from torch_perf_suite.report import markdown as report

    one_rank_waits = counted()
    one_rank_waits.sources = Counter({"planted .item()": 8})  # rank 1 only: 1.00 a step
    assert [row["syncs_per_step"] for row in report.rows([spread(), spread(rank1=one_rank_waits)])] == [0.0, 1.0]
    unprofiled = ranks.result(TEST, timed=Throughput(512, (0.1,)), batch_size=512, ranks={0: None, 1: None},
                              peak_gb={}, gpus=2, resident=True, scaling=None, on_gpu=False)
    assert report.rows([unprofiled])[0]["syncs_per_step"] is None  # a smoke run profiles nothing
