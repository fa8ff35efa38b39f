"""What `nightly` says of a report it cannot read, word for word: each problem names the entry and what it expected."""

import pytest

from torch_perf_suite.nightly import command
from torch_perf_suite.nightly.nights import Night
from torch_perf_suite.report.rows import report_problem

ENV = {"gpu": "NVIDIA H200", "date": "2026-11-22"}
ROW = {"test": "t::a", "parts": {"gpu": {"samples_per_s": 1.0}, "loader": None}}  # no notes, no baseline: both optional


def report(env=ENV, **row):
    return {"env": env, "tests": [{**ROW, **row}]}


def test_a_report_with_optional_fields_left_out_is_one():
    assert report_problem(report()) is None
    full = report(notes=["FAILED"], syncs_per_step=0.0, efficiency=0.97,
                  baseline={"gpu": {"compared": True, "change_pct": -1.0, "allowed_pct": -3}, "loader": {"compared": False}})
    assert report_problem(full) is None


EXPECTED = "expected the environment with its 'gpu' and 'date'"
NUMBERS = "expected an object with ('change_pct', 'allowed_pct') numbers where compared"


@pytest.mark.parametrize("bad, problem", [
    ([], "the top level is list, expected an object"),
    ({"tests": []}, f"'env' is None, {EXPECTED}"),
    ({"env": {"gpu": " ", "date": "2026-11-22"}, "tests": []}, f"'env' is {{'gpu': ' ', 'date': '2026-11-22'}}, {EXPECTED}"),
    ({"env": {"gpu": "H200"}, "tests": []}, "env 'date' is None, expected a date such as 2026-11-22"),
    ({"env": {"gpu": "H200", "date": 20261122}, "tests": []}, "env 'date' is 20261122, expected a date such as 2026-11-22"),
    ({"env": {"gpu": "H200", "date": "2026-11-22 "}, "tests": []},
     "env 'date' is '2026-11-22 ', expected a date such as 2026-11-22"),
    ({"env": ENV, "tests": "x"}, "'tests' is 'x', expected a list of rows"),
    ({"env": ENV}, "'tests' is None, expected a list of rows"),
    ({"env": ENV, "tests": [ROW, 5]}, "tests[1]: is 5, expected an object"),
    (report(test=""), "tests[0]: 'test' is '', expected the test's id"),
    (report(test=7), "tests[0]: 'test' is 7, expected the test's id"),
    (report(notes="x"), "tests[0] 't::a': 'notes' is 'x', expected a list of lines"),
    (report(notes=[1]), "tests[0] 't::a': 'notes' is [1], expected a list of lines"),
    (report(notes="x" * 100), "tests[0] 't::a': 'notes' is '" + "x" * 56 + "..., expected a list of lines"),  # cut at 60
    (report(parts=[]), "tests[0] 't::a': 'parts' is [], expected an object of parts"),
    (report(parts={"gpu": {"samples_per_s": "1"}}),
     "tests[0] 't::a': part 'gpu' is {'samples_per_s': '1'}, expected null or an object with a 'samples_per_s' number"),
    (report(parts={"gpu": 3}), "tests[0] 't::a': part 'gpu' is 3, expected null or an object with a 'samples_per_s' number"),
    (report(syncs_per_step=True), "tests[0] 't::a': 'syncs_per_step' is True, expected a number or null"),
    (report(efficiency="high"), "tests[0] 't::a': 'efficiency' is 'high', expected a number or null"),
    (report(baseline=[]), "tests[0] 't::a': 'baseline' is [], expected an object of parts"),
    (report(baseline={"gpu": 1}), f"tests[0] 't::a': baseline 'gpu' is 1, {NUMBERS}"),
    (report(baseline={"gpu": {"compared": True, "change_pct": 1.0}}),
     f"tests[0] 't::a': baseline 'gpu' is {{'compared': True, 'change_pct': 1.0}}, {NUMBERS}"),
])
def test_each_problem_of_a_report_word_for_word(bad, problem):
    assert report_problem(bad) == problem


# --- a failed test's numbers, and the alert that two failed nights open ------------------------------------------


@pytest.mark.parametrize("row, line", [
    ({"parts": {"gpu": None}}, ""),
    ({"parts": {"gpu": None}, "notes": ["FAILED"]}, ""),
    ({"parts": {"pipeline": {"samples_per_s": 12345.6}, "gpu": {"samples_per_s": 20000.4}, "loader": None},
      "efficiency": 0.617, "bottleneck": "loader", "syncs_per_step": 0.5,
      "baseline": {"gpu": {"compared": True, "change_pct": -4.06, "allowed_pct": -3},
                   "pipeline": {"compared": True, "change_pct": 1.0, "allowed_pct": -10}, "loader": {"compared": False}},
      "notes": ["FAILED", "a new sync appeared", "gpu measured again"]},
     "samples/s: pipeline 12,346, gpu 20,000; efficiency 0.62 (bottleneck: loader); "
     "vs baseline: gpu -4.1% (allowed -3.0%), pipeline +1.0% (allowed -10.0%); syncs/step 0.5; "
     "a new sync appeared; gpu measured again"),
    ({"parts": {}, "efficiency": 0.0, "syncs_per_step": 0}, "efficiency 0.00 (bottleneck: None); syncs/step 0"),
])
def test_a_failed_tests_numbers_on_one_line(row, line):
    assert command._numbers(row) == line


def night(date, commit, failed, gpu="NVIDIA H200", url=""):
    """A night that measured each of three tests and failed `failed`."""
    return Night(date, commit, gpu, failed, url, {t: {"gpu": 100.0} for t in ("t::a", "t::b", "t::c")})


def test_the_alert_of_a_test_failed_two_nights_in_a_row_word_for_word():
    before = night("2026-11-21", "a" * 40, {"t::a": "gpu -4.1%", "t::b": "x"})
    tonight = night("2026-11-22", "b" * 40, {"t::a": "gpu -5.0%", "t::c": "y"})
    decision = command.decide([before], tonight)
    assert decision.status == "1 regression(s) (failed two nights in a row), 1 suspicious (failed tonight only): t::a, t::c"
    [alert] = decision.alerts
    trend = command.trend([before, tonight], "t::a")
    assert alert.body == "\n".join([
        "`t::a` failed on two consecutive nights on NVIDIA H200.", "",
        "- 2026-11-21 (aaaaaaaaaaaa): gpu -4.1%",
        "- 2026-11-22 (bbbbbbbbbbbb): gpu -5.0%", "",
        "Commits: aaaaaaaaaaaa..bbbbbbbbbbbb. Run and traces: (no run URL)",
        "Reproduce: `pytest 't::a' --perf-trace-dir traces` on a NVIDIA H200.", "",
        trend])
    assert decision.charts == trend + "\n" + command.trend([before, tonight], "t::c")
    assert trend.count("2026-11-2") == 2  # both nights charted


def test_a_clean_night_names_no_test_and_a_run_url_is_linked():
    before = night("2026-11-21", "a" * 40, {"t::a": "x"})
    assert command.decide([before], night("2026-11-22", "b" * 40, {})).status == \
        "0 regression(s) (failed two nights in a row), 0 suspicious (failed tonight only)"
    [alert] = command.decide([before], night("2026-11-22", "b" * 40, {"t::a": "y"}, url="https://ci/1"),
                             repo_url="https://github.com/o/r").alerts
    assert f"Commits: [aaaaaaaaaaaa..bbbbbbbbbbbb](https://github.com/o/r/compare/{'a' * 40}...{'b' * 40}). " \
           "Run and traces: https://ci/1" in alert.body


# --- the command line: its commands are required and say what they do ------------------------------------------


def test_the_command_line_requires_a_command_and_a_report(capsys):
    for argv in ([], ["record"]):
        with pytest.raises(SystemExit) as e:
            command.main(argv)
        assert e.value.code == 2
    err = capsys.readouterr().err
    assert "the following arguments are required: command" in err and "--report" in err


def test_the_help_says_what_each_command_does(capsys):
    with pytest.raises(SystemExit):
        command.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert " ".join(command.__doc__.split("\n\n")[0].split()) in out  # the description, whole
    assert "add tonight's report to the history and decide the alerts (no token needed)" in out
    assert "open or update one issue per regression (GITHUB_TOKEN, GITHUB_REPOSITORY)" in out
    with pytest.raises(SystemExit):
        command.main(["record", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "the JSON written by --perf-report" in out and "trends (Markdown)" in out
    assert "https://github.com/OWNER/REPO, for the commit range's link" in out
