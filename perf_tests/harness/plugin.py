"""The pytest plugin: options, the `perf` fixture, baselines, the session report.

A test measures a workload (anything with `step()` and `batch_size`; optionally `warmup_steps`, the
steps it needs to reach its steady state, and `cycle_steps`, the period of its data's arrival, to
which the steps per round are rounded up) and states its expectations:

    result = perf.measure(workload)
    perf.assert_syncs(result, per_step=0)
    perf.assert_baseline(result)

One PerfSession per pytest session lives in `config.stash`; the fixture hands results back to it.
"""

from __future__ import annotations

import gzip
import math
import re
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from . import baselines, device, report, settings
from .syncs import SyncCount
from .timing import Throughput, measure_throughput

SESSION = pytest.StashKey["PerfSession"]()
CROSS_GPU = pytest.StashKey[str]()  # why --benchmark-compare compares across GPU models, if it does


class PerfWarning(UserWarning):
    """A check that could not be made: no baseline, no predecessor measured in this run."""


@dataclass
class Result:
    test_id: str
    throughput: Throughput
    syncs: SyncCount | None  # None where nothing was profiled (smoke runs, CPU)
    peak_mem_gb: float | None
    trace: Path | None
    notes: list[str] = field(default_factory=list)
    baseline: dict | None = None  # the entry this run was compared with
    change_pct: float | None = None  # against that baseline
    extra: dict = field(default_factory=dict)  # columns a test adds to its report row

    @property
    def samples_per_s(self) -> float:
        return self.throughput.median

    def baseline_entry(self, env: dict) -> dict:
        return {
            "samples_per_s": round(self.samples_per_s, 1),
            "spread_pct": round(self.throughput.spread_pct, 2),
            "syncs_per_step": round(self.syncs.per_step, 3) if self.syncs else 0.0,
            "peak_mem_gb": round(self.peak_mem_gb or 0.0, 2),
            "env": env,
        }


class PerfSession:
    def __init__(self, config):
        self.settings = settings.SessionSettings.from_config(config)
        self.device = device.detect_device()
        self.results: dict[str, Result] = {}
        self.updates: dict[str, dict] = {}
        self.sections: dict[str, list[dict]] = {}
        self.baseline_file: baselines.BaselineFile | None = None
        if self.device.is_gpu and not self.settings.smoke:
            gpu = self.device.env["gpu"]
            path = self.settings.baseline_dir / f"{baselines.gpu_slug(gpu)}.json"
            try:
                self.baseline_file = baselines.BaselineFile.load(path, gpu)
            except baselines.BaselineError as e:
                raise pytest.UsageError(str(e)) from None


class Perf:
    """The `perf` fixture: measure a workload, then assert on the result."""

    def __init__(self, session: PerfSession, request, benchmark):
        self._session = session
        self._request = request
        self._benchmark = benchmark
        self.test_id = request.node.nodeid
        marker = request.node.get_closest_marker("perf")
        try:
            self.measure_settings = settings.for_marker(session.settings.measure, marker.kwargs if marker else {}, self.test_id)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None

    @property
    def device(self) -> str:
        return self._session.device.name

    @property
    def smoke(self) -> bool:
        return self._session.settings.smoke

    @property
    def workers(self) -> int:
        return self._session.settings.workers

    @property
    def strict(self) -> bool:
        return self._session.settings.strict

    def measure(self, workload) -> Result:
        """Time `workload.step()` in rounds, then count its syncs in a separate profiled window."""
        s = self.measure_settings
        dev = self._session.device
        warmup, rounds, steps, profile_steps = s.warmup, s.rounds, s.steps, s.profile_steps
        warmup = max(warmup, getattr(workload, "warmup_steps", 0))
        cycle = getattr(workload, "cycle_steps", 1)
        steps = -(-steps // cycle) * cycle  # whole loader cycles: 8 workers deliver 8 batches at a time
        if self.smoke:
            warmup, rounds, steps = 1, 1, 2

        def pedantic(fn, setup, rounds):
            self._benchmark.pedantic(fn, setup=setup, rounds=rounds, iterations=1, warmup_rounds=0)

        dev.reset_peak_memory()
        throughput = measure_throughput(
            workload.step, dev.synchronize, batch_size=workload.batch_size,
            warmup=warmup, rounds=rounds, steps=steps, runner=pedantic,
        )
        peak = dev.peak_memory_gb()
        trace = None
        syncs = None
        if not self.smoke:
            trace = self._request.getfixturevalue("tmp_path") / (re.sub(r"[^\w.-]+", "_", self.test_id) + ".json")
            syncs = dev.count_syncs(workload.step, profile_steps, trace)
        result = Result(self.test_id, throughput, syncs, peak, trace)
        self._session.results[self.test_id] = result
        self._benchmark.extra_info.update(
            samples_per_s=round(result.samples_per_s, 1),
            spread_pct=round(throughput.spread_pct, 2),
            syncs_per_step=syncs.per_step if syncs else None,
            peak_mem_gb=peak,
            gpu=dev.env["gpu"],
        )
        return result

    # --- assertions ---------------------------------------------------------------------------

    def assert_syncs(self, result: Result, per_step: float | None = None, *, at_least: float | None = None,
                     from_library: str | None = None) -> None:
        """Exactly `per_step` syncs per step, or `at_least` that many, optionally all from `from_library`.

        For a pitfall (`at_least`), fewer syncs than expected fails too: the pitfall is gone and the
        workaround that the scenario documents can be retired, knowingly.
        """
        if self.smoke:
            return
        if (per_step is None) == (at_least is None):
            raise TypeError("assert_syncs takes exactly one of per_step= and at_least=")
        counted = self._need_syncs(result)
        measured = counted.per_step
        head = (
            f"{self.test_id}: measured {measured:.2f} host-device syncs per step "
            f"({counted.total} in {counted.steps} profiled steps)"
        )
        where = f"\n{counted.describe()}\ntrace: {result.trace}"
        if per_step is not None and abs(measured - per_step) > 1e-9:
            more = "a new sync appeared" if measured > per_step else "fewer syncs than this scenario documents"
            pytest.fail(f"{head}, expected {per_step:g} ({more}):{where}", pytrace=False)
        if at_least is not None and measured < at_least:
            env = self._session.device.env
            pytest.fail(
                f"{head}, expected at least {at_least:g}: the pitfall this scenario documents no longer syncs "
                f"with torch {env['torch']} and torchmetrics {env['torchmetrics']}. If that is an upgrade's "
                f"doing, retire the workaround and this expectation together.{where}",
                pytrace=False,
            )
        if from_library is not None:
            stray = [s for s in counted.sources if from_library not in s.library_line]
            if stray:
                listing = "\n".join(s.describe() for s in stray)
                pytest.fail(f"{head}; expected every sync to come from {from_library!r}, these do not:\n{listing}", pytrace=False)

    def _need_syncs(self, result: Result) -> SyncCount:
        if result.syncs is None:
            raise RuntimeError(f"{self.test_id}: no sync count; syncs are counted only on a CUDA GPU outside --perf-smoke")
        return result.syncs

    def result_of(self, test: str) -> Result | None:
        """The result of another test measured in this run: a full test id, or a parameter id of
        this test function ("baseline" for test_ladder[baseline])."""
        if "::" not in test:
            test = f"{self.test_id.split('[', 1)[0]}[{test}]"
        return self._session.results.get(test)

    @staticmethod
    def ratio(result: Result, other: Result | None) -> float | None:
        return result.samples_per_s / other.samples_per_s if other else None

    def assert_faster(self, result: Result, than: str, by: float) -> None:
        """At least `by` times the samples/s of test `than`, measured in this pytest run."""
        self._compare(result, than, by, f"at least {by:g}x")

    def assert_not_slower(self, result: Result, than: str, noise_pct: float) -> None:
        """No slower than test `than` beyond `noise_pct` percent (a step the article says did not help)."""
        self._compare(result, than, 1 - noise_pct / 100, f"no less than {1 - noise_pct / 100:g}x")

    def _compare(self, result: Result, than: str, at_least: float, wanted: str) -> None:
        """Fail unless result / than >= at_least, less the two runs' noise (twice their combined spread)."""
        if self.smoke:
            return
        other = self.result_of(than)
        if other is None:
            msg = f"{self.test_id}: {than} was not measured in this run, so the comparison with it is not made"
            if self.strict:
                pytest.fail(msg, pytrace=False)
            result.notes.append(f"not compared with {than}")
            warnings.warn(PerfWarning(msg), stacklevel=3)
            return
        got = self.ratio(result, other)
        noise_pct = 2 * math.hypot(result.throughput.spread_pct, other.throughput.spread_pct)
        result.extra[f"vs {than.rsplit('::', 1)[-1]}"] = got
        if got < at_least * (1 - noise_pct / 100):
            pytest.fail(
                f"{self.test_id}: {result.samples_per_s:,.0f} samples/s is {got:.3f}x {than} "
                f"({other.samples_per_s:,.0f} samples/s in this run); expected {wanted}, less "
                f"{noise_pct:.1f}% for noise (twice the combined spread of "
                f"{result.throughput.spread_pct:.1f}% and {other.throughput.spread_pct:.1f}%)",
                pytrace=False,
            )

    def add_row(self, section: str, **columns) -> None:
        """Add a row to a table of its own in the session report (the ladder's, say)."""
        if self.smoke:
            return
        self._session.sections.setdefault(section, []).append(columns)

    def assert_baseline(self, result: Result) -> None:
        """Not slower than this GPU's baseline beyond the tolerance (plus twice the recorded spread)."""
        if self.smoke:
            return
        session = self._session
        bf = session.baseline_file
        entry = bf.get(self.test_id) if bf else None
        if session.settings.update_baselines:
            result.notes.append("baseline recorded" if entry is None else "baseline re-recorded")
            return  # recorded at the end of the test if it passed
        if entry is None:
            msg = (
                f"{self.test_id}: no baseline for GPU {session.device.env['gpu']!r} in {bf.path}, throughput "
                f"not checked. Record one on this GPU: pytest '{self.test_id}' --perf-update-baselines"
            )
            if self.strict:
                pytest.fail(msg, pytrace=False)
            result.notes.append("no baseline")
            warnings.warn(PerfWarning(msg), stacklevel=2)
            return
        base = entry["samples_per_s"]
        result.baseline = entry
        result.change_pct = 100 * (result.samples_per_s / base - 1)
        allowed = baselines.allowed_drop_pct(self.measure_settings.tolerance, entry["spread_pct"])
        if result.change_pct < -allowed:
            pytest.fail(
                f"{self.test_id}: throughput regression: {result.samples_per_s:,.1f} samples/s against a baseline "
                f"of {base:,.1f} ({result.change_pct:+.1f}%; allowed -{allowed:.1f}% = tolerance "
                f"{self.measure_settings.tolerance:g}% + 2 x recorded spread {entry['spread_pct']:g}%).\n"
                f"  baseline: {bf.path}, recorded {entry['env'].get('date')} with torch {entry['env'].get('torch')}\n"
                f"  this run: spread {result.throughput.spread_pct:.2f}%, rounds "
                + ", ".join(f"{r:,.0f}" for r in result.throughput.rounds),
                pytrace=False,
            )


# --- hooks ------------------------------------------------------------------------------------


def pytest_addoption(parser):
    settings.add_options(parser)


def pytest_configure(config):
    config.stash[SESSION] = PerfSession(config)


@pytest.fixture
def perf(request) -> Perf:
    """Measure a training workload and assert on its throughput, syncs and baseline."""
    session = request.config.stash[SESSION]
    if not session.settings.smoke and not session.device.is_gpu:
        reason = (
            "no CUDA GPU on this machine; the perf scenarios measure GPU training. "
            "Run with --perf-smoke to check that every recipe builds and trains on this device."
        )
        if session.settings.strict:
            pytest.fail(f"--perf-strict: {reason}", pytrace=False)
        pytest.skip(reason)
    return Perf(session, request, request.getfixturevalue("benchmark"))


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
        session.updates[item.nodeid] = result.baseline_entry(session.device.env)
    if rep.failed and result.trace and result.trace.exists() and session.settings.trace_dir:
        session.settings.trace_dir.mkdir(parents=True, exist_ok=True)
        kept = session.settings.trace_dir / (result.trace.name + ".gz")
        with open(result.trace, "rb") as src, gzip.open(kept, "wb") as dst:
            shutil.copyfileobj(src, dst)
        result.notes.append(f"trace kept: {kept}")
    if rep.passed and result.trace and result.trace.exists():
        result.trace.unlink()  # traces run to tens of MB; a failed test's stays in its tmp_path
    result.notes.insert(0, "FAILED" if rep.failed else "passed")


def pytest_sessionfinish(session):
    perf = session.config.stash.get(SESSION, None)
    if perf and perf.updates and perf.baseline_file is not None:
        perf.baseline_file.save(perf.updates)


def pytest_terminal_summary(terminalreporter, config):
    if CROSS_GPU in config.stash:
        terminalreporter.section("WARNING", sep="!", red=True, bold=True)
        terminalreporter.write_line(config.stash[CROSS_GPU], red=True, bold=True)
    perf = config.stash.get(SESSION, None)
    if not perf or not perf.results:
        return
    text = report.markdown(perf.results.values(), perf.device.env, perf.sections, perf.settings.smoke)
    terminalreporter.section("perf report")
    terminalreporter.write_line(text)
    if perf.updates:
        terminalreporter.write_line(f"recorded {len(perf.updates)} baseline(s) into {perf.baseline_file.path}")
    if perf.settings.report:
        written = report.write(perf.settings.report, perf.results.values(), perf.device.env, perf.sections, perf.settings.smoke)
        terminalreporter.write_line("perf report written to " + ", ".join(map(str, written)))


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info["gpu"] = device.detect_device().env


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
