"""What a session does with another commit: `--perf-against REF` (REF measured before the tests, or file by file in a
sharded run's worker, and loaded as the session's baselines) and `--perf-bisect GOOD..BAD` (each commit of the range
judged against GOOD in a run of its own). REF's state in one object the session holds (RefState), and the steps the
plugin's hooks call.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from .. import store
from ..loader import turns
from ..loader.turns import Turns
from ..records import durations
from ..report import plain
from . import bisect_report, bisecting, ref
from .ref import Ref

if TYPE_CHECKING:
    from ..machine.device import Device
    from ..settings import SessionSettings


class SessionForRef(Protocol):
    """What REF's steps read of the session (session/core.py's PerfSession), typed: they take it without importing it
    (the session imports them)."""
    settings: SessionSettings
    device: Device
    records: Any  # fixture/references.py's Records, of the layer above: REF's results are loaded into it
    worker: str | None  # the pytest-xdist worker this process is, if one
    shards: int  # the workers this process starts, as a sharded run's controller
    bisecting: tuple | None  # --perf-bisect: (the repository's top folder, GOOD, the range's commits, BAD as given)
    as_ref: bool  # this process is REF's run, for another session
    deselected: set[str]  # the tests -k or -m left out

    def say(self, line: str) -> None: ...


def load_records(records, folder: Path, ref: bool = False) -> None:
    """The recorded files in `folder` (REF's results, where `ref`) loaded (fixture/references.py's Records.load); one
    that cannot be used is a usage error naming it."""
    try:
        records.load(folder, ref)
    except store.Unusable as e:
        raise pytest.UsageError(str(e)) from None


def check_ref(rev: str, update_baselines: bool, rootdir: Path) -> None:
    """--perf-against REF refused at the session's start where it cannot be done: with --perf-update-baselines, or a
    REF that names no commit here (before the tests are collected and torch imported, seconds on a CPU)."""
    if update_baselines:
        raise pytest.UsageError("--perf-against compares with REF and records nothing: drop --perf-update-baselines, "
                                "or drop --perf-against to record this GPU's baselines")
    ref.resolve(rev, rootdir)


def check_bisect(session: SessionForRef, config) -> tuple[Path, bisecting.Commit, list[bisecting.Commit], str]:
    """--perf-bisect GOOD..BAD refused before anything runs where it cannot be done; else the repository's top
    folder, GOOD and the range."""
    s = session.settings
    clash = ("--perf-against" if s.ref else "--perf-update-baselines" if s.update_baselines
             else "-n" if session.shards else None)
    if clash:
        raise pytest.UsageError(f"--perf-bisect runs each commit's tests against GOOD in a run of its own: drop {clash}")
    if not (session.device.is_gpu or s.smoke):
        raise pytest.UsageError("--perf-bisect measures each commit on this machine's GPU, and it has none: run it on "
                                "a GPU, or add --perf-smoke to bisect what a CPU counts")
    good, bad = bisecting.parse_range(s.bisect)
    top, good_sha = ref.resolve(good, Path(config.rootpath), "--perf-bisect")
    _, bad_sha = ref.resolve(bad, Path(config.rootpath), "--perf-bisect")
    return (top, *bisecting.commits(top, good_sha, bad_sha), bad)


def run_bisection(session: SessionForRef, pytest_session) -> bool:
    """--perf-bisect: the selected tests judged at the range's commits (bisecting.py); none runs in this process."""
    config = pytest_session.config
    test_ids = [item.nodeid for item in pytest_session.items]
    if not test_ids:
        raise pytest.UsageError("--perf-bisect: no test selected; name the test that regressed (-k EXPR, or its id)")
    top, good, range_, bad_name = session.bisecting
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    say = reporter.write_line if reporter else print
    args = ref.forwarded(config) + (["--perf-strict"] if session.settings.strict else [])
    runner = bisecting.Runner(top, Path(config.rootpath), good.sha, test_ids, args, ref_cache(session, config),
                              session.device.env, say, overrides=ref.keyed(config, []))
    say(f"perf bisect: {len(range_)} commit(s) after {good.short}, at most {bisect_report.most_measured(len(range_))} "
        "to judge, one more for each that cannot run")
    finding = bisecting.search(good, range_, runner)
    if why := bisecting.nothing_found(finding, bad_name):
        raise pytest.UsageError(why)
    text = bisect_report.report(finding, good.short, bad_name)
    say(plain.text(text))  # the terminal's plain text; the Markdown goes to the report's .bisect.md
    if session.settings.report:
        session.settings.report.parent.mkdir(parents=True, exist_ok=True)
        store.write_atomic(session.settings.report.with_suffix(".bisect.md"), text)
        store.write_atomic(session.settings.report.with_suffix(".bisect.json"), json.dumps(finding.as_json(), indent=1))
    return True


def ref_cache(session: SessionForRef, config) -> Path:
    """Where REF's results are kept: --perf-against-cache, else pytest's cache folder, else (its cache provider off,
    `-p no:cacheprovider`) the user's cache folder, so that the next run against the same commit still finds them."""
    if session.settings.ref_cache:
        return session.settings.ref_cache
    if getattr(config, "cache", None):
        return config.cache.mkdir("perf-against")
    try:
        xdg = Path(os.environ.get("XDG_CACHE_HOME", ""))
        folder = (xdg if xdg.is_absolute() else Path.home() / ".cache") / "torch-perf-suite" / "perf-against"
        folder.mkdir(parents=True, exist_ok=True)
    except (OSError, RuntimeError):  # no home, or none to write in: this run's own folder
        return Path(tempfile.mkdtemp(prefix="perf-against-cache-"))
    return folder


@dataclass
class RefState:
    """--perf-against REF in one session, the one object the session keeps of it: what REF measured, the processes that
    time REF's loaders and the head's by turns, a sharded worker's files whose REF run failed, the seconds REF took
    and the tests collected. Its methods are the session's steps with REF; `session` is the PerfSession, read only."""

    ref: Ref | None = None  # what the tests compare with, once it was measured
    turns: Turns | None = None  # the processes that time REF's loaders and the head's by turns
    failed: dict[str, str] = field(default_factory=dict)  # a sharded worker's: test file -> why REF's tests could not run
    seconds: float = 0.0  # what measuring REF took, cached or not
    in_tests: float = 0.0  # of them, a sharded worker's before each file, in the tests' span (`before`)
    collected: set[str] = field(default_factory=set)  # the tests collected, selected or not

    def turns_ahead(self, session: SessionForRef) -> None:
        """In a process that runs tests itself and times loaders (not a sharded run's controller or worker, a
        bisection's controller, REF's own run or a smoke run): the turns' processes started with the session,
        importing torch while it collects and reads or measures REF. `compare` aims them at the two trees, or ends them
        where no selected test has a loader at REF."""
        if not (session.shards or session.bisecting or session.as_ref or session.worker or session.settings.smoke):
            self.turns = turns.Turns()
            self.turns.start()

    def compare(self, session: SessionForRef, config, items) -> None:
        """Once the tests are selected: REF's results for the selected perf tests (from the cache, or measured now),
        loaded as this session's baselines. A sharded run's worker loads those cached and measures the rest file by
        file (`before`); its controller runs no test."""
        if not session.settings.ref or session.shards:
            return
        test_ids = [item.nodeid for item in items if "perf" in getattr(item, "fixturenames", ())]
        if config.option.collectonly or not test_ids:
            return self.close()
        self.collected = {item.nodeid for item in items} | session.deselected
        started = time.perf_counter()
        self.ref = ref.prepare(session.settings.ref, config, test_ids, session.device.env, ref_cache(session, config))
        self.turns = self.turns or turns.Turns()  # started with the session where it runs tests (turns_ahead)
        self.turns.aim(self.ref.root, Path(config.rootpath), (self.ref.worktree, self.ref.folder / "tree"))
        if session.worker:  # it measures REF file by file, and counts those cached of the tests it runs (before)
            self.ref.cached = []
        else:
            if self.ref.wanted and not session.settings.smoke:  # the turns' processes import torch while REF's pytest
                self.turns.start()  # does the same, not in a test; a smoke run times no loader by turns
            if self.ref.wanted:  # as long as the head's own tests, the first time: said before it starts
                session.say(f"perf: measuring {len(self.ref.wanted)} test(s) at REF {self.ref.label} first, in its "
                            f"files (kept in {self.ref.folder}: the next run against this commit takes them from there)")
            ref.run(self.ref)
        self.seconds = time.perf_counter() - started
        load_records(session.records, self.ref.folder, ref=True)
        if not (session.worker or session.settings.smoke) and self.loader_at_ref(session.records, test_ids):
            self.turns.start()  # started with the session, else now: beside the first test's build (Measuring.run settles)
        elif not session.worker:
            self.close()  # no loader to time: their cores back
        reporter = None if session.worker else config.pluginmanager.get_plugin("terminalreporter")  # its controller's says it
        if reporter:  # REF cold can take as long as the head's run: say it is done before the head's tests start
            reporter.write_line(f"Compared {self.ref.describe()}; the working tree's tests follow")

    def close(self) -> None:
        if self.turns is not None:
            self.turns.close()

    def loader_at_ref(self, records, test_ids: list[str]) -> bool:
        """Whether REF recorded a loader for any of `test_ids` (its settings, in REF's loaders.json): one the turns time."""
        return any(self.ref.status.get(t) == "passed" and records.loaders_file.get(t) for t in test_ids)

    def before(self, session: SessionForRef, item) -> None:
        """A sharded run's worker, before each test: before the first of each file it runs, REF's tests of that file
        measured on this worker's GPU and cores (with --dist loadfile a file runs whole on one worker), and loaded; a
        test whose REF results were cached counted as such. Where REF's tests of the file cannot run, each test of the
        file fails its setup saying why, REF run once."""
        if not (session.worker and self.ref):
            return
        file = item.nodeid.split("::")[0]
        if file not in self.failed and self.ref.wanted_in({file}):
            started = time.perf_counter()
            if not session.settings.smoke:
                self.turns.start()  # once, where this worker measures REF: beside REF's pytest, as unsharded
            session.device.free_cached_memory()  # what this worker's earlier tests keep cached, REF's run may need
            try:
                ref.run(self.ref, files={file})
                load_records(session.records, self.ref.folder, ref=True)
            except pytest.UsageError as e:
                self.failed[file] = str(e)
            elapsed = time.perf_counter() - started
            self.seconds += elapsed
            self.in_tests += elapsed
            item.user_properties.append((durations.REF_S, elapsed))  # not the test's own (sharding.Clock)
        if file in self.failed:
            pytest.fail(self.failed[file], pytrace=False)
        if item.nodeid in self.ref.status and item.nodeid not in self.ref.measured + self.ref.cached:
            self.ref.cached.append(item.nodeid)
