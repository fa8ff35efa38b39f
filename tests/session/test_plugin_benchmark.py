"""pytest-benchmark's side of a session, end to end (pytester, the fake GPU): its options, what the fixture hands
it, and the saved runs it compares with."""

import json

import pytest

from tests.plugin_suite import TEST_FILE, FakeGPU, clean

pytest_plugins = ["pytester"]


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


def fake_timer(pytester) -> str:
    """pytest-benchmark's --benchmark-timer reading the fake GPU's clock, so that its round times are exact."""
    pytester.makepyfile(fakeclock="from torch_perf_suite.machine import device\n\n"
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
