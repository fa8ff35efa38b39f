"""The counted gates through a session (pytester, the fake GPU): model FLOPs and MFU, the kernels of the profiled
window, step memory, and the step's host side, each recorded and then held to its record."""

import dataclasses
import json

import pytest

from tests.counts.test_kernels import share_by_hand
from tests.plugin_suite import KERNEL_CHECK, TEST_FILE, TRACES, FakeGPU
from torch_perf_suite.counts import kernels
from torch_perf_suite.syncs import count_syncs, load_trace

pytest_plugins = ["pytester"]


def test_the_report_reads_mfu_from_the_model_flops_of_one_more_gpu_side_step(suite, pytester):
    # 2e7 FLOPs a step of 10 samples: 2 MFLOP a sample; 10,000 samples/s GPU-side and 5,000 as trained (exact clock)
    matmul = "        import torch\n        torch.ones(10, 1000) @ torch.ones(1000, 1000)\n"
    pytester.makepyfile(test_copy=TEST_FILE.replace('    def gpu_step(self):\n', '    def gpu_step(self):\n' + matmul))
    result = suite.run("--perf-report=out/perf")
    result.assert_outcomes(passed=1)
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert row["mfu"] == {"gflops_per_sample": 0.002, "dtype": "float32", "peak_tflops": 66.9,
                          "peak_source": "NVIDIA's H100/H200 SXM datasheets, dense", "pipeline_tflops": 0.01,
                          "pipeline_mfu": 0.0001, "gpu_tflops": 0.02, "gpu_mfu": 0.0003}
    assert ("MFU: pipeline 0.0 TFLOP/s (0.0%), GPU-side 0.0 TFLOP/s (0.0%) of 66.9 float32 (NVIDIA's H100/H200 SXM "
            "datasheets, dense); model 0.00 GFLOP/sample") in (suite.path / "out" / "perf.md").read_text()


def test_a_smoke_run_counts_the_model_flops_of_every_scenario_and_times_nothing(suite, pytester):
    matmul = "        import torch\n        torch.ones(10, 1000) @ torch.ones(1000, 10000)\n"  # 2e7 FLOPs a sample
    pytester.makepyfile(test_copy=TEST_FILE.replace('    def gpu_step(self):\n', '    def gpu_step(self):\n' + matmul))
    result = suite.run("--perf-smoke", "--perf-report=out/perf")
    result.assert_outcomes(passed=1)
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert row["mfu"] == {"gflops_per_sample": 0.02, "dtype": "float32", "peak_tflops": 66.9,
                          "peak_source": "NVIDIA's H100/H200 SXM datasheets, dense"}
    result.stdout.fnmatch_lines(["copy  passed   model 0.02 GFLOP/sample (float32); host side * Python lines, 0.00 blocks "
                                 "a step"])


def test_a_step_without_matmuls_has_no_mfu(suite):
    result = suite.run("--perf-report=out/perf")
    result.assert_outcomes(passed=1)
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert row["mfu"] is None and not any("FLOP" in note for note in row["notes"])


@pytest.mark.parametrize("case, check, message", [
    ("clean", "assert_tensor_cores(result, at_most=0.05)", None),  # strict FP32: cuDNN's FFMA kernels
    ("clean", "assert_tensor_cores(result, at_least=0.9)",
     "*0.0% of convolution and matmul GPU time ran on Tensor Cores, expected at least 90%*"),
    ("grad_scaler", "assert_tensor_cores(result, at_least=0.4, at_most=0.6)", None),  # fp16: some on CUTLASS tensorop
    ("grad_scaler", "assert_tensor_cores(result, at_most=0.05)",
     f"*{share_by_hand('grad_scaler')[1]:.1%} of convolution and matmul*expected at most 5%*"),
    ("clean", "assert_no_layout_conversions(result)", None),
])
def test_tensor_core_and_layout_checks_read_the_profiled_kernels(suite, pytester, case, check, message):
    suite.gpu(FakeGPU(case=case))
    pytester.makepyfile(test_copy=KERNEL_CHECK.replace("{check}", check))
    result = suite.run()
    result.assert_outcomes(passed=int(message is None), failed=int(message is not None))
    if message:
        result.stdout.fnmatch_lines([message, "top 10 of * kernels by GPU time per step*"])


def test_a_layout_conversion_fails_naming_its_kernel(suite, pytester):
    name = "void cudnn::engines_precompiled::nchwToNhwcKernel<__half, __half, float, false, true>(params)"
    stats = kernels.KernelStats(3, [kernels.Kernel("sm90_xmma_fprop_f16f16", 900.0, 1.0, 0.9, True),
                                    kernels.Kernel(name, 100.0, 2.0, 0.1, None)])
    suite.gpu(FakeGPU(kernels=stats))
    pytester.makepyfile(test_copy=KERNEL_CHECK.replace("{check}", "assert_no_layout_conversions(result)"))
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_copy: 2 layout conversion kernel(s) per step, expected 0*",
                                 f"*10.0%    0.100 ms/step    2.0x*{name}"])


def one_more_kernel():
    clean = count_syncs(load_trace(TRACES / "clean.json.gz")).kernels
    extra = kernels.Kernel("void at::native::extra_kernel<float>(float*)", 1.0, 1.0, 0.0, None)
    return dataclasses.replace(clean, kernels=[*clean.kernels, extra])


def test_counts_are_recorded_and_a_new_kernel_fails_naming_its_family(suite):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    counts = suite.entry()["counts"]
    events = load_trace(TRACES / "clean.json.gz")["traceEvents"]  # by hand: every kernel and copy lies in a step
    steps = sum(1 for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("perf_step_"))
    pinned = sum(e["args"]["bytes"] for e in events if e.get("name") == "Memcpy HtoD (Pinned -> Device)")
    assert counts["step_peak_bytes"] == 1_000_000_000 and counts["copies_per_step"] == {"HtoD Pinned": pinned / steps}
    launches = sum(1 for e in events if e.get("cat") == "kernel") / steps
    assert sum(counts["kernels_per_step"].values()) == launches and "compile" not in counts  # nothing compiled
    suite.run().assert_outcomes(passed=1)
    suite.gpu(FakeGPU(kernels=one_more_kernel()))
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_copy: counted at this GPU model's baseline (*nvidia-h200.json):",
                                 "18 kernel launches per step, 17 recorded (+1): *",
                                 "  +1 at::native::extra_kernel (0 -> 1, new)"])


@pytest.mark.parametrize("peak, failed", [(1_009_000_000, False), (1_030_000_000, True)])
def test_the_steps_peak_memory_is_held_to_its_margin(suite, peak, failed):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    suite.gpu(FakeGPU(step_peak_bytes=peak))
    result = suite.run()
    result.assert_outcomes(passed=1 - failed, failed=int(failed))
    if failed:
        result.stdout.fnmatch_lines(["*the steps' peak GPU memory is 1.030 GB above what they started with, 1.000 GB "
                                     "recorded (+3.0%; allowed +1%)*"])


def test_an_entry_recorded_before_counting_says_what_was_not_checked_and_fails_strict(suite):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    suite.edit(lambda entry: entry.pop("counts"))
    result = suite.run("-W", "ignore::UserWarning")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*kernels, copies, step memory and compile graphs not checked: the baseline entry was "
                                 "recorded before they were counted; record them with: pytest 'test_copy.py::test_copy' "
                                 "--perf-update-baselines*"])
    suite.run("--perf-strict").assert_outcomes(failed=1)


def test_a_loader_alone_has_nothing_to_count_and_says_nothing_of_it(suite, pytester):
    pytester.makepyfile(test_copy=TEST_FILE.replace("perf.measure(Work(perf_session.device))",
                                                    "perf.measure(Work(perf_session.device), parts=('loader',))")
                        .replace("    perf.assert_syncs(result, per_step=0)\n", ""))
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    assert suite.entry()["counts"] == {}  # no profiled window, nothing compiled
    suite.edit(lambda entry: entry.pop("counts"))  # as entries recorded before counting keep it
    result = suite.run("--perf-strict")
    result.assert_outcomes(passed=1)
    assert "not checked" not in result.stdout.str()


def test_per_step_python_and_a_sleep_in_the_gpu_side_step_fail_naming_where(suite, pytester):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    assert suite.entry()["counts"]["host"]["lines_per_step"] > 0
    plant = ("    def gpu_step(self):\n        [None for _ in range(60)]\n        time.sleep(0.0001)\n"
             "        self.work(\"gpu\", 0.001)\n")
    pytester.makepyfile(test_copy=TEST_FILE.replace('    def gpu_step(self):\n        self.work("gpu", 0.001)\n', plant))
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*counted at this GPU model's baseline (*nvidia-h200.json):",
                                 "the host runs * Python lines a step to issue it, * at the baseline (+*, +*%; allowed +1% "
                                 "or +20): per-step Python*",
                                 "    +* test_copy.py:*",
                                 "the host blocks 1.00 times a step while issuing it, 0.00 at the baseline (allowed +0.5)*",
                                 "    +1.00 test_copy.py:* in gpu_step (0.00 -> 1.00, new)"])


def test_an_entry_older_than_the_host_count_says_so_once(suite):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    suite.edit(lambda entry: entry["counts"].pop("host"))
    result = suite.run("--perf-report=out/perf")
    result.assert_outcomes(passed=1)
    said = [line for line in result.stdout.lines if "entries were recorded before the step's host side was counted" in line]
    assert len(said) == 1 and said[0].endswith("nvidia-h200.json: 1 of 1 entries were recorded before the step's host "
                                               "side was counted: their tests say \"host side not compared\" (a failure "
                                               "under --perf-strict) until they are recorded again on this GPU model: "
                                               "pytest --perf-update-baselines"), said
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert [n for n in row["notes"] if n.startswith("host side")] == [
        "host side not compared: the baseline recorded none (its entry is older than the count); record them with: "
        "pytest 'test_copy.py::test_copy' --perf-update-baselines"]
    assert row["host"]["blocks_per_step"] == 0 and row["host"]["lines_per_step"] > 0


def test_a_smoke_run_without_a_gpu_holds_the_counts_it_recorded_in_this_environment(suite, pytester):
    """`--perf-smoke --perf-update-baselines` on a CPU records the step's host side, host reads and ops by dtype in
    baselines/smoke-counts/<environment>.json; `--perf-smoke` then fails on per-step Python and a step moved to float64,
    naming them; without a record, --perf-strict fails saying how to make one."""
    from tests.plugin_suite import ENV
    from torch_perf_suite.machine import device

    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    step = "    def step(self):\n        import torch\n        torch.ones(4).sum()\n"
    pytester.makepyfile(test_copy=TEST_FILE.replace("    def step(self):\n", step))
    strict = suite.run("--perf-smoke", "--perf-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["  host side and host reads not compared: the baseline recorded no smoke counts for this "
                                 "test (*smoke-counts*.json; record them with: pytest * --perf-smoke --perf-update-baselines)"])
    suite.run("--perf-smoke", "--perf-update-baselines").stdout.fnmatch_lines(
        ["recorded 1 baseline(s) into */baselines/smoke-counts/py*.json"])
    suite.run("--perf-smoke", "--perf-strict").assert_outcomes(passed=1)
    doubled = step.replace("torch.ones(4)", "torch.ones(4, dtype=torch.float64)")
    looped = "    def gpu_step(self):\n        for _ in range(100):\n            pass\n"
    planted = TEST_FILE.replace("    def step(self):\n", doubled).replace("    def gpu_step(self):\n", looped)
    pytester.makepyfile(test_copy=planted)
    result = suite.run("--perf-smoke")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the host runs * Python lines a step to issue it, * at the baseline*",
                                 "*test_copy.py:gpu_step*"])
    result.stdout.fnmatch_lines(["*the step computes in another dtype: ops a step by the dtype they make grew: float64 "
                                 "2.00 a step, 0.00 at the baseline*"])
