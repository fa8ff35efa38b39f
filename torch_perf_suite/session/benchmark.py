"""pytest-benchmark's side of a session: its options that take the perf scenarios' benchmark away, its saved runs
checked before a --benchmark-compare reads them, a compare across GPU models, a smoke run's rounds dropped before it
prints or saves them, and its warnings quieted where no GPU leaves nothing to benchmark. plugin.py's hooks call
these; nothing here reaches into pytest-benchmark beyond the attributes named."""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import pytest

from ..findings import PerfWarning
from ..store import quoted

BENCHMARK_OFF = {  # pytest-benchmark's options that take the perf scenarios' benchmark away, and what they do to it
    "--benchmark-skip": "pytest-benchmark then skips every perf scenario, so throughput goes unchecked",
    "--benchmark-disable": "pytest-benchmark then keeps no benchmark record (no table, nothing to --benchmark-json, "
                           "--benchmark-save or --benchmark-compare); the perf checks still run",
}

NO_GPU = "no CUDA GPU"
UNUSED_BENCHMARK = "ignore:Benchmark fixture was not used at all in this test"  # pytest-benchmark's, for a skipped test
# pytest-benchmark's, outside any test, where nothing ran: a --benchmark-compare with no saved run, an autosave of nothing
NOTHING_BENCHMARKED = ("Can't compare. No benchmark files", "Not saving anything, no benchmarks have been run")
QUIETED = pytest.StashKey[list]()


def nothing_to_benchmark(config) -> None:
    """No GPU and no smoke run: every perf test skips, and no_gpu_line says why once at the end. pytest-benchmark's
    warnings about its fixture unused in a skipped test, a compare with nothing and a save of nothing are noise: ignored
    for this session only (quiet_benchmark_ends puts the filters back)."""
    config.addinivalue_line("filterwarnings", UNUSED_BENCHMARK)
    before = list(warnings.filters)
    for message in NOTHING_BENCHMARKED:  # not a test's warnings: issued at configure and at the session's end
        warnings.filterwarnings("ignore", message=re.escape(message))
    config.stash[QUIETED] = [f for f in warnings.filters if f not in before]


def quiet_benchmark_ends(config) -> None:
    for added in config.stash.get(QUIETED, []):
        if added in warnings.filters:
            warnings.filters.remove(added)
    getattr(warnings, "_filters_mutated", lambda: None)()  # the filters are cached: say they changed (CPython's own)


def no_gpu_line(skipped: list) -> str | None:
    """The one line that ends a run whose perf tests skipped for want of a GPU (skip reports, as pytest keeps them)."""
    n = sum(1 for r in skipped if NO_GPU in str(getattr(r, "longrepr", "")))
    if not n:
        return None
    return (f"{n} perf test(s) skipped: {NO_GPU} on this machine. Run with --perf-smoke to build and train each on this "
            "device (nothing is timed there), or on a CUDA GPU to measure them.")


def check_benchmark_options(config, strict: bool) -> None:
    """--benchmark-skip or --benchmark-disable: a warning in pytest's summary saying what they take away; refused under
    --perf-strict, and under -W error; --benchmark-skip with --perf-update-baselines, which it would leave nothing to
    record, is refused."""
    off = [f"{o}: {why}" for o, why in BENCHMARK_OFF.items() if config.getoption(o[2:].replace("-", "_"), default=False)]
    if not off:
        return
    if off[0].startswith("--benchmark-skip") and config.getoption("--perf-update-baselines"):
        raise pytest.UsageError("--perf-update-baselines records the perf scenarios, and --benchmark-skip skips every one "
                                "of them: drop one of the two")
    why = "; ".join(off)
    if strict:
        raise pytest.UsageError(f"--perf-strict refuses {why}. Drop the option, or drop --perf-strict.")
    try:
        config.issue_config_time_warning(PerfWarning(why), stacklevel=3)  # into pytest's warnings summary
    except PerfWarning:  # -W error (or filterwarnings) made it an error
        raise pytest.UsageError(f"{why}. Drop the option.") from None


STATS = ("min", "max", "mean", "stddev", "median", "iqr", "ops")  # what pytest-benchmark compares and prints of a saved run


def saved_run_problem(run) -> str | None:
    """What makes a pytest-benchmark saved run one that cannot be compared with, naming the entry; None where it can."""
    if not isinstance(run, dict):
        return f"the top level is {type(run).__name__}, expected an object"
    info = run.get("machine_info")
    if not isinstance(info, dict) or not isinstance(info.get("gpu", {}), dict):
        return f"'machine_info' is {quoted(info)}, expected an object (with the 'gpu' this suite adds)"
    benchmarks = run.get("benchmarks")
    if not isinstance(benchmarks, list):
        return f"'benchmarks' is {quoted(benchmarks)}, expected a list"
    for i, bench in enumerate(benchmarks):
        name = bench.get("fullname") if isinstance(bench, dict) else None
        if not isinstance(name, str):
            return f"benchmarks[{i}]: 'fullname' is {quoted(name)}, expected the test's id"
        stats = bench.get("stats")
        if not isinstance(stats, dict):
            return f"benchmarks[{i}] {name!r}: 'stats' is {quoted(stats)}, expected an object"
        for key in STATS:
            value = stats.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                return f"benchmarks[{i}] {name!r}: stats {key!r} is {quoted(value)}, expected a non-negative number"
    return None



def _saved_path(benchmarksession, run) -> str:
    """The file pytest-benchmark read `run` from (its storage keeps what it read, by file), or else its folder."""
    storage = benchmarksession.storage
    return next((str(f) for f, data in getattr(storage, "_cache", {}).items() if data is run), str(storage))


def check_saved_runs(config) -> None:
    """--benchmark-compare naming a saved run that pytest-benchmark could not read (cut short while it was saved, say):
    pytest-benchmark warns and compares with an older run, or with none; a usage error here, naming the file."""
    bs = getattr(config, "_benchmarksession", None)
    compare = getattr(bs, "compare", None)
    if not compare or bs.compared_mapping is None or not hasattr(bs.storage, "query"):
        return
    files = bs.storage.query("[0-9][0-9][0-9][0-9]_" if compare is True else compare)
    read = {Path(p) for p in bs.compared_mapping}
    for f in files[-1:] if compare is True else files:
        if f not in read and f.relative_to(bs.storage.path) not in read:
            raise pytest.UsageError(f"--benchmark-compare: {f} is not a readable pytest-benchmark saved run (cut short "
                                    f"while it was saved?); move it out of {bs.storage} or compare with another run "
                                    "(--benchmark-compare=NNNN)")


def cross_gpu(config, benchmarksession, machine_info: dict, compared_benchmark: dict) -> str | None:
    """--benchmark-compare against a run saved on another GPU model: the warning to print (a usage error under
    --perf-strict); None for the same model, and for a smoke run, whose timings are not measurements. A saved run
    that cannot be compared with is a usage error naming its file and entry."""
    problem = saved_run_problem(compared_benchmark)
    if problem:
        raise pytest.UsageError(f"--benchmark-compare: {_saved_path(benchmarksession, compared_benchmark)}: {problem}; "
                                f"move it out of {benchmarksession.storage} or compare with another run "
                                "(--benchmark-compare=NNNN)")
    if config.getoption("--perf-smoke"):
        return None
    ours = machine_info.get("gpu", {}).get("gpu")
    theirs = compared_benchmark.get("machine_info", {}).get("gpu", {}).get("gpu")
    if ours == theirs:
        return None
    msg = (
        f"COMPARING ACROSS GPU MODELS: this run is on {ours!r}, the saved run on {theirs!r} "
        f"({benchmarksession.storage.location}). The differences below are not regressions. "
        "Compare against a run saved on the same GPU model (--benchmark-compare=NNNN)."
    )
    strict = config.getoption("--perf-strict")
    if strict if strict is not None else config.getini("perf_strict"):
        raise pytest.UsageError("--perf-strict: " + msg)
    return msg


def smoke_timings_off(config) -> None:
    """A smoke run times nothing that means anything: pytest-benchmark neither prints, saves nor compares its rounds
    (SmokeTimings), and --benchmark-compare is dropped, with a warning saying so."""
    if config.getoption("benchmark_compare", None):
        config.option.benchmark_compare = None  # read when pytest-benchmark configures, after this plugin
        config.issue_config_time_warning(PerfWarning("--benchmark-compare does nothing in a smoke run: nothing is timed "
                                                     "that a saved run could be compared with"), stacklevel=3)
    config.pluginmanager.register(SmokeTimings(), "perf_smoke_timings")


class SmokeTimings:
    """Registered in a smoke run: its pipeline rounds, timed by pytest-benchmark, are dropped before pytest-benchmark
    prints, saves or compares them (its own session-finish wrapper does that): a smoke run measures nothing."""

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session):
        bs = getattr(session.config, "_benchmarksession", None)
        if bs is not None:
            bs.benchmarks.clear()
        yield
