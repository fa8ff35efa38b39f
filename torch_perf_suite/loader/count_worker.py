"""The counting process of instructions.py: run under callgrind (`python -m torch_perf_suite.loader.count_worker`, started by
instructions.Counter) with instrumentation off, it builds each loader it is sent and makes its samples while the parent
switches the count on and off around them.

Lines in: a request `{"factory": "module:function", "kwargs": {...}}`, then a line to go on. Lines out: "started";
"ready" or "error <json string>" for a request; "done" once its samples are made and collated.
"""

import contextlib
import gc
import importlib
import io
import json
import select
import sys

from .. import ref_imports
from .instructions import SAMPLES, STRIDE, load_factory

LIKELY = ("torchvision.transforms",)  # what a loader most often imports, much of valgrind's start: imported while
# no loader is asked for yet, as where the process starts with the session (Records.prestart_counter)


def serve(stdin=sys.stdin, stdout=sys.stdout) -> None:
    """Run under callgrind: for each request line, build the loader (torch, if it imports it, on one thread), take two
    samples (warm-up), say "ready", wait, take SAMPLES samples and collate them, say "done"."""

    def say(word: str) -> None:
        stdout.write(word + "\n")
        stdout.flush()

    finder = ref_imports.install_from_env()  # counting REF's loader (in REF's run): REF's code, from REF's tree
    say("started")
    if not _asked(stdin):
        for name in LIKELY:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
    while line := stdin.readline():
        request = json.loads(line)
        try:
            dataset, collate = load_factory(request["factory"])(**request["kwargs"])
            _one_thread()
            indices = [i * STRIDE % len(dataset) for i in range(SAMPLES)]
            collate([dataset[i] for i in indices])  # the counted work once, then the collector's generations emptied
            # and the survivors set aside: the count owes little to what the process ran before (another loader, or none)
            gc.collect()
            gc.freeze()
            if finder is not None and (leaked := ref_imports.leaks(finder.mapping)):
                raise ImportError("; ".join(leaked))
        except Exception as e:  # the parent shows it as the reason nothing was counted
            say("error " + json.dumps(f"{request['factory']}: {type(e).__name__}: {e}"))
            continue
        say("ready")
        stdin.readline()
        collate([dataset[i] for i in indices])
        say("done")


def _one_thread() -> None:
    """torch's ops on one thread, where the loader or LIKELY imported torch: imported for them, not before, so that a
    loader without torch is counted without valgrind starting torch (about a minute on 2 cores)."""
    if (torch := sys.modules.get("torch")) is not None:
        torch.set_num_threads(1)


def _asked(stdin) -> bool:
    """Whether a request waits on `stdin` (a pipe); True where that cannot be told (a stream without a file)."""
    try:
        return bool(select.select([stdin], [], [], 0)[0])
    except (io.UnsupportedOperation, ValueError):
        return True


if __name__ == "__main__":
    serve()
