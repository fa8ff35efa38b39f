"""Per-GPU baseline files: `baselines/<gpu-slug>.json`, written only by real runs.

{
  "schema": 2,
  "gpu": "NVIDIA H200",
  "tests": {
    "perf_tests/test_ladder.py::test_ladder[compile]": {
      "parts": {
        "pipeline": {"samples_per_s": 13288.0, "spread_pct": 1.2, "rounds": [13201.5, ...]},
        "gpu": {...}, "loader": {...}
      },
      "bottleneck": "loader", "efficiency": 0.97, "gpu_busy_pct": 98.0,
      "syncs_per_step": 1.0, "peak_mem_gb": 10.9,
      "env": {"gpu": ..., "driver": ..., "cuda": ..., "torch": ..., "torchvision": ..., "torchmetrics": ...,
              "host": {"cpu": "Intel(R) Xeon(R) Platinum 8480+", "cores": 16}, "date": "2026-11-22"}
    }
  }
}

Each entry keeps the environment it was recorded in: `--perf-update-baselines` rewrites only the
tests that ran, so one file can hold entries from several runs. Files of schema 1 (one pipeline
number per test, no host) still load: their entries become a pipeline part with no rounds and no
host, and the comparison says what it could not check.
"""

from __future__ import annotations

import datetime
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from .. import store
from ..counts import host_side, registry
from ..loader.cost import validate_unit
from ..store import number_problem as _number
from ..store import quoted
from ..throughput.parts import PARTS

SCHEMA = 2
RERECORD = "re-record it on this GPU: run your perf tests again with --perf-update-baselines"
MAX_SAMPLES_PER_S = 1e9  # no training step on any GPU reaches a billion samples a second
MAX_MEMORY_GB = 10_000  # nor holds 10 TB
MAX_SCALING = 2  # samples/s per GPU over one GPU's: more than twice is no measurement
FAR = 1.5  # a part's samples/s is the median of its rounds: beyond this factor of their range it is not theirs


class BaselineError(store.Unusable):
    """A baseline file that cannot be used; the message names the file and what to do."""


@dataclass
class BaselineFile:
    path: Path
    gpu: str
    tests: dict[str, dict]
    old_schema: bool = False  # loaded from a schema-1 file

    @classmethod
    def load(cls, path: Path, gpu: str) -> "BaselineFile":
        """Read and validate; a missing file is an empty baseline for `gpu`."""
        if not path.exists():
            return cls(path, gpu, {})
        if path.is_dir():
            raise BaselineError(f"{path}: is a folder, expected a baseline file; move it or give another --perf-baseline-dir")
        data, problem = _read(path, gpu)
        if problem:
            raise BaselineError(f"{path}: {problem}. Restore it from git (git checkout -- {path}) or {RERECORD}")
        old = data["schema"] == 1
        tests = {k: _from_schema_1(v) for k, v in data["tests"].items()} if old else data["tests"]
        return cls(path, data["gpu"], tests, old_schema=old)

    @classmethod
    def load_for_update(cls, path: Path, gpu: str) -> tuple["BaselineFile", str | None]:
        """Load for --perf-update-baselines: a file that cannot be used is moved aside, not lost,
        and recording starts afresh. Returns the file and a line saying what was moved, if anything."""
        _, problem = _read(path, gpu) if path.is_file() else (None, None)
        if not problem:
            return cls.load(path, gpu), None
        aside = path.with_name(f"{path.name}.corrupt-{datetime.datetime.now():%Y%m%d-%H%M%S}")
        os.replace(path, aside)
        return cls(path, gpu, {}), f"{path}: {problem}. It was moved to {aside}; this run records a new {path.name}."

    def get(self, test_id: str) -> dict | None:
        return self.tests.get(test_id)

    def older_than_the_host_count(self) -> str:
        """One line for the run's header where entries of a step were recorded before its host side was counted: each
        such test leaves the host side uncompared (a hole under --perf-strict) until the file is recorded again."""
        older = [k for k, e in self.tests.items() if e.get("counts") and not host_side.holds_host_side(e["counts"])]
        if not older:
            return ""
        return (f"{self.path}: {len(older)} of {len(self.tests)} entries were recorded before the step's host side was "
                "counted: their tests say \"host side not compared\" (a failure under --perf-strict) until they are "
                "recorded again on this GPU model: pytest --perf-update-baselines")

    def save(self, updates: dict[str, dict]) -> None:
        """Write `updates` over the current entries, keeping every other entry (store.update: locked, atomic, the
        file's mode kept)."""
        self.tests = store.update(self.path, lambda: {"schema": SCHEMA, "gpu": self.gpu, "tests": dict(sorted(
            {**BaselineFile.load(self.path, self.gpu).tests, **updates}.items()))})["tests"]


def _read(path: Path, gpu: str) -> tuple[object, str | None]:
    """The file's data and what makes it unusable (None where nothing does)."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as e:
        return None, f"cannot be read ({e})"
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # ValueError: bad JSON
        return None, f"not valid JSON ({e})"
    return data, _validate(data, gpu)


def _from_schema_1(entry: dict) -> dict:
    """A schema-1 entry as a schema-2 one: its number is the pipeline's; no rounds, no host."""
    part = {"samples_per_s": entry["samples_per_s"], "spread_pct": entry["spread_pct"], "rounds": None}
    rest = {k: v for k, v in entry.items() if k not in ("samples_per_s", "spread_pct")}
    return {"parts": {"pipeline": part}, **rest, "env": {**entry["env"], "host": None}}



def _validate_part(test_id: str, name: str, part) -> str | None:
    if not isinstance(part, dict):
        return f"entry {test_id!r}: part {name!r} is not an object"
    sps = part.get("samples_per_s")
    checks = [("samples_per_s", sps, True, False), ("spread_pct", part.get("spread_pct"), False, True)]
    rounds = part.get("rounds")
    if rounds is not None:
        if not isinstance(rounds, list) or not rounds:
            return f"entry {test_id!r}: part {name!r}: 'rounds' is {quoted(rounds)}, expected a list of samples/s"
        checks += [(f"rounds[{i}]", r, True, False) for i, r in enumerate(rounds)]
    for field, value, positive, optional in checks:
        problem = _number(value, positive=positive, optional=optional,
                          at_most=MAX_SAMPLES_PER_S if field != "spread_pct" else math.inf)
        if problem:
            return f"entry {test_id!r}: part {name!r}: {field!r} {problem}"
    if rounds and not min(rounds) / FAR <= sps <= max(rounds) * FAR:
        return (f"entry {test_id!r}: part {name!r}: 'samples_per_s' {sps:g} is far outside its own rounds "
                f"({min(rounds):g} to {max(rounds):g}), whose median it is")
    return None


def _validate_counts(counts) -> str | None:
    """What a test counted (fixture/result.py's Result.counts), each count's value as its line in counts/registry.py
    says; a test over several GPUs, each rank's."""
    if counts is None:
        return None
    if not isinstance(counts, dict):
        return f"'counts' is {quoted(counts)}, expected an object"
    if "ranks" in counts:  # a test over several GPUs: rank -> its own count
        ranks = counts["ranks"]
        if not isinstance(ranks, dict):
            return f"'counts' 'ranks' is {quoted(ranks)}, expected an object of each rank's counts"
        return next((f"rank {rank}: {p}" for rank, c in ranks.items() if (p := _validate_counts(c))), None)
    return registry.problem(counts)


def _validate_env(env) -> str | None:
    if not isinstance(env, dict) or not isinstance(env.get("gpu"), str) or not env["gpu"]:
        return f"'env' is {quoted(env)}, expected the environment it was recorded in"
    if env.get("host") is not None and not isinstance(env["host"], dict):
        return f"'env' 'host' is {quoted(env['host'])}, expected an object or null"
    if env.get("gpu_uuid") is not None and not isinstance(env["gpu_uuid"], str):
        return f"'env' 'gpu_uuid' is {quoted(env['gpu_uuid'])}, expected a string or null"
    return None


def _validate(data, gpu: str) -> str | None:
    if not isinstance(data, dict):
        return "the top level is not an object"
    if data.get("schema") not in (1, SCHEMA):
        return f"schema {quoted(data.get('schema'))}, expected {SCHEMA} (or 1, read as an old file)"
    if data.get("gpu") != gpu:
        return f"holds baselines for GPU {quoted(data.get('gpu'))}, but this GPU is {gpu!r}"
    tests = data.get("tests")
    if not isinstance(tests, dict):
        return "'tests' is not an object"
    for test_id, entry in tests.items():
        if not isinstance(entry, dict):
            return f"entry {test_id!r} is not an object"
        problem = (_validate_env(entry.get("env")) or _validate_counts(entry.get("counts"))
                   or validate_unit(entry.get("loader_unit")))
        if problem:
            return f"entry {test_id!r}: {problem}"
        for field, at_most in (("syncs_per_step", math.inf), ("peak_mem_gb", MAX_MEMORY_GB), ("scaling", MAX_SCALING)):
            problem = _number(entry.get(field), optional=True, at_most=at_most)
            if problem:
                return f"entry {test_id!r}: {field!r} {problem}"
        problem = None
        if data["schema"] == 1:
            problem = _validate_part(test_id, "pipeline", entry)
        else:
            parts = entry.get("parts")
            if not isinstance(parts, dict) or not parts:
                return f"entry {test_id!r}: 'parts' is {quoted(parts)}, expected an object with some of {PARTS}"
            unknown = sorted(set(parts) - set(PARTS))
            if unknown:
                return f"entry {test_id!r}: unknown part(s) {', '.join(map(repr, unknown))} in 'parts', expected some of {PARTS}"
            problem = next((p for p in (_validate_part(test_id, n, v) for n, v in parts.items()) if p), None)
        if problem:
            return problem
    return None
