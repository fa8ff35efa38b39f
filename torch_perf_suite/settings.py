"""Options (`--perf-...`), their validation, and the resolved settings of one test.

Precedence for the per-test numbers: `@pytest.mark.perf(...)` > command line > ini file > default.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields, replace
from pathlib import Path

from .host import cpu_count


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {value}")
    return value


def percent(text: str) -> float:
    try:
        value = float(str(text).rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 5 or 7.5, got {text!r}") from None
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"expected a percentage from 0 to below 100, got {value}")
    return value


def report_path(text: str) -> Path:
    """--perf-report PATH writes PATH.md and PATH.json; a .md or .json suffix given is dropped."""
    path = Path(text)
    if path.suffix in (".md", ".json"):
        path = path.with_suffix("")
    if path.name in ("", ".", ".."):
        raise argparse.ArgumentTypeError(f"expected a file path such as reports/perf, got {text!r}")
    return path


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds such as 1 or 0.5, got {text!r}") from None
    if not 0 <= value <= 60:
        raise argparse.ArgumentTypeError(f"expected a number of seconds from 0 to 60, got {value}")
    return value


@dataclass(frozen=True)
class Measure:
    """How one test is measured; every field can be set by marker, option, ini or default."""

    warmup: int = 5  # steps before the first round; the workload may ask for more (loader prefetch)
    rounds: int = 5  # timed rounds per part; the pipeline's are pytest-benchmark rounds
    max_rounds: int = 7  # more rounds, up to this many, while the median's interval is wider than ci_pct
    ci_pct: float = 1.0  # half-width of the median's 95% interval wanted, in percent
    steps: int = 2  # least training steps per timed round
    round_s: float = 0.5  # least seconds per timed round: steps per round grow to fill it
    profile_steps: int = 3  # steps in the separate profiled window that counts syncs
    tolerance: float = 3.0  # % below the baseline allowed for GPU-side numbers recorded on this chip
    chip_tolerance: float = 20.0  # % below the baseline allowed for GPU-side numbers recorded on another chip
    host_tolerance: float = 10.0  # % below the baseline allowed for loader and pipeline numbers (same host class)
    count_margin: float = 1.0  # % over the record allowed for bytes copied, the steps' peak memory and loader instructions


MEASURE_TYPES = {
    "warmup": positive_int, "rounds": positive_int, "max_rounds": positive_int, "ci_pct": percent, "steps": positive_int,
    "round_s": seconds, "profile_steps": positive_int, "tolerance": percent, "chip_tolerance": percent,
    "host_tolerance": percent, "count_margin": percent,
}
MEASURE_HELP = {
    "warmup": "warm-up steps before the timed rounds (compilation happens here)",
    "rounds": "timed rounds per part (pipeline, GPU, loader); the pipeline's are pytest-benchmark rounds",
    "max_rounds": "at most this many rounds per part, added one at a time while the median's interval is too wide",
    "ci_pct": "wanted half-width of the median's 95 percent confidence interval, percent of the median",
    "steps": "least training steps per timed round",
    "round_s": "least seconds per timed round; steps per round grow to fill it",
    "profile_steps": "steps in the profiled window that counts host-device syncs",
    "tolerance": "percent a GPU-side number may fall below a baseline recorded on this GPU chip",
    "chip_tolerance": "percent a GPU-side number may fall below a baseline recorded on another chip of this GPU model",
    "host_tolerance": "percent a loader or pipeline number may fall below a baseline recorded on the same host class",
    "count_margin": "percent over the recorded count allowed for bytes copied a step, the steps' peak GPU memory and the "
                    "loader's instructions per sample (kernel launches and compile graphs are compared exactly)",
}


def markers() -> tuple[str, ...]:
    """The plugin's markers and their help, the perf marker's settings named from MEASURE_TYPES."""
    return (
        f"perf(**settings): per-test measurement settings by name ({', '.join(MEASURE_TYPES)}); function over class "
        "over module, over the command line and the ini file",
        "multi_gpu: needs every GPU of the node (skipped in a sharded run, where each worker holds one)",
        "gate: the merge gate's subset (pytest perf_tests -m gate): sync checks and the GPU's optimizations, whose "
        "claims are on GPU-side numbers",
    )


def default_workers() -> int:
    """DataLoader workers of the multi-worker recipes: one per core this process may use. The worker
    sweep (perf_tests/test_worker_sweep.py) measures the loader alone at several counts and checks it. On a node
    of several GPUs, a test on one of them may use that GPU's share of the node's cores only, with -n or without
    (plugin._gpu_share)."""
    return cpu_count()


def add_options(parser) -> None:
    group = parser.getgroup("perf", "performance regression suite")
    for name, default in ((f.name, f.default) for f in fields(Measure)):
        help_text = f"{MEASURE_HELP[name]} (default: {default}"
        group.addoption("--perf-" + name.replace("_", "-"), type=MEASURE_TYPES[name], default=None,
                        help=f"{help_text}; ini: perf_{name})")
        parser.addini(f"perf_{name}", help_text + ")", default=None)
    group.addoption("--perf-strict", action="store_true", default=None,
                    help="nightly mode: a missing GPU, baseline or predecessor fails instead of skipping, and so does "
                         "comparing with another GPU's saved run (default: off; ini: perf_strict)")
    parser.addini("perf_strict", "strict mode (see --perf-strict)", type="bool", default=False)
    group.addoption("--perf-update-baselines", action="store_true", default=False,
                    help="record the tests that ran and passed into baselines/<gpu>.json, keeping every other entry "
                         "(default: off)")
    group.addoption("--perf-baseline-dir", type=Path, default=None,
                    help="folder of the per-GPU baseline files (default: baselines/ in the rootdir; ini: perf_baseline_dir)")
    parser.addini("perf_baseline_dir", "folder of the per-GPU baseline files (default: baselines)", default="baselines")
    group.addoption("--perf-report", type=report_path, default=None, metavar="PATH",
                    help="also write the session report to PATH.md and PATH.json (default: terminal only)")
    group.addoption("--perf-trace-dir", type=Path, default=None, metavar="DIR",
                    help="keep the profiler trace (gzipped Chrome trace) of every failed test in DIR (default: not kept)")
    group.addoption("--perf-smoke", action="store_true", default=False,
                    help="run every scenario for a couple of steps at a tiny image size on whatever device exists, "
                         "without throughput or sync assertions (default: off)")
    group.addoption("--perf-workers", type=positive_int, default=None,
                    help="DataLoader workers for the ladder's multi-worker steps "
                         f"(default: one per core, here {default_workers()}; on a node of several GPUs, one per core of "
                         "the GPU's share: the cores / the GPUs)")
    group.addoption("--perf-instructions", choices=("on", "off"), default=None,
                    help="count the loader's instructions per sample with valgrind's callgrind and compare them with the "
                         "count recorded in this environment (default: on; ini: perf_instructions)")
    parser.addini("perf_instructions", "count the loader's instructions (on or off; see --perf-instructions)", default="on")
    group.addoption("--perf-worker-start", choices=("fork", "forkserver", "spawn"), default=None,
                    help="how the DataLoader starts its workers (default: the platform's, fork on Linux before Python 3.14)")


@dataclass(frozen=True)
class SessionSettings:
    strict: bool
    update_baselines: bool
    baseline_dir: Path
    report: Path | None
    trace_dir: Path | None
    smoke: bool
    workers: int
    measure: Measure  # command line > ini > default; markers are applied per test
    worker_start: str | None = None  # the DataLoader workers' start method; None: the platform's
    instructions: bool = True  # count the loader's instructions per sample (callgrind)

    @classmethod
    def from_config(cls, config) -> "SessionSettings":
        opt = config.getoption
        strict = opt("--perf-strict")
        baseline_dir = opt("--perf-baseline-dir") or Path(config.getini("perf_baseline_dir"))
        if not baseline_dir.is_absolute():
            baseline_dir = Path(config.rootpath) / baseline_dir
        given = "--perf-baseline-dir" if opt("--perf-baseline-dir") else "ini option perf_baseline_dir:"
        return cls(
            strict=config.getini("perf_strict") if strict is None else strict,
            update_baselines=opt("--perf-update-baselines"),
            baseline_dir=_folder(baseline_dir, given),
            report=opt("--perf-report"),
            trace_dir=opt("--perf-trace-dir") and _folder(opt("--perf-trace-dir"), "--perf-trace-dir"),
            smoke=opt("--perf-smoke"),
            workers=opt("--perf-workers") or default_workers(),
            worker_start=opt("--perf-worker-start"),
            measure=_measure_from(config),
            instructions=_on_off(opt("--perf-instructions") or config.getini("perf_instructions"), "perf_instructions"),
        )


def _on_off(value: str, name: str) -> bool:
    import pytest

    if value not in ("on", "off"):
        raise pytest.UsageError(f"ini option {name} = {value!r}: expected on or off")
    return value == "on"


def _folder(path: Path, option: str) -> Path:
    """A folder option, refused at start (not after the tests) where it, or a folder it would be made in, is a file."""
    import pytest

    existing = next(p for p in (path, *path.parents) if p.exists())  # "." or "/" at the latest
    if not existing.is_dir():
        where = "" if existing == path else f": {existing}"
        raise pytest.UsageError(f"{option} {path}{where} is a file; give a folder")
    return path


def _measure_from(config) -> Measure:
    import pytest

    values = {}
    for name, convert in MEASURE_TYPES.items():
        value = config.getoption("--perf-" + name.replace("_", "-"))
        if value is None and config.getini(f"perf_{name}") not in (None, ""):
            raw = config.getini(f"perf_{name}")
            try:
                value = convert(raw)
            except argparse.ArgumentTypeError as e:
                raise pytest.UsageError(f"ini option perf_{name} = {raw!r}: {e}") from None
        if value is not None:
            values[name] = value
    return Measure(**values)


def for_marker(measure: Measure, markers, test_id: str) -> Measure:
    """Apply `@pytest.mark.perf(...)` settings from the function, its class and its module:
    `markers` closest first (as `node.iter_markers("perf")` gives them); the closest wins per field.
    Unknown names, positional arguments and bad values raise ValueError naming the test."""
    merged: dict = {}
    for mark in markers:
        if mark.args:
            given = ", ".join(map(repr, mark.args))
            raise ValueError(f"{test_id}: @pytest.mark.perf({given}) takes settings by name only, e.g. perf(rounds=3)")
        for name, value in mark.kwargs.items():
            merged.setdefault(name, value)
    unknown = set(merged) - set(MEASURE_TYPES)
    if unknown:
        raise ValueError(f"{test_id}: @pytest.mark.perf got unknown settings {sorted(unknown)}; known: {sorted(MEASURE_TYPES)}")
    checked = {}
    for name, value in merged.items():
        try:
            checked[name] = MEASURE_TYPES[name](str(value))
        except argparse.ArgumentTypeError as e:
            raise ValueError(f"{test_id}: @pytest.mark.perf({name}={value!r}): {e}") from None
    return replace(measure, **checked)
