"""The step's host side, counted: what the launching thread does to issue one step, in units that do not move with the
host's speed.

Where the host limits a step (small batches, eager code, per-step Python), the GPU-side number is the host's speed, and
that moves: the same step's host CPU time moves between processes run one after the other on one machine, with nothing
beside them, far more than a regression to catch (docs/measurements/host-side.md). So the host side is counted, as the
loader's work is:

- lines:  the Python lines the thread executes a step (`sys.settrace`), by function: what a hook, a callback, a
          logging helper, a library's new wrapper or a mode that falls back to eager adds;
- blocks: the thread's voluntary context switches a step (`getrusage(RUSAGE_THREAD)`), each put on the Python line
          that was running when it blocked: a sleep, a lock, I/O, a wait on another thread.

Both are counted over a few GPU-side steps (a batch kept on the device: no loader's queue to wait on) after the timed
windows, and compared with REF's or the baseline's counts of the same test: exact where the code is the same, on any
host. What the counts cannot see is C++ work that grew without a Python line or a block (a dispatcher's overhead):
docs/host-side.md says so.
"""

from __future__ import annotations

import collections
import os
import resource
import sys
from dataclasses import dataclass, field
from typing import Callable

from ..findings import FAILED, Finding, briefly
from . import UNCOUNTED, on_this_thread, uncounted
from .files import _is_harness, _is_library

LINES_MARGIN_PCT = 1.0  # Python lines a step may grow by before it counts
LINES_FLOOR = 20  # ... or this many, for a step so light that a percent of it is a line or two
BLOCKS_MARGIN = 0.5  # blocks a step that may appear before it counts (a sleep a step adds 1.00)
TOP = 5  # functions or lines named in a failure, most grown first
KEPT = 40  # functions and lines kept in an entry, busiest first
AT = 3  # lines of a project's function kept in an entry, busiest first
MOST_PASSES = 5  # passes over the steps where blocks came back in the first two
# The import system's entries (an import statement of a module not yet imported, importlib.util.find_spec): what runs
# inside them, the finders over sys.path's folders, depends on the process's path and finders (REF's process has one
# more finder and folder than the head's), not on the step's code; the line that imports is counted
IMPORTING = frozenset({"_find_and_load", "_find_spec"})
_BOOTSTRAP = "<frozen importlib._bootstrap>"

_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)
BEFORE = "(before the step's first line)"


@dataclass(frozen=True)
class HostCount:
    steps: int
    lines: dict[str, float]  # "path:function" -> Python lines a step
    blocks: dict[str, float]  # "path:line in function" -> voluntary context switches a step
    at: dict[str, dict[int, float]] = field(default_factory=dict)  # a function of the project's -> its lines a step by
    # line number: where a failure says its lines ran

    @property
    def lines_per_step(self) -> float:
        return sum(self.lines.values())

    @property
    def blocks_per_step(self) -> float:
        return sum(self.blocks.values())

    def entry(self) -> dict:
        """As a baseline entry's counts keep it: the totals, and the busiest functions and lines."""
        kept = _busiest(self.lines)
        at = {name: {str(line): round(n, 2) for line, n in sorted(lines.items(), key=lambda kv: (-kv[1], kv[0]))[:AT]}
              for name, lines in sorted(self.at.items()) if name in kept}
        return {"lines_per_step": round(self.lines_per_step, 1), "blocks_per_step": round(self.blocks_per_step, 2),
                "lines": kept, "blocks": _busiest(self.blocks), **({"at": at} if at else {})}


def _busiest(counts: dict[str, float]) -> dict[str, float]:
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:KEPT]
    return {name: round(n, 2) for name, n in top}


def _switches() -> int:
    return resource.getrusage(_RUSAGE_THREAD).ru_nvcsw


def short_path(filename: str) -> str:
    """A file named relative to the longest sys.path entry that holds it: "torch/nn/modules/module.py",
    "fixtures/recipes.py", "threading.py"."""
    best = ""
    for entry in sys.path:
        root = os.path.join(os.path.abspath(entry or os.curdir), "")
        if filename.startswith(root) and len(root) > len(best):
            best = root
    return filename[len(best):] if best else filename


def count(step: Callable[[], object], steps: int, settle: Callable[[], object] | None = None,
          within: Callable | None = None) -> HostCount:
    """Run one step, then `steps` steps with a tracer that counts their Python lines by function and their blocks by
    line, in two passes or more (below). The first step is not counted: it finishes what an earlier window left (a
    gpu_step drops the loader's iterator, whose workers then shut down). The steps run slower under the tracer: nothing
    is timed here. A tracer already set (a debugger, coverage) is put back afterwards. `within(step, begin, end)`
    (workload.Members.within) runs a step with the tracer's begin() and end() called in the thread that runs it: a
    framework's loop on a thread of its own is counted there, the frames it was in when the step began included
    (`Tracer`).

    `settle` (the device's synchronize) runs before each counted step, outside the counts: a step the GPU bounds
    otherwise leaves its kernels queued for the next, whose launches may then wait for room in CUDA's queue, blocks
    that follow the GPU's speed, not the code (docs/host-side.md). A function's lines and a line's blocks are the fewest
    of the passes: what the code does every step comes back in each; what comes once does not, such as a wait for
    the interpreter's lock that another thread of the process held at that moment, or for a thread of torch's pool that
    the host's load kept off its core (on a loaded 2-core host an unchanged step's blocks ranged from 0 to 209 a step:
    docs/measurements/host-side.md), or a framework's work every n-th step (a log flushed every 50 steps) that one pass
    happened to hold. Where two passes leave blocks, up to MOST_PASSES are counted: a block the code makes comes back
    in every one."""
    if steps < 1:
        raise ValueError(f"steps={steps}; expected at least 1")
    run = within or on_this_thread

    def one_pass() -> Tracer:
        tracer = Tracer()
        for _ in range(steps):
            if settle is not None:
                settle()
            run(step, tracer.begin, tracer.end)
        return tracer

    step()
    passes = [one_pass(), one_pass()]
    while _fewest([p.blocks for p in passes]) and len(passes) < MOST_PASSES:
        passes.append(one_pass())
    lines = {name: n / steps for name, n in _fewest([p.by_function() for p in passes]).items()}
    blocks = {where: n / steps for where, n in _fewest([p.blocks for p in passes]).items()}
    return HostCount(steps, lines, blocks,
                     {name: {line: n / steps for line, n in by_line.items()}
                      for name, by_line in passes[0].projects().items() if name in lines})


def _fewest(counts: list[collections.Counter]) -> dict:
    """What each of `counts` has, at the fewest any has."""
    return {key: n for key in counts[0] if (n := min(c[key] for c in counts))}


class Tracer:
    """Counts the Python lines (by function, "path:function") and the blocks (by `_where`) of the thread that calls
    begin(), until it calls end(). A step that begins inside frames already running (a framework's loop, held in its
    callback) has those frames traced too, from there on: their lines after the callback are the step's. The harness's
    hand-over around the step (counts.uncounted) is not counted, nor traced into."""

    def __init__(self):
        self.lines: collections.Counter = collections.Counter()  # (code object, line number) -> lines
        self.blocks: collections.Counter = collections.Counter()
        self._frame, self._line, self._switches = None, 0, 0  # the line running, the switches counted up to it
        self._previous, self._outer = None, []
        self._importing = None  # the import system's frame the step is in, where it is in one

    def begin(self) -> None:
        self._previous = sys.gettrace()
        self._switches = _switches()
        frame = sys._getframe(1)
        while frame is not None and frame.f_code in UNCOUNTED:
            frame = frame.f_back
        while frame is not None and frame.f_trace is None and not _is_harness(frame.f_code.co_filename):
            frame.f_trace = self._local  # the loop's frames the step goes on in
            self._outer.append(frame)
            frame = frame.f_back
        sys.settrace(self._local)

    @uncounted
    def end(self) -> None:
        sys.settrace(self._previous)
        self._note()
        for frame in self._outer:
            frame.f_trace = None
        self._outer = []

    def by_function(self) -> collections.Counter:
        """Lines by "path:function" (the code objects of one name added up: a function made anew each step)."""
        found: collections.Counter = collections.Counter()
        for (code, _), n in self.lines.items():
            found[_function(code)] += n
        return found

    def projects(self) -> dict[str, collections.Counter]:
        """The lines of the project's own functions, by function and line number."""
        found: dict[str, collections.Counter] = {}
        for (code, line), n in self.lines.items():
            if not _is_library(code.co_filename):
                found.setdefault(_function(code), collections.Counter())[line] += n
        return found

    def _note(self) -> None:
        now = _switches()
        if now != self._switches:
            self.blocks[_where(self._frame, self._line)] += now - self._switches
            self._switches = now

    def _local(self, frame, event, arg):
        self._note()
        if self._importing is not None:  # inside the import system: nothing counted until its frame returns
            if event == "return" and frame is self._importing:
                self._importing = None
            return None if event == "call" else self._local
        if event == "call" and frame.f_code in UNCOUNTED:
            return None
        if event == "call" and frame.f_code.co_name in IMPORTING and frame.f_code.co_filename == _BOOTSTRAP:
            self._importing = frame
            return self._local  # for its return
        if event == "line":
            self.lines[frame.f_code, frame.f_lineno] += 1
            self._frame, self._line = frame, frame.f_lineno
        return self._local


def _function(code) -> str:
    return f"{short_path(code.co_filename)}:{code.co_name}"


def _where(frame, lineno: int) -> str:
    """'path:line in function' of the line running when the thread blocked, and, where that is a library's, the line
    of the project's own code that called into it."""
    if frame is None:
        return BEFORE
    here = f"{short_path(frame.f_code.co_filename)}:{lineno} in {frame.f_code.co_name}"
    if not _is_library(frame.f_code.co_filename):
        return here
    caller = frame.f_back
    while caller is not None and _is_library(caller.f_code.co_filename):
        caller = caller.f_back
    if caller is None:
        return here
    return f"{here} (from {short_path(caller.f_code.co_filename)}:{caller.f_lineno} in {caller.f_code.co_name})"


def why_uncountable(members, has_loader: bool) -> str | None:
    """Why this workload's host side cannot be counted (None where it can): its steps on a thread of their own that it
    gives no way to count in (Members.within), or only a step that pulls from its loader (whose queue it would wait
    on)."""
    if not members.countable:
        return ("host side not counted: the steps run on a thread of their own, and the workload has no within(step, "
                "begin, end) to count them there (workload.Members)")
    if members.gpu_step is None and has_loader:
        return ("host side not counted: the workload's only step pulls from its loader, whose queue it waits on; give it "
                "a gpu_step() (the same step on a batch kept on the device)")
    return None


def grown(now: dict[str, float], recorded: dict[str, float], complete: bool, at: dict | None = None) -> list[str]:
    """Rows of what grew, most first: '+248.0 fixtures/recipes.py:train_step (12.0 -> 260.0)', and where `at` has a
    project function's lines by line number (HostCount.entry), its busiest lines now. A block in a library is matched
    by its own line, not by the project line that called it, which moves with any edit above it."""
    def own(name: str) -> str:
        return name.split(" (from ", 1)[0]

    was: dict[str, float] = {}
    for name, n in recorded.items():
        was[own(name)] = was.get(own(name), 0.0) + n
    shown = {own(name): name for name in now}
    mine: dict[str, float] = {}
    for name, n in now.items():
        mine[own(name)] = mine.get(own(name), 0.0) + n
    changed = {k: mine.get(k, 0.0) - was.get(k, 0.0) for k in {*mine, *was}}
    rows = []
    for key, d in sorted(changed.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]:
        if d <= 0:
            break
        new = ", new" if key not in was and complete else ""
        busiest = ", ".join(f"{key.rsplit(':', 1)[0]}:{line} ({n:,.2f})" for line, n in (at or {}).get(key, {}).items())
        rows.append(f"    {d:+,.2f} {shown.get(key, key)} ({was.get(key, 0.0):,.2f} -> {mine.get(key, 0.0):,.2f}{new})"
                    + (f", its busiest lines now: {busiest}" if busiest else ""))
    return rows


def failure(now: dict, recorded: dict, compared_with: str, margin_pct: float = LINES_MARGIN_PCT) -> list[Finding]:
    """The host side's counts (HostCount.entry) against recorded ones: more Python lines a step than `margin_pct`
    (and LINES_FLOOR) allow, or more than BLOCKS_MARGIN more blocks a step; each with the functions or lines that
    grew, a failed finding each; none where neither rose."""
    problems = []
    lines, was = now["lines_per_step"], recorded["lines_per_step"]
    if lines > max(was * (1 + margin_pct / 100), was + LINES_FLOOR):
        said = (f"the host runs {lines:,.0f} Python lines a step to issue it, {was:,.0f} at {{}} ({lines - was:+,.0f}, "
                f"{100 * (lines / was - 1) if was else float('inf'):+.1f}%; allowed +{margin_pct:g}% or +{LINES_FLOOR})")
        problems.append(Finding(
            FAILED, f"{said.format(compared_with)}: per-step Python (a hook, a callback, a logging helper, a library's "
            "wrapper, a part run eagerly); lines a step by function, most grown first:\n"
            + "\n".join(grown(now["lines"], recorded["lines"], len(recorded["lines"]) < KEPT, now.get("at"))),
            said.format(briefly(compared_with))))
    blocks, blocked = now["blocks_per_step"], recorded["blocks_per_step"]
    if blocks > blocked + BLOCKS_MARGIN:
        said = f"the host blocks {blocks:.2f} times a step while issuing it, {blocked:.2f} at {{}}"
        problems.append(Finding(
            FAILED, f"{said.format(compared_with)} (allowed +{BLOCKS_MARGIN:g}): a sleep, a lock, I/O or a wait on another "
            "thread (voluntary context switches), at these lines, most grown first:\n"
            + "\n".join(grown(now["blocks"], recorded["blocks"], len(recorded["blocks"]) < KEPT)),
            said.format(briefly(compared_with))))
    return problems


def holds_host_side(counts: dict) -> bool:
    """Whether a test's counts (Result.counts, or its baseline entry's) hold the host side: a test over several GPUs,
    on each of its ranks."""
    if "ranks" in counts:
        return bool(counts["ranks"]) and all("host" in c for c in counts["ranks"].values())
    return "host" in counts


def validate(entry) -> str | None:
    """Why a recorded host count is malformed, or None."""
    if not isinstance(entry, dict):
        return f"host counts must be an object, not {type(entry).__name__}"
    for key in ("lines_per_step", "blocks_per_step"):
        value = entry.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            return f"host counts' {key} must be a number of at least 0, not {value!r}"
    for key in ("lines", "blocks"):
        table = entry.get(key)
        if not isinstance(table, dict) or any(
                isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 for v in table.values()):
            return f"host counts' {key} must map names to numbers of at least 0"
    at = entry.get("at", {})
    if not isinstance(at, dict) or not all(isinstance(t, dict) and all(
            not isinstance(v, bool) and isinstance(v, (int, float)) and v >= 0 for v in t.values()) for t in at.values()):
        return "host counts' at must map functions to their lines' numbers of at least 0"
    return None
