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

The package: `trace` reads a trace and counts its syncs (`count_syncs`), `advice` holds the fixes known for each kind
of sync, `recording` profiles steps and marks each sync's exact lines, and `python -m torch_perf_suite.syncs TRACE`
counts a saved trace (`cli`); counts/files.py tells the user's lines from the libraries' and the harness's.
"""

from .advice import EXPLICIT_LIBRARY, KNOWN_SOURCES, UNKNOWN_FIX, Advice
from .cli import main
from .recording import lines_of, periodic, profile_steps, sync_sites
from .trace import (
    BLOCKING_CALLS,
    HOST_CATEGORIES,
    PAGEABLE_COPIES,
    PERIODIC_PREFIX,
    SITE_PREFIX,
    STEP_PREFIX,
    SyncCount,
    SyncSource,
    count_syncs,
)
from .trace_file import TraceError, load_trace

__all__ = ["Advice", "BLOCKING_CALLS", "EXPLICIT_LIBRARY", "HOST_CATEGORIES", "KNOWN_SOURCES", "PAGEABLE_COPIES",
           "PERIODIC_PREFIX", "SITE_PREFIX", "STEP_PREFIX", "SyncCount", "SyncSource", "TraceError", "UNKNOWN_FIX",
           "count_syncs", "lines_of", "load_trace", "main", "periodic", "profile_steps", "sync_sites"]
