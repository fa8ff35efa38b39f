"""The suite over a matrix of runners (torch_perf_suite/session/runners.py): `--perf-split I/N` deals whole files longest
first, every test in exactly one part; `runners merge` joins the parts' reports and keeps each test's seconds."""

import json

import pytest

from torch_perf_suite import settings
from torch_perf_suite.fixture.result import Result
from torch_perf_suite.report import saved
from torch_perf_suite.session import runners
from torch_perf_suite.throughput.parts import Parts
from torch_perf_suite.throughput.timing import Throughput

pytest_plugins = ["pytester"]

TESTS = [f"perf_tests/test_{f}.py::test[{i}]" for f, n in (("ladder", 6), ("storage", 4), ("h2d", 2), ("metrics", 3))
         for i in range(n)]


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "1/", "a/b", "1/2/3", "-1/2"])
def test_a_malformed_split_says_what_is_expected(text):
    with pytest.raises(ValueError, match=r"expected I/N, this runner's part I of N \(1/2, 2/2\), 1 <= I <= N"):
        settings.split_part(text)


def test_parts_hold_whole_files_every_test_once_longest_first():
    seconds = {t: 30.0 for t in TESTS if "ladder" in t} | {t: 25.0 for t in TESTS if "storage" in t} | {
        t: 5.0 for t in TESTS if "h2d" in t}  # metrics unknown: the mean, 22.5 s a test
    first, second = runners.deal(TESTS, seconds, 2)
    assert sorted(first + second) == sorted(TESTS)
    files = [{t.split("::")[0] for t in part} for part in (first, second)]
    assert files == [{"perf_tests/test_ladder.py"}, {"perf_tests/test_storage.py", "perf_tests/test_metrics.py",
                                                      "perf_tests/test_h2d.py"}]  # 180 s against 100 + 67.5 + 10
    assert runners.deal(TESTS, seconds, 2) == [first, second]  # every runner deals the same


def test_without_seconds_every_test_counts_one():
    parts = runners.deal(TESTS, {}, 3)
    assert [len(p) for p in parts] == [6, 4, 5]  # ladder, storage, metrics each to an empty part, h2d to the lightest
    assert sorted(sum(parts, [])) == sorted(TESTS)


def test_a_durations_file_that_cannot_be_used_names_itself_and_what_to_do(tmp_path):
    assert runners.load_seconds(tmp_path / "none.json") == {}
    bad = tmp_path / "durations.json"
    bad.write_text('{"t": "slow"}')
    with pytest.raises(ValueError, match=r"--perf-durations .*durations.json: expected an object of test id -> seconds"):
        runners.load_seconds(bad)
    bad.write_text("{")
    with pytest.raises(ValueError, match=r"not readable JSON .*restore it from git"):
        runners.load_seconds(bad)


def doc(*tests: str) -> dict:
    """A part's report as --perf-report writes it, a test of 10 s each."""
    results = []
    for t in tests:
        r = Result(t, Parts(100, Throughput(100, (1.0,))), None, None, None, seconds={"build": 1.0, "timed": 9.0})
        r.outcome = "passed"
        results.append(r)
    return saved.document(results, {"gpu": "NVIDIA H200"})


def test_merge_joins_the_parts_reports_and_writes_each_tests_seconds(tmp_path, capsys):
    for name, tests in (("part1", TESTS[:6]), ("part2", TESTS[6:])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "perf.json").write_text(json.dumps(doc(*tests)))
    out, seconds = tmp_path / "merged" / "perf", tmp_path / "durations.json"
    assert runners.main(["merge", str(tmp_path / "part1/perf.json"), str(tmp_path / "part2/perf.json"),
                         "--out", str(out), "--durations", str(seconds)]) == 0
    merged = json.loads((tmp_path / "merged" / "perf.json").read_text())
    assert sorted(r["test"] for r in merged["tests"]) == sorted(TESTS)
    assert {r["worker"] for r in merged["tests"] if "ladder" in r["test"]} == {"part1"}
    assert json.loads(seconds.read_text()) == {t: 10.0 for t in sorted(TESTS)}
    assert "merged 15 tests of 2 parts" in capsys.readouterr().out
    assert "In parts (--perf-split runners): part1 on " in (tmp_path / "merged" / "perf.md").read_text()


def test_a_sharded_runners_rows_keep_their_worker_under_the_runners_name():
    sharded = runners.merge({"gw0": doc(TESTS[0]), "gw1": doc(TESTS[7])})  # a runner's own -n 2, merged at its end
    merged = runners.merge({"part1": sharded, "part2": doc(TESTS[8])})
    assert {r["test"]: r["worker"] for r in merged["tests"]} == {TESTS[0]: "part1/gw0", TESTS[7]: "part1/gw1",
                                                                 TESTS[8]: "part2"}


def test_a_test_in_two_parts_fails_the_merge_naming_it(tmp_path, capsys):
    for name, tests in (("a", TESTS[:3]), ("b", TESTS[2:4])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "perf.json").write_text(json.dumps(doc(*tests)))
    with pytest.raises(SystemExit) as e:
        runners.main(["merge", str(tmp_path / "a/perf.json"), str(tmp_path / "b/perf.json"), "--out", str(tmp_path / "m")])
    assert e.value.code == 2
    assert f"{TESTS[2]} ran in both a and b: the runners' splits differ" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("spoil, said", [
    (lambda d: d["tests"][0].pop("test"), "row 0 of 'tests' names no test"),
    (lambda d: d["tests"].append("a row"), "row 1 of 'tests' names no test"),
    (lambda d: d.pop("sections"), "no 'sections' object of tables"),
    (lambda d: d.pop("env"), "no 'env' object"),
])
def test_a_report_that_lacks_what_the_merge_reads_is_one_line_naming_it(tmp_path, capsys, spoil, said):
    spoiled = doc(TESTS[0])
    spoil(spoiled)
    (tmp_path / "perf.json").write_text(json.dumps(spoiled))
    with pytest.raises(SystemExit) as e:
        runners.main(["merge", str(tmp_path / "perf.json"), "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err
    assert f"{tmp_path / 'perf.json'}: not a report that --perf-report wrote ({said}" in err.splitlines()[-1]


def test_the_split_keeps_this_runners_part_and_deselects_the_rest(pytester):
    pytester.makeconftest('pytest_plugins = ["torch_perf_suite.plugin"]\n')
    for name in ("a", "b", "c"):
        pytester.makepyfile(**{f"test_{name}": "def test_one():\n    pass\ndef test_two():\n    pass\n"})
    (pytester.path / "durations.json").write_text(json.dumps({"test_a.py::test_one": 50, "test_b.py::test_one": 20}))
    ids = {}
    for part in (1, 2):
        result = pytester.runpytest("--collect-only", "-q", f"--perf-split={part}/2", "--perf-durations=durations.json")
        ids[part] = {line for line in result.outlines if "::" in line}
    assert ids[1] == {"test_a.py::test_one", "test_a.py::test_two"}  # 50 + 35 (the mean) against 20 + 35 and 70
    assert ids[2] == {f"test_{n}.py::test_{w}" for n in "bc" for w in ("one", "two")}
    result = pytester.runpytest("--collect-only", "-q", "--perf-split=1/2", "--perf-durations=nowhere/durations.json")
    assert any("2 deselected" in line for line in result.outlines)  # no file: a second a test; a, c against b


def test_the_parts_recorded_baselines_join_into_one_folder_entry_by_entry(tmp_path, capsys):
    """Each runner of a recording in parts records its tests into its own checkout; the folders join test by test,
    the destination's other entries kept."""
    from torch_perf_suite.loader.instructions import InstructionsFile
    from torch_perf_suite.loader.recorded import SettingsFile
    from torch_perf_suite.records.baselines import BaselineFile

    env = {"gpu": "NVIDIA H200", "host": None, "date": "2026-11-27"}

    def entry(sps: float) -> dict:
        return {"parts": {"pipeline": {"samples_per_s": sps, "spread_pct": 1.0, "rounds": [sps]}}, "env": env}

    into = tmp_path / "baselines"
    BaselineFile.load(into / "nvidia-h200.json", "NVIDIA H200").save({"kept": entry(1.0), TESTS[0]: entry(2.0)})
    for i, tests in enumerate((TESTS[:2], TESTS[6:8]), 1):
        part = tmp_path / f"part{i}"
        BaselineFile.load(part / "nvidia-h200.json", "NVIDIA H200").save({t: entry(100.0 * i) for t in tests})
        SettingsFile.load(part / "loaders.json").save({t: {"settings": {"batch_size": 32}, "workers": 4} for t in tests})
        InstructionsFile.load(part / "instructions.json").save("env-key", {t: {"per_sample": 1000.0, "samples": 64,
                                                                                "source": "m:parts", "digest": "d"}
                                                                            for t in tests})
    assert runners.main(["merge-baselines", str(tmp_path / "part1"), str(tmp_path / "part2"), "--into", str(into)]) == 0
    tests = BaselineFile.load(into / "nvidia-h200.json", "NVIDIA H200").tests
    assert set(tests) == {"kept", *TESTS[:2], *TESTS[6:8]}
    assert tests[TESTS[0]]["parts"]["pipeline"]["samples_per_s"] == 100.0  # the part's entry over the older one
    assert set(SettingsFile.load(into / "loaders.json").tests) == {*TESTS[:2], *TESTS[6:8]}
    assert set(InstructionsFile.load(into / "instructions.json").environments["env-key"]) == {*TESTS[:2], *TESTS[6:8]}
    assert "part2/nvidia-h200.json: 2 entries into" in capsys.readouterr().out


def test_a_broken_part_file_is_named_and_nothing_else_is_claimed(tmp_path, capsys):
    (tmp_path / "part1").mkdir()
    (tmp_path / "part1" / "nvidia-h200.json").write_text("{")
    with pytest.raises(SystemExit):
        runners.main(["merge-baselines", str(tmp_path / "part1"), "--into", str(tmp_path / "baselines")])
    assert f"{tmp_path / 'part1' / 'nvidia-h200.json'}: not a baseline file (Expecting" in capsys.readouterr().err
    assert not (tmp_path / "baselines").exists()
