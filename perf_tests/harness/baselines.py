"""Per-GPU baseline files: `baselines/<gpu-slug>.json`, written only by real runs.

{
  "schema": 1,
  "gpu": "NVIDIA H200",
  "tests": {
    "perf_tests/test_h2d_copy.py::test_h2d_copy[pinned]": {
      "samples_per_s": 2616.0, "spread_pct": 0.4, "syncs_per_step": 0.0, "peak_mem_gb": 0.9,
      "env": {"gpu": ..., "driver": ..., "cuda": ..., "torch": ..., "torchvision": ...,
              "torchmetrics": ..., "date": "2026-11-22"}
    }
  }
}

Each entry keeps the environment it was recorded in: `--perf-update-baselines` rewrites only the
tests that ran, so one file can hold entries from several runs.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

SCHEMA = 1
ENTRY_FIELDS = {"samples_per_s": float, "spread_pct": float, "syncs_per_step": float, "peak_mem_gb": float, "env": dict}


class BaselineError(Exception):
    """A baseline file that cannot be used; the message names the file and what to do."""


def gpu_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'"""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug:
        raise ValueError(f"cannot make a file name of the GPU name {name!r}")
    return slug


def environment() -> dict:
    """GPU, driver and library versions of this process, as recorded next to every measurement."""
    import torch

    env = {"gpu": "cpu", "driver": None, "cuda": torch.version.cuda, "torch": torch.__version__}
    for module in ("torchvision", "torchmetrics"):
        try:
            env[module] = __import__(module).__version__
        except ImportError:
            env[module] = None
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        env["driver"] = _driver_version()
    env["date"] = datetime.date.today().isoformat()
    return env


def _driver_version() -> str | None:
    try:
        import pynvml  # shipped as nvidia-ml-py on the GPU image; optional
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else v
        except pynvml.NVMLError:
            pass
    try:
        return Path("/proc/driver/nvidia/version").read_text().split("Kernel Module")[1].split()[0]
    except (OSError, IndexError):
        return None


@dataclass
class BaselineFile:
    path: Path
    gpu: str
    tests: dict[str, dict]

    @classmethod
    def load(cls, path: Path, gpu: str) -> "BaselineFile":
        """Read and validate; a missing file is an empty baseline for `gpu`."""
        if not path.exists():
            return cls(path, gpu, {})
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BaselineError(
                f"{path}: not valid JSON ({e}). Restore it from git (git checkout -- {path}) "
                "or re-record it with --perf-update-baselines."
            ) from e
        problem = _validate(data, gpu)
        if problem:
            raise BaselineError(f"{path}: {problem}. Restore it from git or re-record it with --perf-update-baselines.")
        return cls(path, data["gpu"], data["tests"])

    def get(self, test_id: str) -> dict | None:
        return self.tests.get(test_id)

    def save(self, updates: dict[str, dict]) -> None:
        """Write `updates` over the current entries, keeping every other entry; atomic."""
        current = BaselineFile.load(self.path, self.gpu).tests  # another run may have written meanwhile
        merged = {**current, **updates}
        data = {"schema": SCHEMA, "gpu": self.gpu, "tests": dict(sorted(merged.items()))}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=self.path.name, suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1)
                f.write("\n")
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise
        self.tests = data["tests"]


def _validate(data, gpu: str) -> str | None:
    if not isinstance(data, dict):
        return "the top level is not an object"
    if data.get("schema") != SCHEMA:
        return f"schema {data.get('schema')!r}, expected {SCHEMA}"
    if data.get("gpu") != gpu:
        return f"holds baselines for GPU {data.get('gpu')!r}, but this GPU is {gpu!r}"
    tests = data.get("tests")
    if not isinstance(tests, dict):
        return "'tests' is not an object"
    for test_id, entry in tests.items():
        if not isinstance(entry, dict):
            return f"entry {test_id!r} is not an object"
        for name, kind in ENTRY_FIELDS.items():
            value = entry.get(name)
            ok = isinstance(value, kind) or (kind is float and isinstance(value, int) and not isinstance(value, bool))
            if not ok:
                return f"entry {test_id!r}: field {name!r} is {value!r}, expected a {kind.__name__}"
        if entry["samples_per_s"] <= 0:
            return f"entry {test_id!r}: samples_per_s must be positive, is {entry['samples_per_s']}"
    return None


def allowed_drop_pct(tolerance_pct: float, baseline_spread_pct: float) -> float:
    """How far below the baseline a run may fall: the tolerance plus twice the recorded spread."""
    return tolerance_pct + 2 * baseline_spread_pct
