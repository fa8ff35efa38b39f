"""A sample's CPU time at REF and at the working tree, timed by turns on one core (`--perf-against`).

The same loader's sample timed alone in two pytest processes, one after the other on one GPU host, moved between
identical trees, in CPU time and in yardsticks, far past the tolerance (docs/measurements/loader.md): what the host does
to a process (the GPU session's start, a busy sibling core) does not cancel between two processes minutes apart. So
against REF a loader named by its `loader_source` is built twice, in two processes of its own started for the session:
one with REF's tree first on its path, one with the working tree's (turn_worker.py). Both run on the same core, torch on
one thread, and make the same chunks of samples by turns, REF first in one pair and the head first in the next: whatever
the host does to that core, it does to both within milliseconds. The figure is the median over pairs of the head's chunk
CPU time over REF's, with its 95% interval (stats.median_ci); `failure` judges it. Two processes can differ by a percent
or two for as long as they live (where their memory lies, what they ran first), so a rise past the tolerance is measured
again in two fresh processes before it fails: a reserve pair, started and settled with the first, so that measuring
again costs no second import of torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import ref_imports
from ..findings import FAILED, PASSED, Finding, briefly
from ..throughput.stats import median_ci
from .instructions import STRIDE

CHUNK = 32  # samples a turn: a few ms of seed 000's transforms, well above a turn's pipe round trip
TURNS_S = 2.0  # seconds of turns on each side, at least LEAST_PAIRS pairs, at most MOST_PAIRS
LEAST_PAIRS, MOST_PAIRS = 20, 400
END_S = 5.0  # seconds a pair has to return once told to end, all its processes together
READ_TIMEOUT_S = 300  # a process silent this long is stuck (importing torch takes seconds: docs/measurements/cost.md)
WORKER = Path(__file__).with_name("turn_worker.py")
PRELOAD = ("torch", "torchvision")  # what each process imports as it starts, before it knows its loader: most loaders'
RESERVE = True  # a reserve pair started beside the first, so that a measurement again (time(fresh=True)) waits on no import
# glibc's malloc raises its mmap threshold as a process frees large blocks, so whether a 600 KB image comes from the
# heap or from fresh pages (a page fault each 4 KB) depends on the process's history: fixed here, the same on both sides
MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


class TurnsUnavailable(RuntimeError):
    """Not timed by turns; the message says why in one line."""


@dataclass(frozen=True)
class ByTurns:
    pairs: int
    ref_us: float  # a sample's CPU time at REF, the median over its turns
    head_us: float  # the same at the working tree
    ratio: float  # the median over pairs of the head's turn over REF's
    low: float  # the ratio's 95% interval
    high: float
    again: "ByTurns | None" = None  # measured once more, where the first rose past the tolerance

    @property
    def rise_pct(self) -> float:
        return 100 * (self.ratio - 1)

    def line(self, compared_with: str) -> str:
        return (f"loader CPU time a sample {self.head_us:,.1f} µs, {self.ref_us:,.1f} at {compared_with}, timed by turns on "
                f"one core: {self.rise_pct:+.1f}% (95% interval {100 * (self.low - 1):+.1f}% to "
                f"{100 * (self.high - 1):+.1f}%, {self.pairs} pairs of {CHUNK} samples)")


def from_pairs(pairs: list[tuple[int, int]]) -> ByTurns:
    """REF's and the head's CPU nanoseconds of each pair of turns (same chunk) as the figure compared."""
    ratios = [head / max(ref, 1) for ref, head in pairs]
    low, high = median_ci(ratios)
    return ByTurns(len(pairs), statistics.median(r for r, _ in pairs) / CHUNK / 1e3,
                   statistics.median(h for _, h in pairs) / CHUNK / 1e3, statistics.median(ratios), low, high)


def rose(turns: ByTurns, tolerance_pct: float) -> bool:
    """More CPU time a sample than `tolerance_pct` allows, and more than the pairs' spread explains (the interval's low
    end above 1): to be measured again before it fails."""
    return turns.rise_pct > tolerance_pct and turns.low > 1


def failure(turns: ByTurns, tolerance_pct: float, compared_with: str) -> list[Finding]:
    """It `rose`, and, where it was measured again, past the tolerance again: a failed finding of one line, else none."""
    if not rose(turns, tolerance_pct):
        return []
    if turns.again is not None and turns.again.rise_pct <= tolerance_pct:
        return []
    again = f"; measured again: {turns.again.rise_pct:+.1f}%" if turns.again is not None else ""
    return [Finding(FAILED, f"{turns.line(compared_with)}; allowed +{tolerance_pct:g}%{again}: more CPU work per sample in the "
                            "dataset, its transforms or the collate",
                    f"loader CPU time a sample {turns.head_us:,.1f} µs, {turns.ref_us:,.1f} at {briefly(compared_with)}, timed "
                    f"by turns: {turns.rise_pct:+.1f}%")]


def verdict(turns: ByTurns, tolerance_pct: float, compared_with: str) -> Finding:
    """Failed where `failure` says so, else passed with the report's line."""
    found = failure(turns, tolerance_pct, compared_with)
    if found:
        return found[0]
    again = f"; measured again: {turns.again.rise_pct:+.1f}%" if turns.again is not None else ""
    return Finding(PASSED, f"{turns.line(compared_with)}{again}; allowed +{tolerance_pct:g}%")


class Turns:
    """The session's two processes, REF's tree and the working tree's, started by `start` or on first use, with two
    more held in reserve for a measurement in fresh processes; `time(source)` -> ByTurns; `close()` ends them. They
    can start before REF's tree is written out (PerfSession, at the session's start): `aim` names the trees before
    the first `time`."""

    def __init__(self, ref_root: Path | None = None, head_root: Path | None = None, seconds: float = TURNS_S):
        self.roots = {"REF": ref_root, "the working tree": head_root}
        self.maps: dict[str, dict | None] = {}  # a side's imports mapped onto its tree (ref_imports.as_request)
        self.seconds = seconds
        self._procs: dict[str, subprocess.Popen] = {}
        self._errors: dict[str, object] = {}  # each process's stderr, a file: a pipe left unread could fill
        self._broken: str | None = None
        self._waiting: set[str] = set()  # started, their "started" not read yet
        self._reserve: tuple[dict, dict] | None = None  # (processes, stderr files) that have timed nothing yet
        self._reserve_waiting = False  # the reserve's "started" not read yet

    def time(self, source: tuple[str, dict], fresh: bool = False) -> ByTurns:
        """`fresh`: in two processes started anew, not in those that timed the loaders before."""
        if None in self.roots.values():
            raise RuntimeError("Turns.time before Turns.aim named REF's tree and the working tree")
        if self._broken:
            raise TurnsUnavailable(self._broken)
        if fresh:
            self._renew()
        self._start()
        factory, kwargs = source
        for side, root in self.roots.items():
            other = next(r for s, r in self.roots.items() if s != side)
            self._send(side, json.dumps({"root": str(root), "other": str(other), "factory": factory, "kwargs": kwargs,
                                         "map": self.maps.get(side)}))
        why_not = {side: self._ready(side) for side in self._procs}
        if any(why_not.values()):
            self._end_request([side for side, why in why_not.items() if why is None])
            raise TurnsUnavailable(f"{factory} could not be built by turns: " + "; ".join(
                f"at {side}: {why}" for side, why in why_not.items() if why))
        pairs, deadline, i = [], time.perf_counter() + 2 * self.seconds, 0
        while (i < LEAST_PAIRS or time.perf_counter() < deadline) and i < MOST_PAIRS:
            order = ("REF", "the working tree") if i % 2 == 0 else ("the working tree", "REF")
            cpu = {side: self._turn(side, i) for side in order}
            pairs.append((cpu["REF"], cpu["the working tree"]))
            i += 1
        self._end_request(list(self._procs))
        return from_pairs(pairs)

    def aim(self, ref_root: Path, head_root: Path, trees: tuple[Path, Path] | None = None) -> None:
        """`trees`: (the working tree's top, REF's tree's top): REF's side imports REF's code where an install points
        at the working tree; the head's side maps what this process maps (a bisected commit's run), if anything."""
        self.roots = {"REF": ref_root, "the working tree": head_root}
        self.maps = {"REF": ref_imports.as_request(ref_imports.child_mapping(*trees)) if trees else None,
                     "the working tree": ref_imports.as_request(ref_imports.from_env())}

    def start(self) -> None:
        """The two processes started, and a reserve pair beside them, not waited for: each imports torch (its seconds:
        docs/measurements/cost.md), then waits for a request; `settle` and `time` wait for them. The reserve makes a
        measurement again in fresh processes (`time(fresh=True)`) cost no second import."""
        if self._procs or self._broken:  # started, or failed: `time` says why
            return
        self._procs, self._errors = self._spawn()
        self._waiting = set(self._procs)
        if self._reserve is None and RESERVE:
            self._reserve, self._reserve_waiting = self._spawn(), True

    def _spawn(self) -> tuple[dict, dict]:
        procs, errors = {}, {}
        core = max(os.sched_getaffinity(0))
        for side in self.roots:  # both import torch at once, then take turns
            errors[side] = tempfile.TemporaryFile("w+", errors="replace")
            procs[side] = subprocess.Popen(
                [sys.executable, str(WORKER), str(core), str(STRIDE), str(CHUNK), *PRELOAD],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors[side], text=True,
                env={**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **MALLOC})
        return procs, errors

    def _renew(self) -> None:
        """The pair that timed the loaders ended; the reserve takes its place, or `start` makes a new pair."""
        _end(self._procs, self._errors)
        self._procs, self._errors, self._waiting = {}, {}, set()
        if self._reserve is not None:
            (self._procs, self._errors), self._reserve = self._reserve, None
            self._waiting = set(self._procs) if self._reserve_waiting else set()

    def _start(self) -> None:
        self.start()
        self.settle()

    def settle(self) -> None:
        """Wait for the processes `start`ed to have imported torch, so that no timed window runs beside an import;
        TurnsUnavailable where one failed (`time` says it again)."""
        while self._waiting:
            side = self._waiting.pop()
            self._expect(side, "started")
        if self._reserve_waiting:  # a reserve that cannot start is dropped: a measurement again starts its own pair
            self._reserve_waiting = False
            for proc in self._reserve[0].values():
                if not select.select([proc.stdout], [], [], READ_TIMEOUT_S)[0] or proc.stdout.readline().strip() != "started":
                    _end(*self._reserve)
                    self._reserve = None
                    break

    def _send(self, side: str, line: str) -> None:
        try:
            self._procs[side].stdin.write(line + "\n")
            self._procs[side].stdin.flush()
        except OSError as e:
            raise self._fail(side, f"stopped ({e})") from None

    def _read(self, side: str) -> str:
        out = self._procs[side].stdout  # one line a request, read whole: nothing waits in its buffer here
        if not select.select([out], [], [], READ_TIMEOUT_S)[0]:
            raise self._fail(side, f"said nothing in {READ_TIMEOUT_S} s")
        line = out.readline()
        if not line:
            raise self._fail(side, "stopped")
        return line.strip()

    def _expect(self, side: str, word: str) -> None:
        if (line := self._read(side)) != word:
            raise self._fail(side, f"answered {line!r}, expected {word!r}")

    def _ready(self, side: str) -> str | None:
        line = self._read(side)
        if line.startswith("error "):
            return json.loads(line[6:])
        if line != "ready":
            raise self._fail(side, f"answered {line!r}, expected 'ready'")
        return None

    def _turn(self, side: str, chunk: int) -> int:
        self._send(side, str(chunk))
        line = self._read(side)
        try:
            return int(line.split()[1])
        except (IndexError, ValueError):
            raise self._fail(side, f"answered {line!r}, expected '<wall ns> <CPU ns>'") from None

    def _end_request(self, sides: list[str]) -> None:
        for side in sides:
            self._send(side, "end")

    def _fail(self, side: str, why: str) -> TurnsUnavailable:
        self._procs[side].kill()
        self._procs[side].wait()
        self._errors[side].seek(0)
        err = self._errors[side].read().strip().splitlines()[-3:]
        self._broken = (f"the process timing {side}'s loader by turns {why}" + (f": {' | '.join(err)}" if err else "")
                        + "; loader CPU time not timed by turns")
        self.close()
        return TurnsUnavailable(self._broken)

    def __enter__(self) -> "Turns":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        _end(self._procs, self._errors)
        if self._reserve is not None:
            _end(*self._reserve)
        self._procs, self._errors, self._waiting, self._reserve, self._reserve_waiting = {}, {}, set(), None, False


def _end(procs: dict[str, subprocess.Popen], errors: dict) -> None:
    """A pair's processes ended (their stdin closed: they return) and their stderr files closed; all told to end before
    any is waited for, and one that has not returned within END_S killed: it has timed all it will."""
    for proc in procs.values():
        with contextlib.suppress(OSError):
            proc.stdin.close()
    deadline = time.monotonic() + END_S
    for proc in procs.values():
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    for file in errors.values():
        file.close()
