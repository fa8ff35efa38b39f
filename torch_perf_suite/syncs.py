"""Host-device syncs per training step, counted in a torch.profiler Chrome trace.

What counts as one sync (only inside a step range, `perf_step_<i>`):
- a CUDA runtime or driver call that blocks the host: cudaStreamSynchronize, cudaDeviceSynchronize,
  cudaEventSynchronize, blocking cudaMemcpy (and their cu* driver twins);
- a pageable memcpy on the GPU (`Memcpy HtoD (Pageable -> Device)` or its DtoH twin) whose op did
  not already block in one of the calls above: a pageable `non_blocking=True` copy shows no
  synchronize call, and `torch.cuda.set_sync_debug_mode` misses it too.

Where each sync comes from:
- the torch op around it (`aten::item > aten::_local_scalar_dense`) and the Python functions on the
  stack (the profiler's `python_function` events: their line numbers are where a function starts);
- the exact lines, where `torch.cuda.set_sync_debug_mode("warn")` saw the sync: `sync_sites()`
  writes a `perf_sync_site|...` marker into the trace right after each warned sync, so a saved trace
  carries its own attribution.

The analysis reads the Chrome trace format only, so live runs and committed trace files take the
same path.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import functools
import gzip
import importlib.util
import io
import json
import os
import sys
import sysconfig
import traceback
import warnings
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .kernels import KernelStats, kernel_stats

STEP_PREFIX = "perf_step_"
PERIODIC_PREFIX = "perf_periodic:"  # a phase that runs every k steps (computing metrics, say)
SITE_PREFIX = "perf_sync_site|"
BLOCKING_CALLS = {
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cuStreamSynchronize",
    "cuCtxSynchronize",
    "cuEventSynchronize",
}
PAGEABLE_COPIES = {"Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)"}
HOST_CATEGORIES = {"cuda_runtime", "cuda_driver"}
_SYNC_WARNING = "synchronizing CUDA operation"
_PROTOTYPE_WARNING = "Synchronization debug mode is a prototype feature"


class TraceError(ValueError):
    """A trace that cannot be analysed: the message names the file and what is missing."""


@dataclass(frozen=True)
class SyncSource:
    """Where one kind of sync comes from; the key of a row in the per-step table."""

    call: str  # "cudaStreamSynchronize", or the pageable memcpy's name
    ops: str  # outermost > innermost torch op around it, "" outside any op
    user_line: str  # "fixtures/recipes.py:88 in train_step", or the best guess from the stack
    library_line: str  # "torchmetrics/aggregation.py:93 in _cast_and_nan_check_input", or ""

    @property
    def advice(self) -> Advice | None:
        return next((a for a in (*user_sources, *KNOWN_SOURCES) if a.matches(self)), None)

    def describe(self) -> str:
        where = f" in {self.ops}" if self.ops else ""
        lines = [f"{self.call}{where}", f"    user code: {self.user_line or '(not seen)'}"]
        if self.library_line:
            lines.append(f"    library:   {self.library_line}")
        advice = self.advice
        lines.append(f"    fix:       {advice.fix} (more: {advice.more})" if advice else f"    fix:       {UNKNOWN_FIX}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Advice:
    """The known fix for one kind of sync, told by the call, the torch ops around it or the library line."""

    kind: str  # a short name: "pageable copy"
    fix: str  # one line
    more: str  # where to read more
    calls: frozenset = frozenset()  # the sync's call is one of these
    op: str = ""  # the sync runs inside this torch op
    library: str = ""  # the library line starts with this

    def matches(self, source: SyncSource) -> bool:
        return bool(
            (self.calls or self.op or self.library)
            and (not self.calls or source.call in self.calls)
            and (not self.op or self.op in source.ops.split(" > "))
            and source.library_line.startswith(self.library)
        )


user_sources: tuple[Advice, ...] = ()  # from the pytest_perf_sync_sources hook, set by the plugin for its session
UNKNOWN_FIX = "no fix known to the suite for this source: the lines above and the trace show where it waits"
EXPLICIT_LIBRARY = "torch/cuda/"  # torch.cuda.synchronize(), Event.synchronize() and Stream.synchronize() live there
# First match wins: a library's own sync before the op it syncs in (GradScaler's check is an .item()).
KNOWN_SOURCES: list[Advice] = [
    Advice(
        "GradScaler inf check",
        "GradScaler.step reads the found-inf flag on the host; an optimizer with a fused step "
        "(torch.optim.AdamW(..., fused=True), SGD, Adam) takes the flag on the GPU; bf16 autocast needs no scaler",
        "https://pytorch.org/docs/stable/amp.html#gradient-scaling",
        library="torch/amp/grad_scaler.py",
    ),
    Advice(
        "explicit synchronize",
        "remove it from the step: the step's own work needs no wait. To time the step, record "
        "torch.cuda.Event(enable_timing=True) before and after it and read elapsed_time() outside the step, every k steps",
        "https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution",
        library=EXPLICIT_LIBRARY,
    ),
    Advice(
        "torchmetrics input check",
        'construct the metric with nan_strategy="disable" (its NaN check reads the GPU), and feed it tensors: '
        "a CPU scalar tensor with a weight, not a Python float that is copied to the GPU on each update",
        "https://lightning.ai/docs/torchmetrics/stable/aggregation/mean.html",
        library="torchmetrics/",
    ),
    Advice(
        "Hugging Face loss check",
        "TrainingArguments(logging_nan_inf_filter=False): with it on, the Trainer tests every step's loss for NaN and "
        "inf on the host (`torch.isnan(loss) or torch.isinf(loss)`)",
        "https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments",
        op="aten::is_nonzero",
        library="transformers/trainer.py",
    ),
    Advice(
        "Accelerate blocking batch copy",
        "TrainingArguments(dataloader_pin_memory=True, accelerator_config={\"non_blocking\": True}): Accelerate copies "
        "each batch to the GPU with non_blocking=False unless told",
        "https://huggingface.co/docs/accelerate/package_reference/utilities#accelerate.utils.DataLoaderConfiguration",
        op="aten::copy_",
        library="accelerate/",
    ),
    Advice(
        "pageable copy",
        "copy from pinned memory: DataLoader(pin_memory=True) or tensor.pin_memory(), then .to(device, non_blocking=True)",
        "https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html",
        calls=frozenset(PAGEABLE_COPIES),
    ),
    Advice(
        "blocking copy",
        "to the GPU: pin the source and pass non_blocking=True; from the GPU (.cpu(), .tolist(), .numpy()): "
        "read it every k steps, or copy it non_blocking into pinned memory and read it a step later",
        "https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html",
        op="aten::copy_",
    ),
    Advice(
        "boolean mask",
        "indexing with a boolean mask needs the count of its True values on the host: weight by the mask instead "
        "((x * mask).sum() / mask.sum()) or select with torch.where",
        "https://pytorch.org/docs/stable/generated/torch.where.html",
        op="aten::nonzero",
    ),
    Advice(
        "GPU JPEG decode",
        "torchvision's decode_jpeg(..., device='cuda') waits for each image's decode (torchvision 0.26): decode in the "
        "DataLoader's workers on the CPU, or with a decoder that batches without host waits (DALI, torchcodec)",
        "https://docs.pytorch.org/vision/stable/generated/torchvision.io.decode_jpeg.html",
        op="image::decode_jpegs_cuda",
    ),
    Advice(
        "tensor read on the host",
        ".item(), float(t), bool(t), `if t:` or printing a GPU tensor waits for the GPU: read it every k steps, "
        "or copy it non_blocking into pinned memory and read it a step later",
        "https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution",
        op="aten::_local_scalar_dense",
    ),
]


@dataclass
class SyncCount:
    steps: int
    sources: Counter = field(default_factory=Counter)  # SyncSource -> count over all steps
    periodic: Counter = field(default_factory=Counter)  # (range name, SyncSource) -> count inside perf_periodic:* ranges
    periodic_runs: Counter = field(default_factory=Counter)  # range name -> times it ran in the steps
    gpu_busy_s: float | None = None  # GPU kernel time per step (union of kernel intervals over the window / steps)
    kernels: KernelStats | None = None  # what the GPU ran in the steps
    step_peak_bytes: int | None = None  # the steps' peak GPU memory above what was allocated when they began

    @property
    def total(self) -> int:
        return sum(self.sources.values())

    @property
    def per_step(self) -> float:
        return self.total / self.steps if self.steps else 0.0

    def describe(self) -> str:
        rows = [] if self.sources else ["no host-device syncs in the steps"]
        for source, n in self.sources.most_common():
            rows.append(f"  {n / self.steps:.2f}/step  " + source.describe().replace("\n", "\n           "))
        for name, runs in self.periodic_runs.items():
            inside = [(s, n) for (phase, s), n in self.periodic.items() if phase == name]
            rows.append(f"plus {sum(n for _, n in inside)} sync(s) in {name}, which ran {runs}x in {self.steps} steps:")
            rows += [f"  {n}x  " + s.describe().replace("\n", "\n      ") for s, n in inside]
        return "\n".join(rows)


# --- reading traces --------------------------------------------------------------------------


def load_trace(path: str | os.PathLike) -> dict:
    """Read a Chrome trace written by `prof.export_chrome_trace`, gzipped or not (told by its first bytes, not its name)."""
    path = Path(path)
    try:
        with open(path, "rb") as raw:
            gzipped = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            text = gzip.open(raw, "rt", encoding="utf-8") if gzipped else io.TextIOWrapper(raw, encoding="utf-8")
            trace = json.load(text)
    except FileNotFoundError as e:
        raise TraceError(f"{path}: no such file") from e
    except IsADirectoryError as e:
        raise TraceError(f"{path}: is a directory, not a trace file") from e
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not UTF-8 JSON ({e}); is this a Chrome trace? record it again") from e
    except (OSError, EOFError, zlib.error, ValueError, RecursionError) as e:  # ValueError: bad JSON
        raise TraceError(f"{path}: not a readable Chrome trace ({e}); record it again") from e
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TraceError(f"{path}: no 'traceEvents' list; is this a torch.profiler Chrome trace?")
    return trace


def count_syncs(trace: dict, source: str = "trace") -> SyncCount:
    """Count the syncs inside `perf_step_<i>` ranges of a Chrome trace, and name their sources.

    Events this cannot use (not a complete "X" event, no name, times that are not numbers) are skipped.
    """
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TraceError(f"{source}: no 'traceEvents' list; is this a torch.profiler Chrome trace?")
    events = [u for u in map(_usable, trace["traceEvents"]) if u is not None]
    steps = sorted(
        (_span(e) for e in events if e.get("cat") == "user_annotation" and e["name"].startswith(STEP_PREFIX)),
    )
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

    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in HOST_CATEGORIES and "correlation" in e.get("args", {})
    }
    syncs = [e for e in events if e.get("cat") in HOST_CATEGORIES and _base(e["name"]) in BLOCKING_CALLS]
    for copy in (e for e in events if e["name"] in PAGEABLE_COPIES):
        launch = launches.get(copy.get("args", {}).get("correlation"))
        if launch is None or _blocks_in_same_op(launch, by_thread):
            continue
        syncs.append(by_thread.alias({**launch, "name": copy["name"]}, launch))

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


def _base(name: str) -> str:
    # cudaStreamSynchronize_ptsz and friends are the per-thread-stream variants of the same call
    return name.split("_ptsz")[0].split("_v2")[0]


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
        o.get("cat") in HOST_CATEGORIES and _base(o["name"]) in BLOCKING_CALLS
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


# --- classifying files ------------------------------------------------------------------------

_LIBRARY_ROOTS = tuple(
    {os.path.realpath(p) for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]) if p}
)
_HARNESS_DIR = os.path.dirname(os.path.realpath(__file__))


def _is_library(filename: str) -> bool:
    f = filename.replace("\\", "/")
    if "site-packages/" in f or "dist-packages/" in f or f.startswith("<"):
        return True
    if not os.path.isabs(filename):
        # the profiler names a frame relative to its sys.path entry: "torch/amp/grad_scaler.py", "threading.py"
        top = f.split("/", 1)[0]
        return _installed_package(top if "/" in f else top.removesuffix(".py"))
    return os.path.realpath(filename).startswith(_LIBRARY_ROOTS) or _is_harness(filename)


def _is_harness(filename: str) -> bool:
    """A frame of this package: as the profiler names it (relative to its sys.path entry), or by its path."""
    f = filename.replace("\\", "/")
    if not os.path.isabs(filename):
        return f.startswith(os.path.basename(_HARNESS_DIR) + "/")
    return os.path.realpath(filename).startswith(_HARNESS_DIR + os.sep)


@functools.lru_cache(maxsize=None)
def _installed_package(name: str) -> bool:
    """A top-level package that this Python finds among its libraries (not the project's own)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    where = spec and (spec.origin or next(iter(spec.submodule_search_locations or ()), None))
    if not where or where in ("built-in", "frozen"):
        return bool(where)
    real = os.path.realpath(where).replace("\\", "/")
    return "site-packages/" in real or "dist-packages/" in real or real.startswith(_LIBRARY_ROOTS)


def _short(where: str) -> str:
    """site-packages paths from the package down, project paths relative to the working directory."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in where:
            return where.split(marker, 1)[1]
    cwd = os.getcwd() + os.sep
    return where[len(cwd) :] if where.startswith(cwd) else where


# --- recording --------------------------------------------------------------------------------


def lines_of(stack: list[traceback.FrameSummary], called: str = "") -> tuple[str, str] | None:
    """(user line, library line) of a sync seen with this stack, None where no frame is the user's; `called`: the
    library function the innermost frame called (an explicit synchronize, whose own frame is not on the stack), where
    no library frame is."""
    frames = [f for f in stack if not _is_harness(f.filename)]
    user = [f for f in frames if not _is_library(f.filename)]
    if not user:
        return None
    u = user[-1]
    inner = [f for f in frames[frames.index(u) + 1 :] if "site-packages" in f.filename or "dist-packages" in f.filename]
    lib = f"{_short(inner[-1].filename)}:{inner[-1].lineno} in {inner[-1].name}" if inner else called
    return f"{_short(u.filename)}:{u.lineno} in {u.name}", lib


def _site_of(stack: list[traceback.FrameSummary], called: str = "") -> str:
    """The marker for a sync seen with this stack (lines_of), "" where no frame is the user's."""
    found = lines_of(stack, called)
    if found is None:
        return ""
    user, lib = found
    return f"{SITE_PREFIX}user={user}" + (f"|lib={lib}" if lib else "")


def _explicit_syncs(torch, marked: list[int], on_sync: Callable[[str], None]):
    """torch.cuda.synchronize, Event.synchronize and Stream.synchronize, each wrapped to mark its exact line as the
    debug mode's warning does (it warns for none of the first two): [(owner, name, original)] to put back."""
    patched = []

    def wrap(owner, name):
        original = getattr(owner, name)
        code = getattr(original, "__code__", None)
        called = f"{_short(code.co_filename)}:{code.co_firstlineno} in {original.__qualname__}" if code else name

        @functools.wraps(original)
        def synchronize(*args, **kwargs):
            before = marked[0]
            result = original(*args, **kwargs)
            if marked[0] == before:  # the debug mode did not mark it already
                site = _site_of(traceback.extract_stack()[:-1], called)
                if site:
                    on_sync(site)
            return result

        setattr(owner, name, synchronize)
        patched.append((owner, name, original))

    for owner, name in ((torch.cuda, "synchronize"), (torch.cuda.Event, "synchronize"), (torch.cuda.Stream, "synchronize")):
        wrap(owner, name)
    return patched


def periodic(name: str):
    """Mark a phase that runs every k steps (computing metrics, say): its syncs are counted and reported apart
    from the per-step ones. `with periodic("metrics"): ...` inside the step."""
    import torch

    return torch.profiler.record_function(PERIODIC_PREFIX + name)


def _mark_in_trace(site: str) -> None:
    import torch

    with torch.profiler.record_function(site):
        pass


@contextlib.contextmanager
def sync_sites(on_sync: Callable[[str], None] = _mark_in_trace):
    """Mark each sync that `torch.cuda.set_sync_debug_mode` sees with its exact lines, and each explicit one
    (torch.cuda.synchronize(), Event.synchronize(), Stream.synchronize()), which it does not see.

    Every debug-mode warning and every explicit synchronize called from user code is handed to `on_sync` as its
    `perf_sync_site|user=...|lib=...` marker: by default a zero-length range of that name in an active torch.profiler
    window. The debug mode, the warning filters and the three functions are restored on exit; other warnings pass
    through untouched.
    """
    import torch

    cuda = torch.cuda.is_available()  # without CUDA there is no debug mode to set (nor a sync to see)
    previous_mode = torch.cuda.get_sync_debug_mode() if cuda else None
    marked = [0]  # debug-mode warnings marked so far
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        passthrough = warnings.showwarning

        def mark(message, category, filename, lineno, file=None, line=None):
            if _PROTOTYPE_WARNING in str(message):
                return None  # known: debug mode misses some syncs, which is why the profiler's count decides
            if _SYNC_WARNING not in str(message):
                return passthrough(message, category, filename, lineno, file, line)
            marked[0] += 1
            site = _site_of(traceback.extract_stack()[:-1])
            if site:
                on_sync(site)

        warnings.showwarning = mark
        patched = _explicit_syncs(torch, marked, on_sync)
        if cuda:
            torch.cuda.set_sync_debug_mode("warn")
        try:
            yield
        finally:
            if cuda:
                torch.cuda.set_sync_debug_mode(previous_mode)
            for owner, name, original in reversed(patched):
                setattr(owner, name, original)


def profile_steps(step, steps: int, trace_path: str | os.PathLike, all_threads: bool = False) -> SyncCount:
    """Run `steps` calls of `step` under torch.profiler (CPU + CUDA), save the trace, count syncs. `all_threads`:
    record every thread's events (a loop that runs its steps on a thread of its own), not only this thread's."""
    import torch
    from torch.profiler import ProfilerActivity, _ExperimentalConfig, profile, record_function

    threads = {}
    if all_threads:
        try:
            threads["experimental_config"] = _ExperimentalConfig(profile_all_threads=True)
        except TypeError:  # added in torch 2.7
            raise RuntimeError(f"profiling a loop that runs on a thread of its own needs torch 2.7 or later (its "
                               f"profiler's profile_all_threads); this is torch {torch.__version__}") from None

    torch.cuda.synchronize()
    with warnings.catch_warnings():
        # one window, no schedule: there is one cycle, and its events are the ones read
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle", category=UserWarning)
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True, **threads)
        prof.start()
    try:
        with sync_sites():
            for i in range(steps):
                with record_function(f"{STEP_PREFIX}{i}"):
                    step()
        torch.cuda.synchronize()
    finally:
        prof.stop()
    prof.export_chrome_trace(str(trace_path))
    return count_syncs(load_trace(trace_path), source=str(trace_path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m torch_perf_suite.syncs",
        usage="%(prog)s [-h] TRACE [TRACE ...]",  # at least one, checked below
        description="Count the host-device syncs per step in torch.profiler Chrome traces (with perf_step_<i> ranges).",
        epilog="exit status: 0 every trace read and clean, 1 syncs in some trace's steps, 2 some trace could not be read",
    )
    # nargs="*", checked below: with "+", argparse said a missing TRACE before an unknown option (--bogus)
    parser.add_argument("traces", nargs="*", metavar="TRACE", help="a Chrome trace, .json or gzipped")
    traces = parser.parse_args(argv).traces
    if not traces:
        parser.error("give at least one TRACE, a Chrome trace written by torch.profiler")
    status = 0
    for p in traces:
        try:
            c = count_syncs(load_trace(p), source=p)
        except TraceError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 2
            continue
        print(f"{p}: {c.per_step:.2f} syncs/step over {c.steps} steps\n{c.describe()}")
        if c.total or c.periodic:
            status = max(status, 1)
    return status


if __name__ == "__main__":  # python -m torch_perf_suite.syncs TRACE.json[.gz]...
    sys.exit(main())
