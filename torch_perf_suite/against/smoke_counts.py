"""What a smoke run counts of each test: its counts as a baseline entry keeps them (Result.counts: the step's host side,
Python lines and blocks a step, on any machine; compile graphs where it compiled; on a GPU, what the profiled window
counted), and its host reads a step without a GPU (syncs/host_reads.py), by line, with its ops a step by dtype.

Kept by REF's smoke run under --perf-against (`smoke-counts.json` in REF's cache folder) for the head's smoke run to
compare with, and by a smoke run that records (`--perf-smoke --perf-update-baselines`) in the baselines folder, one file
an environment (`path_in`: the counts follow the versions of Python, torch and the libraries whose code the step runs),
which a smoke run without a GPU compares with. The loader's settings, instructions and blocks a sample have files of
their own (loaders.json, instructions.json). Standard library only, as the stores are."""

from __future__ import annotations

import datetime

from .. import store
from ..counts import host_side

FILE = "smoke-counts.json"
FOLDER = "smoke-counts"  # in the baselines folder: one file an environment
SCHEMA = 1


def path_in(folder, env_key: str):
    """The baselines folder's file of smoke counts for one environment (loader/instructions.key)."""
    return folder / FOLDER / f"{env_key}.json"


class SmokeCountsError(store.Unusable):
    """A smoke counts file that cannot be used; the message names the file and what to do."""


class SmokeFile(store.TestsFile):
    """{"schema": 1, "tests": {test id: {"counts": {...}, "reads": {...} or null, "date": ...}}}, read-merge-write."""

    Error = SmokeCountsError

    @staticmethod
    def validate(data) -> str | None:
        return _validate(data)


def entry(result) -> dict:
    """A test's entry: what its smoke run counted (Result.counts) and its host reads a step (None where none were
    counted: on a GPU the profiled window counts syncs instead)."""
    return {"counts": result.counts(), "reads": reads_entry(result.reads), "date": datetime.date.today().isoformat()}


def reads_entry(counted) -> dict | None:
    """Host reads a step (a SyncCount of host_reads.count), in total and by where they happen (`read_at`); the
    reads inside a periodic phase are not the steps' and are left out, as their check leaves them."""
    if counted is None:
        return None
    lines: dict[str, float] = {}
    for source, n in counted.sources.items():
        at = read_at(source)
        lines[at] = lines.get(at, 0.0) + n / counted.steps
    return {"per_step": round(counted.per_step, 3), "lines": {k: round(v, 3) for k, v in sorted(lines.items())},
            "dtypes": {k: round(n / counted.steps, 2) for k, n in sorted(counted.dtypes.items())}}


def read_at(source) -> str:
    """'aten::_local_scalar_dense at fixtures/training.py:130 in train_step', or, for a read inside a library,
    '... at torchmetrics/aggregation.py:93 in f (from fixtures/metrics.py:41 in update)': a library's read is matched
    by its own line (host_side.grown), not by the project line that called it, which moves with any edit above it."""
    if source.library_line:
        return f"{source.ops} at {source.library_line} (from {source.user_line or '(not seen)'})"
    return f"{source.ops} at {source.user_line or '(not seen)'}"


def _validate(data) -> str | None:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("tests"), dict):
        return f"expected {{\"schema\": {SCHEMA}, \"tests\": {{...}}}}"
    for test_id, e in data["tests"].items():
        if not isinstance(e, dict) or not isinstance(e.get("counts"), dict):
            return f"{test_id!r}: expected an object with the test's 'counts'"
        reads = e.get("reads")
        if reads is not None and not (isinstance(reads, dict) and _number(reads.get("per_step"))
                                      and isinstance(reads.get("lines"), dict)
                                      and all(_number(v) for v in reads["lines"].values())):
            return f"{test_id!r}: 'reads' is {store.quoted(reads)}, expected per_step and lines of numbers, or null"
        if reads is not None and not (isinstance(reads.get("dtypes", {}), dict)
                                      and all(_number(v) for v in reads.get("dtypes", {}).values())):
            return f"{test_id!r}: 'reads' 'dtypes' is {store.quoted(reads.get('dtypes'))}, expected dtypes and numbers"
        problem = "host" in e["counts"] and host_side.validate(e["counts"]["host"])
        if problem:
            return f"{test_id!r}: 'counts' 'host': {problem}"
    return None


def _number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value >= 0
