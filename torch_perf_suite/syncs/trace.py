"""A torch.profiler Chrome trace read, and the host-device syncs in its steps counted, each with where it comes from
(the package's docstring says what counts as one)."""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from ..counts.files import _is_harness, _is_library, _short
from ..counts.kernels import KernelStats, call_name, kernel_stats
from . import advice as known
from .advice import PAGEABLE_COPIES
from .trace_file import TraceError

STEP_PREFIX = "perf_step_"
PERIODIC_PREFIX = "perf_periodic:"  # a phase that runs every k steps (computing metrics, say)
SITE_PREFIX = "perf_sync_site|"
BLOCKING_CALLS = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",  # the runtime's
                  "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize"}  # and the driver's twins
HOST_CATEGORIES = {"cuda_runtime", "cuda_driver"}


@dataclass(frozen=True)
class SyncSource:
    """Where one kind of sync comes from; the key of a row in the per-step table."""

    call: str  # "cudaStreamSynchronize", or the pageable memcpy's name
    ops: str  # outermost > innermost torch op around it, "" outside any op
    user_line: str  # "fixtures/recipes.py:88 in train_step", or the best guess from the stack
    library_line: str  # "torchmetrics/aggregation.py:93 in _cast_and_nan_check_input", or ""

    @property
    def at(self) -> str:
        """The user's file:line, "fixtures/loss_log.py:30", from either form of `user_line` (a marked site's
        "fixtures/loss_log.py:30 in __call__", the stack's "fixtures/training.py(109): prepare"); "" where none was seen."""
        first = self.user_line.split(" ", 1)[0]
        if not first or first.startswith("("):
            return ""
        path, _, line = first.removesuffix(":").removesuffix(")").rpartition("(")
        return f"{path}:{line}" if path and line.isdigit() else first

    @property
    def advice(self) -> known.Advice | None:
        return next((a for a in (*known.user_sources, *known.KNOWN_SOURCES) if a.matches(self)), None)

    def describe(self, fixed: set | None = None) -> str:
        """The source in a few lines: its call and ops, the user's line, the library's, and the fix; a fix already in
        `fixed` (said for another source above, which this adds to) as "as above"."""
        where = f" in {self.ops}" if self.ops else ""
        lines = [f"{self.call}{where}", f"    user code: {self.user_line or '(not seen)'}"]
        if self.library_line:
            lines.append(f"    library:   {self.library_line}")
        advice = self.advice
        fix = f"{advice.fix} (more: {advice.more})" if advice else known.UNKNOWN_FIX
        if advice is not None and fixed is not None and fix in fixed:
            fix = f"as above ({advice.kind})"
        elif fixed is not None:
            fixed.add(fix)
        lines.append(f"    fix:       {fix}")
        return "\n".join(lines)


@dataclass
class SyncCount:
    steps: int
    sources: Counter = field(default_factory=Counter)  # SyncSource -> count over all steps
    periodic: Counter = field(default_factory=Counter)  # (range name, SyncSource) -> count inside perf_periodic:* ranges
    periodic_runs: Counter = field(default_factory=Counter)  # range name -> times it ran in the steps
    gpu_busy_s: float | None = None  # GPU kernel time per step (union of kernel intervals over the window / steps)
    kernels: KernelStats | None = None  # what the GPU ran in the steps
    step_peak_bytes: int | None = None  # the steps' peak GPU memory above what was allocated when they began
    dtypes: Counter = field(default_factory=Counter)  # without a GPU: the steps' ops by the floating dtype they made

    @property
    def total(self) -> int:
        return sum(self.sources.values())

    @property
    def per_step(self) -> float:
        return self.total / self.steps if self.steps else 0.0

    @property
    def where(self) -> str:
        """The user's file:line of the first source `describe` lists that has one ("fixtures/loss_log.py:30"), else ""."""
        listed = [s for s, _ in self.sources.most_common()] + [s for n in self.periodic_runs for p, s in self.periodic if p == n]
        return next((s.at for s in listed if s.at), "")

    def describe(self) -> str:
        rows = [] if self.sources else ["no host-device syncs in the steps"]
        fixed: set = set()  # one fix for several sources of one cause (anomaly mode's), said once
        for source, n in self.sources.most_common():
            rows.append(f"  {n / self.steps:.2f}/step  " + source.describe(fixed).replace("\n", "\n           "))
        for name, runs in self.periodic_runs.items():
            inside = [(s, n) for (phase, s), n in self.periodic.items() if phase == name]
            rows.append(f"plus {sum(n for _, n in inside)} sync(s) in {name}, which ran {runs}x in {self.steps} steps:")
            rows += [f"  {n}x  " + s.describe(fixed).replace("\n", "\n      ") for s, n in inside]
        return "\n".join(rows)


def count_syncs(trace: dict, source: str = "trace") -> SyncCount:
    """Count the syncs inside `perf_step_<i>` ranges of a Chrome trace, and name their sources.

    Events this cannot use (not a complete "X" event, no name, times that are not numbers) are skipped.
    """
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TraceError(f"{source}: no 'traceEvents' list; is this a torch.profiler Chrome trace?")
    events = [u for u in map(_usable, trace["traceEvents"]) if u is not None]
    steps = sorted(_span(e) for e in events if e.get("cat") == "user_annotation" and e["name"].startswith(STEP_PREFIX))
    if not steps:
        raise TraceError(f"{source}: no '{STEP_PREFIX}<i>' ranges; the steps were not marked, so nothing can be counted")
    by_thread = _Threads()
    for e in events:
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))

    def in_steps(ts: float) -> bool:
        i = bisect.bisect_right(steps, (ts, float("inf"))) - 1
        return i >= 0 and steps[i][0] <= ts <= steps[i][1]

    syncs = _blocking(events, by_thread)
    counted = SyncCount(steps=len(steps), gpu_busy_s=_kernel_time_s(events) / len(steps), kernels=kernel_stats(events, steps))
    sites = _sites_by_sync(syncs, by_thread)
    forward_of = _forward_links(trace["traceEvents"], by_thread)
    for e in events:
        if e.get("cat") == "user_annotation" and e["name"].startswith(PERIODIC_PREFIX) and in_steps(e["ts"]):
            counted.periodic_runs[e["name"]] += 1
    for sync in syncs:
        if not in_steps(sync["ts"]):
            continue
        source = _source(sync, by_thread, sites.get(id(sync)), forward_of)
        phase = [p["name"] for p in _enclosing(sync, by_thread, "user_annotation") if p["name"].startswith(PERIODIC_PREFIX)]
        if phase:
            counted.periodic[phase[0], source] += 1
        else:
            counted.sources[source] += 1
    return counted


def _blocking(events: list[dict], by_thread: "_Threads") -> list[dict]:
    """The host's blocking calls, and each pageable copy whose launch did not block in its own op (the copy waits)."""
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in HOST_CATEGORIES and "correlation" in e.get("args", {})}
    syncs = [e for e in events if e.get("cat") in HOST_CATEGORIES and call_name(e["name"]) in BLOCKING_CALLS]
    for copy in (e for e in events if e["name"] in PAGEABLE_COPIES):
        launch = launches.get(copy.get("args", {}).get("correlation"))
        if launch is None or _blocks_in_same_op(launch, by_thread):
            continue
        syncs.append(by_thread.alias({**launch, "name": copy["name"]}, launch))
    return syncs


def _usable(e) -> dict | None:
    """The event as the counting below reads it, or None where it lacks what that needs."""
    if not isinstance(e, dict) or e.get("ph") != "X" or not isinstance(e.get("name"), str):
        return None
    if not _is_number(e.get("ts")) or not _is_number(e.get("dur", 0)) or e.get("dur", 0) < 0:
        return None
    if not all(isinstance(e.get(k), (str, int, type(None))) for k in ("cat", "pid", "tid")):
        return None
    args = e.get("args")
    if not isinstance(args, dict) or not isinstance(args.get("correlation", 0), int):  # only the correlation is read
        return {**e, "args": {}}
    return e


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and -1e300 < x < 1e300  # finite, and float() takes it


def _kernel_time_s(events: list[dict]) -> float:
    """Seconds in which at least one kernel ran: the union of the kernels' intervals (trace times are in us)."""
    busy, end = 0.0, -float("inf")
    for start, stop in sorted(_span(e) for e in events if e.get("cat") == "kernel"):
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return busy / 1e6


def _span(e: dict) -> tuple[float, float]:
    return (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))


def _thread(e: dict, by_thread: dict) -> list[dict]:
    return by_thread.get((e.get("pid"), e.get("tid")), [])


class _Threads(dict):
    """(pid, tid) -> that thread's events sorted by (start, longest first), and which events enclose each event:
    found once for all, by one sweep per thread, where a search per sync made a trace of 1,440 syncs in
    hundreds of thousands of events take minutes."""

    _ancestry: dict[int, list[dict]] | None = None

    def __init__(self, *args):
        super().__init__(*args)
        self._aliases: dict[int, dict] = {}
        self._starts: dict[tuple, list[float]] = {}

    def alias(self, copy: dict, original: dict) -> dict:
        """Let `copy` (a new dict with `original`'s interval and thread) share the index entry of `original`."""
        self._aliases[id(copy)] = original
        return copy

    def enclosing(self, e: dict) -> list[dict] | None:
        """Every event on e's thread whose interval contains e's (not e), in the thread's order; None for an
        event not in these lists (a copy of one, unless made known by `alias`)."""
        if self._ancestry is None:
            self._ancestry = {}
            for thread_events in self.values():
                self._sweep(thread_events)
        return self._ancestry.get(id(self._aliases.get(id(e), e)))

    def starting_within(self, e: dict, lo: float, hi: float) -> list[dict]:
        """The events on e's thread that start at lo..hi (the thread's lists must be sorted by start)."""
        key = (e.get("pid"), e.get("tid"))
        if key not in self._starts:
            self._starts[key] = [float(o["ts"]) for o in self.get(key, [])]
        starts = self._starts[key]
        return self.get(key, [])[bisect.bisect_left(starts, lo):bisect.bisect_right(starts, hi)]

    def _sweep(self, thread_events: list[dict]) -> None:
        open_: list[tuple[float, float, dict]] = []  # events that may still contain what comes next
        for e in thread_events:
            start, end = _span(e)
            while open_ and open_[-1][1] < start:  # ended before e starts: it encloses nothing from here on
                open_.pop()
            self._ancestry[id(e)] = [o for s, t, o in open_ if s <= start and end <= t]
            for s, t, o in open_:
                if (s, t) == (start, end):  # the same interval: each encloses the other
                    self._ancestry[id(o)].append(e)
            open_.append((start, end, e))


def _enclosing(e: dict, by_thread: dict, cat: str) -> list[dict]:
    """Events of category `cat` on e's thread whose interval contains e, outermost first."""
    known = by_thread.enclosing(e) if isinstance(by_thread, _Threads) else None
    if known is not None:
        return [o for o in known if o.get("cat") == cat]
    start, end = _span(e)
    return [
        o
        for o in _thread(e, by_thread)
        if o.get("cat") == cat and o is not e and _span(o)[0] <= start and end <= _span(o)[1]
    ]


def _blocks_in_same_op(launch: dict, by_thread: _Threads) -> bool:
    ops = _enclosing(launch, by_thread, "cpu_op")
    if not ops:
        return False
    return any(
        o.get("cat") in HOST_CATEGORIES and call_name(o["name"]) in BLOCKING_CALLS
        for o in by_thread.starting_within(launch, *_span(ops[-1]))
    )


def _sites_by_sync(syncs: list[dict], by_thread: dict) -> dict[int, str]:
    """Match each `perf_sync_site` marker to the latest unmatched sync before it on its thread.

    torch issues the debug-mode warning when the synchronizing call returns to Python, so the
    marker follows its sync; an op that syncs twice gives two markers with the same lines.
    """
    matched: dict[int, str] = {}
    sync_ids = {id(s) for s in syncs}
    for thread_events in by_thread.values():
        pending: list[dict] = []
        timeline = sorted(
            [s for s in syncs if (s.get("pid"), s.get("tid")) == _key(thread_events)]
            + [e for e in thread_events if e.get("cat") == "user_annotation" and e["name"].startswith(SITE_PREFIX)],
            key=lambda e: e["ts"],
        )
        for e in timeline:
            if id(e) in sync_ids:
                if e["name"] not in PAGEABLE_COPIES:  # the debug mode never warns for those
                    pending.append(e)
            elif pending:
                matched[id(pending.pop())] = e["name"]
    return matched


def _key(thread_events: list[dict]) -> tuple:
    e = thread_events[0]
    return (e.get("pid"), e.get("tid"))


def _forward_links(raw_events: list, by_thread: dict) -> dict[int, dict]:
    """Backward op -> the forward op that created its autograd node, from the trace's `fwdbwd` flow events.

    The profiler draws a flow from each forward op (ph "s", at the op's start) to the backward op that
    differentiates it (ph "f", at that op's start); both ends are keyed by thread and start time.
    """
    ends: dict[str, dict[tuple, object]] = {"s": {}, "f": {}}
    for e in raw_events:
        if (isinstance(e, dict) and e.get("cat") == "fwdbwd" and e.get("ph") in ("s", "f") and _is_number(e.get("ts"))
                and all(isinstance(e.get(k), (str, int, type(None))) for k in ("pid", "tid", "id"))):  # keys of dicts
            ends[e["ph"]][e.get("pid"), e.get("tid"), float(e["ts"])] = e.get("id")
    by_id = {flow_id: at for at, flow_id in ends["s"].items()}
    starts = {}  # (pid, tid, ts) -> outermost cpu_op starting there
    for (pid, tid), thread_events in by_thread.items():
        for o in thread_events:
            if o.get("cat") == "cpu_op":
                starts.setdefault((pid, tid, float(o["ts"])), o)
    links = {}
    for at, flow_id in ends["f"].items():
        backward, forward = starts.get(at), starts.get(by_id.get(flow_id))
        if backward is not None and forward is not None:
            links[id(backward)] = forward
    return links


def _source(sync: dict, by_thread: dict, site: str | None, forward_of: dict[int, dict] | None = None) -> SyncSource:
    around = _enclosing(sync, by_thread, "cpu_op")
    ops = " > ".join(o["name"] for o in around)
    if site:
        fields = dict(part.split("=", 1) for part in site[len(SITE_PREFIX) :].split("|") if "=" in part)
        return SyncSource(sync["name"], ops, fields.get("user", ""), fields.get("lib", ""))
    stack, via = [f["name"] for f in _enclosing(sync, by_thread, "python_function")], ""
    if not stack:  # a backward op on autograd's thread: take the stack of the forward op it differentiates
        backward = next((o for o in reversed(around) if id(o) in (forward_of or {})), None)
        if backward is not None:
            forward = forward_of[id(backward)]
            stack = [f["name"] for f in _enclosing(forward, by_thread, "python_function")]
            via = f", in the forward op {forward['name']} that {backward['name']} differentiates"
    stack = [s for s in stack if not _is_harness(s.split("(")[0])]  # a framework's loop runs on the harness's thread
    user = [s for s in stack if not _is_library(s.split("(")[0])]
    library = [s for s in stack if _is_library(s.split("(")[0]) and not s.startswith("<built-in")]
    user_line = f"{_short(user[-1])} (line where the function starts{via})" if user else ""
    if not stack:
        user_line = "(no Python stack: the op ran on a C++ thread, e.g. autograd's backward)"
    elif not user:
        user_line = "(none: the sync is in a library's own loop)"
    inside = library and (not user or stack.index(library[-1]) > stack.index(user[-1]))
    library_line = _short(library[-1]) if inside else ""
    return SyncSource(sync["name"], ops, user_line, library_line)

