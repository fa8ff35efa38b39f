"""`python -m torch_perf_suite.syncs TRACE [TRACE ...]`: the syncs per step of saved traces."""

from __future__ import annotations

import argparse
import sys

from .trace import count_syncs
from .trace_file import TraceError, load_trace


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

