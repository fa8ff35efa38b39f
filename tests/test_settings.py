import argparse
from pathlib import Path

import pytest

from torch_perf_suite import settings
from torch_perf_suite.session import options
from torch_perf_suite.session.benchmark import UNUSED_BENCHMARK
from torch_perf_suite.settings import Measure, for_marker, percent, positive_int, report_path, seconds


@pytest.mark.parametrize("text, value", [("1", 1), ("40", 40)])
def test_positive_int(text, value):
    assert positive_int(text) == value


@pytest.mark.parametrize("text", ["0", "-3", "ten", "1.5"])
def test_positive_int_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError, match="whole number of at least 1"):
        positive_int(text)


@pytest.mark.parametrize("text, value", [("5", 5.0), ("7.5%", 7.5), ("0", 0.0)])
def test_percent(text, value):
    assert percent(text) == value


@pytest.mark.parametrize("text", ["100", "-1", "lots", "5X", "5 percent"])  # only a trailing % sign is dropped
def test_percent_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError, match="percentage"):
        percent(text)


def test_report_path_drops_a_suffix():
    assert str(report_path("reports/perf.md")) == "reports/perf"
    assert str(report_path("reports/perf")) == "reports/perf"


def marks(*decorators):
    return [d.mark for d in decorators]


def test_marker_overrides_and_is_validated():
    m = for_marker(Measure(), marks(pytest.mark.perf(steps=40, tolerance=2)), "t")
    assert (m.steps, m.tolerance, m.rounds) == (40, 2.0, Measure().rounds)
    with pytest.raises(ValueError, match=r"t: @pytest.mark.perf got unknown settings \['stesp'\]"):
        for_marker(Measure(), marks(pytest.mark.perf(stesp=4)), "t")
    with pytest.raises(ValueError, match=r"t: @pytest.mark.perf\(rounds=0\)"):
        for_marker(Measure(), marks(pytest.mark.perf(rounds=0)), "t")


def test_markers_merge_closest_first_per_field():
    """function perf(steps=40) over class perf(steps=7, rounds=3) over module perf(rounds=2, warmup=9)"""
    m = for_marker(Measure(), marks(pytest.mark.perf(steps=40), pytest.mark.perf(steps=7, rounds=3),
                                    pytest.mark.perf(rounds=2, warmup=9)), "t")
    assert (m.steps, m.rounds, m.warmup) == (40, 3, 9)


def test_positional_marker_arguments_are_refused():
    with pytest.raises(ValueError, match=r"takes settings by name only"):
        for_marker(Measure(), marks(pytest.mark.perf(3)), "t")


@pytest.mark.parametrize("text", ["-1", "61", "soon"])
def test_seconds_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError, match="seconds"):
        seconds(text)


def test_report_path_drops_a_json_suffix_too():
    assert str(report_path("reports/perf.json")) == "reports/perf"
    assert str(report_path("reports/perf.txt")) == "reports/perf.txt"


@pytest.mark.parametrize("text", ["", ".", "..", "reports/.."])
def test_report_path_must_name_a_file(text):
    with pytest.raises(argparse.ArgumentTypeError, match="expected a file path such as reports/perf, got"):
        report_path(text)


def test_report_path_naming_a_folder_is_refused(tmp_path):
    (tmp_path / "reports").mkdir()
    for text in (str(tmp_path / "reports"), "reports/", str(tmp_path / "new") + "/"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected a file path such as reports/perf, got .*, a folder"):
            report_path(text)
    assert report_path(str(tmp_path / "reports" / "perf.md")) == tmp_path / "reports" / "perf"


def test_an_empty_folder_option_is_refused():
    with pytest.raises(argparse.ArgumentTypeError, match="expected a folder, got an empty value"):
        settings.folder("")
    assert settings.folder("baselines") == Path("baselines")


def test_rounds_above_max_rounds_conflict():
    assert settings.conflicting(Measure(rounds=5, max_rounds=2)) == (
        "max_rounds 2 is below rounds 5 (rounds are only ever added)")
    assert settings.conflicting(Measure(rounds=5, max_rounds=5)) is None
    with pytest.raises(ValueError, match=r"t.py::t: @pytest.mark.perf: max_rounds 2 is below rounds 5"):
        settings.for_marker(Measure(), [pytest.mark.perf(rounds=5, max_rounds=2).mark], "t.py::t")


def test_an_output_folder_that_cannot_be_written_is_refused_at_start(tmp_path, monkeypatch):
    monkeypatch.setattr(options.os, "access", lambda path, mode: False)  # as a read-only folder answers a user
    with pytest.raises(pytest.UsageError, match=r"--perf-report .*/out: .* cannot be written by this user"):
        options._folder(tmp_path / "out", "--perf-report", writable=True)
    assert options._folder(tmp_path / "out", "--perf-baseline-dir") == tmp_path / "out"  # read only: no need


def test_the_ini_ignores_the_two_warnings_a_gpu_run_explains_and_no_other(pytestconfig):
    """The messages as an H200 run printed them (docs/limits.md); a DeprecationWarning of one's own still shows."""
    import warnings

    from _pytest.config import parse_warning_filter

    # this repository's pyproject.toml; the plugin adds one where no GPU is (its skipped tests' unused benchmark fixture)
    specs = [s for s in pytestconfig.getini("filterwarnings") if s != UNUSED_BENCHMARK]
    assert len(specs) == 2
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        for spec in specs:
            warnings.filterwarnings(*parse_warning_filter(spec, escape=False))
        warnings.warn("This process (pid=3506) is multi-threaded, use of fork() may lead to deadlocks in the child.",
                      DeprecationWarning)
        warnings.warn("`torch.jit.script_method` is deprecated. Please switch to `torch.compile` or `torch.export`.",
                      DeprecationWarning)
        warnings.warn("use of fork() is deprecated", DeprecationWarning)
        warnings.warn("This process (pid=1) is multi-threaded, use of fork() may lead to deadlocks in the child.", UserWarning)
    assert [str(w.message) for w in shown] == [
        "use of fork() is deprecated",
        "This process (pid=1) is multi-threaded, use of fork() may lead to deadlocks in the child."]
