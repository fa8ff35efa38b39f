"""Syncs through a session (pytester, the fake GPU replaying traces recorded on an H200): a new sync, a pitfall's
sync gone or from another library, the count held exactly, the trace kept, and a host read without a GPU."""

import fnmatch

import pytest

from tests.plugin_suite import ENV, TEST_FILE, FakeGPU, clean, details
from torch_perf_suite.machine import device

pytest_plugins = ["pytester"]


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


def test_a_pitfall_whose_syncs_doubled_fails_the_smoke_runs_sync_pass_on_a_gpu_as_a_measured_run(suite, pytester):
    """The merge gate's sync pass is a smoke run: it bounds a pitfall by the syncs its baseline entry recorded, as a
    measured run does, and records no entry."""
    pytester.makepyfile(test_copy=TEST_FILE.replace("per_step=0", "at_least=1"))
    suite.gpu(FakeGPU(case="item"))  # 1 a step
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    recorded = suite.baseline.read_text()
    suite.run("--perf-smoke", "--perf-strict").assert_outcomes(passed=1)
    suite.gpu(FakeGPU(case="mean_metric"))  # 2 a step
    for args in ((), ("--perf-smoke", "--perf-strict")):
        result = suite.run(*args)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*measured 2.00 host-device syncs per step (6 in 3 profiled steps), 1 recorded by *"])
    suite.run("--perf-smoke", "--perf-update-baselines").assert_outcomes(passed=1)  # a recording run: no bound
    assert suite.baseline.read_text() == recorded  # ... and a smoke run's profiled steps are no measured run's entry


def test_pitfall_from_another_library_fails(suite, pytester):
    suite.gpu(FakeGPU(case="grad_scaler"))
    pytester.makepyfile(test_copy=TEST_FILE.replace("per_step=0", "at_least=1, from_library='torchmetrics/'"))
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*expected every sync to come from 'torchmetrics/', these do not:*",
        "*torch/amp/grad_scaler.py*",
    ])


def test_a_trace_that_cannot_be_kept_says_where_it_still_is(suite, tmp_path):
    suite.gpu(FakeGPU(case="item"))
    (tmp_path / "test_copy.py_test_copy.json.gz").mkdir()  # a write error after the start
    result = suite.run(f"--perf-trace-dir={tmp_path}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*expected 0 (a new sync appeared)*", "copy  FAILED   *"])
    assert fnmatch.filter(details(result.stdout.str(), "copy: FAILED"),
                          "- trace not kept (*Is a directory*); it is still at *test_copy.py_test_copy.json")
    clean(result)


def no_traceback(result):
    """A perf check fails with its message only: no source lines of the harness ("> ...", "E ...")."""
    assert not [line for line in result.stdout.lines if line.startswith(("> ", "E "))]


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
    result.assert_outcomes(**{outcome: 1}, warnings=1)  # "no baseline": assert_baseline runs after a failed sync check too
    if message:
        result.stdout.fnmatch_lines([f"*measured 1.00 host-device syncs per step (3 in 3 profiled steps), {message}*"])
        no_traceback(result)


def test_a_pitfall_that_syncs_more_than_its_baseline_recorded_fails(suite, pytester):
    """The item trace syncs once a step: recorded so, it passes; recorded as half that, the pitfall grew and fails."""
    suite.gpu(FakeGPU(case="item"))
    pytester.makepyfile(test_copy=TEST_FILE.replace("per_step=0", "at_least=0.5"))
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    assert suite.entry()["syncs_per_step"] == 1.0
    suite.run().assert_outcomes(passed=1)
    suite.edit(lambda entry: entry.update(syncs_per_step=0.5))
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*measured 1.00 host-device syncs per step (3 in 3 profiled steps), 0.5 recorded by the "
                                 "baseline: the pitfall syncs more than it did (a new sync beside it)*"])
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


def test_a_smoke_run_without_a_gpu_fails_a_host_read_naming_its_line(suite, pytester):
    """The README's example: a loss read on the host each step fails --perf-smoke on a CPU, at its line."""
    read = "        import torch\n        print(torch.ones(3).sum().item())\n"
    pytester.makepyfile(test_copy=TEST_FILE.replace("    def step(self):\n", "    def step(self):\n" + read))
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    result = suite.run("--perf-smoke")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*measured 1.00 host reads per step (3 in 3 steps) with no GPU, expected at most 0:*",
                                 "*host read in aten::_local_scalar_dense*", "*user code: test_copy.py:24 in step*"])


def test_a_smoke_run_without_a_gpu_names_anomaly_detection_beside_the_reads_it_makes(suite, pytester):
    """Anomaly detection checks every backward op's output: on a CPU those checks are host reads at the step's line;
    the failure names the switch that makes them, as a GPU's sync check does, not only the `.item()` advice."""
    backward = ("        import torch\n        torch.autograd.set_detect_anomaly(True)\n"
                "        w = torch.ones(3, requires_grad=True)\n        (w * 2).sum().backward()\n")
    pytester.makepyfile(test_copy=TEST_FILE.replace("    def step(self):\n", "    def step(self):\n" + backward))
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    result = suite.run("--perf-smoke")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*host reads per step * with no GPU, expected at most 0:*",
                                 "  debugging switched on in these steps, whose checks sync too: anomaly detection *"])


def test_a_new_sync_and_a_changed_kernel_count_fail_the_test_together_with_its_own_assertion(suite, pytester):
    """The sync check fails first, yet the kernels are compared too and the test's own assertion after them runs: one
    failure names all three in its first line."""
    suite.gpu(FakeGPU(case="item"))
    pytester.makepyfile(test_copy=TEST_FILE.replace("per_step=0", "per_step=1"))
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    suite.edit(lambda entry: entry["counts"]["kernels_per_step"].update(
        {family: n - 1 for family, n in list(entry["counts"]["kernels_per_step"].items())[:1]}))
    pytester.makepyfile(test_copy=TEST_FILE + "    assert False, 'own check'\n")
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "1.00 host-device syncs per step, expected 0, from tests/traces/record_traces.py:*; * kernel launches per step, "
        "* recorded (+1); AssertionError at test_copy.py:*",
        "test_copy.py::test_copy: measured 1.00 host-device syncs per step*",
        "test_copy.py::test_copy: counted at this GPU model's baseline*",
        "test_copy.py::test_copy: then the test raised AssertionError at test_copy.py:*: own check"])
