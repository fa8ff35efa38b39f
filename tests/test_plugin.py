"""The pytest plugin end to end, in pytester sessions, on a CPU.

A fake GPU stands in for CUDA: it times real (sleeping) steps and reports the syncs of a real
trace recorded on an H200, so every message the suite prints is exercised here.
"""

import json
import shutil
from pathlib import Path

import pytest

from perf_tests.harness import device
from perf_tests.harness.syncs import count_syncs, load_trace

pytest_plugins = ["pytester"]
TRACES = Path(__file__).parent / "traces"
ENV = json.loads((TRACES / "environment.json").read_text())  # recorded with the traces: NVIDIA H200

CONFTEST = 'pytest_plugins = ["perf_tests.harness.plugin"]\n'
TEST_FILE = """
import time
import pytest

class Sleepy:
    batch_size = 10
    def step(self):
        time.sleep(0.002)

@pytest.mark.perf(warmup=1, rounds=3, steps=5)
def test_copy(perf):
    result = perf.measure(Sleepy())
    perf.assert_syncs(result, per_step=0)
    perf.assert_baseline(result)
"""


class FakeGPU(device.Device):
    """A GPU by its name and environment; syncs come from the recorded trace `case`."""

    is_gpu = True

    def __init__(self, case="clean", gpu="NVIDIA H200"):
        super().__init__("cpu", {**ENV, "gpu": gpu})
        self.case = case

    def synchronize(self):
        pass

    def reset_peak_memory(self):
        pass

    def peak_memory_gb(self):
        return 1.5

    def count_syncs(self, step, steps, trace_path):
        for _ in range(steps):
            step()
        shutil.copy(TRACES / f"{self.case}.json.gz", trace_path)
        return count_syncs(load_trace(TRACES / f"{self.case}.json.gz"))


@pytest.fixture
def suite(pytester, monkeypatch):
    """A pytester dir with the plugin and one measured test; `suite.gpu(...)` picks the fake GPU."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_copy=TEST_FILE)

    class Suite:
        path = pytester.path
        baseline = pytester.path / "baselines" / "nvidia-h200.json"

        @staticmethod
        def gpu(dev):
            monkeypatch.setattr(device, "detect_device", lambda: dev)

        @staticmethod
        def run(*args):
            return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)

    Suite.gpu(FakeGPU())
    return Suite


def test_without_a_gpu_the_scenarios_skip_naming_perf_smoke(suite):
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    result = suite.run("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no CUDA GPU*Run with --perf-smoke*"])


def test_strict_mode_fails_without_a_gpu(suite):
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    result = suite.run("--perf-strict")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*--perf-strict: no CUDA GPU*"])


def test_smoke_runs_the_step_without_assertions(suite):
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    result = suite.run("--perf-smoke")
    result.assert_outcomes(passed=1)
    assert not suite.baseline.exists()


@pytest.mark.parametrize("option, message", [
    ("--perf-rounds=0", "argument --perf-rounds: expected a whole number of at least 1, got 0"),
    ("--perf-tolerance=abc", "argument --perf-tolerance: expected a percentage such as 5 or 7.5, got 'abc'"),
    ("--perf-workers=-2", "argument --perf-workers: expected a whole number of at least 1, got -2"),
])
def test_malformed_options_are_usage_errors(suite, option, message):
    result = suite.run(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_bad_ini_value_is_a_usage_error(suite, pytester):
    pytester.makeini("[pytest]\nperf_steps = many\n")
    result = suite.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option perf_steps = 'many'*whole number*"])


def test_missing_baseline_says_how_to_record_one(suite):
    result = suite.run()
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*no baseline for GPU 'NVIDIA H200'*pytest 'test_copy.py::test_copy' --perf-update-baselines*"])


def test_missing_baseline_fails_in_strict_mode(suite):
    result = suite.run("--perf-strict")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no baseline for GPU 'NVIDIA H200'*"])


def test_update_records_this_test_and_keeps_every_other_entry(suite):
    other = {"samples_per_s": 123.0, "spread_pct": 1.0, "syncs_per_step": 2.0, "peak_mem_gb": 0.5, "env": ENV}
    suite.baseline.parent.mkdir()
    suite.baseline.write_text(json.dumps({"schema": 1, "gpu": "NVIDIA H200", "tests": {"elsewhere::test_x": other}}))
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    tests = json.loads(suite.baseline.read_text())["tests"]
    assert tests["elsewhere::test_x"] == other
    mine = tests["test_copy.py::test_copy"]
    assert 1000 < mine["samples_per_s"] < 5000  # 10 samples per 2 ms step, less the sleep's overshoot
    assert mine["env"]["gpu"] == "NVIDIA H200" and mine["syncs_per_step"] == 0
    # and now the check runs against it
    suite.run().assert_outcomes(passed=1)


def test_failed_test_is_not_recorded(suite):
    suite.gpu(FakeGPU(case="item"))
    suite.run("--perf-update-baselines").assert_outcomes(failed=1)
    assert not suite.baseline.exists()


def test_corrupt_baseline_is_a_clear_error_naming_the_file(suite):
    suite.baseline.parent.mkdir()
    suite.baseline.write_text('{"schema": 1, "gpu": "NVIDIA H200", "tests": {')
    result = suite.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{suite.baseline}: not valid JSON*--perf-update-baselines*"])
    assert suite.baseline.read_text().endswith('"tests": {')  # left as the user had it


def test_raised_baseline_fails_showing_both_numbers(suite):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    data = json.loads(suite.baseline.read_text())
    entry = data["tests"]["test_copy.py::test_copy"]
    entry["samples_per_s"] = round(entry["samples_per_s"] * 1.3, 1)
    suite.baseline.write_text(json.dumps(data))
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        f"*throughput regression: *samples/s against a baseline of {entry['samples_per_s']:,.1f}*",
        "*baseline: *nvidia-h200.json, recorded 2026-11-22 with torch 2.11.0+cu130*",
    ])


def test_new_sync_fails_naming_the_line(suite, tmp_path):
    suite.gpu(FakeGPU(case="item"))
    result = suite.run(f"--perf-trace-dir={tmp_path}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*measured 1.00 host-device syncs per step (3 in 3 profiled steps), expected 0 (a new sync appeared)*",
        "*cudaStreamSynchronize in aten::item > aten::_local_scalar_dense",
        "*user code: tests/traces/record_traces.py:*in step",
    ])
    assert [p.name for p in tmp_path.iterdir()] == ["test_copy.py_test_copy.json.gz"]


def test_vanished_pitfall_fails_with_a_retire_message(suite, pytester):
    pytester.makepyfile(test_copy=TEST_FILE.replace("per_step=0", "at_least=1, from_library='torchmetrics/'"))
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*expected at least 1: the pitfall this scenario documents no longer syncs*retire*"])


def test_pitfall_from_another_library_fails(suite, pytester):
    suite.gpu(FakeGPU(case="grad_scaler"))
    pytester.makepyfile(test_copy=TEST_FILE.replace("per_step=0", "at_least=1, from_library='torchmetrics/'"))
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*expected every sync to come from 'torchmetrics/', these do not:*",
        "*torch/amp/grad_scaler.py*",
    ])


def test_report_is_written_as_markdown_and_json(suite):
    suite.run("--perf-report=out/perf.md").assert_outcomes(passed=1)
    md = (suite.path / "out" / "perf.md").read_text()
    data = json.loads((suite.path / "out" / "perf.json").read_text())
    assert "| test_copy.py::test_copy |" in md and "GPU: NVIDIA H200" in md
    [row] = data["tests"]
    assert row["test"] == "test_copy.py::test_copy" and row["syncs_per_step"] == 0 and len(row["rounds"]) == 3


def test_comparing_with_a_run_from_another_gpu_warns_and_fails_in_strict_mode(suite):
    suite.run("--perf-update-baselines", "--benchmark-save=h200").assert_outcomes(passed=1)
    saved = next(suite.path.glob(".benchmarks/**/*h200.json"))
    assert json.loads(saved.read_text())["machine_info"]["gpu"]["gpu"] == "NVIDIA H200"
    suite.gpu(FakeGPU(gpu="NVIDIA H100 80GB HBM3"))
    warned = suite.run("--benchmark-compare")
    warned.stdout.fnmatch_lines(["*COMPARING ACROSS GPU MODELS*"])
    strict = suite.run("--benchmark-compare", "--perf-strict")
    assert strict.ret == pytest.ExitCode.USAGE_ERROR
