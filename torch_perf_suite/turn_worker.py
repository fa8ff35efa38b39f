"""One side of `turns`: run as a script (`python turn_worker.py ROOT CORE STRIDE CHUNK`), never imported by the
harness, so that nothing of the harness's own package is imported from ROOT's tree by this file.

ROOT goes first on the path in place of this file's folder: the loader's factory is imported from that tree (REF's,
or the working tree's). Once torch is imported, the process runs on core CORE alone, torch on one thread, as in a
DataLoader worker.

Lines in: a request `{"factory": "module:function", "kwargs": {...}}`, then chunk numbers, then "end" (or EOF).
Lines out: "started"; "ready" or "error <json string>" for a request; "<wall ns> <CPU ns>" for a chunk, which makes
the samples (i * CHUNK + k) * STRIDE mod len(dataset) for k < CHUNK and collates them.
"""

import importlib
import json
import os
import sys
import time


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def build(request: dict, root: str):
    """The loader's (dataset, collate), from ROOT's tree; ValueError where the factory's module is not ROOT's."""
    module, _, name = request["factory"].partition(":")
    found = importlib.import_module(module)
    where = os.path.realpath(getattr(found, "__file__", None) or "?")
    if not where.startswith(os.path.realpath(root) + os.sep):
        raise ValueError(f"{module} is imported from {where}, not from the tree {root} (an editable install of it "
                         "shadows the tree?)")
    return getattr(found, name)(**request["kwargs"])


def serve(root: str, core: int, stride: int, chunk: int) -> None:
    import torch

    # on the one core once torch is imported: the two processes import it side by side on any (on one GPU host, two
    # imports on one core took about 20 s before the first test's turns)
    os.sched_setaffinity(0, {core})
    torch.set_num_threads(1)
    say("started")
    while line := sys.stdin.readline():
        try:
            dataset, collate = build(json.loads(line), root)
            size = len(dataset)
            for i in range(-2, 0):  # warm: first calls, lazy imports, the allocator's first blocks
                collate([dataset[(i * chunk + k) * stride % size] for k in range(chunk)])
        except Exception as e:  # the parent says it as the reason nothing was timed
            say("error " + json.dumps(f"{type(e).__name__}: {e}"))
            continue
        say("ready")
        while (line := sys.stdin.readline().strip()) and line != "end":
            i = int(line)
            wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
            collate([dataset[(i * chunk + k) * stride % size] for k in range(chunk)])
            say(f"{time.perf_counter_ns() - wall} {time.thread_time_ns() - cpu}")


if __name__ == "__main__":
    tree, core, stride_, chunk_ = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    sys.path[0] = tree
    serve(tree, core, stride_, chunk_)
