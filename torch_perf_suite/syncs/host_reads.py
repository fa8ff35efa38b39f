"""Host reads per step, counted by the dispatcher: the syncs a step would make on a GPU, found on any device.

On a GPU the profiler's trace counts the syncs themselves (trace.py). Without one, there is no sync to see, but the
ops that would make one still pass through torch, on the CPU too. Two modes watch the steps, each seeing a read
with the Python stack that made it, so a smoke run names the line as the GPU's check does, as a `SyncCount` that
`checks.host_reads` judges (a smoke run on a GPU profiles its steps instead, as a measured run does):
- a `TorchDispatchMode` sees the ops: `.item()`, `float(t)`, `bool(t)` and `if t:` (`aten::_local_scalar_dense`);
  `nonzero`, boolean-mask indexing, `masked_select` and `unique` (their output's size is read on the host);
  `torch.equal` and `torch.allclose` (a Python bool); `bincount` (its size, the input's largest value);
  `repeat_interleave` with a tensor of repeats and no `output_size` (their sum);
- a `TorchFunctionMode` sees the calls that never reach the dispatcher on the CPU, or reach it with the dispatch mode
  switched off: printing or formatting a tensor (`Tensor.__repr__`, `Tensor.__format__`: torch formats with the
  modes off), and a copy to the host of a tensor the step computed on the device (`.cpu()`, `.to("cpu")` without
  `non_blocking=True`, `.numpy()`, `.tolist()`), which on the CPU copies nothing.

What it cannot see on the CPU: a copy to the device (`.to("cuda")`: where the batch is not pinned, the GPU's
pageable copy), a copy to the host of a tensor not computed from the model's parameters in the counted steps (a
batch, a buffer), and an explicit `torch.cuda.synchronize()`.

Where a tensor lives is told apart so that reads that are host-side on a GPU too are left out:
- a tensor made from Python values (`torch.tensor(x)`, `torch.as_tensor(x)`: `aten::lift_fresh`), or computed from
  such tensors alone (an in-place update by host tensors included): a host value fed to a metric, a transform's
  constants. Made by the user's code with an explicit `device=` (the step's device: the GPU's on a GPU), it is the
  device's, and so is a host tensor updated in place with a device tensor (`acc += loss`);
- a read made while the DataLoader fetches a batch (a frame in torch/utils/data/): the dataset runs on the host;
- an optimizer's step counter (`state["step"]`, a CPU tensor unless the optimizer is fused or capturable), read by
  torch/optim's own code on every step; any other read inside torch/optim (`ReduceLROnPlateau.step(loss)`) counts.

`Watch` holds both modes; it is entered and left, a step at a time, in the thread that runs the steps (`count`: a
framework's loop in its own thread, workload.Members.within).
"""

from __future__ import annotations

import sys
import traceback

from ..counts import on_this_thread
from ..counts.files import _is_library, _short
from . import PERIODIC_PREFIX, SyncCount, SyncSource, lines_of

READS = frozenset({"_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_dim", "unique_consecutive",
                   "equal", "allclose", "bincount"})
OPTIM_FRAMES = "torch/optim/"  # where an optimizer reads its step counters
LOADER_FRAMES = "torch/utils/data/"  # a read made while the DataLoader fetches: the dataset's, on the host
FROM_PYTHON = "lift_fresh"  # torch.tensor(x) and torch.as_tensor(x) of Python values
MODE_FRAMES = ("torch/_dynamo/eval_frame.py", "torch/_compile.py", "torch/utils/_python_dispatch.py",
               "torch/overrides.py")  # the frames through which torch calls a mode
CALL = "host read"  # SyncSource.call of a read: the sync it would make on a GPU is not known here
FORMATS = ("__repr__", "__format__")  # Tensor methods that print a tensor's values: read on the host
COPIES = ("cpu", "to", "numpy", "tolist", "__array__")  # Tensor methods that copy a tensor to the host
READ_BY = {"format": "aten::_local_scalar_dense", "copy": "aten::copy_"}  # what each makes on a GPU (its advice)


def is_read(op: str, args: tuple, kwargs: dict | None = None, overload: str = "") -> bool:
    """An op that reads a tensor's values on the host: one of READS, indexing with a boolean mask, or
    `repeat_interleave` of a tensor of repeats without an `output_size`."""
    if op in READS:
        return True
    if op == "repeat_interleave":
        return overload in ("Tensor", "self_Tensor") and (kwargs or {}).get("output_size") is None
    return op == "index" and len(args) > 1 and any(
        getattr(i, "dtype", None) is not None and str(i.dtype) in ("torch.bool", "torch.uint8") for i in args[1] or ())


def count(step, steps: int, within=None) -> SyncCount:
    """`steps` calls of `step` under both modes' watch: each host read with its lines, those inside a
    `perf_periodic:` range counted apart, as the GPU's count does. `within(step, begin, end)` (workload.Members.within):
    the watch entered and left in the thread that runs each step."""
    watch = Watch(steps)
    run = within or on_this_thread
    for _ in range(steps):
        run(step, watch.__enter__, lambda: watch.__exit__(None, None, None))
    return watch.counted


class Watch:
    """The modes that count host reads while entered (in the thread that runs the steps), into `counted`."""

    def __init__(self, steps: int):
        from torch.utils.weak import WeakIdKeyDictionary

        self.counted = SyncCount(steps=steps)
        self.ranges: list[str] = []  # the record_function ranges open now, innermost last
        self.on_host = WeakIdKeyDictionary()  # tensors made from Python values, or from such tensors alone
        self.on_device = WeakIdKeyDictionary()  # tensors computed from the model's parameters, or made with device=
        self.calling = 0  # > 0 while a call counted as a read runs: the ops it makes are not counted again
        self._modes: tuple = ()

    def __enter__(self) -> Watch:
        self._modes = _modes(self)
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(None, None, None)
        self._modes = ()

    def op(self, func, args: tuple, kwargs: dict):
        """One op the dispatcher runs: a read noted, where its output lives kept."""
        import torch
        from torch.utils._pytree import tree_leaves

        op = func.overloadpacket.__name__
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if op == "_record_function_enter_new":
            self.ranges.append(args[0])
            if args[0].startswith(PERIODIC_PREFIX):
                self.counted.periodic_runs[args[0]] += 1
        elif op == "_record_function_exit" and self.ranges:
            self.ranges.pop()
        elif not self.calling and is_read(op, args, kwargs, func._overloadname) and args[0] not in self.on_host \
                and not _step_counter(args[0]):
            ops = "aten::index > aten::nonzero" if op == "index" else f"aten::{op}"  # a mask's count is a nonzero
            self.note(ops, traceback.extract_stack()[:-1])
        out = func(*args, **kwargs)
        outputs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        self._place(op, inputs, outputs)
        made = next((t.dtype for t in outputs if t.is_floating_point()), None)
        if made is not None and not _fetching():  # what the step computes in; not the batch the loader hands it
            self.counted.dtypes[str(made).removeprefix("torch.")] += 1
        return out

    def _place(self, op: str, inputs: list, outputs: list) -> None:
        import torch

        if op == FROM_PYTHON or (inputs and all(t in self.on_host for t in inputs)):
            self.on_host.update((t, True) for t in outputs)
            return
        for t in outputs:  # an in-place update of a host tensor by a device tensor: the device's
            self.on_host.pop(t, None)
        if any(t in self.on_device or isinstance(t, torch.nn.Parameter) for t in inputs):
            self.on_device.update((t, True) for t in outputs)

    def call(self, func, args: tuple, kwargs: dict):
        """One torch function or Tensor method called: printing a tensor or copying it to the host noted as a read;
        a factory given `device=` by the user's code makes the device's tensor."""
        import torch

        name = getattr(func, "__name__", "")
        tensor = args[0] if args and isinstance(args[0], torch.Tensor) else None
        kind = _read_kind(name, tensor, args, kwargs, self) if tensor is not None and not self.calling else None
        if kind is None:
            out = func(*args, **kwargs)
            if kwargs.get("device") is not None and tensor is None and isinstance(out, torch.Tensor) \
                    and not _is_library(_caller().f_code.co_filename):
                self.on_host.pop(out, None)
                self.on_device[out] = True
            return out
        self.note(f"Tensor.{name} > {READ_BY[kind]}", traceback.extract_stack()[:-1])
        self.calling += 1
        try:
            out = func(*args, **kwargs)
        finally:
            self.calling -= 1
        if kind == "copy" and isinstance(out, torch.Tensor):
            self.on_host[out] = True  # the host's copy: reading it waits for nothing more
        return out

    def note(self, ops: str, stack: list[traceback.FrameSummary]) -> None:
        stack = _callers(stack)
        if any(LOADER_FRAMES in f.filename.replace("\\", "/") for f in stack):
            return
        user, library = lines_of(stack) or ("", _innermost_library(stack))
        source = SyncSource(CALL, ops, user, library)
        phase = next((r for r in reversed(self.ranges) if r.startswith(PERIODIC_PREFIX)), None)
        if phase is not None:
            self.counted.periodic[phase, source] += 1
        else:
            self.counted.sources[source] += 1


def _read_kind(name: str, tensor, args: tuple, kwargs: dict, watch: Watch) -> str | None:
    """"format" where the call prints a tensor of the device's, "copy" where it copies one the step computed on the
    device to the host and waits for it; None where it reads nothing on the host."""
    if name in FORMATS:
        return "format" if tensor not in watch.on_host else None
    if name not in COPIES or tensor not in watch.on_device or tensor in watch.on_host:
        return None
    if name == "to":  # a library's `.to(device)` is its move to the step's device, "cpu" in a smoke run
        import torch

        device, _, non_blocking, _ = torch._C._nn._parse_to(*args[1:], **kwargs)
        if device is None or torch.device(device).type != "cpu" or non_blocking \
                or _is_library(_caller().f_code.co_filename):
            return None  # a dtype's change, a copy into pinned memory that does not wait, or a library's move
    return "copy"


def _modes(watch: Watch) -> tuple:
    """The function mode and the dispatch mode, each handing what it sees to `watch`."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Calls(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return watch.call(func, args, kwargs or {})

    class Reads(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return watch.op(func, args, kwargs or {})

    return Calls(), Reads()


def _caller():
    """The frame that called torch: the first outside this module."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return frame


def _fetching() -> bool:
    """Whether the DataLoader is fetching a batch: a dataset's item, the collate, or a worker's batch unpickled in the
    main thread (which step receives it depends on when the workers' batches arrive, so the ops a step counts would
    move with the machine's load)."""
    frame = sys._getframe(2)
    while frame is not None:
        if LOADER_FRAMES in frame.f_code.co_filename.replace("\\", "/"):
            return True
        frame = frame.f_back
    return False


def _step_counter(tensor) -> bool:
    """A tensor read by an optimizer's own code that is one of its step counters (`state[p]["step"]`)."""
    import torch

    frame = sys._getframe(1)
    while frame is not None:
        if OPTIM_FRAMES in frame.f_code.co_filename.replace("\\", "/"):
            owner = frame.f_locals.get("self")
            if isinstance(owner, torch.optim.Optimizer):
                return any(isinstance(s, dict) and s.get("step") is tensor for s in owner.state.values())
        frame = frame.f_back
    return False


def _innermost_library(stack: list[traceback.FrameSummary]) -> str:
    """The library line of a read no frame of the user's made (a framework's own loop, in its thread)."""
    inner = [f for f in stack if "site-packages" in f.filename or "dist-packages" in f.filename]
    return f"{_short(inner[-1].filename)}:{inner[-1].lineno} in {inner[-1].name}" if inner else ""


def _callers(stack: list[traceback.FrameSummary]) -> list[traceback.FrameSummary]:
    """The stack down to the op's caller: without the frames through which torch calls the modes (a dynamo wrapper,
    `handle_torch_function`) and this module's own."""
    while stack and (stack[-1].filename.replace("\\", "/").endswith(MODE_FRAMES) or stack[-1].filename == __file__):
        stack = stack[:-1]
    return stack
