"""The `--perf-...` options and ini values as a session reads them (a parsed config, no test run), and the
exact messages of the value checks."""

import argparse
import re

import pytest

from torch_perf_suite import settings
from torch_perf_suite.machine import host
from torch_perf_suite.session import options
from torch_perf_suite.settings import Measure, SessionSettings, for_marker, percent, positive_int, positive_percent, seconds

pytest_plugins = ["pytester"]


@pytest.fixture
def parsed(pytester):
    """parsed(*args) -> SessionSettings of a session started in pytester's folder with the suite's plugin."""
    pytester.makeconftest('pytest_plugins = ["torch_perf_suite.plugin"]\n')
    return lambda *args: options.read_settings(pytester.parseconfig(*args))


def test_defaults(parsed, pytester):
    s = parsed()
    assert s == SessionSettings(strict=False, update_baselines=False, baseline_dir=pytester.path / "baselines", report=None,
                                trace_dir=None, smoke=False, workers=host.cpu_count(), measure=Measure(),
                                durations=pytester.path / "baselines" / "durations.json")


def test_every_option(parsed, pytester):
    s = parsed("--perf-warmup=9", "--perf-rounds=3", "--perf-max-rounds=4", "--perf-ci-pct=2.5%", "--perf-steps=40",
               "--perf-round-s=0.25", "--perf-profile-steps=6", "--perf-tolerance=4", "--perf-host-tolerance=12",
               "--perf-strict", "--perf-update-baselines", "--perf-baseline-dir=bl", "--perf-report=out/perf.md",
               "--perf-trace-dir=traces", "--perf-smoke", "--perf-workers=3", "--perf-worker-start=forkserver",
               "--perf-split=2/3", "--perf-durations=seconds.json", "--perf-against=main", "--perf-against-cache=ref",
               "--perf-bisect=v1..main")
    assert s == SessionSettings(
        strict=True, update_baselines=True, baseline_dir=pytester.path / "bl", report=pytester.path.__class__("out/perf"),
        trace_dir=pytester.path.__class__("traces"), smoke=True, workers=3, worker_start="forkserver",
        split=(2, 3), durations=pytester.path.__class__("seconds.json"), ref="main",
        ref_cache=pytester.path.__class__("ref"), bisect="v1..main",
        measure=Measure(warmup=9, rounds=3, max_rounds=4, ci_pct=2.5, steps=40, round_s=0.25, profile_steps=6, tolerance=4.0,
                        host_tolerance=12.0))


def test_ini_values_and_the_command_line_over_them(parsed, pytester, tmp_path):
    pytester.makeini(f"[pytest]\nperf_rounds = 4\nperf_ci_pct = 2.5%\nperf_steps =\nperf_strict = true\n"
                     f"perf_baseline_dir = {tmp_path / 'shared' / 'baselines'}\n")
    s = parsed()
    assert s.strict is True and s.baseline_dir == tmp_path / "shared" / "baselines"  # absolute: kept as it is
    assert s.measure == Measure(rounds=4, ci_pct=2.5)  # an empty value is no value
    assert parsed("--perf-rounds=6").measure == Measure(rounds=6, ci_pct=2.5)


def test_a_relative_ini_folder_is_under_the_rootdir(parsed, pytester):
    pytester.makeini("[pytest]\nperf_baseline_dir = perf/baselines\n")
    assert parsed().baseline_dir == pytester.path / "perf" / "baselines"


def test_a_bad_ini_value_names_the_option_and_the_value(parsed, pytester):
    pytester.makeini("[pytest]\nperf_tolerance = 120\n")
    with pytest.raises(pytest.UsageError) as e:
        parsed()
    assert str(e.value) == "ini option perf_tolerance = '120': expected a percentage from 0 to below 100, got 120.0"


def test_a_baseline_folder_given_that_does_not_exist_is_refused_unless_recorded_into(parsed, pytester):
    with pytest.raises(pytest.UsageError) as e:
        parsed("--perf-baseline-dir=nowhere/dir")
    assert str(e.value) == (f"--perf-baseline-dir {pytester.path / 'nowhere' / 'dir'} does not exist: give the folder "
                            "that holds the baseline files, or record into it with --perf-update-baselines")
    assert parsed("--perf-baseline-dir=nowhere/dir", "--perf-update-baselines").baseline_dir == pytester.path / "nowhere/dir"


def test_folder_options_that_are_files_are_refused(parsed, pytester):
    (pytester.path / "a_file").write_text("")
    with pytest.raises(pytest.UsageError) as e:
        parsed("--perf-baseline-dir=a_file")
    assert str(e.value) == f"--perf-baseline-dir {pytester.path / 'a_file'} is a file; give a folder"
    with pytest.raises(pytest.UsageError) as e:
        parsed("--perf-trace-dir=a_file/traces")
    assert str(e.value) == "--perf-trace-dir a_file/traces: a_file is a file; give a folder"
    pytester.makeini("[pytest]\nperf_baseline_dir = a_file/baselines\n")
    with pytest.raises(pytest.UsageError) as e:
        parsed()
    folder = pytester.path / "a_file" / "baselines"
    assert str(e.value) == f"ini option perf_baseline_dir: {folder}: {pytester.path / 'a_file'} is a file; give a folder"


def test_a_value_apart_from_its_option_that_names_a_folder_outside_the_run_is_refused_saying_to_join_them(
        pytester, tmp_path_factory, monkeypatch):
    """pytest finds the rootdir before it knows the plugin's options: `--perf-against-cache DIR`, DIR an existing folder
    elsewhere, made DIR the rootdir, and every test id and REF's repository with it."""
    pytester.makeconftest('pytest_plugins = ["torch_perf_suite.plugin"]\n')
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    outside = tmp_path_factory.mktemp("ref-cache")
    monkeypatch.chdir(pytester.path)
    result = pytester.runpytest("--perf-against-cache", str(outside))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --perf-against-cache {outside}: write it --perf-against-cache={outside}: pytest "
                                 "finds its rootdir before it knows --perf-against-cache, takes *"])
    pytester.runpytest(f"--perf-against-cache={outside}").assert_outcomes(passed=1)
    (pytester.path / "traces").mkdir()
    pytester.runpytest("--perf-trace-dir", "traces", "--perf-smoke", "test_a.py").assert_outcomes(passed=1)  # inside


def test_help_names_each_default_and_ini_name(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    pytester.makeconftest('pytest_plugins = ["torch_perf_suite.plugin"]\n')
    out = pytester.runpytest("--help").stdout.str()
    squeezed = re.sub(r"\s+", " ", out)
    for name in ("warmup", "rounds", "max_rounds", "ci_pct", "steps", "round_s", "profile_steps", "tolerance", "host_tolerance"):
        option, default = "--perf-" + name.replace("_", "-"), getattr(Measure(), name)
        value = next(o.value for o in settings.OPTIONS if o.name == name)  # the README's placeholder: N, PCT, S
        assert re.search(rf"{option}={value} {re.escape(settings.MEASURE_HELP[name])} "
                         rf"\(default: {default}; ini: perf_{name}\)", squeezed), name
        ini_help = rf"perf_{name} \(string\):? {re.escape(settings.MEASURE_HELP[name])} \(default: {default}\)"
        assert re.search(ini_help, squeezed), name
    assert "performance regression suite: --perf-warmup=N " in squeezed  # the options' own group
    # each flag says what it defaults to, and its ini name where it has one (the next option follows)
    for claim in [
        r"--perf-strict .*?\(default: off; ini: perf_strict\) --perf-update-baselines ",
        r"--perf-update-baselines .*?\(default: off\) --perf-baseline-dir=",
        r"--perf-baseline-dir=DIR .*?\(default: baselines/ in the rootdir; ini: perf_baseline_dir\) --perf-report=",
        r"--perf-report=PATH .*?\(default: terminal only\) --perf-trace-dir=",
        r"--perf-trace-dir=DIR .*?\(default: not kept\) --perf-smoke ",
        r"--perf-smoke .*?\(default: off\) --perf-workers=",
        rf"--perf-workers=N .*?\(default: one per core, here {host.cpu_count()}; on a node of several GPUs, one "
        r"per core of the GPU's share: the cores / the GPUs\) ",
        r"perf_strict \(bool\): strict mode \(see --perf-strict\) perf_baseline_dir \(string\): ",
        r"perf_baseline_dir \(string\): .*?\(default: baselines\) ",
    ]:
        assert re.search(claim, squeezed), claim


# --- the value checks' messages ---------------------------------------------------------------------------------


@pytest.mark.parametrize("check, text, message", [
    (positive_int, "ten", "expected a whole number of at least 1, got 'ten'"),
    (positive_int, "0", "expected a whole number of at least 1, got 0"),
    (percent, "lots", "expected a percentage such as 5 or 7.5, got 'lots'"),
    (percent, "100", "expected a percentage from 0 to below 100, got 100.0"),
    (percent, "-0.5", "expected a percentage from 0 to below 100, got -0.5"),
    (positive_percent, "0", "expected a percentage above 0 and below 100, got 0"),
    (positive_percent, "100", "expected a percentage from 0 to below 100, got 100.0"),
    (seconds, "soon", "expected a number of seconds such as 1 or 0.5, got 'soon'"),
    (seconds, "60.5", "expected a number of seconds from 0 to 60, got 60.5"),
    (seconds, "-1", "expected a number of seconds from 0 to 60, got -1.0"),
])
def test_check_messages(check, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as e:
        check(text)
    assert str(e.value) == message


@pytest.mark.parametrize("text, value", [("0", 0.0), ("60", 60.0), ("0.5", 0.5)])
def test_seconds_bounds_are_inclusive(text, value):
    assert seconds(text) == value


def test_percent_just_below_100_is_accepted():
    assert percent("99.9") == 99.9


def marks(*decorators):
    return [d.mark for d in decorators]


def test_marker_messages_in_full():
    with pytest.raises(ValueError) as e:
        for_marker(Measure(), marks(pytest.mark.perf(3, "x")), "t.py::t")
    assert str(e.value) == "t.py::t: @pytest.mark.perf(3, 'x') takes settings by name only, e.g. perf(rounds=3)"
    with pytest.raises(ValueError) as e:
        for_marker(Measure(), marks(pytest.mark.perf(stesp=4, rouns=2)), "t.py::t")
    assert str(e.value) == ("t.py::t: @pytest.mark.perf got unknown settings ['rouns', 'stesp']; known: "
                            "['chip_tolerance', 'ci_pct', 'count_margin', 'host_tolerance', 'max_rounds', 'profile_steps', "
                            "'round_s', 'rounds', 'steps', 'tolerance', 'unit_tolerance', 'warmup']")
    with pytest.raises(ValueError) as e:
        for_marker(Measure(), marks(pytest.mark.perf(round_s="long")), "t.py::t")
    assert str(e.value) == ("t.py::t: @pytest.mark.perf(round_s='long'): expected a number of seconds such as 1 or 0.5, "
                            "got 'long'")


def test_marker_values_are_converted_like_options():
    m = for_marker(Measure(), marks(pytest.mark.perf(ci_pct="2.5%", round_s=0, warmup="3")), "t")
    assert (m.ci_pct, m.round_s, m.warmup) == (2.5, 0.0, 3)
    assert for_marker(Measure(steps=7), [], "t") == Measure(steps=7)


def test_default_workers_is_one_per_usable_core():
    assert settings.default_workers() == host.cpu_count()


@pytest.mark.parametrize("args, ini, message", [
    (["--perf-rounds=5", "--perf-max-rounds=2"], "",
     "max_rounds 2 is below rounds 5 (rounds are only ever added): give --perf-max-rounds at least --perf-rounds"),
    (["-o", "perf_strict=maybe"], "", "ini option perf_strict: invalid truth value 'maybe'; expected true or false"),
    ([], "perf_baseline_dir =  \n", "ini option perf_baseline_dir is empty: name the folder of the baseline files"),
])
def test_conflicting_or_unreadable_settings_are_one_line_naming_them(parsed, pytester, args, ini, message):
    if ini:
        pytester.makeini("[pytest]\n" + ini)
    with pytest.raises(pytest.UsageError) as e:
        parsed(*args)
    assert str(e.value) == message


def test_an_empty_baseline_dir_on_the_command_line_is_refused(pytester):
    pytester.makeconftest('pytest_plugins = ["torch_perf_suite.plugin"]\n')
    result = pytester.runpytest("--perf-baseline-dir=")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*argument --perf-baseline-dir: expected a folder, got an empty value"])
