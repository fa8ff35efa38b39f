"""The options, ini values and markers a session is given, end to end (pytester, the fake GPU): each bad one is a
usage error in one clear line, never a traceback, that loses nothing recorded."""

import json
import textwrap

import pytest

from tests.plugin_suite import TEST_FILE, FakeGPU, clean

pytest_plugins = ["pytester"]


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


def test_a_report_path_under_a_file_is_a_clear_error(suite):
    """Found at start, before any test runs (it was found only after every test had run)."""
    (suite.path / "out").write_text("a file")
    result = suite.run("--perf-report=out/perf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-report out/perf: folder out is a file; give a folder"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


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


@pytest.mark.parametrize("update", [[], ["--perf-update-baselines"]])
def test_a_baseline_dir_that_is_a_file_is_a_usage_error(suite, update):
    (suite.path / "bl").write_text("a file")
    result = suite.run("--perf-baseline-dir=bl", *update)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--perf-baseline-dir {suite.path / 'bl'} is a file; give a folder*"])
    assert (suite.path / "bl").read_text() == "a file"
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
