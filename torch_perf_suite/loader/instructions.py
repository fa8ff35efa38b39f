"""The loader's CPU cost as instructions per sample, counted by valgrind's callgrind: exact on any machine.

Wall-clock loader numbers move between hosts and rounds by more than a loader regression worth catching, which
hides in them (docs/counted-gates.md). Instructions do not move: callgrind simulates the CPU, and two runs of
the same code on the same inputs count the same to a few hundredths of a percent, whatever else the machine is
doing.

What is counted: `dataset[i]` for a fixed list of indices and the collate of those samples (the work a
DataLoader worker does for a batch), in one process, one thread, no workers. Not counted: sleeps, waits for
I/O, the workers' start, their pickling and IPC, pinning: those stay with the wall-clock loader number.

How: one callgrind process per pytest session (`Counter`), started on first use with instrumentation off,
serves every loader of the session. For each it builds the dataset and warms it up (imports, caches), then the
parent switches instrumentation on (`callgrind_control -i on`), lets it take the samples, switches it off
and dumps the count (`callgrind_control -d`). Python and torch start uninstrumented, once;
torch.utils.benchmark's `Timer.collect_callgrind` instead runs the whole start instrumented, several
times slower for the same count (docs/counted-gates.md, "The loader's instructions per sample"), and
needs its statement as a string, so it is not used.

A workload names its loader by `loader_source`: ("package.module:function", keyword arguments as JSON), a
function returning (dataset, collate_fn), which the callgrind process imports and calls.

Counts are recorded per environment (`key()`: the versions of Python, torch, torchvision, Pillow and numpy,
the machine's architecture and valgrind's version; each changes the instructions run) in
`baselines/instructions.json`; a count is compared only with one recorded under the same key.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import store
from ..machine.versions import torchvision_version

SAMPLES = 16  # samples counted per loader: about 8M instructions each for seed 000's transforms
STRIDE = 7919  # indices i * STRIDE mod len(dataset): spread over the dataset, the same on every machine
FILE_HASH = 16  # hex digits of a file's SHA-256 kept in an entry's `files`
CONTROL_TIMEOUT_S = 120  # callgrind_control reaches the process through vgdb; a stuck one is said, not waited on
INSTALL = "install valgrind (Debian, Ubuntu: apt-get install valgrind)"


class CountUnavailable(RuntimeError):
    """Instructions cannot be counted here (no valgrind, the counting process failed): the message says why."""


@dataclass(frozen=True)
class Counted:
    per_sample: float
    samples: int
    source: str  # what was counted, as `describe_source` writes it
    content: str = ""  # the digest of what the loader reads (`digest.Read.digest`)
    read: object | None = None  # what it reads (a digest.Read), recorded with it
    reused: bool = False  # taken from a count recorded for the same content, key and source: valgrind not started


def describe_source(source: tuple[str, dict]) -> str:
    """The loader's factory and arguments as one line, a data directory by its name only (its path is the machine's)."""
    factory, kwargs = source
    shown = {k: (Path(v).name if k == "data_dir" and v else v) for k, v in sorted(kwargs.items())}
    return f"{factory}({json.dumps(shown, sort_keys=True)})"


def key() -> str:
    """What the instruction count depends on besides the loader's own code. torchvision's version is read from its
    version.py, not imported (machine/versions.py): a project that does not use it may have one that does
    not load with its torch (a CUDA build from PyPI beside a CPU torch)."""
    versions = [f"py{platform.python_version()}"]
    for module in ("torch", "torchvision", "PIL", "numpy"):
        try:
            version = torchvision_version() if module == "torchvision" else importlib.import_module(module).__version__
        except ImportError:
            version = None
        versions.append(f"{module.lower()}{version}" if version else f"{module.lower()}-none")
    return "-".join([*versions, platform.machine(), valgrind_version() or "valgrind-none"])


def installed_keys(keys) -> list[str]:
    """Those of `keys` (environments, as key() names them) that may be this one, told without importing torch, which
    key() does (seconds of a process's start): the same Python, torch release, machine and valgrind. The other
    versions, and torch's local part (+cu130), are key()'s to tell at the session's start."""
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = "-none"
    head, tail = f"py{platform.python_version()}-torch{torch}", f"-{platform.machine()}-{valgrind_version() or 'valgrind-none'}"
    return [k for k in keys if k.startswith(head) and k.endswith(tail)]


def valgrind_version() -> str | None:
    exe = shutil.which("valgrind")
    if exe is None:
        return None
    try:
        return subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


class Counter:
    """The session's callgrind process: `count(source)` -> Counted, once per source; `close()` ends it. `begin(source)`
    starts a count without waiting for it: valgrind starting Python and torch, then building the loader, the slow part,
    run beside the caller's timed windows, on one core (`counting_core`), and `count` collects it."""

    def __init__(self):
        self._proc: subprocess.Popen | None = None
        self._started = False  # the process said "started": Python and torch imported under valgrind
        self._pending: str | None = None  # the source begun and not yet collected
        self._dir: str | None = None
        self._cache: dict[str, Counted] = {}
        self._broken: str | None = None

    def prestart(self) -> None:
        """Start the process now, before any loader is known (it imports Python and torch under valgrind, the slow
        part): where a recorded count's code changed, a count will follow. Where it cannot start, `count` says why."""
        with contextlib.suppress(CountUnavailable):
            self._start()

    def begin(self, source: tuple[str, dict]) -> None:
        described = describe_source(source)
        if self._broken or described in self._cache or self._pending is not None:
            return
        self._start()
        factory, kwargs = source
        self._send({"factory": factory, "kwargs": kwargs})
        self._pending = described

    def counted(self, source: tuple[str, dict]) -> bool:
        """Whether this session counted `source` already."""
        return describe_source(source) in self._cache

    def count(self, source: tuple[str, dict]) -> Counted:
        described = describe_source(source)
        if self._pending is not None and self._pending != described:  # another source begun: its count is cached
            with contextlib.suppress(CountUnavailable):
                self._collect()
        if described not in self._cache:
            self.begin(source)
            self._collect()
        return self._cache[described]

    def _collect(self) -> None:
        described, self._pending = self._pending, None
        if described is None:
            raise CountUnavailable(self._broken)
        if not self._started:
            self._expect("started")
            self._started = True
        self._expect("ready")
        self._control("-i", "on")
        self._send("go")
        self._expect("done")
        self._control("-i", "off")
        before = set(os.listdir(self._dir))
        self._control("-d")
        dumps = sorted(set(os.listdir(self._dir)) - before, key=lambda n: os.stat(os.path.join(self._dir, n)).st_mtime)
        if not dumps:
            raise self._fail(f"callgrind wrote no count for pid {self._proc.pid} into {self._dir}")
        self._cache[described] = Counted(read_total(Path(self._dir) / dumps[-1]) / SAMPLES, SAMPLES, described)

    def _start(self) -> subprocess.Popen:
        if self._proc is not None:
            return self._proc
        for tool in ("valgrind", "callgrind_control"):
            if shutil.which(tool) is None:
                self._broken = f"{tool} not found: loader instructions not counted; {INSTALL}"
                raise CountUnavailable(self._broken)
        self._dir = tempfile.mkdtemp(prefix="perf-callgrind-")
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
               "PYTHONPATH": os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)}
        self._proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-line=no", "--dump-instr=no",
             f"--callgrind-out-file={self._dir}/callgrind.out", sys.executable, "-m", "torch_perf_suite.loader.count_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(os.path.join(self._dir, "valgrind.log"), "w"),
            text=True, env=env, cwd=os.getcwd())
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(self._proc.pid, {counting_core()})
        with contextlib.suppress(OSError):  # the windows' loader workers share its core: they go first (the count is exact)
            os.setpriority(os.PRIO_PROCESS, self._proc.pid, NICE)
        return self._proc

    def _send(self, message) -> None:
        try:
            self._proc.stdin.write(json.dumps(message) + "\n")
            self._proc.stdin.flush()
        except OSError as e:
            raise self._fail(f"the callgrind process stopped ({e})") from None

    def _expect(self, word: str) -> None:
        line = self._proc.stdout.readline().strip()
        if line == word:
            return
        if line.startswith("error "):
            raise CountUnavailable(f"the loader could not be built for counting: {json.loads(line[6:])}")
        raise self._fail(f"the callgrind process answered {line!r}, expected {word!r}")

    def _control(self, *args: str) -> None:
        try:
            done = subprocess.run(["callgrind_control", *args, str(self._proc.pid)], capture_output=True, text=True,
                                  timeout=CONTROL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise self._fail(f"callgrind_control {' '.join(args)} got no answer in {CONTROL_TIMEOUT_S} s") from None
        if done.returncode != 0 or "OK" not in done.stdout:
            raise self._fail(f"callgrind_control {' '.join(args)} failed: {(done.stdout + done.stderr).strip()[-300:]}")

    def _fail(self, why: str) -> CountUnavailable:
        log = Path(self._dir or ".") / "valgrind.log"
        tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.is_file() else []
        self._broken = f"{why}; loader instructions not counted" + (f" (valgrind: {' | '.join(tail)})" if tail else "")
        self.close()
        return CountUnavailable(self._broken)

    def close(self) -> None:
        proc, self._proc, self._started, self._pending = self._proc, None, False, None
        if proc is not None:  # every count is read from a dump made while it ran: its exit is not waited for, which can
            # take as long as the counts
            proc.kill()
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                proc.stdin.close()
                proc.wait(timeout=10)
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


NICE = 19  # the counting process's niceness: it yields its core to the timed windows' workers


def counting_core() -> int:
    """The core callgrind's process is pinned to: the next to last, since turns.py times on the last, and the timed
    windows' threads and workers spread over the rest (the only one where there is one)."""
    cores = sorted(os.sched_getaffinity(0))
    return cores[-2] if len(cores) > 1 else cores[0]


def read_total(path: Path) -> int:
    """The instruction count of one callgrind dump (its `totals:` line, else `summary:`)."""
    found = {}
    for line in path.read_text(errors="replace").splitlines():
        head, _, value = line.partition(":")
        if head in ("totals", "summary") and value.strip():
            found[head] = int(value.split()[0])
    if not found:
        raise CountUnavailable(f"{path}: no totals line; not a callgrind output file")
    return found.get("totals", found.get("summary"))


def load_factory(factory: str):
    """A loader's factory ("package.module:function"), imported."""
    module, _, name = factory.partition(":")
    return getattr(importlib.import_module(module), name)


# --- the recorded counts -------------------------------------------------------------------------

SCHEMA = 1


class InstructionsError(store.Unusable):
    """An instructions file that cannot be used; the message names the file and what to do."""


@dataclass
class InstructionsFile:
    """baselines/instructions.json: {"schema": 1, "environments": {key: {test id: {"per_sample", "samples",
    "source", "content", "files", "date"}}}} ("content": the digest of the loader's code; "files": its files' hashes).
    Written atomically, read-merge-write, so entries of other keys and tests are kept."""

    path: Path
    environments: dict

    @classmethod
    def load(cls, path: Path) -> "InstructionsFile":
        data = store.read_checked(path, _validate, InstructionsError)
        return cls(path, data["environments"] if data else {})

    def get(self, env_key: str, test_id: str) -> dict | None:
        return self.environments.get(env_key, {}).get(test_id)

    def reusable(self, env_key: str, source: str, digests: tuple[str, ...]) -> dict | None:
        """An entry of this environment that counted the same loader (`source`) reading the same (one of `digests`:
        what it reads, or its code's files whole for an entry keyed so, digest.Read.whole)."""
        return next((e for e in self.environments.get(env_key, {}).values()
                     if e.get("content") in digests and e.get("source") == source), None)

    def of_source(self, env_key: str, source: str) -> tuple[str, dict] | None:
        """(the test, its entry) of this environment that counted the same loader (`source`), where any did."""
        return next(((test, e) for test, e in sorted(self.environments.get(env_key, {}).items())
                     if e.get("source") == source), None)

    def keys_for(self, test_id: str) -> list[str]:
        return [k for k, tests in self.environments.items() if test_id in tests]

    def save(self, env_key: str, updates: dict[str, dict]) -> None:
        def merged() -> dict:
            current = InstructionsFile.load(self.path).environments
            current[env_key] = dict(sorted({**current.get(env_key, {}), **updates}.items()))
            return {"schema": SCHEMA, "environments": dict(sorted(current.items()))}

        self.environments = store.update(self.path, merged)["environments"]


def entry(counted: Counted) -> dict:
    return {"per_sample": round(counted.per_sample, 1), "samples": counted.samples, "source": counted.source,
            "content": counted.content, **read_entry(counted.read), "date": datetime.date.today().isoformat()}


def read_entry(read) -> dict:
    """What an entry keeps of what its loader reads (a digest.Read, or None), for `digest.changed_files` at a session's
    start: each file and
    its hash's first digits, the functions of each Python file that ran, the packages' versions."""
    if read is None:
        return {}
    return {"files": {path: sha[:FILE_HASH] for path, sha in sorted(read.files.items())},
            "ran": {path: list(names) for path, names in read.ran.items()}, "packages": dict(read.packages),
            "functions": {path: {fn: sha for fn, (sha, _) in sorted(fns.items())}
                          for path, fns in sorted(read.functions.items())}}


def _one_line(key: str) -> str:
    """An environment's key as a message names it: as it is, a line break or other control character escaped."""
    return key.encode("unicode_escape").decode("ascii") if not key.isprintable() else key


def _validate(data) -> str | None:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("environments"), dict):
        return f"expected {{\"schema\": {SCHEMA}, \"environments\": {{...}}}}"
    for env_key, tests in data["environments"].items():
        if not isinstance(tests, dict):
            return f"environment {env_key!r} is not an object"
        for test_id, e in tests.items():
            value = e.get("per_sample") if isinstance(e, dict) else None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e15:
                return f"{_one_line(env_key)} / {test_id!r}: 'per_sample' is {value!r}, expected a positive number"
            if not isinstance(e.get("source"), str):
                return f"{_one_line(env_key)} / {test_id!r}: 'source' is {e.get('source')!r}, expected the loader counted"
            files, ran, packages = e.get("files", {}), e.get("ran", {}), e.get("packages", {})
            if not isinstance(files, dict) or not all(isinstance(h, str) and h for h in files.values()):
                return f"{_one_line(env_key)} / {test_id!r}: 'files' is {files!r}, expected paths and their hashes"
            if not isinstance(ran, dict) or not all(isinstance(n, list) and all(isinstance(x, str) for x in n)
                                                    for n in ran.values()):
                return f"{_one_line(env_key)} / {test_id!r}: 'ran' is {ran!r}, expected paths and their functions' names"
            if not isinstance(packages, dict) or not all(isinstance(v, str) for v in packages.values()):
                return f"{_one_line(env_key)} / {test_id!r}: 'packages' is {packages!r}, expected names and versions"
    return None
