"""The pytest plugin: its hooks and fixtures, in the order pytest calls them, each handing over in a few lines.

A test measures a workload (throughput/parts.py says what one is) through the `perf` fixture (fixture/perf.py) and
states its expectations. One PerfSession (session/core.py) a pytest session lives in `config.stash`: it holds the
settings, the device, the baseline files and the results, and records, keeps traces and reports. Sharding over a
node's GPUs with pytest-xdist is session/sharding.py's.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import pytest

from . import hooks, ref_imports, settings
from .against.state import run_bisection
from .findings import PerfWarning
from .fixture.perf import Perf
from .fixture.result import Result
from .machine import device
from .session import calls, sharding, writing
from .session.benchmark import (
    check_benchmark_options,
    check_saved_runs,
    cross_gpu,
    no_gpu_line,
    nothing_to_benchmark,
    quiet_benchmark_ends,
    smoke_timings_off,
)
from .session.core import STARTED, PerfSession, sync_sources, torch_settings_kept
from .session.early import count_early
from .syncs import advice

SESSION = pytest.StashKey[PerfSession]()
CROSS_GPU = pytest.StashKey[str]()  # why --benchmark-compare compares across GPU models, if it does
__all__ = ["Perf", "PerfWarning", "Result", "PerfSession"]


def pytest_addoption(parser):
    settings.add_options(parser)


def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(hooks)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config):
    early_config.stash[STARTED] = time.perf_counter()  # pytest's start as this run sees it: before conftest.py's imports


def pytest_plugin_registered(plugin, manager):
    """The plugin's first moment, by its entry point, -p or a conftest.py (then too late for the hook above): before
    the conftest.py files below the rootdir, which often import torch."""
    config = manager.get_plugin("pytestconfig")
    if plugin is sys.modules[__name__]:
        ref_imports.install_from_env()  # REF's process: REF's code from REF's tree, before any conftest.py imports it
    if plugin is sys.modules[__name__] and hasattr(config, "known_args_namespace"):  # pytest read its command line
        count_early(config)


@pytest.hookimpl(tryfirst=True)  # before any plugin (pytest-benchmark reads the GPU here) starts CUDA
def pytest_configure(config):
    for line in settings.markers():  # registered by the plugin: a user's project runs under --strict-markers too
        config.addinivalue_line("markers", line)
    sharding.pin_worker(config)
    sharding.confine_to_its_gpu(config)
    advice.user_sources = sync_sources(config)
    perf_session = config.stash[SESSION] = PerfSession(config, sharding.xdist_workers(config))
    sharding.shard(config, perf_session)
    if not perf_session.worker and (perf_session.settings.smoke or perf_session.device.is_gpu):
        config.pluginmanager.register(sharding.Clock(perf_session), "perf_clock")
    if perf_session.settings.smoke:
        smoke_timings_off(config)
    elif not perf_session.device.is_gpu:  # every perf test skips, saying why once at the end (no_gpu_line)
        nothing_to_benchmark(config)
    check_benchmark_options(config, perf_session.settings.strict)


def pytest_sessionstart(session):
    check_saved_runs(session.config)  # after pytest-benchmark's configure, which read what --benchmark-compare names


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: pytest-xdist may be absent or disabled (-p no:xdist)
def pytest_xdist_auto_num_workers(config):
    return sharding.auto_num_workers(config)


@pytest.hookimpl(trylast=True)  # after -k and -m deselected what they do
def pytest_collection_modifyitems(config, items):
    """A bad `@pytest.mark.perf(...)` is a usage error naming the test, before any test runs."""
    measure = config.stash[SESSION].settings.measure
    for item in items:
        try:
            settings.for_marker(measure, item.iter_markers("perf"), item.nodeid)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
    config.stash[SESSION].split(config, items)  # --perf-split I/N: this runner's part of what -k and -m selected
    perf_session = config.stash[SESSION]
    perf_session.tests_selected(items)  # without a GPU, perf tests skip before their session fixtures are made
    perf_session.ref_state.compare(perf_session, config, items)  # --perf-against REF: REF measured before the tests run
    perf_session.collected = time.perf_counter()  # the session line's collection ends here


def pytest_runtestloop(session):
    perf_session = session.config.stash.get(SESSION, None)
    if perf_session and perf_session.bisecting and not session.config.option.collectonly:
        return run_bisection(perf_session, session)  # --perf-bisect: each commit's tests run in a process of their own
    return None


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
    session.require_device()  # as pytest_runtest_setup does; here too for a test that asks for it by getfixturevalue
    with torch_settings_kept(request.node.nodeid):
        yield Perf(session, request, benchmark)


@pytest.fixture(scope="session")  # one for the session: session fixtures (the suite's image dataset) say through it
def perf_session(request) -> PerfSession:
    """The session's settings and the results measured so far, for checks across tests."""
    return request.config.stash[SESSION]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    perf_session = item.config.stash.get(SESSION, None)
    if perf_session:
        perf_session.test_span(began=True)  # the session line's parts: the tests' span
    yield
    if perf_session:
        perf_session.test_span(began=False)


@pytest.hookimpl(tryfirst=True)  # before the test's fixtures
def pytest_runtest_setup(item):
    perf_session = item.config.stash.get(SESSION, None)
    if perf_session:
        if perf_session.settings.strict and "perf" in getattr(item, "fixturenames", ()):  # without a GPU: failed
            perf_session.require_device()  # before the session fixtures it asks for are made (PerfSession.tests_selected)
        perf_session.ref_state.before(perf_session, item)  # --perf-against REF, sharded: REF's tests of this file first


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    perf_session = item.config.stash.get(SESSION, None)
    if not perf_session:
        return (yield)
    with calls.call(perf_session, item):  # may fail it: every check that failed, what --perf-strict leaves unmade
        return (yield)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    rep = (yield).get_result()
    if rep.when == "call" and SESSION in item.config.stash:
        item.config.stash[SESSION].test_done(item.nodeid, passed=rep.passed, failed=rep.failed,
                                               failure=rep.longreprtext if rep.failed else None)
        if rep.failed and item.nodeid in item.config.stash[SESSION].results:
            rep.user_properties.append((writing.CAUSE, writing.summary_message(rep)))


def pytest_unconfigure(config):
    advice.user_sources = ()  # the next session (pytester's, say) asks its own plugins
    quiet_benchmark_ends(config)


def pytest_sessionfinish(session):
    perf_session = session.config.stash.get(SESSION, None)
    if perf_session and perf_session.finish(session.config) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # what the user asked to be written was not
    errors, notes = ref_imports.finish()  # REF's process: a module still imported from the working tree fails it
    for line in errors + notes:
        print(line, file=sys.stderr)
    if errors:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR


def pytest_terminal_summary(terminalreporter, config):
    if CROSS_GPU in config.stash:
        terminalreporter.section("WARNING", sep="!", red=True, bold=True)
        terminalreporter.write_line(config.stash[CROSS_GPU], red=True, bold=True)
    text, lines = writing.summary(config.stash[SESSION]) if SESSION in config.stash else (None, [])
    if text:
        terminalreporter.section("perf report")
        terminalreporter.write_line(text)
    for line, markup in lines:
        terminalreporter.write_line(line, **markup)
    if no_gpu := no_gpu_line(terminalreporter.stats.get("skipped", [])):
        terminalreporter.write_line(no_gpu, yellow=True)


@pytest.hookimpl(wrapper=True, tryfirst=True, specname="pytest_terminal_summary")
def pytest_terminal_summary_causes_whole(terminalreporter, config):
    """After pytest's short summary, which cuts each line to the terminal's width outside CI and below -vv: the
    measured tests' failure lines it cut, whole (a second hook of one name: pluggy takes its `specname`)."""
    yield
    if "f" in terminalreporter.reportchars and config.option.verbose < 2 and not writing.on_ci():
        for line in writing.cut_causes(terminalreporter.stats.get("failed", []), config.get_terminal_writer().fullwidth):
            terminalreporter.write_line(line)


def pytest_benchmark_update_machine_info(config, machine_info):
    perf_session = config.stash.get(SESSION, None)
    machine_info["gpu"] = perf_session.device.env if perf_session else device.detect_device().env


def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info, compared_benchmark):
    msg = cross_gpu(config, benchmarksession, machine_info, compared_benchmark)
    if msg:
        config.stash[CROSS_GPU] = msg
        benchmarksession.logger.warning(msg)


def pytest_report_header(config):
    if CROSS_GPU in config.stash:
        return ["WARNING: " + config.stash[CROSS_GPU]]
