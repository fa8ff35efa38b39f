"""The throughput verdicts (throughput/checks.py, gpu_util.py) as plain functions: each returns None where all is well, and
a message naming what changed."""

from types import SimpleNamespace

from torch_perf_suite.findings import FAILED, NOT_CHECKED, PASSED, Finding, failures
from torch_perf_suite.machine.nvml import Utilization
from torch_perf_suite.throughput import checks, gpu_util
from torch_perf_suite.throughput.parts import Parts, parts_line
from torch_perf_suite.throughput.timing import Throughput


def parts(pipeline, gpu, loader):
    return Parts(10, Throughput(10, (10 / pipeline,)), Throughput(10, (10 / gpu,)), Throughput(10, (10 / loader,)))


def test_efficiency_of_the_slowest_part_and_in_turns():
    p = parts(5_000, 10_000, 20_000)  # efficiency 0.5; in turns 5,000 of 6,667: 0.75
    assert failures(checks.efficiency(p, 0.5)) is None and failures(checks.efficiency(p, 0.7, in_turns=True)) is None
    assert failures(checks.efficiency(p, 0.6)).startswith(
        "pipeline efficiency 0.50, expected at least 0.6: the pipeline delivers 5,000 samples/s while its bottleneck (GPU) "
        "allows 10,000.")
    assert failures(checks.efficiency(p, 0.8, in_turns=True)).startswith(
        "the pipeline delivers 5,000 samples/s, 0.75 of the 6,667")


def test_bottleneck():
    p = parts(5_000, 10_000, 20_000)
    assert failures(checks.bottleneck(p, "GPU")) is None
    assert failures(checks.bottleneck(p, "loader")) == ("bottleneck GPU, expected loader. parts (samples/s): pipeline 5,000, "
                                                        "GPU-side 10,000, loader 20,000; bottleneck: GPU")


def test_a_host_bound_claim_is_checked_only_on_the_host_that_recorded_the_baseline():
    entry = {"env": {}}
    assert checks.host_scope(entry, "", updating=False) == ""
    assert checks.host_scope(entry, "recorded on machine a, this is machine b", updating=False) == (
        "not checked: recorded on machine a, this is machine b")
    assert checks.host_scope(None, "", updating=False).startswith("not checked: no baseline from this host")
    assert checks.host_scope(entry, "", updating=True).startswith("recorded as measured on this host, not checked")
    assert checks.host_scope(entry, "", updating=False, vs_ref=True).startswith("reported, not gated against REF")


def test_in_turns_exactly_at_the_floor_passes():
    p = parts(2048, 4096, 4096)  # in turns: 1 / (1/4096 + 1/4096) = 2048 samples/s, all of it delivered
    assert failures(checks.efficiency(p, 1.0, in_turns=True)) is None


def test_the_parts_line_gives_the_loaders_samples_per_cpu_second_where_measured():
    loader = Throughput(10, (10 / 20_000,), cpu_s=(10 / 4_000,))
    p = Parts(10, Throughput(10, (10 / 5_000,)), Throughput(10, (10 / 10_000,)), loader)
    assert parts_line(p) == ("parts (samples/s): pipeline 5,000, GPU-side 10,000, loader 20,000; bottleneck: GPU; "
                                    "loader 4,000 samples per worker CPU second")


def test_utilization_fails_below_its_floor_and_notes_what_nvml_cannot_say():
    util = SimpleNamespace(unavailable="", gpu_util_pct=80.0, samples=9, describe=lambda: "80% GPU-Util")
    found = gpu_util.verdict(util, 90, "gpu")
    assert found.outcome == FAILED
    assert found.text.startswith("GPU-Util 80% over the gpu rounds (NVML, 9 samples), expected at least 90%")
    assert gpu_util.verdict(util, 80, "gpu") == Finding(PASSED)
    assert gpu_util.verdict(None, 80, "gpu") == Finding(NOT_CHECKED, "utilization not checked: no utilization sampled in the "
                                                                    "gpu window", "utilization not checked")
    assert found.brief == "GPU-Util 80% over the gpu rounds, expected at least 90%"


def test_a_utilization_shortfall_fails_only_where_its_second_measurement_falls_short_too():
    first = gpu_util.verdict(Utilization(samples=50, gpu_util_pct=84.0), 90, "gpu")
    assert first.outcome == FAILED
    assert gpu_util.confirmed(first, Utilization(samples=50, gpu_util_pct=97.0), 90, "gpu") == Finding(
        PASSED, "GPU-Util 84% over the gpu rounds (NVML, 50 samples), expected at least 90%: the GPU waits for the host; "
                  "measured again: GPU-Util 97%: not confirmed")
    again = gpu_util.confirmed(first, Utilization(samples=50, gpu_util_pct=85.0), 90, "gpu")
    assert again.outcome == FAILED and again.text == f"{first.text}; measured again: GPU-Util 85%"
    unread = gpu_util.confirmed(first, Utilization(unavailable="NVML: lost"), 90, "gpu")  # nothing read: no verdict
    assert unread == Finding(NOT_CHECKED, "GPU-Util 84% over the gpu rounds (NVML, 50 samples), expected at least 90%: "
                                          "the GPU waits for the host; measured again: utilization not checked: NVML: lost")


def test_utilization_not_sampled_or_not_readable_is_noted():
    unread = SimpleNamespace(unavailable="NVML: Insufficient Permissions", gpu_util_pct=None)
    assert gpu_util.verdict(unread, 80, "gpu") == Finding(NOT_CHECKED, "utilization not checked: NVML: Insufficient "
                                                                      "Permissions", "utilization not checked")
    empty = SimpleNamespace(unavailable="", gpu_util_pct=None)
    assert gpu_util.verdict(empty, 80, "gpu") == Finding(NOT_CHECKED, "utilization not checked: no utilization sampled in "
                                                                     "the gpu window", "utilization not checked")
