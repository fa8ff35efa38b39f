"""The session's report end to end (pytester, the fake GPU): Markdown and JSON, the terminal's plain text, a
failure's short summary line, the rows and charts a test adds, and a report of nothing measured."""

import json

from tests.plugin_suite import ENV, HOST, FakeGPU, claim, clean, details
from torch_perf_suite.machine import device
from torch_perf_suite.report import plain

pytest_plugins = ["pytester"]


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


def test_a_short_summary_line_cut_to_a_narrow_terminal_is_said_whole_below_it(suite, monkeypatch):
    """Outside CI and below -vv pytest cuts each short summary line to the terminal's width ("...syncs per st..."): a
    measured test's whole line follows the summary; in CI, where pytest cuts nothing, nothing is said again."""
    monkeypatch.setenv("COLUMNS", "80")
    for name in ("CI", "BUILD_NUMBER"):
        monkeypatch.delenv(name, raising=False)
    suite.gpu(FakeGPU(case="item"))
    result = suite.run("-rf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED test_copy.py::test_copy - Failed: 1.00 host-device syncs per*...",
                                 "the lines above that were cut, whole:",
                                 "FAILED test_copy.py::test_copy - Failed: 1.00 host-device syncs per step, expected 0, "
                                 "from tests/traces/record_traces.py:*"])
    monkeypatch.setenv("CI", "true")
    result = suite.run("-rf")
    assert "were cut, whole" not in result.stdout.str()
    result.stdout.fnmatch_lines(["FAILED test_copy.py::test_copy - Failed: 1.00 host-device syncs per step, expected 0, "
                                 "from tests/traces/record_traces.py:*"])


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


def test_a_row_added_to_a_section_is_in_the_report(suite, pytester, tmp_path):
    check = "add_row('Claims', step='other', gain=perf.ratio(result, perf.result_of('test_copy.py::test_copy'), 'gpu'))"
    result = claim(pytester, suite, 2.0, check, f"--perf-report={tmp_path / 'perf'}")
    result.assert_outcomes(passed=2)
    assert json.loads((tmp_path / "perf.json").read_text())["sections"] == {"Claims": [{"step": "other", "gain": 2.0}]}


def test_a_charted_section_is_drawn_once_at_the_end(suite, pytester, tmp_path, monkeypatch):
    from torch_perf_suite.report import saved

    drawn = []  # drawing stubbed: matplotlib need not be installed
    monkeypatch.setattr(saved, "png", lambda path, *args: drawn.append(path.name) or path.write_bytes(b"png") or True)
    check = ("add_row('Claims', chart=__import__('torch_perf_suite').Chart(x='step', bars=('gain',)), step='other', "
             "gain=2.0)")
    result = claim(pytester, suite, 2.0, check, f"--perf-report={tmp_path / 'perf'}")
    result.assert_outcomes(passed=2, warnings=1)
    assert drawn == ["perf.claims.png"]  # not after each test
    result.stdout.fnmatch_lines([f"perf report written to {tmp_path / 'perf.md'}, {tmp_path / 'perf.json'}, "
                                 f"{tmp_path / 'perf.claims.png'}"])
