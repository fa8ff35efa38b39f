"""One pytest session of the suite: its settings, device and baseline files, the results the `perf` fixture hands
back, and what is recorded, kept and reported at the end. plugin.py's hooks delegate here.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import pytest

from . import (
    against,
    baselines,
    benchmark,
    bisecting,
    checks,
    device,
    durations,
    host,
    loader,
    records,
    report,
    runners,
    settings,
    store,
    syncs,
    timing,
    turns,
)
from .fixture import PerfWarning, Result

STARTED = pytest.StashKey[float]()  # when pytest started, as the plugin's first hook saw it (perf_counter)


class PerfSession:
    def __init__(self, config, shards: int = 0):
        """`shards`: the pytest-xdist workers this process starts, as the controller of a sharded run (sharding.py)."""
        self.settings = settings.SessionSettings.from_config(config)
        # the session's seconds count from pytest's start (the plugin's first hook), so the imports before the session
        # (conftest.py, the plugins', torch where one imports it) are measured; without that hook (the plugin registered
        # by a conftest.py, too late for it), from now
        now = time.perf_counter()
        started = config.stash.get(STARTED, None)
        self.imports_s = None if started is None else now - started
        self.started = now if started is None else started
        self.ref_s = 0.0  # what measuring REF took (--perf-against), cached or not
        self.laps: dict[str, timing.Laps] = {}  # test id -> where its call's seconds went
        workerinput = getattr(config, "workerinput", {})
        self.worker: str | None = workerinput.get("workerid")  # the pytest-xdist worker this process is, if one
        self.gpu: str | None = workerinput.get("perf_gpu")  # the CUDA_VISIBLE_DEVICES its controller gave it, if any
        self.cores: list[int] = workerinput.get("perf_cores") or []  # the cores its controller gave it, if any
        self.shards = shards
        self.worker_outputs: dict[str, dict] = {}  # the controller's: what each worker sent at its end
        self.merged: dict | None = None  # the controller's: the workers' reports as one
        self.written: list[Path] = []  # the controller's: the merged report's files
        try:
            self.device = device.detect_device()
        except baselines.Mismatched as e:
            raise pytest.UsageError(str(e)) from None
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
        self.collected: set[str] = set()  # under --perf-against, the tests collected, selected or not
        self.deselected: set[str] = set()  # tests that -k or -m left out: a claim over one of them is not checked
        self.sections: dict[str, list[dict]] = {}
        self.charts: dict[str, report.Chart] = {}  # section title -> how to draw it
        self.report_error: str | None = None
        self.records = records.Records(self.settings, self.device, config.rootpath)  # compared with, recorded into
        self.loader_dir: str | None = None  # where the loaders' per-batch timings are written, made on first use
        self.ref: against.Ref | None = None  # --perf-against REF: what the tests compare with, once it was measured
        self.turns: turns.Turns | None = None  # and the processes that time REF's loaders and the head's by turns
        self.ref_failed: dict[str, str] = {}  # a sharded worker's: test file -> why REF's tests of it could not run
        self.as_ref = against.is_ref_run(self.settings.update_baselines)  # this is REF's run, for another session
        self.bisecting: tuple | None = self._check_bisect(config) if self.settings.bisect else None
        if self.settings.against:
            self._check_against()
            return  # the baselines are REF's, loaded once it was measured (compare_against)
        self.records.load(self.settings.baseline_dir)

    def _check_against(self) -> None:
        if self.settings.update_baselines:
            raise pytest.UsageError("--perf-against compares with REF and records nothing: drop --perf-update-baselines, "
                                    "or drop --perf-against to record this GPU's baselines")

    def _check_bisect(self, config) -> tuple[Path, bisecting.Commit, list[bisecting.Commit], str]:
        """--perf-bisect GOOD..BAD refused before anything runs where it cannot be done; else the repository's top
        folder, GOOD and the range."""
        s = self.settings
        clash = ("--perf-against" if s.against else "--perf-update-baselines" if s.update_baselines
                 else "-n" if self.shards else None)
        if clash:
            raise pytest.UsageError(f"--perf-bisect runs each commit's tests against GOOD in a run of its own: drop {clash}")
        if not (self.device.is_gpu or s.smoke):
            raise pytest.UsageError("--perf-bisect measures each commit on this machine's GPU, and it has none: run it on "
                                    "a GPU, or add --perf-smoke to bisect what a CPU counts")
        good, bad = bisecting.parse_range(s.bisect)
        top, good_sha = against.resolve(good, Path(config.rootpath), "--perf-bisect")
        _, bad_sha = against.resolve(bad, Path(config.rootpath), "--perf-bisect")
        return (top, *bisecting.commits(top, good_sha, bad_sha), bad)

    def bisect(self, session) -> bool:
        """--perf-bisect: the selected tests judged at the range's commits (bisecting.py); none runs in this process."""
        config = session.config
        test_ids = [item.nodeid for item in session.items]
        if not test_ids:
            raise pytest.UsageError("--perf-bisect: no test selected; name the test that regressed (-k EXPR, or its id)")
        top, good, range_, bad_name = self.bisecting
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        say = reporter.write_line if reporter else print
        args = against.forwarded(config) + (["--perf-strict"] if self.settings.strict else [])
        runner = bisecting.Runner(top, Path(config.rootpath), good.sha, test_ids, args, self._against_cache(config),
                                  self.device.env, say)
        say(f"perf bisect: {len(range_)} commit(s) after {good.short}, at most {bisecting.most_measured(len(range_))} "
            "to judge, one more for each that cannot run")
        finding = bisecting.search(good, range_, runner)
        if why := bisecting.nothing_found(finding, bad_name):
            raise pytest.UsageError(why)
        text = bisecting.describe(finding, good.short, bad_name)
        say(text)
        if self.settings.report:
            self.settings.report.parent.mkdir(parents=True, exist_ok=True)
            store.write_atomic(self.settings.report.with_suffix(".bisect.md"), text)
            store.write_atomic(self.settings.report.with_suffix(".bisect.json"), json.dumps(finding.as_json(), indent=1))
        return True

    def _against_cache(self, config) -> Path:
        return self.settings.against_cache or (config.cache.mkdir("perf-against") if getattr(config, "cache", None)
                                               else Path(tempfile.mkdtemp(prefix="perf-against-cache-")))

    def split(self, config, items) -> None:
        """--perf-split I/N: keep this runner's part of the selected tests (runners.parts); the rest deselected."""
        if self.settings.split is None:
            return
        part, n = self.settings.split
        try:
            seconds = runners.load_seconds(self.settings.durations)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
        mine = set(runners.parts([item.nodeid for item in items], seconds, n)[part - 1])
        config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in mine])
        items[:] = [item for item in items if item.nodeid in mine]

    def compare_against(self, config, items) -> None:
        """--perf-against REF, once the tests are selected: REF's results for the selected perf tests (from the cache,
        or measured now), loaded as this session's baselines. A sharded run's worker loads those cached and measures
        the rest file by file (`ref_before`); its controller runs no test."""
        if not self.settings.against or config.option.collectonly or self.shards:
            return
        test_ids = [item.nodeid for item in items if "perf" in getattr(item, "fixturenames", ())]
        if not test_ids:
            return
        self.collected = {item.nodeid for item in items} | self.deselected
        started = time.perf_counter()
        self.ref = against.prepare(self.settings.against, config, test_ids, self.device.env, self._against_cache(config))
        self.turns = turns.Turns(self.ref.root, Path(config.rootpath))
        if self.worker:  # it measures REF file by file, and counts those cached of the tests it runs (ref_before)
            self.ref.cached = []
        else:
            if self.ref.wanted:  # the turns' processes import torch while REF's pytest does the same, not in a test
                self.turns.start()
            against.run(self.ref)
        self.ref_s = time.perf_counter() - started
        self.records.load(self.ref.folder)
        if not (self.worker or self.settings.smoke) and self._loader_at_ref(test_ids):
            self.turns.start()  # REF cached: beside the first test's build; no window is timed before (Measuring.run)
        reporter = None if self.worker else config.pluginmanager.get_plugin("terminalreporter")  # its controller's says it
        if reporter:  # REF cold can take as long as the head's run: say it is done before the head's tests start
            reporter.write_line(f"Compared {self.ref.describe()}; the working tree's tests follow")

    def _loader_at_ref(self, test_ids: list[str]) -> bool:
        """Whether REF recorded a loader for any of `test_ids` (its settings, in REF's loaders.json): one the turns time."""
        return any(self.ref.status.get(t) == "passed" and self.records.loaders_file.get(t) for t in test_ids)

    def ref_before(self, item) -> None:
        """A sharded run's worker, before each test: before the first of each file it runs, REF's tests of that file
        measured on this worker's GPU and cores (with --dist loadfile a file runs whole on one worker), and loaded; a
        test whose REF results were cached counted as such. Where REF's tests of the file cannot run, each test of the
        file fails its setup saying why, REF run once."""
        if not (self.worker and self.ref):
            return
        file = item.nodeid.split("::")[0]
        if file not in self.ref_failed and self.ref.wanted_in({file}):
            started = time.perf_counter()
            self.turns.start()  # once, where this worker measures REF: beside REF's pytest, as unsharded
            self.device.free_cached_memory()  # what this worker's earlier tests keep cached, REF's run may need
            try:
                against.run(self.ref, files={file})
                self.records.load(self.ref.folder)
            except pytest.UsageError as e:
                self.ref_failed[file] = str(e)
            elapsed = time.perf_counter() - started
            self.ref_s += elapsed
            item.user_properties.append((durations.REF_S, elapsed))  # not the test's own (sharding.Clock)
        if file in self.ref_failed:
            pytest.fail(self.ref_failed[file], pytrace=False)
        if item.nodeid in self.ref.status and item.nodeid not in self.ref.measured + self.ref.cached:
            self.ref.cached.append(item.nodeid)

    def call_started(self, item) -> None:
        """A perf test's call starts: its seconds are lapped from here (`laps_of`), the rest of it lapped as checks."""
        if "perf" in getattr(item, "fixturenames", ()):
            self.laps[item.nodeid] = timing.Laps()

    def call_ended(self, item) -> None:
        if item.nodeid in self.laps:
            self.laps[item.nodeid].lap("checks")

    def call_passed(self, item) -> None:
        """A test's checks all passed: under --perf-against --perf-strict (the merge gate) it fails where it left
        something uncompared that nothing else judged (Result.holes), naming each."""
        result = self.results.get(item.nodeid)
        if self.ref and self.settings.strict and result is not None:
            failure = checks.holes(result.holes(), self.ref.label)
            if failure:
                pytest.fail(f"{item.nodeid}: {failure}", pytrace=False)

    def laps_of(self, test_id: str) -> timing.Laps:
        return self.laps.setdefault(test_id, timing.Laps())

    def seconds(self) -> dict:
        """The session's seconds: in all since the process started, the imports before the session, measuring REF, and
        in the perf tests' calls."""
        tests = sum(sum(laps.seconds.values()) for laps in self.laps.values())
        imports = {} if self.imports_s is None else {"imports": round(self.imports_s, 1)}
        return {"total": round(time.perf_counter() - self.started, 1), **imports, "REF": round(self.ref_s, 1),
                "tests": round(tests, 1)}

    @property
    def reference(self) -> str:
        """What this run's numbers are compared with, as a failure names it."""
        return f"REF {self.ref.label}, measured on this GPU" if self.ref else str(self.records.baseline_file.path)

    @property
    def against_label(self) -> str:
        """What the loader's verdicts compare with, in a few words."""
        return f"REF {self.ref.label}" if self.ref else "the baseline"

    def loader_folder(self, test_id: str) -> Path:
        """A folder for one test's per-batch loader timings, under the session's (removed at its end)."""
        if self.loader_dir is None:
            self.loader_dir = tempfile.mkdtemp(prefix="perf-loader-")
        return loader.timer_folder(self.loader_dir, test_id)

    @property
    def sharded(self) -> bool:
        """True inside a pytest-xdist worker that was given a GPU of its own: a test that needs every GPU of the
        node (marker multi_gpu) skips itself there."""
        return self.gpu is not None

    @property
    def clock(self) -> str | None:
        """The table of seconds (durations.py) this run's tests are timed into and a sharded run is ordered by: the
        GPU model's, or the smoke runs' (None); a run that measures nothing (no GPU, no --perf-smoke) has none."""
        return self.device.env["gpu"] if self.device.is_gpu and not self.settings.smoke else None

    def document(self) -> dict:
        """This process's report as its JSON holds it; an xdist worker's says which worker and GPU it was."""
        cores = host.cpu_list(self.cores) if self.cores else None
        worker = {"id": self.worker, "cuda_visible_devices": self.gpu, "cores": cores} if self.worker else None
        return report.document(self.results.values(), self.device.env, self.sections, self.settings.smoke, self.charts, worker,
                               against=self.ref.describe() if self.ref else None, seconds=self.seconds())

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
        partial = report.partial_reports(self.settings.report) if self.settings.report else {}
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

    # --- what the hooks delegate -------------------------------------------------------------------

    def skip(self, reason: str) -> None:
        """A check that cannot be made in this run: the test skips, or fails under --perf-strict (the nightly's mode)."""
        if self.settings.strict:
            pytest.fail(f"--perf-strict: {reason}", pytrace=False)
        pytest.skip(reason)

    def require_device(self) -> None:
        """A perf scenario measures GPU training: without a GPU (and without --perf-smoke) it skips, or fails under
        --perf-strict, saying how to check the recipes on this machine."""
        if self.settings.smoke or self.device.is_gpu:
            return
        reason = (f"{benchmark.NO_GPU} on this machine: a perf test measures GPU training. "
                  "Run with --perf-smoke to check that it builds and trains on this device.")
        self.skip(reason)

    @staticmethod
    @contextlib.contextmanager
    def torch_settings_kept(test_id: str):
        """torch's global settings (torch_state.SETTINGS) as the test found them, restored after it with a warning
        naming any it left changed: the next scenario starts from the same settings."""
        from . import torch_state  # imports torch: only where a perf test runs

        saved = torch_state.snapshot()
        yield
        left = torch_state.restore(saved)
        if left:
            changed = ", ".join(f"{name} {now!r} (was {then!r})" for name, (now, then) in left.items())
            warnings.warn(PerfWarning(f"{test_id} left torch settings changed: {changed}; restored them. "
                                      "Set them around the step (torch_perf_suite.torch_state.applied) instead"), stacklevel=1)

    def test_done(self, test_id: str, passed: bool, failed: bool) -> None:
        """A measured test's call ended: a passed one is recorded under --perf-update-baselines, a failed one's trace
        kept under --perf-trace-dir (a passed one's removed: traces run to tens of MB), and the report rewritten (an
        interrupted run keeps what it measured)."""
        result = self.results.get(test_id)
        if result is None:
            return
        if passed and self.settings.update_baselines:
            self.records.record(test_id, result)
        if failed and result.trace and result.trace.exists() and self.settings.trace_dir:
            result.notes.append(self._keep_trace(result.trace))
        if passed and result.trace and result.trace.exists():
            result.trace.unlink()  # a failed test's stays in its tmp_path
        result.notes.insert(0, "FAILED" if failed else "passed")
        self.write_report()

    def _keep_trace(self, trace: Path) -> str:
        kept = self.settings.trace_dir / (trace.name + ".gz")
        try:
            self.settings.trace_dir.mkdir(parents=True, exist_ok=True)
            with open(trace, "rb") as src, store.atomic(kept, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb") as dst:
                shutil.copyfileobj(src, dst)
            return f"trace kept: {kept}"
        except OSError as e:
            return f"trace not kept ({e}); it is still at {trace}"

    def finish(self, config) -> bool:
        """At the session's end: the callgrind process and the turns' processes stopped; an xdist worker hands its
        report, lines and records to its controller; a sharded run's controller merges the workers' reports. True where
        something asked to be written (a baseline, the report) was not."""
        self.records.counter.close()
        if self.turns:
            self.turns.close()
        if self.loader_dir:
            shutil.rmtree(self.loader_dir, ignore_errors=True)
        if self.worker and hasattr(config, "workeroutput"):  # for the controller, which reports for its workers
            config.workeroutput["perf"] = {
                # through JSON: execnet sends plain types only (torch.__version__ is a str subclass, a column a numpy int)
                "report": json.loads(json.dumps(self.document(), default=str)) if self.results or self.sections else None,
                "lines": [line for line in (self.records.baseline_note, self.records.save_error, self.report_error) if line],
                "recorded": self.records.recorded(),
                "failed": bool(self.records.save_error or self.report_error),
            }
        if self.shards:
            self.written = self.merge_reports()
        workers_failed = any(out.get("failed") for out in self.worker_outputs.values())
        return bool(self.records.save_error or self.report_error or workers_failed)

    def summary(self) -> tuple[str | None, list[tuple[str, dict]]]:
        """The end of the terminal output: the report (None where nothing was measured) and lines as (line, markup):
        what went wrong writing, what was recorded, where the report was written. An xdist worker's controller reports
        for it: a worker says nothing."""
        if self.worker:
            return None, []
        doc = self.merged if self.shards else self.document()
        measured = bool(doc and (doc["tests"] or doc["sections"]))
        out: list[tuple[str, dict]] = []
        outputs = self.worker_outputs.values()
        own = (self.records.baseline_note, self.records.save_error, self.report_error)
        lines = [*own, *(line for o in outputs for line in o.get("lines", []))]
        out += [(line, {"red": True, "bold": True}) for line in dict.fromkeys(filter(None, lines))]  # workers say the same
        recorded = self.records.recorded()
        for o in outputs:  # a sharded run's workers, each into the file of its GPU model
            for path, n in o.get("recorded", {}).items():
                recorded[path] = recorded.get(path, 0) + n
        out += [(f"recorded {n} baseline(s) into {path}", {}) for path, n in recorded.items()]
        if self.settings.update_baselines and self.records.baseline_file is None and not self.records.recorded():
            out.append(("--perf-update-baselines recorded nothing: baselines are recorded only on a CUDA GPU outside "
                        "--perf-smoke (loader instruction counts and settings on any machine, where counted and described)",
                        {"yellow": True}))
        if self.settings.report:
            written = self.written if self.shards else self.write_report(final=True)
            if not self.report_error:
                why = "none of the tests run measured a training step" if self.device.is_gpu or self.settings.smoke \
                    else "no CUDA GPU and no --perf-smoke"
                empty = "" if measured else f" (no test was measured: {why})"
                out.append(("perf report written to " + ", ".join(map(str, written)) + empty, {}))
        return (report.render(doc) if measured else None), out


def sync_sources(config) -> tuple[syncs.Advice, ...]:
    """What the project's pytest_perf_sync_sources hooks name (hooks.py), each checked to be an Advice."""
    found = [a for sources in config.hook.pytest_perf_sync_sources() for a in sources or ()]
    wrong = [a for a in found if not isinstance(a, syncs.Advice)]
    if wrong:
        raise pytest.UsageError(f"pytest_perf_sync_sources returned {wrong[0]!r}; return a list of torch_perf_suite.Advice")
    return tuple(found)
