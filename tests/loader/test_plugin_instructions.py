"""The loader's instructions per sample through a session (pytester, the fake GPU, the callgrind process replaced
by a count the test sets): recorded per environment, counted again only where the loader's code changed."""

import json

import pytest

from tests.plugin_suite import ENV, TEST_FILE
from torch_perf_suite.loader import digest as loader_code
from torch_perf_suite.loader import instructions
from torch_perf_suite.machine import device

pytest_plugins = ["pytester"]


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


LOADER_FILE = TEST_FILE.replace("    batch_size = 10\n", "    batch_size = 10\n    loader_source = ('toy:parts', {'n': 1})\n")


@pytest.fixture
def counted_loader(suite, pytester, monkeypatch):
    """The test's workload names a loader; the callgrind process is replaced by a count the test sets."""
    pytester.makepyfile(test_copy=LOADER_FILE)
    per_sample = {"now": 6_353_205.7}
    monkeypatch.setattr(instructions.Counter, "count",
                        lambda self, source: instructions.Counted(per_sample["now"], 16, instructions.describe_source(source)))
    # the code the loader runs, its files named from the rootdir (not from the folder pytest ran in)
    class Read(loader_code.Read):
        digest = property(lambda self: per_sample["content"])

    monkeypatch.setattr(loader_code, "read", lambda source, root: per_sample.update(root=root) or Read({"toy.py": "ab"}))
    per_sample["content"] = "c0"
    return per_sample


def test_loader_instructions_are_recorded_per_environment_and_a_plant_fails(suite, counted_loader):
    result = suite.run("--perf-update-baselines")
    result.stdout.fnmatch_lines(["recorded 1 baseline(s) into *instructions.json (py*)"])
    result.stdout.fnmatch_lines([  # said as it happens: a minute or more of a test that shows nothing else
        "perf: test_copy.py::test_copy: its loader's instructions counted under valgrind (what the loader reads changed *",
        "perf: test_copy.py::test_copy: loader counted in * s: 6,353,206 instructions a sample"])
    recorded = json.loads((suite.path / "baselines" / "instructions.json").read_text())["environments"]
    (key, tests), = recorded.items()
    assert key == instructions.key() and tests["test_copy.py::test_copy"]["per_sample"] == 6_353_205.7
    assert tests["test_copy.py::test_copy"]["source"] == 'toy:parts({"n": 1})'
    assert tests["test_copy.py::test_copy"]["content"] == "c0" and counted_loader["root"] == suite.path
    suite.run().assert_outcomes(passed=1)
    counted_loader["now"] = 7_348_639  # +15.7%, with the loader's code as it was: the recorded count is the answer
    result = suite.run()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*loader instructions: what it reads unchanged since counted (c0: toy.py), not counted again*"])
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
    result = suite.run()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*loader instructions not comparable: recorded with py3.12.3-torch2.11.0; this is py*"])
    strict = suite.run("--perf-strict")  # nothing else judged the loader's CPU work: a hole
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*--perf-strict: * not made against the baseline*",
                                 "*loader instructions not comparable: recorded with py3.12.3-torch2.11.0*"])


def test_loader_instructions_in_smoke_runs_and_off(suite, counted_loader):
    suite.run("--perf-smoke", "--perf-update-baselines").stdout.fnmatch_lines(["recorded 1 baseline(s) into *instructions*"])
    counted_loader["now"], counted_loader["content"] = 7_348_639, "c1"
    suite.run("--perf-smoke").assert_outcomes(failed=1)
    off = suite.run("--perf-smoke", "--perf-instructions=off")
    off.assert_outcomes(passed=1)  # switched off: said, and under --perf-strict a hole
    off.stdout.fnmatch_lines(["*- loader instructions not counted: --perf-instructions off*"])
    strict = suite.run("--perf-smoke", "--perf-instructions=off", "--perf-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["  loader instructions not counted: --perf-instructions off*"])


def test_a_recording_run_counts_the_loader_afresh_even_where_its_code_is_unchanged(suite, counted_loader):
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    counted_loader["now"] = 6_400_000  # the same code ("c0"), another count: a recording run records what it measured
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    recorded = json.loads((suite.path / "baselines" / "instructions.json").read_text())["environments"]
    assert next(iter(recorded.values()))["test_copy.py::test_copy"]["per_sample"] == 6_400_000


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
