"""Hand-made profiler events and the paths their frames name, shared by the syncs' tests (where a sync comes from,
the site markers, the command line, the fixes' advice) and the file classification's (tests/counts/test_files.py)."""

import sysconfig

STDLIB = sysconfig.get_paths()["stdlib"]
SITE = "/opt/conda/lib/python3.11/site-packages"  # a site-packages folder outside this interpreter's own roots
NO_STACK = "(no Python stack: the op ran on a C++ thread, e.g. autograd's backward)"
PAGEABLE = "Memcpy HtoD (Pageable -> Device)"


def ev(name, cat, ts, dur=0, tid=1, **args):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}


SYNC = ev("cudaStreamSynchronize", "cuda_runtime", 100, 5)
