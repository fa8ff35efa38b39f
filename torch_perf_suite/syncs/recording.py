"""Syncs recorded as they happen: steps profiled (`profile_steps`), each sync's exact lines marked in the trace
(`sync_sites`, with `torch.cuda.set_sync_debug_mode`), and a phase that runs every k steps named (`periodic`)."""

from __future__ import annotations

import contextlib
import functools
import os
import traceback
import warnings
from typing import Callable

from ..counts.files import _is_harness, _is_library, _short
from .trace import PERIODIC_PREFIX, SITE_PREFIX, STEP_PREFIX, SyncCount, count_syncs
from .trace_file import load_trace

_SYNC_WARNING = "synchronizing CUDA operation"
_PROTOTYPE_WARNING = "Synchronization debug mode is a prototype feature"


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


def count_steps(step, steps: int, trace_path, all_threads: bool = False) -> SyncCount:
    """Profile `steps` steps into `trace_path` and count their syncs, with the steps' peak memory on this process's GPU
    above what was allocated when they began (the model, its optimizer's state, batches held: not the steps')."""
    import torch

    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    counted = profile_steps(step, steps, trace_path, all_threads)
    counted.step_peak_bytes = torch.cuda.max_memory_allocated() - held
    return counted
