"""The baseline file through a session (pytester, the fake GPU): recorded, read, missing, corrupt, old, or not
writable; what each entry notes."""

import json

import pytest

from tests.plugin_suite import ENV, HOST, TEST_FILE, FakeGPU, clean, details
from torch_perf_suite.records import baselines

pytest_plugins = ["pytester"]


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


def test_a_baseline_entry_is_noted_recorded_then_re_recorded(suite):
    notes = []
    for _ in range(2):
        suite.run("--perf-update-baselines", "--perf-report=out/perf").assert_outcomes(passed=1)
        notes.append(json.loads((suite.path / "out" / "perf.json").read_text())["tests"][0]["notes"])
    assert notes[0][-1] == "baseline recorded" and notes[1][-1] == "baseline re-recorded"
    suite.baseline.unlink()
    suite.run("--perf-report=out/perf").assert_outcomes(passed=1, warnings=1)
    assert json.loads((suite.path / "out" / "perf.json").read_text())["tests"][0]["notes"][-1] == "no baseline"
