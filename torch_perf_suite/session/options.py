"""The session's options read from pytest's config (command line > ini file > default, as settings.py declares them),
each refused at the session's start with one line naming what was wrong, before any test runs."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from ..settings import MEASURE_TYPES, OPTIONS, Measure, SessionSettings, conflicting, default_workers, split_part


def read_settings(config) -> SessionSettings:
    """The session's settings from `config` (pytest's, or early.KnownArgs before the session)."""
    opt = config.getoption
    strict = opt("--perf-strict")
    if strict is None:
        try:
            strict = config.getini("perf_strict")
        except (ValueError, pytest.UsageError) as e:  # pytest's bool ini: "invalid truth value ..."
            raise pytest.UsageError(f"ini option perf_strict: {e}; expected true or false") from None
    ini_dir = config.getini("perf_baseline_dir")
    if not opt("--perf-baseline-dir") and not str(ini_dir).strip():
        raise pytest.UsageError("ini option perf_baseline_dir is empty: name the folder of the baseline files")
    baseline_dir = opt("--perf-baseline-dir") or Path(ini_dir)
    if not baseline_dir.is_absolute():
        baseline_dir = Path(config.rootpath) / baseline_dir
    given = "--perf-baseline-dir" if opt("--perf-baseline-dir") else "ini option perf_baseline_dir:"
    if opt("--perf-baseline-dir") and not opt("--perf-update-baselines") and not baseline_dir.exists():
        raise pytest.UsageError(f"--perf-baseline-dir {baseline_dir} does not exist: give the folder that holds the "
                                "baseline files, or record into it with --perf-update-baselines")
    report = opt("--perf-report")
    if report is not None:
        _folder(report.parent, f"--perf-report {report}: folder", writable=True)
    return SessionSettings(
        strict=strict,
        update_baselines=opt("--perf-update-baselines"),
        baseline_dir=_folder(baseline_dir, given, writable=opt("--perf-update-baselines")),
        report=report,
        trace_dir=opt("--perf-trace-dir") and _folder(opt("--perf-trace-dir"), "--perf-trace-dir", writable=True),
        smoke=opt("--perf-smoke"),
        workers=opt("--perf-workers") or default_workers(),
        worker_start=opt("--perf-worker-start"),
        measure=_measure_from(config),
        ref=opt("--perf-against"),
        ref_cache=opt("--perf-against-cache"),
        bisect=opt("--perf-bisect"),
        split=_split(opt("--perf-split")),
        durations=opt("--perf-durations") or Path(config.rootpath) / "baselines" / "durations.json",
        instructions=_on_off(opt("--perf-instructions") or config.getini("perf_instructions"), "perf_instructions"),
    )


def check_values_apart(args: list[str]) -> None:
    """A --perf- option given its value as the next argument where that value is a file or folder that exists outside
    the folder pytest runs in: pytest finds its rootdir before it knows the plugin's options, takes the value for a test
    path, and the rootdir (and with it the test ids, the baselines folder and REF's repository) becomes that folder's.
    Refused, saying to join them."""
    valued, here = {f"--perf-{o.name.replace('_', '-')}" for o in OPTIONS if o.value}, Path.cwd().resolve()
    for option, value in zip(args, args[1:]):
        path = Path(value).resolve()
        if option in valued and not value.startswith("-") and path.exists() and here not in (path, *path.parents):
            raise pytest.UsageError(f"{option} {value}: write it {option}={value}: pytest finds its rootdir before it "
                                    f"knows {option}, takes {value}, which exists, for a test path, and would run from it")


def _split(text: str | None) -> tuple[int, int] | None:
    try:
        return None if text is None else split_part(text)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def _on_off(value: str, name: str) -> bool:
    if value not in ("on", "off"):
        raise pytest.UsageError(f"ini option {name} = {value!r}: expected on or off")
    return value == "on"


def _folder(path: Path, option: str, writable: bool = False) -> Path:
    """A folder option, refused at start (not after the tests, with GPU time spent) where it, or a folder it would be
    made in, is a file, or, where something is to be written there, cannot be written."""
    existing = next(p for p in (path, *path.parents) if p.exists())  # "." or "/" at the latest
    where = "" if existing == path else f": {existing}"
    if not existing.is_dir():
        raise pytest.UsageError(f"{option} {path}{where} is a file; give a folder")
    if writable and not os.access(existing, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"{option} {path}{where} cannot be written by this user; give a folder it can write")
    return path


def _measure_from(config) -> Measure:
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
    measure = Measure(**values)
    conflict = conflicting(measure)
    if conflict:
        raise pytest.UsageError(f"{conflict}: give --perf-max-rounds at least --perf-rounds")
    return measure
