"""What a session does with another commit: `--perf-against REF` (REF measured before the tests, or file by file in a
sharded run's worker, and loaded as the session's baselines) and `--perf-bisect GOOD..BAD` (each commit of the range
judged against GOOD in a run of its own). Functions of the PerfSession (session.py), which the plugin's hooks call.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest

from .. import store
from ..loader import turns
from ..records import durations
from ..report import plain
from . import bisecting
from . import ref as against


def load_records(records, folder: Path) -> None:
    """The recorded files in `folder` loaded (records.Records.load); one that cannot be used is a usage error naming
    it."""
    try:
        records.load(folder)
    except store.Unusable as e:
        raise pytest.UsageError(str(e)) from None


def check_against(update_baselines: bool) -> None:
    if update_baselines:
        raise pytest.UsageError("--perf-against compares with REF and records nothing: drop --perf-update-baselines, "
                                "or drop --perf-against to record this GPU's baselines")


def check_bisect(perf, config) -> tuple[Path, bisecting.Commit, list[bisecting.Commit], str]:
    """--perf-bisect GOOD..BAD refused before anything runs where it cannot be done; else the repository's top
    folder, GOOD and the range."""
    s = perf.settings
    clash = ("--perf-against" if s.against else "--perf-update-baselines" if s.update_baselines
             else "-n" if perf.shards else None)
    if clash:
        raise pytest.UsageError(f"--perf-bisect runs each commit's tests against GOOD in a run of its own: drop {clash}")
    if not (perf.device.is_gpu or s.smoke):
        raise pytest.UsageError("--perf-bisect measures each commit on this machine's GPU, and it has none: run it on "
                                "a GPU, or add --perf-smoke to bisect what a CPU counts")
    good, bad = bisecting.parse_range(s.bisect)
    top, good_sha = against.resolve(good, Path(config.rootpath), "--perf-bisect")
    _, bad_sha = against.resolve(bad, Path(config.rootpath), "--perf-bisect")
    return (top, *bisecting.commits(top, good_sha, bad_sha), bad)


def bisect(perf, session) -> bool:
    """--perf-bisect: the selected tests judged at the range's commits (bisecting.py); none runs in this process."""
    config = session.config
    test_ids = [item.nodeid for item in session.items]
    if not test_ids:
        raise pytest.UsageError("--perf-bisect: no test selected; name the test that regressed (-k EXPR, or its id)")
    top, good, range_, bad_name = perf.bisecting
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    say = reporter.write_line if reporter else print
    args = against.forwarded(config) + (["--perf-strict"] if perf.settings.strict else [])
    runner = bisecting.Runner(top, Path(config.rootpath), good.sha, test_ids, args, against_cache(perf, config),
                              perf.device.env, say)
    say(f"perf bisect: {len(range_)} commit(s) after {good.short}, at most {bisecting.most_measured(len(range_))} "
        "to judge, one more for each that cannot run")
    finding = bisecting.search(good, range_, runner)
    if why := bisecting.nothing_found(finding, bad_name):
        raise pytest.UsageError(why)
    text = bisecting.describe(finding, good.short, bad_name)
    say(plain.text(text))  # the terminal's plain text; the Markdown goes to the report's .bisect.md
    if perf.settings.report:
        perf.settings.report.parent.mkdir(parents=True, exist_ok=True)
        store.write_atomic(perf.settings.report.with_suffix(".bisect.md"), text)
        store.write_atomic(perf.settings.report.with_suffix(".bisect.json"), json.dumps(finding.as_json(), indent=1))
    return True


def against_cache(perf, config) -> Path:
    return perf.settings.against_cache or (config.cache.mkdir("perf-against") if getattr(config, "cache", None)
                                           else Path(tempfile.mkdtemp(prefix="perf-against-cache-")))


def turns_ahead(perf) -> None:
    """Under --perf-against, in a process that runs tests itself and times loaders (not a sharded run's controller or
    worker, a bisection's controller, REF's own run or a smoke run): the turns' processes started with the session,
    importing torch while it collects and reads or measures REF. `compare_against` aims them at the two trees, or ends
    them where no selected test has a loader at REF."""
    if not (perf.shards or perf.bisecting or perf.as_ref or perf.worker or perf.settings.smoke):
        perf.turns = turns.Turns()
        perf.turns.start()


def compare_against(perf, config, items) -> None:
    """--perf-against REF, once the tests are selected: REF's results for the selected perf tests (from the cache,
    or measured now), loaded as this session's baselines. A sharded run's worker loads those cached and measures
    the rest file by file (`ref_before`); its controller runs no test."""
    if not perf.settings.against or perf.shards:
        return
    test_ids = [item.nodeid for item in items if "perf" in getattr(item, "fixturenames", ())]
    if config.option.collectonly or not test_ids:
        return _no_turns(perf)
    perf.collected = {item.nodeid for item in items} | perf.deselected
    started = time.perf_counter()
    perf.ref = against.prepare(perf.settings.against, config, test_ids, perf.device.env, against_cache(perf, config))
    perf.turns = perf.turns or turns.Turns()  # started with the session where it runs tests (PerfSession)
    perf.turns.aim(perf.ref.root, Path(config.rootpath), (perf.ref.worktree, perf.ref.folder / "tree"))
    if perf.worker:  # it measures REF file by file, and counts those cached of the tests it runs (ref_before)
        perf.ref.cached = []
    else:
        if perf.ref.wanted:  # the turns' processes import torch while REF's pytest does the same, not in a test
            perf.turns.start()
        against.run(perf.ref)
    perf.ref_s = time.perf_counter() - started
    load_records(perf.records, perf.ref.folder)
    if not (perf.worker or perf.settings.smoke) and loader_at_ref(perf, test_ids):
        perf.turns.start()  # started with the session, else now: beside the first test's build (Measuring.run settles)
    elif not perf.worker:
        _no_turns(perf)  # no loader to time: their cores back
    reporter = None if perf.worker else config.pluginmanager.get_plugin("terminalreporter")  # its controller's says it
    if reporter:  # REF cold can take as long as the head's run: say it is done before the head's tests start
        reporter.write_line(f"Compared {perf.ref.describe()}; the working tree's tests follow")


def _no_turns(perf) -> None:
    if perf.turns is not None:
        perf.turns.close()


def loader_at_ref(perf, test_ids: list[str]) -> bool:
    """Whether REF recorded a loader for any of `test_ids` (its settings, in REF's loaders.json): one the turns time."""
    return any(perf.ref.status.get(t) == "passed" and perf.records.loaders_file.get(t) for t in test_ids)


def ref_before(perf, item) -> None:
    """A sharded run's worker, before each test: before the first of each file it runs, REF's tests of that file
    measured on this worker's GPU and cores (with --dist loadfile a file runs whole on one worker), and loaded; a
    test whose REF results were cached counted as such. Where REF's tests of the file cannot run, each test of the
    file fails its setup saying why, REF run once."""
    if not (perf.worker and perf.ref):
        return
    file = item.nodeid.split("::")[0]
    if file not in perf.ref_failed and perf.ref.wanted_in({file}):
        started = time.perf_counter()
        perf.turns.start()  # once, where this worker measures REF: beside REF's pytest, as unsharded
        perf.device.free_cached_memory()  # what this worker's earlier tests keep cached, REF's run may need
        try:
            against.run(perf.ref, files={file})
            load_records(perf.records, perf.ref.folder)
        except pytest.UsageError as e:
            perf.ref_failed[file] = str(e)
        elapsed = time.perf_counter() - started
        perf.ref_s += elapsed
        item.user_properties.append((durations.REF_S, elapsed))  # not the test's own (sharding.Clock)
    if file in perf.ref_failed:
        pytest.fail(perf.ref_failed[file], pytrace=False)
    if item.nodeid in perf.ref.status and item.nodeid not in perf.ref.measured + perf.ref.cached:
        perf.ref.cached.append(item.nodeid)
