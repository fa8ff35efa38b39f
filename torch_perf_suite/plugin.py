"""The pytest plugin: options, the `perf` fixture, baselines, the session report.

A test measures a workload (see parts.py for what one is) through the `perf` fixture (fixture.py)
and states its expectations. This module is the pytest glue: one PerfSession per pytest session
lives in `config.stash`; the fixture hands results back to it; the hooks record baselines, keep
traces of failed tests and write the report.
"""

from __future__ import annotations

import gzip
import shutil
import warnings
from collections.abc import Iterator

import pytest

from . import baselines, device, hooks, report, settings, syncs
from .fixture import Perf, PerfWarning, Result

SESSION = pytest.StashKey["PerfSession"]()
CROSS_GPU = pytest.StashKey[str]()  # why --benchmark-compare compares across GPU models, if it does
__all__ = ["Perf", "PerfWarning", "Result", "PerfSession"]
BENCHMARK_OFF = {  # pytest-benchmark's options that take the perf scenarios' benchmark away, and what they do to it
    "--benchmark-skip": "pytest-benchmark then skips every perf scenario, so throughput goes unchecked",
    "--benchmark-disable": "pytest-benchmark then keeps no benchmark record (no table, nothing to --benchmark-json, "
                           "--benchmark-save or --benchmark-compare); the perf checks still run",
}


class PerfSession:
    def record(self, test_id: str, entry: dict) -> None:
        """Save one passed test's baseline entry at once (atomic): an interrupted run keeps what it recorded."""
        self.updates[test_id] = entry
        try:
            self.baseline_file.save({test_id: entry})
        except (OSError, baselines.BaselineError) as e:
            self.save_error = f"baselines NOT recorded into {self.baseline_file.path}: {e}"

    def write_report(self, final: bool = False) -> list:
        """After each test (the tables), and at the end (`final`: the charts' images too, drawn once)."""
        if not self.settings.report or self.report_error:
            return []
        try:
            return report.write(self.settings.report, self.results.values(), self.device.env, self.sections, self.settings.smoke,
                                self.charts, images=final)
        except OSError as e:
            self.report_error = f"perf report NOT written to {self.settings.report}: {e}"
            return []

    def __init__(self, config):
        self.settings = settings.SessionSettings.from_config(config)
        self.device = device.detect_device()
        config.hook.pytest_perf_update_environment(env=self.device.env)
        self.results: dict[str, Result] = {}
        # (part, loader_key or gpu_key, settings) -> (Throughput, test id): one measurement of each a session
        self.shared: dict = {}
        self.deselected: set[str] = set()  # tests that -k or -m left out: a claim over one of them is not checked
        self.updates: dict[str, dict] = {}
        self.sections: dict[str, list[dict]] = {}
        self.charts: dict[str, report.Chart] = {}  # section title -> how to draw it
        self.baseline_file: baselines.BaselineFile | None = None
        self.baseline_note: str | None = None  # a corrupt file moved aside, an old schema
        self.save_error: str | None = None
        self.report_error: str | None = None
        if self.device.is_gpu and not self.settings.smoke:
            gpu = self.device.env["gpu"]
            path = self.settings.baseline_dir / f"{baselines.gpu_slug(gpu)}.json"
            try:
                if self.settings.update_baselines:
                    self.baseline_file, self.baseline_note = baselines.BaselineFile.load_for_update(path, gpu)
                else:
                    self.baseline_file = baselines.BaselineFile.load(path, gpu)
            except (baselines.BaselineError, OSError) as e:
                raise pytest.UsageError(str(e)) from None
            if self.baseline_file.old_schema and not self.settings.update_baselines:
                self.baseline_note = (
                    f"{path} is an old baseline file (schema 1): it holds one pipeline number per test and no host, so "
                    "GPU-side and loader numbers are not checked and pipeline numbers are not comparable. "
                    + baselines.RERECORD[0].upper() + baselines.RERECORD[1:]
                )


# --- hooks ------------------------------------------------------------------------------------


def pytest_addoption(parser):
    settings.add_options(parser)


def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(hooks)


def pytest_configure(config):
    found = [a for sources in config.hook.pytest_perf_sync_sources() for a in sources or ()]
    wrong = [a for a in found if not isinstance(a, syncs.Advice)]
    if wrong:
        raise pytest.UsageError(f"pytest_perf_sync_sources returned {wrong[0]!r}; return a list of torch_perf_suite.Advice")
    syncs.user_sources = tuple(found)
    session = config.stash[SESSION] = PerfSession(config)
    _refuse_xdist(config, session)
    benchmark_off = [f"{o}: {why}" for o, why in BENCHMARK_OFF.items()
                     if config.getoption(o[2:].replace("-", "_"), default=False)]
    if benchmark_off:
        why = "; ".join(benchmark_off)
        if session.settings.strict:
            raise pytest.UsageError(f"--perf-strict refuses {why}. Drop the option, or drop --perf-strict.")
        try:
            config.issue_config_time_warning(PerfWarning(why), stacklevel=2)  # into pytest's warnings summary
        except PerfWarning:  # -W error (or filterwarnings) made it an error
            raise pytest.UsageError(f"{why}. Drop the option.") from None


def _refuse_xdist(config, session) -> None:
    """pytest-xdist's -n: refused where it would measure or write: one GPU is measured from one process,
    a ladder step is compared with its predecessor measured in the same process, and the report and
    baseline files have one writer. Smoke runs that write no file may use it."""
    workers = config.getoption("numprocesses", default=None)
    s = session.settings
    if not workers or hasattr(config, "workerinput"):
        return
    writes = [o for o, on in (("--perf-report", s.report), ("--perf-update-baselines", s.update_baselines)) if on]
    if (session.device.is_gpu and not s.smoke) or writes:
        what = f"with {' and '.join(writes)}" if writes else "on a GPU"
        raise pytest.UsageError(
            f"-n {workers} (pytest-xdist) {what}: the perf scenarios measure one GPU from one process, compare a "
            "ladder step with its predecessor measured in the same process, and write one report and one baseline "
            "file. Run them without -n (a --perf-smoke run without --perf-report may use it).")


@pytest.hookimpl(trylast=True)  # after -k and -m deselected what they do
def pytest_collection_modifyitems(config, items):
    """A bad `@pytest.mark.perf(...)` is a usage error naming the test, before any test runs."""
    measure = config.stash[SESSION].settings.measure
    for item in items:
        try:
            settings.for_marker(measure, item.iter_markers("perf"), item.nodeid)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None


def pytest_deselected(items):
    if items and SESSION in items[0].config.stash:
        items[0].config.stash[SESSION].deselected.update(item.nodeid for item in items)


@pytest.fixture
def perf(request, benchmark) -> Iterator[Perf]:
    """Measure a training workload and assert on its throughput, syncs and baseline.

    torch's global settings (TF32, cuDNN, default dtype: torch_state.SETTINGS) are restored after
    the test, with a warning naming any the test left changed. It requests `benchmark` by name, so that
    pytest-benchmark's --benchmark-only selects the perf tests."""
    session = request.config.stash[SESSION]
    if not session.settings.smoke and not session.device.is_gpu:
        reason = (
            "no CUDA GPU on this machine; the perf scenarios measure GPU training. "
            "Run with --perf-smoke to check that every recipe builds and trains on this device."
        )
        if session.settings.strict:
            pytest.fail(f"--perf-strict: {reason}", pytrace=False)
        pytest.skip(reason)
    from . import torch_state  # imports torch: only where a perf test runs

    saved = torch_state.snapshot()
    yield Perf(session, request, benchmark)
    left = torch_state.restore(saved)  # the next scenario starts from the settings this one found
    if left:
        changed = ", ".join(f"{name} {now!r} (was {then!r})" for name, (now, then) in left.items())
        warnings.warn(PerfWarning(f"{request.node.nodeid} left torch settings changed: {changed}; restored them. "
                                  "Set them around the step (torch_perf_suite.torch_state.applied) instead"), stacklevel=1)


@pytest.fixture
def perf_session(request) -> PerfSession:
    """The session's settings and the results measured so far, for checks across tests."""
    return request.config.stash[SESSION]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" or SESSION not in item.config.stash:
        return
    session = item.config.stash[SESSION]
    result = session.results.get(item.nodeid)
    if result is None:
        return
    if rep.passed and session.settings.update_baselines and session.baseline_file is not None:
        session.record(item.nodeid, result.baseline_entry(session.device.env))
    if rep.failed and result.trace and result.trace.exists() and session.settings.trace_dir:
        kept = session.settings.trace_dir / (result.trace.name + ".gz")
        try:
            session.settings.trace_dir.mkdir(parents=True, exist_ok=True)
            with open(result.trace, "rb") as src, gzip.open(kept, "wb") as dst:
                shutil.copyfileobj(src, dst)
            result.notes.append(f"trace kept: {kept}")
        except OSError as e:
            result.notes.append(f"trace not kept ({e}); it is still at {result.trace}")
    if rep.passed and result.trace and result.trace.exists():
        result.trace.unlink()  # traces run to tens of MB; a failed test's stays in its tmp_path
    result.notes.insert(0, "FAILED" if rep.failed else "passed")
    session.write_report()  # after every test: an interrupted run keeps what it measured


def pytest_unconfigure(config):
    syncs.user_sources = ()  # the next session (pytester's, say) asks its own plugins


def pytest_sessionfinish(session):
    perf = session.config.stash.get(SESSION, None)
    if perf and (perf.save_error or perf.report_error) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # what the user asked to be written was not


def pytest_terminal_summary(terminalreporter, config):
    if CROSS_GPU in config.stash:
        terminalreporter.section("WARNING", sep="!", red=True, bold=True)
        terminalreporter.write_line(config.stash[CROSS_GPU], red=True, bold=True)
    perf = config.stash.get(SESSION, None)
    if not perf:
        return
    if perf.results:
        terminalreporter.section("perf report")
        terminalreporter.write_line(report.markdown(perf.results.values(), perf.device.env, perf.sections, perf.settings.smoke,
                                                    perf.charts))
    for line in filter(None, [perf.baseline_note, perf.save_error, perf.report_error]):
        terminalreporter.write_line(line, red=True, bold=True)
    if perf.updates and not perf.save_error:
        terminalreporter.write_line(f"recorded {len(perf.updates)} baseline(s) into {perf.baseline_file.path}")
    if perf.settings.update_baselines and perf.baseline_file is None:
        terminalreporter.write_line("--perf-update-baselines recorded nothing: baselines are recorded only on a CUDA GPU "
                                    "outside --perf-smoke", yellow=True)
    if perf.settings.report:
        written = perf.write_report(final=True)
        if not perf.report_error:
            empty = "" if perf.results else " (no test was measured: no CUDA GPU and no --perf-smoke, or nothing selected)"
            terminalreporter.write_line("perf report written to " + ", ".join(map(str, written)) + empty)


def pytest_benchmark_update_machine_info(config, machine_info):
    perf = config.stash.get(SESSION, None)
    machine_info["gpu"] = perf.device.env if perf else device.detect_device().env


def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info, compared_benchmark):
    ours = machine_info.get("gpu", {}).get("gpu")
    theirs = compared_benchmark.get("machine_info", {}).get("gpu", {}).get("gpu")
    if ours == theirs:
        return
    msg = (
        f"COMPARING ACROSS GPU MODELS: this run is on {ours!r}, the saved run on {theirs!r} "
        f"({benchmarksession.storage.location}). The differences below are not regressions. "
        "Compare against a run saved on the same GPU model (--benchmark-compare=NNNN)."
    )
    strict = config.getoption("--perf-strict")
    if strict is None:
        strict = config.getini("perf_strict")
    if strict:
        raise pytest.UsageError("--perf-strict: " + msg)
    config.stash[CROSS_GPU] = msg
    benchmarksession.logger.warning(msg)


def pytest_report_header(config):
    if CROSS_GPU in config.stash:
        return ["WARNING: " + config.stash[CROSS_GPU]]
