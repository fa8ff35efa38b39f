"""The pytest plugin: options, the `perf` fixture, baselines, the session report.

A test measures a workload (see parts.py for what one is) through the `perf` fixture (fixture.py)
and states its expectations. This module is the pytest glue: one PerfSession per pytest session
lives in `config.stash`; the fixture hands results back to it; the hooks record baselines, keep
traces of failed tests and write the report.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import baselines, device, durations, hooks, host, instructions, nvml, report, settings, syncs
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
    @property
    def sharded(self) -> bool:
        """True inside a pytest-xdist worker that was given a GPU of its own: a test that needs every GPU of the
        node (marker multi_gpu) skips itself there."""
        return self.gpu is not None

    def record(self, test_id: str, result: Result) -> None:
        """Save one passed test's baseline entry and loader instruction count at once (atomic): an interrupted run
        keeps what it recorded."""
        if self.baseline_file is not None:
            entry = self.updates[test_id] = result.baseline_entry(self.device.env)
            try:
                self.baseline_file.save({test_id: entry})
            except (OSError, baselines.BaselineError) as e:
                self.save_error = f"baselines NOT recorded into {self.baseline_file.path}: {e}"
        if result.instructions is not None and self.instructions_file is not None:
            try:
                self.instructions_file.save(self.instructions_key, {test_id: instructions.entry(result.instructions)})
                self.instructions_recorded += 1
            except (OSError, instructions.InstructionsError) as e:
                self.save_error = f"loader instruction counts NOT recorded into {self.instructions_file.path}: {e}"

    @property
    def clock(self) -> str | None:
        """The table of seconds (durations.py) this run's tests are timed into and a sharded run is ordered by: the
        GPU model's, or the smoke runs' (None); a run that measures nothing (no GPU, no --perf-smoke) has none."""
        return self.device.env["gpu"] if self.device.is_gpu and not self.settings.smoke else None

    def recorded(self) -> dict[str, int]:
        """The baseline files this process recorded into -> how many entries; empty where it recorded none."""
        found = {str(self.baseline_file.path): len(self.updates)} if self.updates and not self.save_error else {}
        if self.instructions_recorded and not self.save_error:
            found[f"{self.instructions_file.path} ({self.instructions_key})"] = self.instructions_recorded
        return found

    def document(self) -> dict:
        """This process's report as its JSON holds it; an xdist worker's says which worker and GPU it was."""
        cores = host.cpu_list(self.cores) if self.cores else None
        worker = {"id": self.worker, "cuda_visible_devices": self.gpu, "cores": cores} if self.worker else None
        return report.document(self.results.values(), self.device.env, self.sections, self.settings.smoke, self.charts, worker)

    def write_report(self, final: bool = False) -> list:
        """After each test (the tables), and at the end (`final`: the charts' images too, drawn once). An xdist worker
        writes PATH.<worker id>.md and .json, which its controller merges at the end (and draws the charts of)."""
        if not self.settings.report or self.report_error:
            return []
        path = self.settings.report
        if self.worker:
            path = path.with_name(f"{path.name}.{self.worker}")
        try:
            return report.write(path, self.document(), images=final and not self.worker)
        except OSError as e:
            self.report_error = f"perf report NOT written to {path}: {e}"
            return []

    def merge_reports(self) -> list[Path]:
        """The controller of a sharded run, at the end: the workers' reports as one (report.merge), kept for the
        terminal and, under --perf-report, written to PATH.md and PATH.json with the charts. A worker's report comes
        with its end (workeroutput), or, from a worker that crashed, from its partial file. The partial files
        (PATH.<worker id>.md and .json) are removed once merged; kept, and said so, where one cannot be read (the
        others are merged) or the merge failed."""
        docs = {wid: out["report"] for wid, out in self.worker_outputs.items() if out.get("report")}
        partial = _partial_reports(self.settings.report) if self.settings.report else {}
        unread: dict[str, str] = {}  # worker id -> why its partial report could not be read
        for wid, files in partial.items():
            js = next((f for f in files if f.suffix == ".json"), None)
            if wid not in docs and js:
                try:
                    docs[wid] = json.loads(js.read_text())
                except (OSError, ValueError) as e:  # a worker killed while writing it: the others' still merge
                    unread[wid] = f"{js}: {e}"
        try:
            self.merged = report.merge(docs)
            written = report.write(self.settings.report, self.merged) if self.settings.report else []
        except (OSError, ValueError) as e:
            kept = ", ".join(str(f) for files in partial.values() for f in files) or "none"
            self.report_error = f"perf report NOT merged into {self.settings.report}: {e}; the workers' reports: {kept}"
            return []
        if unread:
            self.report_error = f"perf report merged into {self.settings.report} without these workers' reports, kept: " + \
                "; ".join(unread.values())
        for f in (f for wid, files in partial.items() if wid not in unread for f in files):
            f.unlink(missing_ok=True)
        return written

    def __init__(self, config):
        self.settings = settings.SessionSettings.from_config(config)
        workerinput = getattr(config, "workerinput", {})
        self.worker: str | None = workerinput.get("workerid")  # the pytest-xdist worker this process is, if one
        self.gpu: str | None = workerinput.get("perf_gpu")  # the CUDA_VISIBLE_DEVICES its controller gave it, if any
        self.cores: list[int] = workerinput.get("perf_cores") or []  # the cores its controller gave it, if any
        self.shards = _xdist_workers(config)  # the workers this process starts, as the controller of a sharded run
        self.worker_outputs: dict[str, dict] = {}  # the controller's: what each worker sent at its end
        self.merged: dict | None = None  # the controller's: the workers' reports as one
        self.written: list[Path] = []  # the controller's: the merged report's files
        self.device = device.detect_device()
        if self.gpu is not None and self.device.is_gpu and device.gpu_count() != 1:
            # CUDA's driver read CUDA_VISIBLE_DEVICES before _pin_worker set it: torch.cuda.is_available() at import
            # time starts the driver without torch.cuda.is_initialized() saying so
            raise pytest.UsageError(
                f"xdist worker {self.worker}: CUDA sees {device.gpu_count()} GPUs, not only GPU {self.gpu} that it was "
                "given: CUDA was started before the worker set CUDA_VISIBLE_DEVICES (torch.cuda.is_available() or other "
                "CUDA work at import time, in a conftest.py or plugin). Move that into a fixture, or run without -n.")
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
        self.counter = instructions.Counter()  # the loader's instructions, counted in a callgrind process started on first use
        self.instructions_file: instructions.InstructionsFile | None = None
        self.instructions_key = ""
        self.instructions_recorded = 0
        if self.settings.instructions and (self.device.is_gpu or self.settings.smoke):
            try:
                self.instructions_file = instructions.InstructionsFile.load(self.settings.baseline_dir / "instructions.json")
            except instructions.InstructionsError as e:
                raise pytest.UsageError(str(e)) from None
            self.instructions_key = instructions.key()
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


@pytest.hookimpl(tryfirst=True)  # before any plugin (pytest-benchmark reads the GPU here) starts CUDA
def pytest_configure(config):
    for line in settings.markers():  # registered by the plugin: a user's project runs under --strict-markers too
        config.addinivalue_line("markers", line)
    _pin_worker(config)
    _confine_to_its_gpu(config)
    found = [a for sources in config.hook.pytest_perf_sync_sources() for a in sources or ()]
    wrong = [a for a in found if not isinstance(a, syncs.Advice)]
    if wrong:
        raise pytest.UsageError(f"pytest_perf_sync_sources returned {wrong[0]!r}; return a list of torch_perf_suite.Advice")
    syncs.user_sources = tuple(found)
    session = config.stash[SESSION] = PerfSession(config)
    _shard(config, session)
    if not session.worker and (session.settings.smoke or session.device.is_gpu):
        config.pluginmanager.register(_Clock(session), "perf_clock")
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


# --- pytest-xdist: the suite sharded over the GPUs of one node ----------------------------------


def _xdist_workers(config) -> int:
    """How many pytest-xdist workers this process starts: 0 where it runs the tests itself (no -n, -n 0,
    --collect-only, or an xdist worker)."""
    if (hasattr(config, "workerinput") or config.getoption("collectonly") or config.getoption("dist", "no") == "no"
            or not config.getoption("tx", None)):
        return 0
    from xdist.workermanage import parse_tx_spec_config  # -n N is N "popen" specs by now, -n auto resolved

    return len(parse_tx_spec_config(config))


def _pin_worker(config) -> None:
    """In a pytest-xdist worker of a sharded run: the cores its controller gave it (host.confine: else two workers'
    loaders and intra-op threads oversubscribe the node's cores, and a loader-bound test measured beside another
    collapses: on two H200s test_h2d_copy[pinned] measured 67 samples/s, its loader's rounds 51 to 839), and its
    GPU, made the only GPU that CUDA shows this process. CUDA reads CUDA_VISIBLE_DEVICES once, when it starts, so
    this runs first in pytest_configure (tryfirst), before this plugin's device detection or another plugin's
    configure starts it; importing torch does not."""
    workerinput = getattr(config, "workerinput", {})
    if workerinput.get("perf_cores"):
        host.confine(workerinput["perf_cores"])
    gpu = workerinput.get("perf_gpu")
    if gpu is None:
        return
    import torch

    if torch.cuda.is_initialized():
        raise pytest.UsageError(f"xdist worker {config.workerinput.get('workerid')}: CUDA was started before the worker "
                                f"could be given GPU {gpu}, so it would measure on a GPU another worker uses. Start no "
                                "CUDA work at import time (in a conftest.py or plugin), or run without -n.")
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu


def _node_gpus(visible: int) -> int:
    """The node's GPUs: NVML's count, which CUDA_VISIBLE_DEVICES does not narrow; the `visible` ones where NVML cannot
    say."""
    return max(visible, nvml.gpu_count() or 0)


def _gpu_share(gpu: str | None, fallback: int, gpus: int, cores: list[int]) -> list[int]:
    """One GPU's share of the node's cores: `cores` split into as many parts as the node has GPUs (`gpus`), the part
    of the GPU's index where CUDA_VISIBLE_DEVICES names the GPU by one (`gpu`), else the `fallback`-th. A test on one
    GPU then measures on as many cores, and with as many DataLoader workers, with -n or without: on two H200s with 32
    cores, a run on one of them without -n gave the loaders 32 workers, which decoded JPEGs faster than the GPU
    trained (loader 16,825, GPU-side 12,708 samples/s), and test_storage's loader-bound scenarios failed where the
    sharded run, 16 cores a GPU, passed them."""
    index = int(gpu) if gpu is not None and gpu.strip().isdigit() and int(gpu) < gpus else fallback
    return host.share_of_cores(index, gpus, cores)


def _confine_to_its_gpu(config) -> None:
    """A run without -n on one GPU of a node with several (CUDA_VISIBLE_DEVICES picked it): this process, its loaders
    and its threads on that GPU's share of the cores (_gpu_share), as a sharded run's worker on that GPU would be.
    Where CUDA sees several GPUs the tests run on all the cores: the multi_gpu scenarios spread over the node."""
    if (hasattr(config, "workerinput") or _xdist_workers(config) or config.getoption("--perf-smoke")
            or not hasattr(os, "sched_getaffinity") or device.gpu_count() != 1):
        return
    gpus = _node_gpus(1)
    if gpus > 1:
        gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0]
        host.confine(_gpu_share(gpu, 0, gpus, sorted(os.sched_getaffinity(0))))


def _shard(config, session: PerfSession) -> None:
    """The controller of `-n N`: on a GPU outside --perf-smoke, N must not exceed the GPUs visible, and each test
    file must run in one worker (a ladder step is compared with its predecessor measured in the same process, and
    the scenarios of a file share measurements). Worker i runs on the i-th share of the cores and, where there are
    GPUs enough, measures on the i-th GPU (_Controller). A smoke run with more workers than GPUs shares them, as
    without -n; a CPU run has none to give."""
    workers = session.shards
    if not workers:
        return
    s = session.settings
    for files in _partial_reports(s.report).values() if s.report else ():  # an earlier run's: not to be merged into this one's
        for f in files:
            f.unlink(missing_ok=True)
    gpus = device.gpu_count()
    if gpus and not s.smoke:
        if workers > gpus:
            raise pytest.UsageError(
                f"-n {workers} but {gpus} GPU(s) visible: each pytest-xdist worker measures on a GPU of its own. "
                f"Use -n {gpus} or fewer (-n auto starts one worker per GPU), or make more GPUs visible (CUDA_VISIBLE_DEVICES).")
        dist = config.getoption("dist")
        if dist != "loadfile":
            given = " (what -n means without --dist)" if dist == "load" else ""
            raise pytest.UsageError(
                f"-n {workers} with --dist {dist}{given} on a GPU: the tests of one file must run in one worker, since a "
                "ladder step is compared with its predecessor measured in the same process and the scenarios of a file "
                "share measurements. Add --dist loadfile.")
    pinned = gpus if gpus >= workers else 0
    shares = _node_gpus(pinned) if pinned else workers  # a GPU's share of the node (_gpu_share), else a worker's
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []  # none to share out off Linux
    controller = _Controller(session, workers, os.environ.get("CUDA_VISIBLE_DEVICES"), pinned, cores, shares)
    config.pluginmanager.register(controller, "perf_xdist_controller")


class _Controller:
    """pytest-xdist's hooks in the controller of a sharded run, registered only there (so only where xdist is
    installed and started): each worker's share of the cores and its GPU, and what each worker sends at its end."""

    def __init__(self, session: PerfSession, workers: int, visible: str | None, gpus: int, cores: list[int],
                 shares: int):
        self.session, self.workers, self.visible, self.gpus, self.cores = session, workers, visible, gpus, cores
        self.shares = shares  # the parts the cores are split into: the node's GPUs, or the workers where none is given
        self.held: dict[str, int] = {}  # live worker id -> its slot: the index of its GPU and of its share of the cores

    def pytest_configure_node(self, node):
        """The first slot no live worker holds: gw0 the first, gw1 the second, a worker started in place of a crashed
        one (with a new id) the crashed one's. With it, where there is a GPU a worker, that GPU, and a share of the
        cores (none where there are fewer cores than shares): its GPU's (_gpu_share), else its slot's."""
        index = min(set(range(self.workers)) - set(self.held.values()))
        self.held[node.gateway.id] = index
        gpu = device.gpu_for_worker(index, self.visible, self.gpus) if self.gpus else None
        node.workerinput["perf_cores"] = _gpu_share(gpu, index, self.shares, self.cores)
        if gpu is not None:
            node.workerinput["perf_gpu"] = gpu

    def pytest_testnodedown(self, node, error):
        self.held.pop(node.gateway.id, None)
        self.session.worker_outputs[node.gateway.id] = getattr(node, "workeroutput", {}).get("perf") or {}

    def pytest_xdist_make_scheduler(self, config, log):
        """--dist loadfile: the file with the most seconds left first, by the last run's (durations.py)."""
        if config.getoption("dist") == "loadfile":
            seconds = durations.load(getattr(config, "cache", None), self.session.clock)
            return durations.longest_file_first(config, log, seconds)
        return None


class _Clock:
    """The seconds each test took (setup, call and teardown), put in pytest's cache at the end for the order of the
    next sharded run (durations.py). In the process that reports: a sharded run's controller sees its workers'."""

    def __init__(self, session: PerfSession):
        self.session, self.seconds = session, {}

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self, session):
        durations.save(getattr(session.config, "cache", None), self.session.clock, self.seconds)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: pytest-xdist may be absent or disabled (-p no:xdist)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (or `logical`) on a GPU outside --perf-smoke: one worker per visible GPU, where xdist would start one
    per core and the run would be refused. Elsewhere (and where PYTEST_XDIST_AUTO_NUM_WORKERS says), xdist's count."""
    if config.getoption("--perf-smoke") or os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return device.gpu_count() or None


def _partial_reports(path: Path) -> dict[str, list[Path]]:
    """The xdist workers' reports beside --perf-report PATH: worker id -> its PATH.<id>.md and PATH.<id>.json."""
    found: dict[str, list[Path]] = {}
    if path.parent.is_dir():
        for f in sorted(path.parent.iterdir()):
            m = re.fullmatch(re.escape(path.name) + r"\.(gw\d+)\.(md|json)", f.name)
            if m:
                found.setdefault(m[1], []).append(f)
    return found


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
    if rep.passed and session.settings.update_baselines:
        session.record(item.nodeid, result)
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
    config = session.config
    perf = config.stash.get(SESSION, None)
    if not perf:
        return
    perf.counter.close()
    if perf.worker and hasattr(config, "workeroutput"):  # for the controller, which reports for its workers
        config.workeroutput["perf"] = {
            # through JSON: execnet sends plain types only (torch.__version__ is a str subclass, a column a numpy int)
            "report": json.loads(json.dumps(perf.document(), default=str)) if perf.results or perf.sections else None,
            "lines": [line for line in (perf.baseline_note, perf.save_error, perf.report_error) if line],
            "recorded": perf.recorded(),
            "failed": bool(perf.save_error or perf.report_error),
        }
    if perf.shards:
        perf.written = perf.merge_reports()
    failed = perf.save_error or perf.report_error or any(out.get("failed") for out in perf.worker_outputs.values())
    if failed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # what the user asked to be written was not


def pytest_terminal_summary(terminalreporter, config):
    if CROSS_GPU in config.stash:
        terminalreporter.section("WARNING", sep="!", red=True, bold=True)
        terminalreporter.write_line(config.stash[CROSS_GPU], red=True, bold=True)
    perf = config.stash.get(SESSION, None)
    if not perf or perf.worker:  # an xdist worker's controller reports for it
        return
    doc = perf.merged if perf.shards else perf.document()
    measured = bool(doc and (doc["tests"] or doc["sections"]))
    if measured:
        terminalreporter.section("perf report")
        terminalreporter.write_line(report.render(doc))
    outputs = perf.worker_outputs.values()
    lines = [perf.baseline_note, perf.save_error, perf.report_error, *(line for out in outputs for line in out.get("lines", []))]
    for line in dict.fromkeys(filter(None, lines)):  # each worker may say the same
        terminalreporter.write_line(line, red=True, bold=True)
    recorded = perf.recorded()
    for out in outputs:  # a sharded run's workers, each into the file of its GPU model
        for path, n in out.get("recorded", {}).items():
            recorded[path] = recorded.get(path, 0) + n
    for path, n in recorded.items():
        terminalreporter.write_line(f"recorded {n} baseline(s) into {path}")
    if perf.settings.update_baselines and perf.baseline_file is None and not perf.instructions_recorded:
        terminalreporter.write_line("--perf-update-baselines recorded nothing: baselines are recorded only on a CUDA GPU "
                                    "outside --perf-smoke (loader instruction counts on any machine, where valgrind "
                                    "counted them)", yellow=True)
    if perf.settings.report:
        written = perf.written if perf.shards else perf.write_report(final=True)
        if not perf.report_error:
            empty = "" if measured else " (no test was measured: no CUDA GPU and no --perf-smoke, or nothing selected)"
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
