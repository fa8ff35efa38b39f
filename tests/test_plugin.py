"""The pytest plugin end to end, in pytester sessions, on a CPU.

A fake GPU stands in for CUDA: it times real (sleeping) steps and reports the syncs of a real
trace recorded on an H200, so every message the suite prints is exercised here.
"""

import contextlib
import dataclasses
import fnmatch
import itertools
import json
import re
import shutil
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_kernels import share_by_hand  # tests/ is on sys.path (rootdir-relative, no __init__.py)

from torch_perf_suite.against import ref as against
from torch_perf_suite.counts import kernels
from torch_perf_suite.loader import digest as loader_code
from torch_perf_suite.loader import instructions
from torch_perf_suite.machine import device, nvml
from torch_perf_suite.records import baselines
from torch_perf_suite.report import plain
from torch_perf_suite.syncs import count_syncs, load_trace

pytest_plugins = ["pytester"]
TRACES = Path(__file__).parent / "traces"
ENV = json.loads((TRACES / "environment.json").read_text())  # recorded with the traces: NVIDIA H200

CONFTEST = 'pytest_plugins = ["torch_perf_suite.plugin"]\n'
TEST_FILE = """
import time
import pytest
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __len__(self):
        return 100

    def __getitem__(self, i):
        return i

class Work:
    # 2 ms a pipeline step, 1 ms on the GPU, 0.5 ms for the loader, batch 10: on the fake GPU's clock
    # (exact numbers), or slept on a real device; `loader` is described, never iterated
    batch_size = 10
    loader = DataLoader(Items(), batch_size=10)

    def __init__(self, device):
        self.work = getattr(device, "work", lambda part, seconds: time.sleep(seconds))
        self.loader_cpu_s = getattr(device, "loader_cpu_s", lambda: None)  # its workers' CPU seconds

    def step(self):
        self.work("pipeline", 0.002)

    def gpu_step(self):
        self.work("gpu", 0.001)

    def loader_step(self):
        self.work("loader", 0.0005)

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
def test_copy(perf, perf_session):
    result = perf.measure(Work(perf_session.device))
    perf.assert_syncs(result, per_step=0)
    perf.assert_baseline(result)
"""
HOST = {"cpu": "Intel(R) Xeon(R) Platinum 8480+", "cores": 16, "machine": "4c4c4544"}


UTIL = nvml.Utilization(5, gpu_util_pct=97.0, mem_used_gb=45.0, mem_total_gb=141.0, power_w=640.0, power_limit_w=700.0,
                        sm_mhz=1980.0)


class FakeGPU(device.Device):
    """A GPU by its name and environment. Time is a clock that the workload's steps advance (so every
    number is exact); `slow` makes a part slower by a factor for its first `slow_steps` steps (all, if
    None). Syncs come from the recorded trace `case`; the kernels keep the GPU 95% busy."""

    is_gpu = True

    def __init__(self, case="clean", gpu="NVIDIA H200", host=None, slow=None, slow_steps=None, chip="GPU-1", watts=None,
                 util=UTIL, kernels=None, step_peak_bytes=1_000_000_000):
        super().__init__("cpu", {**ENV, "gpu": gpu, "gpu_uuid": chip, "host": host or HOST, "power_limit_w": 700.0})
        self.watts, self.util, self.kernels, self.step_peak_bytes = watts, util, kernels, step_peak_bytes
        self.case, self.now, self.slow, self.slow_steps = case, 0.0, slow or {}, slow_steps
        self.steps = {"pipeline": 0, "gpu": 0, "loader": 0}
        self.cpu_s = 0.0  # the loader's workers'
        self.order = []  # parts in the order they were first stepped

    def work(self, part, seconds):
        self.steps[part] += 1
        if part not in self.order:
            self.order.append(part)
        slowed = self.slow_steps is None or self.steps[part] <= self.slow_steps
        self.now += seconds * (self.slow.get(part, 1.0) if slowed else 1.0)
        if part == "loader":  # two workers busy all the while: 10,000 samples per CPU second
            self.cpu_s += 2 * seconds * (self.slow.get("loader_cpu", 1.0) if slowed else 1.0)

    def loader_cpu_s(self):
        return self.cpu_s

    @property
    def monitor(self):
        """What NVML says over every GPU window (`util`)."""
        return lambda: contextlib.nullcontext(SimpleNamespace(summary=lambda: self.util))

    def clock(self):
        return self.now

    def energy_j(self):
        return None if self.watts is None else self.watts * self.now

    def synchronize(self):
        pass

    def reset_peak_memory(self):
        pass

    def peak_memory_gb(self):
        return 1.5

    def count_syncs(self, step, steps, trace_path, all_threads=False):
        self.all_threads = all_threads
        for _ in range(steps):
            step()
        shutil.copy(TRACES / f"{self.case}.json.gz", trace_path)
        counted = count_syncs(load_trace(TRACES / f"{self.case}.json.gz"))
        counted.gpu_busy_s = 0.95 * 0.001
        counted.kernels = self.kernels or counted.kernels  # the trace's own, unless given
        counted.step_peak_bytes = self.step_peak_bytes
        return counted


@pytest.fixture
def suite(pytester, monkeypatch):
    """A pytester dir with the plugin and one measured test; `suite.gpu(...)` picks the fake GPU."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_copy=TEST_FILE)
    # under `pytest tests -n N` this process is an xdist worker; the session it starts is not one, but would
    # read this variable and have pytest-benchmark disable itself
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)

    class Suite:
        path = pytester.path
        baseline = pytester.path / "baselines" / "nvidia-h200.json"

        @staticmethod
        def gpu(dev):
            monkeypatch.setattr(device, "detect_device", lambda: dev)

        @staticmethod
        def run(*args, traceback=False):
            """`traceback`: whether a frame of the harness may show (a check called wrongly raises); a check
            that fails says its message only."""
            # the plugin, imported by this session, cannot be assertion-rewritten by the one it starts, which says so
            # where this one was started as `pytest` rather than `python -m pytest` (pytest 9.2, an editable install)
            result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args,
                                        "-W", "ignore::pytest.PytestAssertRewriteWarning")
            frames = [line for line in result.stdout.lines if re.match(r"\S*torch_perf_suite/\w+\.py:\d+: \w+$", line)]
            assert traceback or not frames, frames
            return result

        @staticmethod
        def entry(test="test_copy.py::test_copy"):
            return json.loads(Suite.baseline.read_text())["tests"][test]

        @staticmethod
        def edit(change):
            data = json.loads(Suite.baseline.read_text())
            change(data["tests"]["test_copy.py::test_copy"])
            Suite.baseline.write_text(json.dumps(data))

    Suite.gpu(FakeGPU())
    return Suite


def details(text: str, summary: str, test: str | None = None) -> list[str]:
    """The lines of one test's <details> block in a report (PATH.md), or of its plain-text block in the terminal (its
    summary line, its lines indented under it, returned without the indent): the block whose summary is `summary`, the
    test's short id and verdict ("copy: passed"), and, where given, whose full id is `test`."""
    if "<details><summary>" in text:
        blocks = [block.split("</details>")[0].splitlines() for block in text.split("<details><summary>")[1:]]
        head = f"{summary}</summary>"
    else:
        lines = text.splitlines()
        blocks = [[line, *(under[2:] for under in itertools.takewhile(lambda u: u.startswith("  "), lines[i + 1:]))]
                  for i, line in enumerate(lines) if line == summary]
        head = summary
    found = [lines for lines in blocks if lines[0] == head and (test is None or {f"`{test}`", test} & set(lines))]
    assert len(found) == 1, f"{len(found)} details blocks of {summary!r}" + (f" ({test})" if test else "")
    return found[0]


def test_without_a_gpu_the_scenarios_skip_naming_perf_smoke(suite):
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    result = suite.run("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no CUDA GPU*Run with --perf-smoke*"])


@pytest.mark.parametrize("args", [(), ("--benchmark-compare", "--benchmark-autosave")])  # the README's main job
def test_without_a_gpu_the_run_ends_with_one_line_of_reason_and_no_warning(suite, pytester, args):
    import warnings

    pytester.makepyfile(test_two=TEST_FILE)
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    with warnings.catch_warnings(record=True) as seen:  # an in-process run's warnings outside its tests land here
        warnings.simplefilter("always")
        filters = list(warnings.filters)
        result = suite.run(*args)
        assert warnings.filters == filters  # quieted for that session only
    result.assert_outcomes(skipped=2)
    out = result.stdout.str() + result.stderr.str()
    assert "warning" not in result.stdout.lines[-1] and "Benchmark fixture was not used" not in out
    # "Can't compare. No benchmark files", "Not saving anything"
    assert not [str(w.message) for w in seen if type(w.message).__name__ == "PytestBenchmarkWarning"]
    assert result.stdout.lines[-2] == ("2 perf test(s) skipped: no CUDA GPU on this machine. Run with --perf-smoke to build "
                                       "and train each on this device (nothing is timed there), or on a CUDA GPU to "
                                       "measure them.")


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
    ("--perf-worker-start=thread", "argument --perf-worker-start: invalid choice: 'thread' (choose from "),
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


def test_update_records_every_part_and_keeps_every_other_entry(suite):
    other = {"samples_per_s": 123.0, "spread_pct": 1.0, "syncs_per_step": 2.0, "peak_mem_gb": 0.5, "env": ENV}
    suite.baseline.parent.mkdir()
    suite.baseline.write_text(json.dumps({"schema": 1, "gpu": "NVIDIA H200", "tests": {"elsewhere::test_x": other}}))
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    data = json.loads(suite.baseline.read_text())
    assert data["schema"] == 2
    kept = data["tests"]["elsewhere::test_x"]  # an old entry, kept with every number it had
    assert kept["parts"]["pipeline"]["samples_per_s"] == 123.0 and kept["syncs_per_step"] == 2.0
    mine = suite.entry()
    # 10 samples per 2 ms step, per 1 ms on the GPU, per 0.5 ms for the loader; 3 rounds each
    assert {p: v["samples_per_s"] for p, v in mine["parts"].items()} == {"pipeline": 5000.0, "gpu": 10000.0, "loader": 20000.0,
                                                                     "loader_cpu": 10000.0}
    assert all(v["rounds"] == [v["samples_per_s"]] * 3 and v["spread_pct"] == 0.0 for v in mine["parts"].values())
    assert (mine["bottleneck"], mine["efficiency"], mine["gpu_busy_pct"]) == ("GPU", 0.5, 95.0)
    assert mine["env"]["host"] == HOST and mine["syncs_per_step"] == 0
    # and now the check runs against it
    suite.run().assert_outcomes(passed=1)


def test_the_gpu_side_window_comes_first_and_the_pipeline_last(suite):
    dev = FakeGPU()
    suite.gpu(dev)
    suite.run().assert_outcomes(passed=1)
    assert dev.order == ["gpu", "loader", "pipeline"]


@pytest.mark.parametrize("all_threads", [True, False])
def test_a_loop_on_a_thread_of_its_own_is_profiled_on_every_thread(suite, pytester, all_threads):
    work = TEST_FILE.replace("    batch_size = 10\n", f"    batch_size = 10\n    all_threads = {all_threads}\n")
    pytester.makepyfile(test_copy=work)
    dev = FakeGPU()
    suite.gpu(dev)
    suite.run().assert_outcomes(passed=1)
    assert dev.all_threads is all_threads


@pytest.mark.parametrize("watts, note", [(690.0, True), (600.0, False)])
def test_a_gpu_side_window_at_the_power_limit_says_so(suite, watts, note):
    suite.gpu(FakeGPU(watts=watts))
    result = suite.run("--perf-update-baselines")
    result.assert_outcomes(passed=1)
    assert suite.entry()["parts"]["gpu"]["watts"] == watts
    assert ("GPU-side at the power limit: 690 of 700 W" in result.stdout.str()) is note


def test_a_loader_is_measured_once_per_recipe_and_settings(suite, pytester):
    pytester.makepyfile(test_copy=TEST_FILE + """
Work.loader_key = ("recipe", 1)

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
def test_again(perf, perf_session):
    perf.measure(Work(perf_session.device))

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0.001)
def test_longer_rounds(perf, perf_session):
    perf.measure(Work(perf_session.device))
""")
    dev = FakeGPU()
    suite.gpu(dev)
    result = suite.run("-p", "no:randomly")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    # test_again's (a note of its own, not one said once for several tests); test_longer_rounds measured its own
    assert "- loader measured in test_copy" in details(out, "again: passed") and out.count("loader measured in test_copy") == 1
    assert dev.steps["loader"] == 3 * 5 + (1 + 3 * 5)  # test_copy's rounds; test_longer_rounds', after a probe


def test_a_gpu_side_step_is_measured_once_per_key_and_checked_by_the_test_that_measured_it(suite, pytester):
    pytester.makepyfile(test_copy=TEST_FILE + """
Work.gpu_key = ("model", 1)

class OtherLoader(Work):
    def loader_step(self):
        self.work("loader", 0.001)

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
def test_other_loader(perf, perf_session):
    result = perf.measure(OtherLoader(perf_session.device))
    perf.assert_baseline(result)
""")
    suite.run("-p", "no:randomly", "--perf-update-baselines").assert_outcomes(passed=2)
    dev = FakeGPU(slow={"gpu": 2.0})  # half the GPU-side speed: a regression for test_copy to report, not test_other_loader
    suite.gpu(dev)
    result = suite.run("-p", "no:randomly", "--perf-report=out/perf")
    result.assert_outcomes(passed=1, failed=1)
    # test_copy's window, its confirmation and one more step whose FLOPs are counted; and in each test a first step and
    # two passes of 3 whose host side is counted
    assert dev.steps["gpu"] == 2 * (3 + 3 * 5) + 1 + 2 * (1 + 2 * 3)
    copy, other = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert copy["baseline"]["gpu"]["failed"] and "gpu" not in other["baseline"]
    # the failed test's whole message, for a run that reads the report (--perf-bisect); none for the one that passed
    assert copy["failure"].startswith("test_copy.py::test_copy: ") and "gpu" in copy["failure"] and "failure" not in other
    assert other["gpu_measured_in"] == "test_copy.py::test_copy" and other["loader_measured_in"] is None
    assert "gpu measured in test_copy" in other["notes"] and other["parts"]["gpu"] == copy["parts"]["gpu"]


def test_smoke_mode_shrinks_every_window_and_checks_nothing_but_syncs(suite):
    """--perf-smoke: one round of two steps per part after one warm-up step, whatever the marker asks (5 steps, 3 rounds);
    on a GPU its profiled steps' syncs are checked as a measured run's (the merge gate's sync pass)."""
    suite.gpu(FakeGPU(case="item"))  # a sync per step
    suite.run("--perf-smoke").stdout.fnmatch_lines(["*measured 1.00 host-device syncs per step*expected 0*"])
    suite.gpu(gpu := FakeGPU(case="clean"))
    result = suite.run("--perf-smoke", "--perf-report=out/perf")
    result.assert_outcomes(passed=1)
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert {p: len(v["rounds"]) for p, v in row["parts"].items()} == {"pipeline": 1, "gpu": 1, "loader": 1, "loader_cpu": 1}
    # each window 1 warm-up + 2 steps; the pipeline's profiled steps (3); a first GPU-side step and one whose host side is
    # counted in each of two passes, one whose FLOPs are
    assert gpu.steps == {"pipeline": 1 + 2 + 3, "gpu": 1 + 2 + 1 + 2 * 1 + 1, "loader": 1 + 2}
    assert (suite.path / "out" / "perf.md").read_text().startswith("SMOKE RUN (--perf-smoke)")
    result.stdout.fnmatch_lines(["SMOKE RUN (--perf-smoke): 1 scenario(s) built and trained for 2 steps on "
                                 "NVIDIA H200; nothing was timed. torch *", "", "test  verdict  counted*",
                                 "----  -------  ----*", "copy  passed   host side * Python lines, 0.00 blocks a step"])
    assert "test_copy.py::test_copy" in details(result.stdout.str(), "copy: passed")


def test_a_smoke_run_on_a_cpu_shows_no_throughput_and_compares_nothing(suite):
    """Its timings mean nothing: no samples/s, bottleneck or efficiency, no pytest-benchmark table, nothing saved, and no
    warning against a run saved on a GPU."""
    suite.run("--benchmark-save=h200").assert_outcomes(passed=1, warnings=1)  # a GPU run, saved
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    result = suite.run("--perf-smoke", "--benchmark-compare", "--benchmark-autosave")
    result.assert_outcomes(passed=1)
    out = result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["SMOKE RUN (--perf-smoke): 1 scenario(s) built and trained * on cpu; nothing was timed.*",
                                 "", "Without a GPU: syncs were checked by the host reads each step makes *; "
                                 "throughput, kernels, bytes copied and peak memory need a GPU and were not checked."])
    result.stdout.fnmatch_lines(["*PerfWarning: --benchmark-compare does nothing in a smoke run*"])
    for measured in ("samples/s", "bottleneck", "efficiency", "benchmark: 1 tests", "Min ", "COMPARING ACROSS",
                     "machine_info is different"):
        assert measured not in out, measured
    assert len(list(suite.path.glob(".benchmarks/**/*.json"))) == 1  # the GPU run's only


def test_failed_test_is_not_recorded(suite):
    suite.gpu(FakeGPU(case="item"))
    suite.run("--perf-update-baselines").assert_outcomes(failed=1)
    assert not suite.baseline.exists()


def test_corrupt_baseline_is_a_clear_error_naming_the_file(suite):
    suite.baseline.parent.mkdir()
    suite.baseline.write_text('{"schema": 2, "gpu": "NVIDIA H200", "tests": {')
    result = suite.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{suite.baseline}: not valid JSON*--perf-update-baselines*"])
    assert suite.baseline.read_text().endswith('"tests": {')  # left as the user had it


def test_a_corrupt_baseline_can_be_re_recorded_and_is_kept_aside(suite):
    suite.baseline.parent.mkdir()
    suite.baseline.write_text('{"schema": 2, "gpu": "NVIDIA H200", "tests": {')
    result = suite.run("--perf-update-baselines")
    result.assert_outcomes(passed=1)
    [aside] = suite.baseline.parent.glob("nvidia-h200.json.corrupt-*")
    assert aside.read_text().endswith('"tests": {')
    result.stdout.fnmatch_lines([f"*It was moved to {aside}*", f"*recorded 1 baseline(s) into {suite.baseline}*"])
    assert suite.entry()["parts"]["gpu"]["samples_per_s"] == 10000.0


def test_raised_baseline_fails_showing_both_numbers(suite):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    suite.edit(lambda e: e["parts"]["gpu"].update(samples_per_s=13000.0, rounds=[13000.0] * 3))
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*throughput regression in gpu:",
        "*gpu: 10,000.0 samples/s against a baseline of 13,000.0 (-23.1%; allowed -3%, median intervals); "
        "measured again: -23.1%",
        "*this run's rounds: 10,000, 10,000, 10,000; baseline's: 13,000, 13,000, 13,000",
        "*baseline: *nvidia-h200.json, recorded 2026-11-22 with torch 2.11.0+cu130 on "
        "Intel(R) Xeon(R) Platinum 8480+ x 16 cores, machine 4c4c4544",
        "*parts (samples/s): pipeline 5,000, GPU-side 10,000, loader 20,000; bottleneck: GPU; "
        "loader 10,000 samples per worker CPU second",
    ])


@pytest.mark.parametrize("slow, failed", [(1.05, True), (1.02, False)])
def test_a_gpu_side_slowdown_beyond_the_tolerance_fails(suite, slow, failed):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    suite.gpu(FakeGPU(slow={"gpu": slow}))
    result = suite.run()
    result.assert_outcomes(failed=int(failed), passed=int(not failed))


@pytest.mark.parametrize("slow, args, failed", [(1.15, (), False), (1.1, ("--perf-chip-tolerance=8",), True)])
def test_a_gpu_side_number_from_another_chip_is_checked_at_the_chip_tolerance(suite, slow, args, failed):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    suite.gpu(FakeGPU(slow={"gpu": slow}, chip="GPU-2"))
    result = suite.run(*args)
    result.assert_outcomes(failed=int(failed), passed=int(not failed))
    if failed:
        result.stdout.fnmatch_lines(["*gpu: 9,090.9 samples/s against a baseline of 10,000.0 (-9.1%; allowed -8%, "
                                     "recorded on chip GPU-1, not this one, median intervals)*"])
    else:
        result.stdout.fnmatch_lines(["*gpu against a baseline recorded on chip GPU-1, not this one: allowed -20%*"])


def test_a_slowdown_the_second_measurement_does_not_show_passes_with_a_note(suite):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    suite.gpu(FakeGPU(slow={"gpu": 1.2}, slow_steps=3 + 3 * 5))  # the first measurement only: warm-up + rounds
    result = suite.run()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*gpu measured again to confirm: 10,000 samples/s*"])
    result.stdout.fnmatch_lines(["*gpu -16.7%, not confirmed by a second measurement (+0.0%)*"])


def test_a_shortfall_that_is_not_significant_passes_saying_so(suite):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    # the warm-up and the first two of three GPU-side rounds (5 steps each) 5% slower, no round added: the median is
    # 4.8% short, but the third round, at the baseline's speed, keeps it within the interval
    suite.gpu(FakeGPU(slow={"gpu": 1.05}, slow_steps=3 + 2 * 5))
    result = suite.run("--perf-rounds=3", "--perf-max-rounds=3")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["copy  passed   5,000 +0.0%  9,524 -4.8%  20,000 +0.0%  *"])
    assert "- gpu -4.8% (below the allowed -3%, not significant: median intervals)" in details(result.stdout.str(),
                                                                                              "copy: passed")


def test_loader_numbers_from_another_machine_are_not_compared(suite):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    suite.gpu(FakeGPU(host={**HOST, "machine": "9b1d0c2e"}, slow={"loader": 2.0, "pipeline": 2.0}))
    result = suite.run()
    result.assert_outcomes(passed=1)  # half the loader's speed, but on another host: no verdict
    assert ("- loader, pipeline: not comparable: recorded on machine 4c4c4544, this is machine 9b1d0c2e "
            "(the same CPU class)") in details(result.stdout.str(), "copy: passed")
    strict = suite.run("--perf-strict")  # the nightly on a new runner: a host change is said, not a failure
    strict.assert_outcomes(passed=1)
    assert "not comparable: recorded on machine 4c4c4544" in strict.stdout.str()


def test_a_loader_slowdown_on_the_recording_machine_fails(suite):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    suite.gpu(FakeGPU(slow={"loader": 1.15}))
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*throughput regression in loader:*", "*loader: 17,391.3 samples/s*(-13.0%; allowed -10%*"])


def test_the_loaders_cpu_cost_is_reported_and_recorded_not_gated(suite):
    """The loader's workers spend 15% more CPU per batch; on the H200 machines measured, CPU time per sample
    moved with the host as much as wall time did, so the number is shown, not held to the baseline."""
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    assert suite.entry()["parts"]["loader_cpu"]["samples_per_s"] == 10000.0
    suite.gpu(FakeGPU(slow={"loader_cpu": 1.15}))
    result = suite.run()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["copy  passed   5,000 +0.0%  10,000 +0.0%  20,000 +0.0%        0.00"])
    assert "- bottleneck GPU; efficiency 0.50; spread 0.0/0.0/0.0/0.0%; loader/CPU s 8,696" in details(
        result.stdout.str(), "copy: passed")


def test_an_old_baseline_file_loads_and_says_what_was_not_checked(suite):
    old = {"samples_per_s": 5000.0, "spread_pct": 1.0, "syncs_per_step": 0.0, "peak_mem_gb": 0.5,
           "env": {k: v for k, v in ENV.items() if k != "host"}}
    suite.baseline.parent.mkdir()
    suite.baseline.write_text(json.dumps({"schema": 1, "gpu": "NVIDIA H200", "tests": {"test_copy.py::test_copy": old}}))
    result = suite.run()
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "gpu, loader: no baseline number for this part" in out
    assert "pipeline: not comparable: the baseline was recorded without host information" in out
    assert "is an old baseline file (schema 1)" in out
    assert "Re-record it on this GPU: run your perf tests again with --perf-update-baselines" in out
    result.stdout.fnmatch_lines([f"{suite.baseline} is an old baseline file (schema 1): it holds one "
                                 "pipeline number per test and no host, so GPU-side and loader numbers are not checked and "
                                 "pipeline numbers are not comparable. Re-record it on this GPU: run your perf tests again "
                                 "with --perf-update-baselines"])
    colored = suite.run("--color=yes")  # said in red, bold
    colored.stdout.fnmatch_lines([f"\x1b[31m\x1b[1m{suite.baseline} is an old baseline file (schema 1)*"])
    recording = suite.run("--perf-update-baselines")  # re-recording: nothing to warn about
    assert "is an old baseline file" not in recording.stdout.str()
    assert f"recorded 1 baseline(s) into {suite.baseline}" in recording.stdout.str()


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


def test_a_failures_short_summary_line_names_its_cause(suite, monkeypatch):
    """pytest's short summary (-r) shows a failure's first line: the cause and its line, not the test's id again; the
    whole text follows it, and the report keeps that only."""
    monkeypatch.setenv("COLUMNS", "200")  # the line as a wide terminal shows it (a narrow one cuts it)
    suite.gpu(FakeGPU(case="item"))
    result = suite.run("-rf", "--perf-report=out/perf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED test_copy.py::test_copy - Failed: 1.00 host-device syncs per step, expected 0, "
                                 "from tests/traces/record_traces.py:*"])
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert row["failure"].startswith("test_copy.py::test_copy: measured 1.00 host-device syncs per step (3 in 3 profiled")


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


def test_report_is_written_as_markdown_and_json(suite):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    result = suite.run("--perf-report=out/perf.md")
    result.assert_outcomes(passed=1)
    md = (suite.path / "out" / "perf.md").read_text()
    # the terminal shows the same report in plain text (plain.py): no Markdown, no HTML
    out = result.stdout.lines
    shown = out[out.index(next(line for line in out if " perf report " in line)) + 1:]
    shown = [line for line in shown[:shown.index(next(line for line in shown if line.startswith("perf report written")))]
             if not line.startswith("session: ")]
    assert "\n".join(shown).strip() == "\n".join(line for line in plain.text(md).splitlines()
                                                  if not line.startswith("session: ")).strip()
    assert "copy  passed   5,000 +0.0%  10,000 +0.0%  20,000 +0.0%        0.00" in shown
    assert not [line for line in shown if line.startswith(("|", "#", "<")) or "`" in line]
    data = json.loads((suite.path / "out" / "perf.json").read_text())
    assert "| test | verdict | pipeline    | GPU-side     | loader       | syncs/step |\n" in md
    assert "| copy | passed  | 5,000 +0.0% | 10,000 +0.0% | 20,000 +0.0% |       0.00 |\n" in md
    assert details(md, "copy: passed")[2:5] == [
        "`test_copy.py::test_copy`", "", "- bottleneck GPU; efficiency 0.50; spread 0.0/0.0/0.0/0.0%; loader/CPU s 10,000"]
    assert "GPU: NVIDIA H200" in md and "host Intel(R) Xeon(R) Platinum 8480+ x 16 cores" in md
    [row] = data["tests"]
    assert row["test"] == "test_copy.py::test_copy" and row["syncs_per_step"] == 0
    assert {p: v["rounds"] for p, v in row["parts"].items()} == {
        "pipeline": [5000.0] * 3, "gpu": [10000.0] * 3, "loader": [20000.0] * 3, "loader_cpu": [10000.0] * 3}
    assert (row["bottleneck"], row["efficiency"], row["gpu_busy_pct"]) == ("GPU", 0.5, 95.0)
    assert row["baseline"]["gpu"] == {
        "compared": True, "baseline_samples_per_s": 10000.0, "change_pct": 0.0, "allowed_pct": -3.0,
        "method": "", "failed": False, "confirmed_change_pct": None, "why_not": None}
    assert data["env"]["host"] == HOST


def test_a_run_that_counts_a_loader_again_says_so_as_it_starts_and_times_it(suite, pytester, monkeypatch):
    """A file a recorded count ran changed: the header names the test and the file; the session line the seconds the
    count took."""
    monkeypatch.setattr(instructions.Counter, "prestart", lambda self: None)  # no valgrind: the line is what is tested
    pytester.makepyfile(tiny="X = 1\n")
    entry = {"per_sample": 5.0, "samples": 16, "source": "tiny:loader_parts({})", "files": {"tiny.py": "0" * 16}}
    (suite.path / "baselines").mkdir()
    (suite.path / "baselines" / "instructions.json").write_text(json.dumps(
        {"schema": 1, "environments": {instructions.key(): {"test_copy.py::test_copy": entry}}}))
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    result = suite.run("--perf-smoke")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["perf: loader instructions counted again under valgrind (callgrind) for "
                                 "test_copy.py::test_copy: tiny.py changed since counted. *", "rootdir: *"])
    result.stdout.fnmatch_lines(["session: * s (*, tests * s, of them loader counted again *.* s)"])


def test_a_report_without_measurements_says_so(suite):
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    result = suite.run("--perf-report=out/perf")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*perf report written to *out/perf.md, *out/perf.json (no test was measured: no CUDA GPU "
                                 "and no --perf-smoke)"])
    assert json.loads((suite.path / "out" / "perf.json").read_text())["tests"] == []
    assert "| test | verdict | pipeline | GPU-side | loader | syncs/step |\n" in (suite.path / "out" / "perf.md").read_text()
    clean(result)


def test_a_report_on_a_gpu_whose_tests_measured_nothing_says_so(suite, pytester):
    pytester.makepyfile(test_copy="def test_plain():\n    assert True\n")
    result = suite.run("--perf-report=out/perf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*perf report written to *out/perf.md, *out/perf.json (no test was measured: none of "
                                 "the tests run measured a training step)"])


def test_a_report_path_under_a_file_is_a_clear_error(suite):
    """Found at start, before any test runs (it was found only after every test had run)."""
    (suite.path / "out").write_text("a file")
    result = suite.run("--perf-report=out/perf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-report out/perf: folder out is a file; give a folder"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_comparing_with_a_run_from_another_gpu_warns_and_fails_in_strict_mode(suite):
    suite.run("--perf-update-baselines", "--benchmark-save=h200").assert_outcomes(passed=1)
    saved = next(suite.path.glob(".benchmarks/**/*h200.json"))
    assert json.loads(saved.read_text())["machine_info"]["gpu"]["gpu"] == "NVIDIA H200"
    suite.gpu(FakeGPU(gpu="NVIDIA H100 80GB HBM3"))
    message = ("COMPARING ACROSS GPU MODELS: this run is on 'NVIDIA H100 80GB HBM3', the saved run on 'NVIDIA H200' "
               "(*.benchmarks). The differences below are not regressions. Compare against a run saved on the same GPU "
               "model (--benchmark-compare=NNNN).")
    warned = suite.run("--benchmark-compare", "--color=yes")
    # in the header, and again after the tests in a red, bold section of its own
    warned.stdout.fnmatch_lines([f"WARNING: {message}", "*\x1b[31m\x1b[1m*!! WARNING !!*", f"\x1b[31m\x1b[1m{message}*"])
    strict = suite.run("--benchmark-compare", "--perf-strict")
    assert strict.ret == pytest.ExitCode.USAGE_ERROR
    strict.stderr.fnmatch_lines([f"*--perf-strict: {message}"])
    suite.gpu(FakeGPU())
    same = suite.run("--benchmark-compare", "--perf-strict")  # the same model: compared, nothing to say
    same.assert_outcomes(passed=1)
    assert "COMPARING ACROSS" not in same.stdout.str() + same.stderr.str()


def test_strict_mode_from_the_ini_file_refuses_a_comparison_across_models(suite, pytester):
    suite.run("--benchmark-save=h200").assert_outcomes(passed=1, warnings=1)
    suite.gpu(FakeGPU(gpu="NVIDIA H100 80GB HBM3"))
    pytester.makeini("[pytest]\nperf_strict = true\n")
    assert suite.run("--benchmark-compare").ret == pytest.ExitCode.USAGE_ERROR


@pytest.mark.parametrize("break_it, message", [
    # an INTERNALERROR with a traceback in the plugin
    (lambda run: run.update(machine_info="H200"),
     "'machine_info' is 'H200', expected an object (with the 'gpu' this suite adds)"),
    # pytest-benchmark's own TypeError, from its table
    (lambda run: run["benchmarks"][0]["stats"].update(median="fast"),
     "benchmarks[0] 'test_copy.py::test_copy': stats 'median' is 'fast', expected a non-negative number"),
])
def test_a_saved_run_that_cannot_be_compared_with_is_a_usage_error_naming_it(suite, break_it, message):
    suite.run("--benchmark-save=h200").assert_outcomes(passed=1, warnings=1)
    saved = next(suite.path.glob(".benchmarks/**/*h200.json"))
    run = json.loads(saved.read_text())
    break_it(run)
    saved.write_text(json.dumps(run))
    result = suite.run("--benchmark-compare")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    [line] = [line for line in clean(result).splitlines() if line.startswith("ERROR:")]
    assert line == (f"ERROR: --benchmark-compare: {saved}: {message}; move it out of {saved.parent.parent} or compare "
                    "with another run (--benchmark-compare=NNNN)")


def test_a_truncated_saved_run_is_a_usage_error_not_a_comparison_with_an_older_one(suite):
    """pytest-benchmark warned and compared with the run before it."""
    for _ in range(2):
        suite.run("--benchmark-autosave").assert_outcomes(passed=1, warnings=1)
    older, latest = sorted(suite.path.glob(".benchmarks/**/*.json"))
    latest.write_text(latest.read_text()[:200])
    result = suite.run("--benchmark-compare")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    [line] = [line for line in clean(result).splitlines() if line.startswith("ERROR:")]
    assert line == (f"ERROR: --benchmark-compare: {latest} is not a readable pytest-benchmark saved run (cut short while "
                    f"it was saved?); move it out of {latest.parent.parent} or compare with another run "
                    "(--benchmark-compare=NNNN)")
    suite.run(f"--benchmark-compare={older.name[:4]}").assert_outcomes(passed=1, warnings=1)  # the older one, asked for


# --- bad inputs: each ends in one clear line, never a traceback, and loses nothing recorded -------


def clean(result) -> str:
    """The output, asserted free of tracebacks and internal errors."""
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    return out


@pytest.mark.parametrize("given, message", [
    ("traces", "--perf-trace-dir traces is a file; give a folder"),
    ("traces/failed", "--perf-trace-dir traces/failed: traces is a file; give a folder"),
])
def test_a_trace_dir_that_is_a_file_is_a_usage_error(suite, given, message):
    suite.gpu(FakeGPU(case="item"))  # a test that fails, so that its trace would be kept
    (suite.path / "traces").write_text("a file")
    result = suite.run(f"--perf-trace-dir={given}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])
    assert (suite.path / "traces").read_text() == "a file"
    clean(result)


def test_a_trace_that_cannot_be_kept_says_where_it_still_is(suite, tmp_path):
    suite.gpu(FakeGPU(case="item"))
    (tmp_path / "test_copy.py_test_copy.json.gz").mkdir()  # a write error after the start
    result = suite.run(f"--perf-trace-dir={tmp_path}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*expected 0 (a new sync appeared)*", "copy  FAILED   *"])
    assert fnmatch.filter(details(result.stdout.str(), "copy: FAILED"),
                          "- trace not kept (*Is a directory*); it is still at *test_copy.py_test_copy.json")
    clean(result)


@pytest.mark.parametrize("update", [[], ["--perf-update-baselines"]])
def test_a_baseline_dir_that_is_a_file_is_a_usage_error(suite, update):
    (suite.path / "bl").write_text("a file")
    result = suite.run("--perf-baseline-dir=bl", *update)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--perf-baseline-dir {suite.path / 'bl'} is a file; give a folder*"])
    assert (suite.path / "bl").read_text() == "a file"
    clean(result)


def test_update_in_smoke_mode_records_the_loaders_settings_only(suite):
    result = suite.run("--perf-update-baselines", "--perf-smoke")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["recorded 1 baseline(s) into *loaders.json"])
    assert sorted(p.name for p in suite.baseline.parent.glob("*.json")) == ["loaders.json"]


def test_update_in_smoke_mode_says_nothing_was_recorded(suite, pytester):
    pytester.makepyfile(test_copy=TEST_FILE.replace("    loader = DataLoader(Items(), batch_size=10)\n", "")
                        .replace("    def loader_step(self):\n        self.work(\"loader\", 0.0005)\n", ""))
    result = suite.run("--perf-update-baselines", "--perf-smoke")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*--perf-update-baselines recorded nothing: baselines are recorded only on a CUDA GPU "
                                 "outside --perf-smoke*"])
    assert not suite.baseline.parent.exists()
    clean(result)
    suite.run("--perf-update-baselines", "--perf-smoke", "--color=yes").stdout.fnmatch_lines(
        ["\x1b[33m--perf-update-baselines recorded nothing*"])  # in yellow
    assert "recorded nothing" not in suite.run("--perf-smoke").stdout.str()  # nothing was asked


def test_benchmark_only_runs_the_perf_tests(suite):
    result = suite.run("--benchmark-only")
    result.assert_outcomes(passed=1, warnings=1)  # the missing baseline's
    clean(result)


@pytest.mark.parametrize("option", ["--benchmark-skip", "--benchmark-disable"])
def test_benchmark_off_is_refused_in_strict_mode(suite, option):
    result = suite.run(option, "--perf-strict")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--perf-strict refuses {option}: *Drop the option, or drop --perf-strict.*"])
    clean(result)


def test_benchmark_off_is_a_usage_error_where_warnings_are_errors(suite):
    result = suite.run("--benchmark-skip", "-W", "error")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --benchmark-skip: pytest-benchmark then skips every perf scenario, so throughput goes "
                                 "unchecked. Drop the option."])
    clean(result)


def test_benchmark_skip_warns_and_skips(suite):
    result = suite.run("--benchmark-skip")
    result.assert_outcomes(skipped=1, warnings=1)
    result.stdout.fnmatch_lines(["*PerfWarning: --benchmark-skip: pytest-benchmark then skips every perf scenario, "
                                 "so throughput goes unchecked"])
    clean(result)


def test_benchmark_skip_with_update_baselines_is_a_usage_error(suite):
    """Each asks the opposite of the other: record every perf scenario, skip every perf scenario (it ran, skipped
    everything and recorded nothing)."""
    result = suite.run("--benchmark-skip", "--perf-update-baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-update-baselines records the perf scenarios, and --benchmark-skip skips "
                                 "every one of them: drop one of the two"])
    assert not suite.baseline.exists()
    clean(result)


def test_benchmark_disable_warns_and_still_measures_every_round(suite):
    result = suite.run("--benchmark-disable", "--perf-report=out/perf")
    result.assert_outcomes(passed=1, warnings=2)  # --benchmark-disable's and the missing baseline's
    result.stdout.fnmatch_lines(["*PerfWarning: --benchmark-disable: pytest-benchmark then keeps no benchmark record*"
                                 "; the perf checks still run"])
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert row["parts"]["pipeline"]["rounds"] == [5000.0] * 3  # every round, timed by the harness
    assert "Benchmark fixture was not used" not in clean(result)


def test_benchmark_json_holds_every_part(suite):
    result = suite.run("--benchmark-json=bench.json")
    result.assert_outcomes(passed=1, warnings=1)
    [bench] = json.loads((suite.path / "bench.json").read_text())["benchmarks"]
    assert bench["fullname"] == "test_copy.py::test_copy"
    assert bench["extra_info"]["parts"]["gpu"]["rounds"] == [10000.0] * 3
    assert bench["stats"]["rounds"] == 3
    clean(result)


MARK = "@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)\n"
HEAD, TEST = TEST_FILE.split(MARK)
CLASS_TEST = textwrap.indent("@pytest.mark.perf(steps=3)\n" + TEST.replace("(perf,", "(self, perf,"), "    ")
MARKED = {  # module rounds=2 (or class over module), function steps=3
    "module": HEAD + "pytestmark = pytest.mark.perf(rounds=2, warmup=1, round_s=0)\n\n@pytest.mark.perf(steps=3)\n" + TEST,
    "class": HEAD + "pytestmark = pytest.mark.perf(rounds=4, warmup=1)\n\n"
    "@pytest.mark.perf(rounds=2, round_s=0)\nclass TestCopy:\n" + CLASS_TEST,
}


@pytest.mark.parametrize("layout", ["module", "class"])
def test_markers_merge_per_field_closest_first(suite, pytester, layout):
    pytester.makepyfile(test_copy=MARKED[layout])
    suite.gpu(gpu := FakeGPU())
    result = suite.run("--perf-report=out/perf")
    result.assert_outcomes(passed=1, warnings=1)  # the missing baseline's
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert {p: len(v["rounds"]) for p, v in row["parts"].items()} == {"pipeline": 2, "gpu": 2, "loader": 2, "loader_cpu": 2}
    assert gpu.steps["loader"] == 2 * 3  # the loader has no warm-up here: 2 rounds of 3 steps
    clean(result)


@pytest.mark.parametrize("mark, message", [
    ("perf(3)", "test_copy.py::test_copy: @pytest.mark.perf(3) takes settings by name only, e.g. perf(rounds=3)"),
    ("perf(round=3)",
     "test_copy.py::test_copy: @pytest.mark.perf got unknown settings ['round']; known: ['chip_tolerance', 'ci_pct', "),
    ("perf(rounds=0)", "test_copy.py::test_copy: @pytest.mark.perf(rounds=0): expected a whole number of at least 1, got 0"),
])
def test_a_bad_marker_is_a_usage_error_naming_the_test(suite, pytester, mark, message):
    pytester.makepyfile(test_copy=TEST_FILE.replace(MARK, f"@pytest.mark.{mark}\n"))
    result = suite.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {message}" in result.stderr.str()
    assert "no tests ran" in clean(result)


def test_a_single_round_records_no_spread(suite, pytester):
    pytester.makepyfile(test_copy=TEST_FILE.replace("rounds=3, ", ""))
    result = suite.run("--perf-rounds=1", "--perf-update-baselines", "--perf-report=out/perf")
    result.assert_outcomes(passed=1)
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    for parts in (suite.entry()["parts"], row["parts"]):
        assert {p: (v["rounds"], v["spread_pct"]) for p, v in parts.items()} == {
            "pipeline": ([5000.0], None), "gpu": ([10000.0], None), "loader": ([20000.0], None),
            "loader_cpu": ([10000.0], None)}
    md = (suite.path / "out" / "perf.md").read_text()
    assert "| copy | passed  |    5,000 |   10,000 | 20,000 |       0.00 |\n" in md
    # no spread, then the fake GPU's NVML figures
    assert details(md, "copy: passed")[4:6] == ["- bottleneck GPU; efficiency 0.50; loader/CPU s 10,000",
                                                "- GPU-Util 97/97%; 45/141 GB, 640/700 W, 1,980 MHz; peak mem 1.50 GB"]
    clean(result)
    again = suite.run("--perf-rounds=1")  # the file with null spreads reads back, and checks
    again.assert_outcomes(passed=1)
    clean(again)
    again.stdout.fnmatch_lines(["copy  passed   5,000 +0.0%  10,000 +0.0%  20,000 +0.0%        0.00"])


def test_a_failing_baseline_write_fails_the_session_and_keeps_the_file(suite, monkeypatch):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    recorded = suite.baseline.read_text()

    def save(self, updates):
        raise PermissionError(13, "Permission denied", str(self.path))

    monkeypatch.setattr(baselines.BaselineFile, "save", save)  # as root, chmod would not stop the write
    result = suite.run("--perf-update-baselines")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"baselines NOT recorded into {suite.baseline}: [[]Errno 13] Permission denied: *"])
    out = clean(result)
    assert "recorded 1 baseline(s)" not in out
    assert suite.baseline.read_text() == recorded


# -n on a GPU (each worker its own GPU, the reports merged, the refusals): tests/test_xdist.py


# mutmut runs the tests inside mutants/, where xdist's workers start without the mutated modules' setup.cfg
@pytest.mark.skipif("'MUTANT_UNDER_TEST' in os.environ", reason="under mutmut: xdist's workers cannot load mutants")
def test_xdist_runs_smoke_scenarios_on_a_cpu_and_merges_their_report(suite, monkeypatch):
    pytest.importorskip("xdist")
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    monkeypatch.setattr(device, "gpu_count", lambda: 0)
    result = suite.run("-n", "2", "--perf-smoke", "--perf-report=out/perf", "--perf-update-baselines")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["copy  passed   host side *", "copy: passed", "  test_copy.py::test_copy", "  - ran on gw?",
                                 "--perf-update-baselines recorded nothing: *",
                                 "perf report written to out/perf.md, out/perf.json"])
    assert sorted(p.name for p in (suite.path / "out").iterdir()) == ["perf.json", "perf.md"]
    assert not suite.baseline.exists()


# --- claims within one run: gains, costs, efficiency ----------------------------------------------------------------

CLAIM_FILE = TEST_FILE + """
class Other(Work):
    def gpu_step(self):
        self.work("gpu", 0.001 / {speed})  # {speed} times test_copy's GPU-side speed

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
def test_other(perf, perf_session):
    result = perf.measure(Other(perf_session.device))
    perf.{check}
"""


def claim(pytester, suite, speed, check, *args):
    pytester.makepyfile(test_copy=CLAIM_FILE.format(speed=speed, check=check))
    return suite.run("-p", "no:randomly", *args)


@pytest.mark.parametrize("speed, failed", [(2.0, False), (1.2, True)])
def test_a_gain_over_a_predecessor_is_checked_on_the_named_part(suite, pytester, speed, failed):
    result = claim(pytester, suite, speed, "assert_gain(result, over='test_copy.py::test_copy', at_least=1.5, part='gpu')")
    result.assert_outcomes(passed=2 - failed, failed=int(failed))
    if failed:
        assert not [line for line in result.stdout.lines if line.startswith(("> ", "E "))]  # the message, no traceback
        result.stdout.fnmatch_lines([
            "*test_other: gpu 12,000 samples/s is 1.200x the gpu number of test_copy (10,000 samples/s in this run), "
            "expected at least 1.5x (median intervals); measured again: 1.200x (median intervals).",
            "*this test's rounds: 12,000, 12,000, 12,000",
            "*test_copy's rounds: 10,000, 10,000, 10,000",
        ])
    else:
        assert "- gpu vs test_copy 2.00x" in details(result.stdout.str(), "other: passed", "test_copy.py::test_other")


@pytest.mark.parametrize("speed, failed", [(0.8, False), (1.0, True)])
def test_a_pitfall_must_still_cost_what_it_costs(suite, pytester, speed, failed):
    result = claim(pytester, suite, speed, "assert_cost(result, over='test_copy.py::test_copy', at_most=0.9, part='gpu')")
    result.assert_outcomes(passed=2 - failed, failed=int(failed))
    if failed:
        result.stdout.fnmatch_lines(["*gpu 10,000 samples/s is 1.000x the gpu number of test_copy*expected at most 0.9x*"])


@pytest.mark.parametrize("speed, failed", [(0.97, False), (0.9, True)])
def test_no_slower_allows_its_noise_only(suite, pytester, speed, failed):
    result = claim(pytester, suite, speed, "assert_not_slower(result, than='test_copy.py::test_copy', noise_pct=5, part='gpu')")
    result.assert_outcomes(passed=2 - failed, failed=int(failed))


def test_a_predecessor_not_measured_warns_and_fails_in_strict_mode(suite, pytester):
    check = "assert_gain(result, over='test_copy.py::test_gone', at_least=1.5, part='gpu')"
    result = claim(pytester, suite, 2.0, check)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*: PerfWarning: test_copy.py::test_other: the gpu number of test_copy.py::test_gone was "
        "not measured in this run, so gpu vs test_gone is not checked"])
    assert "- not compared with test_gone" in details(result.stdout.str(), "other: passed", "test_copy.py::test_other")
    strict = claim(pytester, suite, 2.0, check, "--perf-strict")
    strict.stdout.fnmatch_lines(["*test_other: the gpu number of*was not measured in this run*"])
    assert strict.ret == pytest.ExitCode.TESTS_FAILED


def test_a_predecessor_left_out_by_a_marker_is_a_note_even_in_strict_mode(suite, pytester):
    """The merge gate runs a marked subset under --perf-strict: a claim over a test that -m left out is not checked."""
    check = "assert_gain(result, over='test_copy.py::test_copy', at_least=1.5, part='gpu')"
    marked = CLAIM_FILE.format(speed=2.0, check=check).replace("def test_other", "@pytest.mark.gate\ndef test_other")
    pytester.makepyfile(test_copy=marked)
    pytester.makeini("[pytest]\nmarkers =\n    gate: the subset")
    result = suite.run("-p", "no:randomly", "-m", "gate", "--perf-strict")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines([
        "*: PerfWarning: test_copy.py::test_other: test_copy.py::test_copy was deselected (-k or -m) in this run, "
        "so gpu vs test_copy is not checked"])
    assert "- not compared with test_copy (deselected)" in details(result.stdout.str(), "other: passed",
                                                                   "test_copy.py::test_other")


EFFICIENCY_FAILS = {  # pipeline 5,000 samples/s; GPU-side 10,000; loader 20,000
    # efficiency 0.5 of the bottleneck, the GPU
    "": "*test_other: pipeline efficiency 0.50, expected at least 0.6: the pipeline delivers 5,000 samples/s while its "
        "bottleneck (GPU) allows 10,000. parts (samples/s): pipeline 5,000, GPU-side 10,000, loader 20,000; bottleneck: "
        "GPU; loader 10,000 samples per worker CPU second",
    # the two in series: 6,667, of which 5,000 is 0.75
    ", in_turns=True": "*test_other: the pipeline delivers 5,000 samples/s, 0.75 of the 6,667 that loading and training "
                       "in turns allow, expected at least 0.8. parts (samples/s): pipeline 5,000, GPU-side 10,000, loader "
                       "20,000;*",
}


@pytest.mark.parametrize("how, floor, failed", [("", 0.5, False), ("", 0.6, True),
                                                (", in_turns=True", 0.7, False), (", in_turns=True", 0.8, True)])
def test_an_efficiency_below_its_floor_fails_naming_the_parts(suite, pytester, how, floor, failed):
    """On the host that recorded the baseline: recording checks no host-bound claim, the run after it does."""
    recording = claim(pytester, suite, 1.0, f"assert_efficiency(result, at_least={floor}{how})", "--perf-update-baselines")
    recording.assert_outcomes(passed=2)
    result = claim(pytester, suite, 1.0, f"assert_efficiency(result, at_least={floor}{how})")
    result.assert_outcomes(passed=2 - failed, failed=int(failed))
    if failed:
        result.stdout.fnmatch_lines([EFFICIENCY_FAILS[how]])


@pytest.mark.parametrize("check", ["assert_efficiency(result, at_least=0.8)", "assert_bottleneck(result, 'loader')"])
def test_a_host_bound_claim_is_checked_only_where_its_baseline_was_recorded(suite, pytester, check):
    """Efficiency 0.5 and a GPU bottleneck: both claims fail on the recording host, and say only a note elsewhere."""
    claim(pytester, suite, 1.0, check, "--perf-update-baselines").assert_outcomes(passed=2)
    claim(pytester, suite, 1.0, check).assert_outcomes(passed=1, failed=1)
    data = json.loads(suite.baseline.read_text())
    data["tests"]["test_copy.py::test_other"]["env"]["host"] = {**HOST, "machine": "another"}
    suite.baseline.write_text(json.dumps(data))
    result = claim(pytester, suite, 1.0, check, "-W", "ignore::UserWarning")
    result.assert_outcomes(passed=2)
    assert fnmatch.filter(details(result.stdout.str(), "other: passed", "test_copy.py::test_other"),
                          "- *: not checked: *; it does not hold here")


def test_a_bottleneck_claim_names_the_parts(suite, pytester):
    claim(pytester, suite, 1.0, "assert_bottleneck(result, 'loader')", "--perf-update-baselines")
    claim(pytester, suite, 1.0, "assert_bottleneck(result, 'loader')").stdout.fnmatch_lines([
        "*test_other: bottleneck GPU, expected loader. parts (samples/s): pipeline 5,000, GPU-side 10,000, loader 20,000;*"])


def test_a_row_added_to_a_section_is_in_the_report(suite, pytester, tmp_path):
    check = "add_row('Claims', step='other', gain=perf.ratio(result, perf.result_of('test_copy.py::test_copy'), 'gpu'))"
    result = claim(pytester, suite, 2.0, check, f"--perf-report={tmp_path / 'perf'}")
    result.assert_outcomes(passed=2)
    assert json.loads((tmp_path / "perf.json").read_text())["sections"] == {"Claims": [{"step": "other", "gain": 2.0}]}


def test_a_step_names_its_predecessor_by_parameter_id(suite, pytester):
    pytester.makepyfile(test_copy=TEST_FILE + """
class Other(Work):
    def __init__(self, device, speed):
        super().__init__(device)
        self.speed = speed

    def gpu_step(self):
        self.work("gpu", 0.001 / self.speed)

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
@pytest.mark.parametrize("step", ["slow", "fast"])
def test_ladder(perf, perf_session, step):
    result = perf.measure(Other(perf_session.device, {"slow": 1.0, "fast": 3.0}[step]))
    if step == "fast":
        perf.assert_gain(result, over="slow", at_least=2.5, part="gpu")
        assert perf.result_of("slow").test_id == "test_copy.py::test_ladder[slow]"
""")
    result = suite.run("-p", "no:randomly")
    result.assert_outcomes(passed=3)
    assert "- gpu vs slow 3.00x" in details(result.stdout.str(), "ladder[fast]: passed", "test_copy.py::test_ladder[fast]")


def test_a_marker_applied_after_collection_fails_the_test_naming_it(suite, pytester):
    pytester.makepyfile(test_copy=TEST_FILE.replace(
        "def test_copy(perf, perf_session):",
        "def test_copy(request, perf_session):\n    request.node.add_marker(pytest.mark.perf(rouns=2))\n"
        "    perf = request.getfixturevalue('perf')"))
    result = suite.run("-rN")  # no short summary: its line is cut or not by the terminal's width
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert out.count("test_copy.py::test_copy: @pytest.mark.perf got unknown settings ['rouns']; known: ") == 1
    assert "During handling" not in out and not [line for line in result.stdout.lines if line.startswith(("> ", "E "))]


# --- what the fixture hands pytest-benchmark, and its checks' exact edges (mutation testing found these unguarded) ----


def no_traceback(result):
    """A perf check fails with its message only: no source lines of the harness ("> ...", "E ...")."""
    assert not [line for line in result.stdout.lines if line.startswith(("> ", "E "))]


def fake_timer(pytester) -> str:
    """pytest-benchmark's --benchmark-timer reading the fake GPU's clock, so that its round times are exact."""
    pytester.makepyfile(fakeclock="from torch_perf_suite import device\n\n"
                                  "def clock():\n    return device.detect_device().clock()\n")
    pytester.syspathinsert()
    return "--benchmark-timer=fakeclock.clock"


def test_pytest_benchmark_times_the_pipeline_and_records_every_number(suite, pytester):
    result = suite.run("--benchmark-json=bench.json", fake_timer(pytester))
    result.assert_outcomes(passed=1, warnings=1)
    [bench] = json.loads((suite.path / "bench.json").read_text())["benchmarks"]
    assert bench["stats"]["data"] == pytest.approx([5 * 0.002] * 3)  # the pipeline's rounds: 5 steps of 2 ms, as the marker asks
    extra = bench["extra_info"]
    assert isinstance(extra.pop("profile_window_s"), float)  # wall time, not the fake clock
    assert {k: extra[k] for k in ("samples_per_s", "bottleneck", "syncs_per_step", "peak_mem_gb", "gpu")} == {
        "samples_per_s": 5000.0, "bottleneck": "GPU", "syncs_per_step": 0.0, "peak_mem_gb": 1.5, "gpu": "NVIDIA H200"}


def test_a_test_of_the_loader_alone_gives_pytest_benchmark_the_loader(suite, pytester):
    pytester.makepyfile(test_copy=TEST_FILE.replace("perf.measure(Work(perf_session.device))",
                                                    "perf.measure(Work(perf_session.device), parts=('loader',))")
                        .replace("    perf.assert_syncs(result, per_step=0)\n", ""))
    suite.run("--benchmark-json=bench.json", fake_timer(pytester)).assert_outcomes(passed=1, warnings=1)
    [bench] = json.loads((suite.path / "bench.json").read_text())["benchmarks"]
    assert bench["stats"]["data"] == pytest.approx([5 * 0.0005] * 3)


def test_a_resident_workload_is_its_own_gpu_side_step(suite, pytester):
    """A workload with only step() (its batch lives on the GPU): its pipeline is the GPU-side number (whose kernels,
    0.95 ms of each 2 ms step, leave the GPU waiting for launches)."""
    pytester.makepyfile(test_copy=TEST_FILE.replace("    def gpu_step(self):\n        self.work(\"gpu\", 0.001)\n", "")
                        .replace("    def loader_step(self):\n        self.work(\"loader\", 0.0005)\n", ""))
    suite.run("--perf-report=out/perf").assert_outcomes(passed=1, warnings=1)
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert row["parts"]["gpu"] == row["parts"]["pipeline"] and row["parts"]["gpu"]["rounds"] == [5000.0] * 3
    assert (row["parts"]["loader"], row["bottleneck"], row["efficiency"]) == (None, "host launch overhead", 1.0)


# --- what the GPU ran and how busy it was: kernels from the profiled window, NVML over the rounds ---------------------

KERNEL_CHECK = TEST_FILE.replace("    perf.assert_syncs(result, per_step=0)\n    perf.assert_baseline(result)\n",
                                 "    perf.{check}\n")
assert "{check}" in KERNEL_CHECK


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


@pytest.mark.parametrize("util, at_least, outcome, shown", [
    (UTIL, 90, "passed", "- GPU-Util 97/97%; 45/141 GB, 640/700 W, 1,980 MHz; peak mem 1.50 GB"),
    (UTIL, 99, "failed", "*GPU-Util 97% over the gpu rounds (NVML, 5 samples), expected at least 99%*"),
    (nvml.Utilization(unavailable="NVML refused: Not Supported"), 90, "passed",
     "- GPU-Util unavailable: NVML refused: Not Supported; peak mem 1.50 GB"),
])
def test_utilization_is_checked_where_nvml_can_say(suite, pytester, util, at_least, outcome, shown):
    suite.gpu(FakeGPU(util=util))
    pytester.makepyfile(test_copy=KERNEL_CHECK.replace("{check}", f"assert_utilization(result, at_least={at_least})"))
    result = suite.run("--perf-strict", "--perf-report=out/perf")  # an unavailable NVML fails nothing, even here
    result.assert_outcomes(**{outcome: 1})
    if outcome == "failed":
        result.stdout.fnmatch_lines([shown])
    else:
        assert shown in details((suite.path / "out" / "perf.md").read_text(), "copy: passed")
    if util.unavailable:
        assert "utilization not checked: NVML refused: Not Supported" in (suite.path / "out" / "perf.md").read_text()


@pytest.mark.parametrize("strict", [False, True])
def test_a_gpu_without_a_feature_skips_the_step_or_fails_it_under_strict(suite, pytester, strict):
    pytester.makepyfile(test_copy="def test_bf16(perf):\n    perf.require(True, 'TF32')\n    perf.require(False, 'bf16')\n")
    result = suite.run("-rs", *(["--perf-strict"] if strict else []))
    result.assert_outcomes(**({"failed": 1} if strict else {"skipped": 1}))
    result.stdout.fnmatch_lines(["*--perf-strict: NVIDIA H200 has no bf16*" if strict else "SKIPPED*NVIDIA H200 has no bf16"])


def test_a_resident_workloads_failing_gpu_claim_is_confirmed_on_its_own_step(suite, pytester):
    """A batch on the GPU (only step()): its GPU-side number is its pipeline, 5,000 samples/s, half test_copy's; the
    confirmation of a failed GPU-side claim times that step again."""
    pytester.makepyfile(test_copy=TEST_FILE + """
class Resident(Work):
    gpu_step = loader_step = None

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
def test_resident(perf, perf_session):
    result = perf.measure(Resident(perf_session.device))
    perf.assert_gain(result, over="test_copy.py::test_copy", at_least=0.9, part="gpu")
""")
    result = suite.run("-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_resident: gpu 5,000 samples/s is 0.500x the gpu number of test_copy (10,000 samples/s "
                                 "in this run), expected at least 0.9x (median intervals); measured again: 0.500x*"])


@pytest.mark.parametrize("loader_s, pipeline_steps", [
    (0.0005, 1 + 3 * 5),  # the loader 2x the GPU-side step: its queue stays full, the marker's warm-up is enough
    (0.00095, 4 + 3 * 5),  # 1.05x: the workload's warm-up, which drains the loader's queue
])
def test_the_pipeline_window_is_sized_by_the_other_two(suite, pytester, loader_s, pipeline_steps):
    pytester.makepyfile(test_copy=TEST_FILE.replace('self.work("loader", 0.0005)', f'self.work("loader", {loader_s})')
                        + "\nWork.warmup_steps = 4\n")
    suite.gpu(gpu := FakeGPU())
    suite.run().assert_outcomes(passed=1, warnings=1)
    assert gpu.steps["pipeline"] - 3 == pipeline_steps  # 3 more: the profiled window's


def test_added_rounds_are_noted(suite):
    suite.gpu(FakeGPU(slow={"gpu": 1.3}, slow_steps=1 + 5))  # the GPU-side window's first round is slow
    result = suite.run("--perf-report=out/perf", "--perf-ci-pct=0.5")
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert row["parts"]["gpu"]["added_rounds"] > 0
    assert f"rounds added: gpu +{row['parts']['gpu']['added_rounds']}" in row["notes"]
    clean(result)


@pytest.mark.parametrize("expect, outcome, message", [
    ("per_step=1", "passed", None),  # exactly one, as the trace has
    ("per_step=2", "failed", "expected 2 (fewer syncs than this scenario documents)"),
    ("per_step=0.5", "failed", "expected 0.5 (a new sync appeared)"),
    ("at_least=1", "passed", None),
    ("at_least=1.5", "failed", "expected at least 1.5: the pitfall this scenario documents no longer syncs"),
])
def test_a_sync_count_is_held_exactly(suite, pytester, expect, outcome, message):
    suite.gpu(FakeGPU(case="item"))
    pytester.makepyfile(test_copy=TEST_FILE.replace("per_step=0", expect))
    result = suite.run()
    result.assert_outcomes(**{outcome: 1}, warnings=1 if outcome == "passed" else 0)
    if message:
        result.stdout.fnmatch_lines([f"*measured 1.00 host-device syncs per step (3 in 3 profiled steps), {message}*"])
        no_traceback(result)


def test_syncs_from_another_library_are_each_listed(suite, pytester):
    suite.gpu(FakeGPU(case="pageable_nonblocking"))
    pytester.makepyfile(test_copy=TEST_FILE.replace("per_step=0", "at_least=1, from_library='torchmetrics/'"))
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*; expected every sync to come from 'torchmetrics/', these do not:",
                                 "Memcpy HtoD (Pageable -> Device) in aten::to > *",
                                 "    user code: record_traces.py(*): step *"])
    no_traceback(result)


@pytest.mark.parametrize("call, error", [
    ("perf.assert_syncs(result)", "TypeError: assert_syncs takes exactly one of per_step= and at_least="),
    ("perf.assert_syncs(result, per_step=0, at_least=1)", "TypeError: assert_syncs takes exactly one of per_step= and at_least="),
    ("result.syncs = None; perf.assert_syncs(result, per_step=0)",
     "RuntimeError: test_copy.py::test_copy: no sync count; syncs are counted in the pipeline's profiled steps, and this "
     "test measured no pipeline part"),
    ("result.test_id = 'another'; perf._confirm(result, 'gpu')",
     "RuntimeError: test_copy.py::test_copy: can only confirm a result measured by this test"),
])
def test_a_check_called_wrongly_raises_naming_the_mistake(suite, pytester, call, error):
    pytester.makepyfile(test_copy=TEST_FILE.replace("perf.assert_syncs(result, per_step=0)", call))
    result = suite.run(traceback=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"E * {error}"])


DEFAULTS_FILE = TEST_FILE + """
class Other(Work):
    def step(self):
        self.work("pipeline", 0.002 / {speed})

    def gpu_step(self):
        self.work("gpu", 0.001 * {speed})

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
def test_other(perf, perf_session):
    result = perf.measure(Other(perf_session.device))
    {check}
"""


@pytest.mark.parametrize("check, speed, failed", [
    ("perf.assert_gain(result, over='test_copy.py::test_copy', at_least=1.5)", 2.0, False),  # the pipeline, by default
    ("perf.assert_gain(result, over='test_copy.py::test_copy', at_least=1.5)", 1.2, True),
    ("perf.assert_not_slower(result, than='test_copy.py::test_copy', noise_pct=5)", 0.96, False),  # 1 - 5/100 = 0.95
    ("perf.assert_not_slower(result, than='test_copy.py::test_copy', noise_pct=5)", 0.945, True),
    ("perf.assert_cost(result, over='test_copy.py::test_copy', at_most=0.5)", 2.0, False),  # the GPU-side, by default
    ("perf.assert_cost(result, over='test_copy.py::test_copy', at_most=0.5)", 1.5, True),
    ("assert round(perf.ratio(result, perf.result_of('test_copy.py::test_copy')), 9) == 2.5", 2.5, False),  # pipeline
])
def test_the_claims_default_parts(suite, pytester, check, speed, failed):
    """Other's pipeline is `speed` times test_copy's, its GPU-side number 1/`speed` times."""
    pytester.makepyfile(test_copy=DEFAULTS_FILE.format(speed=speed, check=check))
    result = suite.run("-p", "no:randomly")
    result.assert_outcomes(passed=2 - failed, failed=int(failed), warnings=1)  # test_copy's missing baseline


def test_a_claim_across_parts_is_labelled_with_both(suite, pytester):
    check = "perf.assert_gain(result, over='test_copy.py::test_copy', at_least=0.4, part='pipeline', over_part='gpu')"
    pytester.makepyfile(test_copy=DEFAULTS_FILE.format(speed=1.0, check=check))
    result = suite.run("-p", "no:randomly", "--perf-report=out/perf")
    result.assert_outcomes(passed=2, warnings=1)
    rows = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert rows[1]["extra"] == {"pipeline vs test_copy gpu": 0.5}  # 5,000 over 10,000


def test_a_predecessor_without_the_part_is_not_compared(suite, pytester):
    loader_only = "perf.measure(Work(perf_session.device), parts=('loader',))"
    pytester.makepyfile(test_copy=DEFAULTS_FILE.format(speed=1.0, check="perf.assert_gain(result, over='x', at_least=1)")
                        .replace("perf.measure(Work(perf_session.device))", loader_only)
                        .replace("    perf.assert_syncs(result, per_step=0)\n    perf.assert_baseline(result)\n", "")
                        .replace("over='x'", "over='test_copy.py::test_copy', part='gpu'"))
    result = suite.run("-p", "no:randomly", "--perf-strict")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_other: the gpu number of test_copy.py::test_copy was not measured in this run*"])


def test_the_loader_note_names_the_test_that_measured_it(suite, pytester):
    pytester.makepyfile(test_copy=TEST_FILE + """
Work.loader_key = ("recipe", 1)

class TestB:
    @pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
    def test_b(self, perf, perf_session):
        perf.measure(Work(perf_session.device))
""")
    result = suite.run("-p", "no:randomly", "--perf-report=out/perf")
    rows = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert rows[1]["test"] == "test_copy.py::TestB::test_b" and "loader measured in test_copy" in rows[1]["notes"]
    clean(result)


def test_a_claim_that_fails_once_is_measured_again_and_noted_when_not_confirmed(suite, pytester):
    """test_copy's GPU-side window, the steps whose host side and FLOPs it counts, and test_other's first window (3
    warm-up + 3 x 5 steps each) run at half speed: test_other is 1.2x at first, 2.4x measured again."""
    suite.gpu(FakeGPU(slow={"gpu": 2.0}, slow_steps=2 * (3 + 3 * 5) + 1 + 2 * 3 + 1))  # the host side: two passes of 3
    check = "assert_gain(result, over='test_copy.py::test_copy', at_least=1.5, part='gpu')"
    result = claim(pytester, suite, 1.2, check, "--perf-report=out/perf")
    result.assert_outcomes(passed=2, warnings=1)
    row = json.loads((suite.path / "out" / "perf.json").read_text())["tests"][1]
    assert row["outcome"] == "passed" and row["notes"] == ["gpu measured again to confirm: 12,000 samples/s",
                                                           "gpu vs test_copy: 1.200x at first, 2.400x measured again: "
                                                           "not confirmed"]


def test_a_baseline_entry_is_noted_recorded_then_re_recorded(suite):
    notes = []
    for _ in range(2):
        suite.run("--perf-update-baselines", "--perf-report=out/perf").assert_outcomes(passed=1)
        notes.append(json.loads((suite.path / "out" / "perf.json").read_text())["tests"][0]["notes"])
    assert notes[0][-1] == "baseline recorded" and notes[1][-1] == "baseline re-recorded"
    suite.baseline.unlink()
    suite.run("--perf-report=out/perf").assert_outcomes(passed=1, warnings=1)
    assert json.loads((suite.path / "out" / "perf.json").read_text())["tests"][0]["notes"][-1] == "no baseline"


def test_refs_run_records_what_the_head_gates_against_it_and_times_the_loader_fed_parts_briefly(suite, monkeypatch):
    gpu = FakeGPU()
    suite.gpu(gpu)
    monkeypatch.setenv(against.AS_REF, "1")  # as --perf-against starts REF's run
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    entry = suite.entry()
    assert set(entry["parts"]) == {"gpu"} and entry["efficiency"] is None
    assert gpu.steps["pipeline"] == 1 + 5 + 3  # its warm-up, one round of the least steps, the profiled steps
    monkeypatch.delenv(against.AS_REF)
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)  # recording the committed baselines: whole
    assert {"gpu", "loader", "pipeline"} <= set(suite.entry()["parts"])


def test_two_parts_that_regress_are_listed_together_against_median_only_entries(suite):
    """Entries without rounds (recorded by an older harness) are compared with their median, and say so."""
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)

    def medians_only(entry):
        for part in entry["parts"].values():
            del part["rounds"]

    suite.edit(medians_only)
    suite.gpu(FakeGPU(slow={"gpu": 2.0, "loader": 2.0}))
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*test_copy.py::test_copy: throughput regression in gpu, loader:",
        # at half speed the fake GPU waits for launches (0.95 ms of kernels in a 2 ms step): held as host-bound, at 10%
        "  gpu: 5,000.0 samples/s against a baseline of 10,000.0 (-50.0%; allowed -10%, median intervals); "
        "measured again: -50.0%",
        "    this run's rounds: 5,000, 5,000, 5,000; baseline's: 10,000 (median only)",
        "  loader: 10,000.0 samples/s against a baseline of 20,000.0 (-50.0%; allowed -10%, median intervals); "
        "measured again: -50.0%",
        "    this run's rounds: 10,000, 10,000, 10,000; baseline's: 20,000 (median only)",
        f"  baseline: {suite.baseline}, recorded 2026-11-22 with torch 2.11.0+cu130 on *",
    ])


def test_strict_mode_lists_every_part_it_could_not_compare(suite):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    suite.edit(lambda e: [e["parts"].pop(part) for part in ("loader", "pipeline")])  # an entry older than those parts
    result = suite.run("--perf-strict")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_copy.py::test_copy: --perf-strict: no comparable baseline: loader, pipeline: "
                                 "no baseline number for this part*"])


def test_an_installed_package_gives_any_project_the_plugin(pytester):
    """No conftest: pytest loads the plugin through the package's pytest11 entry point."""
    import importlib.metadata

    if not [e for e in importlib.metadata.entry_points(group="pytest11") if e.value == "torch_perf_suite.plugin"]:
        pytest.skip("the package is not installed: pip install -e .")
    pytester.makepyfile(test_mine="def test_mine(perf):\n    assert perf.smoke\n")
    result = pytester.runpytest("--perf-smoke", "-p", "no:randomly")
    result.assert_outcomes(passed=1)


# --- the plugin's own hooks ------------------------------------------------------------------------------------------

HOOKS = '''
from torch_perf_suite import Advice

def pytest_perf_sync_sources():
    return [Advice("our scaler", "use ourlib.Scaler(check_every=100)", "https://ourlib/scaler", library="torch/amp/")]

def pytest_perf_update_environment(env):
    env["cluster"] = "rack-7"
'''


def test_a_users_sync_source_carries_the_users_fix(suite, pytester):
    pytester.makeconftest(CONFTEST + HOOKS)
    suite.gpu(FakeGPU(case="grad_scaler"))  # GradScaler's sync: torch/amp/grad_scaler.py
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*fix:       use ourlib.Scaler(check_every=100) (more: https://ourlib/scaler)"])


def test_a_users_environment_fields_are_recorded(suite, pytester):
    pytester.makeconftest(CONFTEST + HOOKS)
    suite.run("--perf-update-baselines", "--perf-report=out/perf").assert_outcomes(passed=1)
    assert suite.entry()["env"]["cluster"] == "rack-7"
    assert json.loads((suite.path / "out" / "perf.json").read_text())["env"]["cluster"] == "rack-7"


def test_a_sync_source_that_is_not_advice_is_a_usage_error(suite, pytester):
    pytester.makeconftest(CONFTEST + "def pytest_perf_sync_sources():\n    return ['pin your memory']\n")
    result = suite.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pytest_perf_sync_sources returned 'pin your memory'; return a list of "
                                 "torch_perf_suite.Advice"])


def test_a_charted_section_is_drawn_once_at_the_end(suite, pytester, tmp_path, monkeypatch):
    from torch_perf_suite.report import markdown as report

    drawn = []  # drawing stubbed: matplotlib need not be installed
    monkeypatch.setattr(report, "png", lambda path, *args: drawn.append(path.name) or path.write_bytes(b"png") or True)
    check = ("add_row('Claims', chart=__import__('torch_perf_suite').Chart(x='step', bars=('gain',)), step='other', "
             "gain=2.0)")
    result = claim(pytester, suite, 2.0, check, f"--perf-report={tmp_path / 'perf'}")
    result.assert_outcomes(passed=2, warnings=1)
    assert drawn == ["perf.claims.png"]  # not after each test
    result.stdout.fnmatch_lines([f"perf report written to {tmp_path / 'perf.md'}, {tmp_path / 'perf.json'}, "
                                 f"{tmp_path / 'perf.claims.png'}"])


RESIDENT_FILE = TEST_FILE + """
class Resident(Work):
    gpu_step = loader_step = None  # the batch lives on the GPU: its pipeline step is the GPU-side one

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
def test_resident(perf, perf_session):
    result = perf.measure(Resident(perf_session.device))
    assert round(perf._confirm(result, "gpu").median) == 5000  # the pipeline step, timed again
    with pytest.raises(RuntimeError, match="test_resident: cannot measure 'loader' again; this workload measures pipeline$"):
        perf._confirm(result, "loader")
"""


def test_confirming_a_part_the_workload_does_not_measure_names_what_it_does(suite, pytester):
    pytester.makepyfile(test_copy=RESIDENT_FILE)
    result = suite.run("-p", "no:randomly", "-k", "resident")
    result.assert_outcomes(passed=1)


# --- counted gates: kernels, step memory, loader instructions -------------------------------------------------------


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


LOADER_FILE = TEST_FILE.replace("    batch_size = 10\n", "    batch_size = 10\n    loader_source = ('toy:parts', {'n': 1})\n")


@pytest.fixture
def counted_loader(suite, pytester, monkeypatch):
    """The test's workload names a loader; the callgrind process is replaced by a count the test sets."""
    pytester.makepyfile(test_copy=LOADER_FILE)
    per_sample = {"now": 6_353_205.7}
    monkeypatch.setattr(instructions.Counter, "count",
                        lambda self, source: instructions.Counted(per_sample["now"], 16, instructions.describe_source(source)))
    # the code the loader runs, its files named from the rootdir (not from the folder pytest ran in)
    monkeypatch.setattr(loader_code, "content_files", lambda source, root: per_sample.update(root=root) or {"toy.py": "ab"})
    monkeypatch.setattr(loader_code, "digest_of", lambda files: per_sample["content"])
    per_sample["content"] = "c0"
    return per_sample


def test_loader_instructions_are_recorded_per_environment_and_a_plant_fails(suite, counted_loader):
    result = suite.run("--perf-update-baselines")
    result.stdout.fnmatch_lines(["recorded 1 baseline(s) into *instructions.json (py*)"])
    recorded = json.loads((suite.path / "baselines" / "instructions.json").read_text())["environments"]
    (key, tests), = recorded.items()
    assert key == instructions.key() and tests["test_copy.py::test_copy"]["per_sample"] == 6_353_205.7
    assert tests["test_copy.py::test_copy"]["source"] == 'toy:parts({"n": 1})'
    assert tests["test_copy.py::test_copy"]["content"] == "c0" and counted_loader["root"] == suite.path
    suite.run().assert_outcomes(passed=1)
    counted_loader["now"] = 7_348_639  # +15.7%, with the loader's code as it was: the recorded count is the answer
    result = suite.run()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*loader instructions: its code unchanged since counted (c0), not counted again*"])
    counted_loader["content"] = "c1"  # the plant changed the code the loader runs: counted again
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_copy: the loader runs 7,348,639 instructions per sample *, 6,353,206 recorded "
                                 "(+15.7%; allowed +1%)*"])


def test_loader_instructions_of_another_environment_are_not_compared(suite, counted_loader):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    path = suite.path / "baselines" / "instructions.json"
    data = json.loads(path.read_text())
    data["environments"] = {"py3.12.3-torch2.11.0": next(iter(data["environments"].values()))}
    path.write_text(json.dumps(data))
    counted_loader["now"] = 9e6
    result = suite.run("--perf-strict")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*loader instructions not comparable: recorded with py3.12.3-torch2.11.0; this is py*"])


def test_loader_instructions_in_smoke_runs_and_off(suite, counted_loader):
    suite.run("--perf-smoke", "--perf-update-baselines").stdout.fnmatch_lines(["recorded 1 baseline(s) into *instructions*"])
    counted_loader["now"], counted_loader["content"] = 7_348_639, "c1"
    suite.run("--perf-smoke").assert_outcomes(failed=1)
    suite.run("--perf-smoke", "--perf-instructions=off").assert_outcomes(passed=1)


def test_the_installed_plugin_registers_its_markers_in_a_project_of_its_own(pytester, monkeypatch):
    """No conftest naming the plugin: pytest finds it through the package's entry point; --strict-markers passes."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    pytester.makepyfile(test_mine="""
        import pytest

        @pytest.mark.perf(rounds=3)
        @pytest.mark.gate
        def test_step():
            pass
    """)
    result = pytester.runpytest("--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    shown = pytester.runpytest("--markers").stdout.str()
    assert "@pytest.mark.perf(**settings): per-test measurement settings by name (warmup, rounds," in shown
    assert "count_margin" in shown


def test_a_recording_run_counts_the_loader_afresh_even_where_its_code_is_unchanged(suite, counted_loader):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    counted_loader["now"] = 6_400_000  # the same code ("c0"), another count: a recording run records what it measured
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    recorded = json.loads((suite.path / "baselines" / "instructions.json").read_text())["environments"]
    assert next(iter(recorded.values()))["test_copy.py::test_copy"]["per_sample"] == 6_400_000


def test_the_phases_seconds_add_up_to_the_tests_call(suite):
    """Each perf test's seconds by phase (timing.Laps) cover its call: their sum is the call's duration as pytest
    timed it, and each phase measured is there."""
    result = suite.run("--perf-report=out/perf", "--durations=0", "--durations-min=0", "-vv")
    result.assert_outcomes(passed=1, warnings=1)
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    [call_s] = [float(line.split("s ")[0]) for line in result.stdout.lines if re.match(r"[\d.]+s call +test_copy", line)]
    assert {"build", "loader alone", "timed", "profiled", "instructions", "FLOPs", "checks"} <= set(row["seconds"])
    assert sum(row["seconds"].values()) == pytest.approx(call_s, rel=0.05, abs=0.02)
    assert row["seconds"]["timed"] > 0 and all(s >= 0 for s in row["seconds"].values())


def test_the_sessions_seconds_count_from_pytests_start_and_hold_their_parts(suite, pytester):
    """The imports are measured from pytest's start (a conftest.py that takes 0.5 s), not the process's (this one's
    pytest run is older than that)."""
    pytester.makeconftest(CONFTEST + "import time\ntime.sleep(0.5)\n")
    suite.run("--perf-report=out/perf").assert_outcomes(passed=1, warnings=1)
    seconds = json.loads((suite.path / "out" / "perf.json").read_text())["seconds"]
    assert list(seconds) == ["total", "imports", "REF", "tests"]
    assert seconds["total"] >= seconds["imports"] + seconds["REF"] + seconds["tests"] - 0.15  # three roundings
    assert 0.5 <= seconds["imports"] < 3 and seconds["tests"] > 0


def test_a_recording_into_another_folder_takes_the_committed_count_of_unchanged_code(suite, counted_loader):
    """REF's run under --perf-against records into a folder of its own: there, as in any run, a loader whose code is
    unchanged since the committed count is not counted again; only a recording into the committed file counts afresh."""
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    counted_loader["now"] = 6_400_000
    suite.run("--perf-update-baselines", "--perf-baseline-dir=ref").assert_outcomes(passed=1)
    ref = json.loads((suite.path / "ref" / "instructions.json").read_text())["environments"]
    assert next(iter(ref.values()))["test_copy.py::test_copy"]["per_sample"] == 6_353_205.7  # the committed count
    counted_loader["content"] = "c1"  # the code changed: counted
    suite.run("--perf-update-baselines", "--perf-baseline-dir=ref").assert_outcomes(passed=1)
    ref = json.loads((suite.path / "ref" / "instructions.json").read_text())["environments"]
    assert next(iter(ref.values()))["test_copy.py::test_copy"]["per_sample"] == 6_400_000


# --- the step's host side (host_side.py) ---------------------------------------------------------------------------


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
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert [n for n in row["notes"] if n.startswith("host side")] == [
        "host side not compared: the baseline recorded none (its entry is older than the count); record them with: "
        "pytest 'test_copy.py::test_copy' --perf-update-baselines"]
    assert row["host"]["blocks_per_step"] == 0 and row["host"]["lines_per_step"] > 0


def test_a_smoke_run_without_a_gpu_fails_a_host_read_naming_its_line(suite, pytester):
    """The README's example: a loss read on the host each step fails --perf-smoke on a CPU, at its line."""
    read = "        import torch\n        print(torch.ones(3).sum().item())\n"
    pytester.makepyfile(test_copy=TEST_FILE.replace("    def step(self):\n", "    def step(self):\n" + read))
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    result = suite.run("--perf-smoke")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*measured 1.00 host reads per step (3 in 3 steps) with no GPU, expected at most 0:*",
                                 "*host read in aten::_local_scalar_dense*", "*user code: test_copy.py:24 in step*"])
