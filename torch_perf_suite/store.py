"""The suite's files on disk, one way: the recorded JSON stores (`baselines/<gpu>.json`, `instructions.json`,
`loaders.json`) and the reports. A file is written whole or not at all (`atomic`), keeping the mode of the file it
replaces; a store is read and checked in one place (`read_checked`) and updated read-merge-write under a lock beside
it (`update`), so that processes recording into one file at once (a sharded run's workers) never drop each other's
entries."""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator

LOCK_TIMEOUT_S = 60  # a write takes milliseconds; a lock held this long is a process stuck, said rather than waited on


class Unusable(Exception):
    """A recorded file that cannot be used (a baseline file, the instruction counts, the loaders' settings); the message
    names the file and what to do. The pytest layer says it as a usage error."""


@contextlib.contextmanager
def atomic(path: Path, mode: str = "w") -> Iterator[IO]:
    """A file written beside `path`, renamed over it when the block ends, removed if the block raises: a reader (the
    nightly, a sharded run's controller, a user opening a kept trace) sees the old file or the new one, never half. It
    keeps the mode of the file it replaces; a new file gets the usual one (0666 less the umask), not mkstemp's 0600."""
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f
        os.chmod(tmp, file_mode(path))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def file_mode(path: Path) -> int:
    """The mode a file written over `path` gets: the one it has, else 0666 less the process's umask."""
    if path.exists():
        return stat.S_IMODE(path.stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: Path, text: str) -> None:
    with atomic(path) as f:
        f.write(text)


def write_json(path: Path, data) -> None:
    """`data` as the stores keep it: one-space indents, a final newline; atomic."""
    with atomic(path) as f:
        json.dump(data, f, indent=1)
        f.write("\n")


def read_checked(path: Path, validate: Callable[[object], str | None], error: type[Exception]) -> dict | None:
    """A recorded JSON file, checked by `validate` (what is wrong, or None); None where it does not exist; `error`
    naming the file, what is wrong and what to do where it cannot be used."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: nested too deep
        raise error(f"{path}: not valid JSON ({e}); restore it from git (git checkout -- {path})") from None
    problem = validate(data)
    if problem:
        raise error(f"{path}: {problem}; restore it from git (git checkout -- {path}) or re-record it with "
                    "--perf-update-baselines")
    return data


def lock_path(path: Path) -> Path:
    """The lock of a store: in the machine's temporary folder, named by the store's path, so that the processes that
    record into it at once (a sharded run's workers, on one machine) share it and no lock file is left beside the
    recorded files for `git add` to pick up."""
    import hashlib

    name = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:24]
    return Path(tempfile.gettempdir()) / "torch-perf-suite-locks" / f"{name}.lock"


def update(path: Path, merged: Callable[[], dict]) -> dict:
    """Under the store's lock (`lock_path`): `merged()` reads the file as it is now (another process may have written
    meanwhile) and returns what to write; written atomically and returned. A lock held past LOCK_TIMEOUT_S raises
    filelock's Timeout (an OSError), which the caller says."""
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock), timeout=LOCK_TIMEOUT_S):
        data = merged()
        write_json(path, data)
    return data


@dataclass
class TestsFile:
    """A store of one entry a test: {"schema": 1, "tests": {test id: entry}}, read-merge-write. A store of this shape
    names its `validate` (what is wrong with the data, or None) and its `Error`."""

    path: Path
    tests: dict

    SCHEMA = 1
    Error = Unusable

    @staticmethod
    def validate(data) -> str | None:
        raise NotImplementedError

    @classmethod
    def load(cls, path: Path):
        data = read_checked(path, cls.validate, cls.Error)
        return cls(path, data["tests"] if data else {})

    def get(self, test_id: str) -> dict | None:
        return self.tests.get(test_id)

    def save(self, updates: dict[str, dict]) -> None:
        self.tests = update(self.path, lambda: {"schema": self.SCHEMA, "tests": dict(sorted(
            {**type(self).load(self.path).tests, **updates}.items()))})["tests"]


def quoted(value, limit: int = 60) -> str:
    """A value as a message about a file's content names it: its repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def number_problem(value, *, positive: bool = False, optional: bool = False, at_most: float = math.inf) -> str | None:
    """None if `value` is a usable number in a recorded file; else what is wrong with it ("is -1, expected a non-negative
    number")."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"is {quoted(value)}, expected a number"
    if not math.isfinite(value):
        return f"is {value!r}, expected a finite number"
    if value < 0 or (positive and value == 0):
        return f"is {value!r}, expected a {'positive' if positive else 'non-negative'} number"
    if value > at_most:
        return f"is {value:g}, more than any GPU does (at most {at_most:g})"
    return None
