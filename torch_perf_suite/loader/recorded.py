"""`baselines/loaders.json`: each test's loader settings (and, from a smoke run, its cost per sample), one file for
every machine, read and written through the one store."""

from __future__ import annotations

import datetime

from .. import store
from .cost import UnitCost, validate_unit
from .described import SCALARS, _short

SCHEMA = 1


class SettingsError(store.Unusable):
    """A loaders file that cannot be used; the message names the file and what to do."""


class SettingsFile(store.TestsFile):
    """baselines/loaders.json: {"schema": 1, "tests": {test id: {"settings": {...}, "workers": N, "date": ...}}}, one
    file for every machine (settings do not depend on the host). Written atomically, read-merge-write."""

    Error = SettingsError

    @staticmethod
    def validate(data) -> str | None:
        return _validate(data)


def entry(settings: dict, workers: int, unit: UnitCost | None = None) -> dict:
    """A loaders.json entry; `unit`: a smoke run's cost per sample, kept where no baseline entry holds it (REF's run)."""
    found = {"settings": settings, "workers": workers, "date": datetime.date.today().isoformat()}
    return {**found, "unit": unit.entry()} if unit is not None else found


# what describe() gives each setting that is not a name: read back as anything else, the file is corrupt, not changed
NUMBERS = ("num_workers", "batch_size", "prefetch_factor", "timeout")  # or null
FLAGS = ("drop_last", "pin_memory", "persistent_workers", "in_order")


def _validate(data) -> str | None:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("tests"), dict):
        return f"expected {{\"schema\": {SCHEMA}, \"tests\": {{...}}}}"
    for test_id, e in data["tests"].items():
        settings = e.get("settings") if isinstance(e, dict) else None
        if not isinstance(settings, dict) or not all(isinstance(v, SCALARS) for v in settings.values()):
            return f"{test_id!r}: 'settings' is {_short(settings, 60)}, expected an object of plain values"
        for name, value in settings.items():
            number = value is None or (not isinstance(value, bool) and isinstance(value, (int, float)) and value >= 0)
            if name in NUMBERS and not number:
                return f"{test_id!r}: setting {name!r} is {value!r}, expected a number of at least 0, or null"
            if name in FLAGS and not isinstance(value, bool):
                return f"{test_id!r}: setting {name!r} is {value!r}, expected true or false"
        workers = e.get("workers")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            return f"{test_id!r}: 'workers' is {workers!r}, expected the --perf-workers it was recorded with"
        problem = validate_unit(e.get("unit"))
        if problem:
            return f"{test_id!r}: {problem}"
    return None
