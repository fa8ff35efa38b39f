"""A session end to end (pytester, the fake GPU): without a GPU, in smoke mode, its seconds, and under -n."""

import json
import time

import pytest

from tests.plugin_suite import CONFTEST, ENV, TEST_FILE, FakeGPU, details
from torch_perf_suite.machine import device

pytest_plugins = ["pytester"]


def test_without_a_gpu_the_scenarios_skip_naming_perf_smoke(suite):
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    result = suite.run("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no CUDA GPU*Run with --perf-smoke*"])


def test_without_a_gpu_a_perf_test_skips_before_its_session_fixtures_are_made(suite, pytester):
    """The README's main job's first run on a CPU took 243 s to skip every test: each session fixture a perf test asked
    for was made first (the suite's image dataset, 1.4 GB written on 2 cores), then `perf` skipped the test."""
    pytester.makepyfile(test_made="""
import pytest

@pytest.fixture(scope="session")
def costly(tmp_path_factory):
    (tmp_path_factory.getbasetemp() / "made").touch()

def test_uses_it(costly, perf):
    pass

def test_asks_for_perf_later(costly, request):
    request.getfixturevalue("perf")
""")
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    result = suite.run("test_made.py", "-rs", f"--basetemp={pytester.path / 'temp'}")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_made.py: no CUDA GPU*",  # at the test, as pytest says a mark's
                                 "SKIPPED [[]1[]] test_made.py:10: no CUDA GPU*"])  # at the line that asked for perf
    made = (pytester.path / "temp" / "made").exists()
    assert made, "the test that asks for perf by name sets up what it asked for first"
    (pytester.path / "temp" / "made").unlink()
    result = suite.run("test_made.py", "-k", "test_uses_it", f"--basetemp={pytester.path / 'temp'}")
    result.assert_outcomes(skipped=1)
    assert not (pytester.path / "temp" / "made").exists(), "made for a test that skips without a GPU"
    result = suite.run("test_made.py", "-k", "test_uses_it", "--perf-strict", f"--basetemp={pytester.path / 'temp'}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*--perf-strict: no CUDA GPU*"])
    assert not (pytester.path / "temp" / "made").exists(), "made for a test that fails without a GPU"


def test_what_is_slow_is_said_as_it_happens_past_pytests_capture(pytester):
    """A line said inside a session fixture or a test (the image dataset being written, a loader counted under
    valgrind) shows as it happens in a plain run, not only in a failure's captured output."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_said="""
import pytest

@pytest.fixture(scope="session")
def dataset(perf_session):
    perf_session.say("writing the dataset once")

def test_said(dataset, perf_session):
    perf_session.say("counting under valgrind")
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")  # the capture of a real run, by file descriptor
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["writing the dataset once", "counting under valgrind"])


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


def test_a_slow_session_that_measured_nothing_says_where_its_seconds_went(suite, pytester, monkeypatch):
    """The README's main job on a CPU skips every test; its first run took 243 s on a user's machine and said nothing
    of why (16 s the second time). A session that measured nothing and took SLOW_S says its parts; a quick one does not."""
    from torch_perf_suite.session import writing

    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    assert "where a session that measured no test spent its time" not in suite.run().stdout.str()
    monkeypatch.setattr(writing, "SLOW_S", 0.0)
    pytester.makeconftest(CONFTEST + "import time\ntime.sleep(0.3)\n")
    suite.run().stdout.fnmatch_lines(["session: * s (imports 0.[3-9] s, collection * s, REF 0.0 s, tests 0.0 s, "
                                      "setup and other tests * s, end * s): where a session that measured no test "
                                      "spent its time"])
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")  # a user's own tests, the plugin installed
    assert "where a session" not in suite.run("test_plain.py").stdout.str()  # nothing it could have measured


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


def test_the_sessions_seconds_count_from_pytests_start_and_hold_their_parts(suite, pytester):
    """The imports are measured from pytest's start (a conftest.py that takes 0.5 s), not the process's (this one's
    pytest run is older than that); every second is in a part (a fixture's 0.4 s in the tests' setup, which the
    session line left out: 127 s of a user's run against HEAD were in no part), and the parts add up to the total,
    which is pytest's wall time."""
    pytester.makeconftest(CONFTEST + "import time\nimport pytest\ntime.sleep(0.5)\n\n\n@pytest.fixture(autouse=True)\n"
                          "def slow_setup():\n    time.sleep(0.4)\n")
    began = time.perf_counter()
    suite.run("--perf-report=out/perf").assert_outcomes(passed=1, warnings=1)
    wall = time.perf_counter() - began
    seconds = json.loads((suite.path / "out" / "perf.json").read_text())["seconds"]
    assert list(seconds) == ["total", "imports", "collection", "REF", "tests", "setup and other tests", "end"]
    assert sum(seconds.values()) - seconds["total"] == pytest.approx(seconds["total"], abs=0.35)  # six roundings
    assert seconds["total"] == pytest.approx(wall, abs=5) and seconds["total"] <= wall + 0.05  # rounded to 0.1 s
    assert 0.5 <= seconds["imports"] < 3 and seconds["tests"] > 0 and seconds["setup and other tests"] >= 0.4


# -n on a GPU (the refusals, a sharded run end to end): tests/session/test_xdist.py; each worker its own GPU and cores:
# test_xdist_gpus.py; the reports merged: test_xdist_merge.py


# mutmut runs the tests inside mutants/, where xdist's workers start without the mutated modules' setup.cfg
@pytest.mark.slow
@pytest.mark.skipif("'MUTANT_UNDER_TEST' in os.environ", reason="under mutmut: xdist's workers cannot load mutants")
def test_xdist_runs_smoke_scenarios_on_a_cpu_and_merges_their_report(suite, monkeypatch):
    pytest.importorskip("xdist")
    suite.gpu(device.Device("cpu", {**ENV, "gpu": "cpu"}))
    monkeypatch.setattr(device, "gpu_count", lambda: 0)
    result = suite.run("-n", "2", "--perf-smoke", "--perf-report=out/perf", "--perf-update-baselines")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["copy  passed   host side *", "copy: passed", "  test_copy.py::test_copy", "  - ran on gw?",
                                 "recorded 1 baseline(s) into */baselines/loaders.json",  # what a worker recorded,
                                 "recorded 1 baseline(s) into */baselines/smoke-counts/*.json",  # said by the controller
                                 "perf report written to out/perf.md, out/perf.json"])
    assert "recorded nothing" not in result.stdout.str()
    assert sorted(p.name for p in (suite.path / "out").iterdir()) == ["perf.json", "perf.md"]
    assert not suite.baseline.exists()  # no GPU's baseline file in a smoke run


@pytest.mark.parametrize("span, in_test, worker_ref, parts", [
    ([], False, 0.0, {"collection": 3.0, "REF": 2.0, "tests": 0.0, "setup and other tests": 0.0, "end": 10.0}),
    ([10.0], True, 0.0, {"collection": 3.0, "REF": 2.0, "tests": 4.0, "setup and other tests": 6.0, "end": 0.0}),
    ([10.0, 18.0], True, 0.0, {"collection": 3.0, "REF": 2.0, "tests": 4.0, "setup and other tests": 6.0, "end": 0.0}),
    ([10.0, 18.0], False, 0.0, {"collection": 3.0, "REF": 2.0, "tests": 4.0, "setup and other tests": 4.0, "end": 2.0}),
    ([10.0, 18.0], False, 1.5, {"collection": 4.5, "REF": 2.0, "tests": 4.0, "setup and other tests": 2.5, "end": 2.0}),
])
def test_the_session_line_adds_up_whenever_it_is_written(monkeypatch, span, in_test, worker_ref, parts):
    """At 20 s, the session configured at 5 s after 1 s of imports, REF 2 s, the tests collected at 10 s, 4 s of perf
    calls: no test yet; a report written inside the first test, or a later one (its call in the tests' span, not the
    end: the end held the test's time); after the last; a sharded worker that measured 1.5 s of REF before its files
    (REF's setup, the rest, was collection's, not taken twice)."""
    from types import SimpleNamespace

    from torch_perf_suite.session import writing

    monkeypatch.setattr(writing.time, "perf_counter", lambda: 20.0)
    laps = {"t": SimpleNamespace(seconds={"timed": 4.0})} if span else {}
    session = SimpleNamespace(tests_span=span, in_test=in_test, collected=10.0, configured=5.0, started=4.0,
                              imports_s=1.0, laps=laps, recount=None, recount_s=0.0,
                              ref_state=SimpleNamespace(seconds=2.0, in_tests=worker_ref))
    seconds = writing.spent(session)
    assert {k: v for k, v in seconds.items() if k not in ("total", "imports")} == parts
    assert sum(seconds.values()) - seconds["total"] == pytest.approx(seconds["total"])
