"""The nightly's history: one JSON file a night (its date, commit and GPU model in its name), each read back with its
shape checked, so that a corrupt or foreign file is named rather than read as a night."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ..report.rows import is_number
from ..store import quoted, write_atomic


@dataclass
class Night:
    date: str
    commit: str
    gpu: str
    failed: dict[str, str] = field(default_factory=dict)  # test id -> its numbers, one line
    run_url: str = ""
    samples: dict[str, dict[str, float]] = field(default_factory=dict)  # test id -> part -> samples/s (median)
    numbers: dict[str, dict[str, float]] = field(default_factory=dict)  # test id -> its other numbers (creep.py)
    said: list[dict] = field(default_factory=list)  # the change points found this night (creep.Creep.said)



def load_history(folder: Path) -> list[Night]:
    """The nights recorded in `folder`, oldest first (their names start with the date)."""
    nights, skipped = read_history(folder)
    for path, problem in skipped[:1]:
        raise SystemExit(f"error: {path}: not a night recorded by this tool ({problem}); move it out of {folder}")
    return nights


def read_history(folder: Path) -> tuple[list[Night], list[tuple[Path, str]]]:
    """The nights in `folder`, oldest first, and each file that is not one with its problem (publish names them)."""
    nights, skipped = [], []
    for path in sorted(folder.glob("*.json")):
        try:
            night, problem = _night(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, RecursionError) as e:
            night, problem = None, e.strerror if isinstance(e, OSError) and e.strerror else str(e)  # its name is said
        nights += [] if problem else [night]
        skipped += [(path, problem)] if problem else []
    return nights, skipped


def _night(data) -> tuple[Night | None, str | None]:
    """A night from its JSON, and what is wrong with it (None where nothing is)."""
    if not isinstance(data, dict):
        return None, f"{quoted(data)} is not an object"
    known = {f.name for f in fields(Night)}
    unknown, missing = sorted(set(data) - known), [k for k in ("date", "commit", "gpu") if k not in data]
    if unknown or missing:
        return None, f"unknown key(s) {quoted(unknown)}" if unknown else f"no {quoted(missing)}"
    night = Night(**data)
    return night, _night_problem(night)


def _night_problem(night: Night) -> str | None:
    for name in ("date", "commit", "gpu", "run_url"):
        if not isinstance(getattr(night, name), str):
            return f"{name!r} is {quoted(getattr(night, name))}, expected a string"
    if not isinstance(night.failed, dict) or not all(isinstance(v, str) for v in night.failed.values()):
        return f"'failed' is {quoted(night.failed)}, expected an object of test ids and lines"
    for name in ("samples", "numbers"):
        tests = getattr(night, name)
        if not isinstance(tests, dict) or not all(
                isinstance(each, dict) and all(is_number(v) for v in each.values()) for each in tests.values()):
            return f"{name!r} is {quoted(tests)}, expected an object of test ids and their numbers by name"
    kinds = {"test": str, "number": str, "date": str, "commit": str, "drift": bool}
    if not isinstance(night.said, list) or not all(
            isinstance(s, dict) and set(s) == {*kinds, "change_pct"} and is_number(s["change_pct"])
            and all(isinstance(s[k], t) for k, t in kinds.items()) for s in night.said):
        return f"'said' is {quoted(night.said)}, expected a list of change points ({', '.join(kinds)}, change_pct)"
    return None


def night_path(folder: Path, night: Night) -> Path:
    """Where a night is kept: one file a date, commit and GPU model, so that a re-run of a night replaces it."""
    gpu = re.sub(r"[^a-z0-9]+", "-", night.gpu.lower()).strip("-")
    return folder / f"{night.date}-{night.commit[:12]}-{gpu}.json"


def same_night(a: Night, b: Night) -> bool:
    return (a.date, a.commit, a.gpu) == (b.date, b.commit, b.gpu)


def save_night(folder: Path, night: Night) -> Path:
    """Record tonight in the history (atomic); a re-run of the same night replaces it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = night_path(folder, night)
    write_atomic(path, json.dumps(asdict(night), indent=1) + "\n")
    for other in folder.glob("*.json"):  # the same night under an older name (before the GPU model was in it)
        if other != path and other.name.startswith(f"{night.date}-{night.commit[:12]}"):
            try:
                old, problem = _night(json.loads(other.read_text(encoding="utf-8")))
            except (OSError, ValueError, RecursionError):
                continue  # not this night's: load_history names it
            if not problem and same_night(old, night):
                other.unlink()
    return path
