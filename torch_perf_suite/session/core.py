"""One pytest session of the suite: its settings, device and baseline files, the results the `perf` fixture hands
back, and what is recorded, kept and reported at the end. plugin.py's hooks delegate here.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import pytest

from ..against.ref import is_ref_run
from ..against.state import RefState, check_bisect, check_ref, load_records
from ..findings import Finding, PerfWarning
from ..fixture import references
from ..fixture.result import Result
from ..loader import instructions
from ..loader.cost import timer_folder
from ..machine import device
from ..report import causes
from ..report.charts import Chart
from ..syncs.advice import Advice
from ..syncs.recording import count_steps
from ..throughput import timing
from . import benchmark, early, options, runners, writing

STARTED = pytest.StashKey[float]()  # when pytest started, as the plugin's first hook saw it (perf_counter)


class PerfSession:
    def __init__(self, config, shards: int = 0):
        """`shards`: the pytest-xdist workers this process starts, as the controller of a sharded run (sharding.py)."""
        options.check_values_apart(list(config.invocation_params.args))
        self.settings = options.read_settings(config)
        # the session's seconds count from pytest's start (the plugin's first hook), so the imports before the session
        # (conftest.py, the plugins', torch where one imports it) are measured; without that hook (the plugin registered
        # by a conftest.py, too late for it), from now
        now = time.perf_counter()
        started = config.stash.get(STARTED, None)
        self.imports_s, self.started, self.configured = None if started is None else now - started, started or now, now
        self.tests_span: list[float] = []  # when the first test began and the last one ended (`test_span`)
        self.in_test, self.collected = False, now  # a test runs now; when the tests were collected and selected
        self.laps: dict[str, timing.Laps] = {}  # test id -> where its call's seconds went
        self._config, self.shards = config, shards
        workerinput = getattr(config, "workerinput", {})
        self.worker: str | None = workerinput.get("workerid")  # the pytest-xdist worker this process is, if one
        self.gpu: str | None = workerinput.get("perf_gpu")  # the CUDA_VISIBLE_DEVICES its controller gave it, if any
        self.cores: list[int] = workerinput.get("perf_cores") or []  # the cores its controller gave it, if any
        self.worker_outputs: dict[str, dict] = {}  # the controller's: what each worker sent at its end
        self.merged, self.written = None, []  # the controller's: the workers' reports as one, and its files
        self.device = _device(config, self.worker, self.gpu)
        self.results: dict[str, Result] = {}
        self.shared: dict = {}  # (part, loader_key or gpu_key, settings) -> (Throughput, test id): one measurement each
        self.deselected: set[str] = set()  # tests that -k or -m left out: a claim over one of them is not checked
        self.perf_tests = 0  # the selected tests that ask for `perf` (tests_selected)
        self.sections: dict[str, list[dict]] = {}
        self.charts: dict[str, Chart] = {}  # section title -> how to draw it
        self.failed: dict[str, list[tuple[str, list[Finding]]]] = {}  # test id -> its checks failed so far (Judge.fail)
        self.report_error: str | None = None
        self.records = references.Records(self.settings, self.device, config.rootpath, config.stash.get(early.COUNTER, None))
        self.loader_dir: str | None = None  # where the loaders' per-batch timings are written, made on first use
        self.ref_state = RefState()  # --perf-against REF: what the tests compare with, its turns and seconds
        self.as_ref = self.records.as_ref = is_ref_run(self.settings.update_baselines)  # REF's run, for another session
        self.bisecting: tuple | None = check_bisect(self, config) if self.settings.bisect else None
        # a process that runs tests here counts its loaders here
        self._prestart(config, runs_tests=not (shards or self.bisecting or self.as_ref or config.option.collectonly))
        if self.settings.ref:
            check_ref(self.settings.ref, self.settings.update_baselines, Path(config.rootpath))
            self.ref_state.turns_ahead(self)
            return  # the baselines are REF's, loaded once it was measured (RefState.compare)
        load_records(self.records, self.settings.baseline_dir)
        file = self.records.baseline_file  # None without a GPU
        if file is not None and not self.settings.smoke and (older := file.older_than_the_host_count()):  # said once
            config.pluginmanager.register(_Header([older]), "perf_older_entries")

    def _prestart(self, config, runs_tests: bool) -> None:
        """The counting process started where a loader will be counted again (Records.prestart_counter), and the run's
        header saying so (`recount`, early.recount_line; "" where none will be)."""
        changed = self.records.prestart_counter(self.settings.baseline_dir, runs_tests=runs_tests)
        self.recount = early.recount_line(self.settings.baseline_dir, changed, changed and instructions.key())
        self.recount_s = 0.0  # stopping the counting process at the end (`finish`)
        if self.recount:
            config.pluginmanager.register(_Header([self.recount]), "perf_recount")

    def split(self, config, items) -> None:
        """--perf-split I/N: keep this runner's part of the selected tests (runners.split); the rest deselected."""
        try:
            items[:], dropped = runners.split(items, self.settings.split, self.settings.durations)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
        if dropped:
            config.hook.pytest_deselected(items=dropped)

    def laps_of(self, test_id: str) -> timing.Laps:
        return self.laps.setdefault(test_id, timing.Laps())

    def say(self, line: str) -> None:
        """A line on the terminal as it happens (what is slow, and why), on a line of its own; inside a test's setup or
        call too, past pytest's capture (as its live logging writes)."""
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        capture = self._config.pluginmanager.get_plugin("capturemanager")
        if reporter is not None:
            with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
                reporter.ensure_newline()
                reporter.write_line(line, yellow=True)

    def test_span(self, began: bool) -> None:
        """A test's protocol began or ended: the first beginning and the last end are kept, and whether a test runs
        now (`writing.spent`: a report written inside a test counts it in the tests' span)."""
        self.tests_span[min(len(self.tests_span), 1):] = [time.perf_counter()]
        self.in_test = began

    @property
    def reference(self) -> str:
        """What this run's numbers are compared with, as a failure names it."""
        ref = self.ref_state.ref
        return f"REF {ref.label}, measured on this GPU" if ref else str(self.records.baseline_file.path)

    @property
    def compared_with(self) -> str:
        """What the loader's verdicts compare with, in a few words."""
        return f"REF {self.ref_state.ref.label}" if self.ref_state.ref else "the baseline"

    def loader_folder(self, test_id: str) -> Path:
        """A folder for one test's per-batch loader timings, under the session's (removed at its end)."""
        if self.loader_dir is None:
            self.loader_dir = tempfile.mkdtemp(prefix="perf-loader-")
        return timer_folder(self.loader_dir, test_id)

    @property
    def sharded(self) -> bool:
        """True inside a pytest-xdist worker that was given a GPU of its own: a test that needs every GPU of the
        node (marker multi_gpu) skips itself there."""
        return self.gpu is not None

    @property
    def clock(self) -> str | None:
        """The table of seconds (records/durations.py) this run's tests are timed into and a sharded run is ordered by: the
        GPU model's, or the smoke runs' (None); a run that measures nothing (no GPU, no --perf-smoke) has none."""
        return self.device.env["gpu"] if self.device.is_gpu and not self.settings.smoke else None

    # --- what the hooks delegate -------------------------------------------------------------------

    def skip(self, reason: str) -> None:
        """A check that cannot be made in this run: the test skips, or fails under --perf-strict (the nightly's mode)."""
        if self.settings.strict:
            pytest.fail(f"--perf-strict: {reason}", pytrace=False)
        pytest.skip(reason)

    def no_device(self) -> str | None:
        """Why a perf test cannot run on this machine: no GPU (and no --perf-smoke); None where it can."""
        if self.settings.smoke or self.device.is_gpu:
            return None
        return (f"{benchmark.NO_GPU} on this machine: a perf test measures GPU training. "
                "Run with --perf-smoke to check that it builds and trains on this device.")

    def require_device(self) -> None:
        """A perf scenario measures GPU training: without a GPU (and without --perf-smoke) it skips, or fails under
        --perf-strict, saying how to check the recipes on this machine."""
        if reason := self.no_device():
            self.skip(reason)

    def tests_selected(self, items) -> None:
        """The tests that ask for `perf` counted and, where no GPU runs them, marked to skip before the session fixtures
        they ask for are made (the image dataset: minutes on a CPU); under --perf-strict each fails at its setup."""
        perf_items = [item for item in items if "perf" in getattr(item, "fixturenames", ())]
        self.perf_tests = len(perf_items)
        if (reason := self.no_device()) and not self.settings.strict:
            for item in perf_items:
                item.add_marker(pytest.mark.skip(reason=reason))

    def test_done(self, test_id: str, passed: bool, failed: bool, failure: str | None = None) -> None:
        """A measured test's call ended: a passed one is recorded under --perf-update-baselines, a failed one's trace
        kept under --perf-trace-dir (a passed one's removed: traces run to tens of MB), and the report rewritten (an
        interrupted run keeps what it measured)."""
        result = self.results.get(test_id)
        if result is None:
            return
        if passed and self.settings.update_baselines:
            self.records.record(test_id, result)
        if failed and result.trace and result.trace.exists() and self.settings.trace_dir:
            result.notes.append(writing.keep_trace(self.settings.trace_dir, result.trace))
        if passed and result.trace and result.trace.exists():
            result.trace.unlink()  # a failed test's stays in its tmp_path
        # the report keeps the whole text: a failure's first line is its causes again, for pytest's short summary
        result.outcome, result.failure = ("FAILED", failure and causes.whole(failure, test_id)) if failed else ("passed", None)
        writing.write_report(self)

    def finish(self, config) -> bool:
        """At the session's end: the callgrind process and the turns' processes stopped; an xdist worker hands its
        report, lines and records to its controller; a sharded run's controller merges the workers' reports. True where
        something asked to be written (a baseline, the report) was not."""
        stopping = time.perf_counter()
        self.records.counter.close()
        if self.recount:  # valgrind's end, after the count: time the session line says
            self.recount_s = time.perf_counter() - stopping
        self.ref_state.close()
        if self.loader_dir:
            shutil.rmtree(self.loader_dir, ignore_errors=True)
        if self.worker and hasattr(config, "workeroutput"):  # for the controller, which reports for its workers
            config.workeroutput["perf"] = writing.worker_output(self)
        if self.shards:
            self.written = writing.merge_reports(self)
        workers_failed = any(out.get("failed") for out in self.worker_outputs.values())
        return bool(self.records.save_error or self.report_error or workers_failed)


@contextlib.contextmanager
def torch_settings_kept(test_id: str):
    """torch's global settings (torch_state.SETTINGS) as the test found them, restored after it with a warning
    naming any it left changed: the next scenario starts from the same settings."""
    from ..machine import torch_state  # imports torch: only where a perf test runs

    saved = torch_state.snapshot()
    yield
    left = torch_state.restore(saved)
    if left:
        changed = ", ".join(f"{name} {now!r} (was {then!r})" for name, (now, then) in left.items())
        warnings.warn(PerfWarning(f"{test_id} left torch settings changed: {changed}; restored them. "
                                  "Set them around the step (torch_perf_suite.torch_settings) instead"), stacklevel=1)


class _Header:
    """Lines the run's header shows (pytest_report_header), registered by the session that has them."""

    def __init__(self, lines: list[str]):
        self.lines = lines

    def pytest_report_header(self) -> list[str]:
        return self.lines


def _device(config, worker: str | None, gpu: str | None) -> device.Device:
    """The device the tests run on, its sync counter the profiler's (from the syncs' side), its environment as the
    project's hooks complete it; a sharded run's worker sees only the GPU it was given."""
    found = device.detect_device()
    found.count_steps = count_steps
    if gpu is not None and found.is_gpu:
        _sees_its_gpu_only(worker, gpu)
    config.hook.pytest_perf_update_environment(env=found.env)
    return found


def _sees_its_gpu_only(worker: str, gpu: str) -> None:
    """A sharded run's worker sees the one GPU it was given, or the run stops saying why: CUDA's driver read
    CUDA_VISIBLE_DEVICES before sharding.pin_worker set it (torch.cuda.is_available() at import time starts the driver
    without torch.cuda.is_initialized() saying so)."""
    if device.gpu_count() != 1:
        raise pytest.UsageError(
            f"xdist worker {worker}: CUDA sees {device.gpu_count()} GPUs, not only GPU {gpu} that it was "
            "given: CUDA was started before the worker set CUDA_VISIBLE_DEVICES (torch.cuda.is_available() or other "
            "CUDA work at import time, in a conftest.py or plugin). Move that into a fixture, or run without -n.")


def sync_sources(config) -> tuple[Advice, ...]:
    """What the project's pytest_perf_sync_sources hooks name (hooks.py), each checked to be an Advice."""
    found = [a for sources in config.hook.pytest_perf_sync_sources() for a in sources or ()]
    wrong = [a for a in found if not isinstance(a, Advice)]
    if wrong:
        raise pytest.UsageError(f"pytest_perf_sync_sources returned {wrong[0]!r}; return a list of torch_perf_suite.Advice")
    return tuple(found)
