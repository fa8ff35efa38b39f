"""Host reads per step, counted by the dispatcher: the syncs a step would make on a GPU, found on any device.

On a GPU the profiler's trace counts the syncs themselves (syncs.py). Without one, there is no sync to see, but the
ops that would make one still pass through torch's dispatcher, on the CPU too: `.item()`, `float(t)`, `bool(t)` and
`if t:` (`aten::_local_scalar_dense`), `nonzero`, boolean-mask indexing, `masked_select` and `unique` (their output's
size is read on the host). A `TorchDispatchMode` sees each one with the Python stack that called it, so a smoke run
names the line as the GPU's check does, as a `SyncCount` that `checks.host_reads` judges. (A smoke run on a GPU
profiles its steps instead, as a measured run does.)

What it cannot see on the CPU: a copy between host and device (`.cpu()`, `.to("cuda")`, `.tolist()`, `.numpy()`:
on the CPU there is no copy to make) and an explicit `torch.cuda.synchronize()`.

Reads that are host-side on a GPU too are left out:
- of a tensor made from Python values (`torch.tensor(x)`, `torch.as_tensor(x)`: `aten::lift_fresh`), or computed from
  such tensors alone: a host value fed to a metric, a transform's constants;
- made while the DataLoader fetches a batch (a frame in torch/utils/data/): the dataset runs on the host;
- an optimizer's step counter (a CPU tensor unless the optimizer is fused or capturable), read with `.item()` by
  torch/optim's own code on every step.
"""

from __future__ import annotations

import traceback

from .syncs import PERIODIC_PREFIX, SyncCount, SyncSource, lines_of

READS = frozenset({"_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_dim", "unique_consecutive"})
HOST_RESIDENT = ("torch/optim/",)  # library lines whose reads are of CPU tensors on a GPU too (step counters)
LOADER_FRAMES = "torch/utils/data/"  # a read made while the DataLoader fetches: the dataset's, on the host
FROM_PYTHON = "lift_fresh"  # torch.tensor(x) and torch.as_tensor(x) of Python values
MODE_FRAMES = ("torch/_dynamo/eval_frame.py", "torch/_compile.py", "torch/utils/_python_dispatch.py")  # into the mode
CALL = "host read"  # SyncSource.call of a read: the sync it would make on a GPU is not known here


def is_read(op: str, args: tuple) -> bool:
    """An op that reads a tensor's values on the host: one of READS, or indexing with a boolean mask."""
    if op in READS:
        return True
    return op == "index" and len(args) > 1 and any(
        getattr(i, "dtype", None) is not None and str(i.dtype) in ("torch.bool", "torch.uint8") for i in args[1] or ())


def count(step, steps: int) -> SyncCount:
    """`steps` calls of `step` under the dispatcher's watch: each host read with its lines, those inside a
    `perf_periodic:` range counted apart, as the GPU's count does."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    from torch.utils.weak import WeakIdKeyDictionary

    counted = SyncCount(steps=steps)
    ranges: list[str] = []  # the record_function ranges open now, innermost last
    on_host = WeakIdKeyDictionary()  # tensors made from Python values, or from such tensors alone

    class Reads(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            op = func.overloadpacket.__name__
            inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            if op == "_record_function_enter_new":
                ranges.append(args[0])
                if args[0].startswith(PERIODIC_PREFIX):
                    counted.periodic_runs[args[0]] += 1
            elif op == "_record_function_exit" and ranges:
                ranges.pop()
            elif is_read(op, args) and args[0] not in on_host:
                _note(counted, op, ranges, _callers(traceback.extract_stack()[:-1]))
            out = func(*args, **(kwargs or {}))
            if op == FROM_PYTHON or (inputs and all(t in on_host for t in inputs)):
                on_host.update((t, True) for t in tree_leaves(out) if isinstance(t, torch.Tensor))
            return out

    with Reads():
        for _ in range(steps):
            step()
    return counted


def _callers(stack: list[traceback.FrameSummary]) -> list[traceback.FrameSummary]:
    """The stack down to the op's caller: without the frames through which torch calls the mode (a dynamo wrapper)."""
    while stack and stack[-1].filename.replace("\\", "/").endswith(MODE_FRAMES):
        stack = stack[:-1]
    return stack


def _note(counted: SyncCount, op: str, ranges: list[str], stack: list[traceback.FrameSummary]) -> None:
    user, library = lines_of(stack) or ("", "")
    if library.startswith(HOST_RESIDENT) or any(LOADER_FRAMES in f.filename.replace("\\", "/") for f in stack):
        return
    ops = "aten::index > aten::nonzero" if op == "index" else f"aten::{op}"  # a mask's count is a nonzero
    source = SyncSource(CALL, ops, user, library)
    phase = next((r for r in reversed(ranges) if r.startswith(PERIODIC_PREFIX)), None)
    if phase is not None:
        counted.periodic[phase, source] += 1
    else:
        counted.sources[source] += 1
