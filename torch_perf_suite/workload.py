"""What the `perf` fixture measures: a workload, and a helper that makes one from a training loop's parts."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, Hashable, Iterator, Protocol, runtime_checkable

from .machine.host import workers_cpu_s


@runtime_checkable
class Workload(Protocol):
    """Anything with a `step()` (one training step, the batch pulled as the user's loop pulls it) and its
    `batch_size`. The more of the optional members in `Members` it has, the more the harness can tell apart;
    the harness reads them once, with `members(workload)`."""

    batch_size: int

    def step(self) -> Any: ...


@dataclass(frozen=True)
class Members:
    """A workload's optional members, each defaulting to what the harness takes where the workload has none
    (a step, key, source or close given as None is one it has not):

    gpu_step()       the same step on a batch already on the device: the GPU-side number; none where `step`
                     is that already (a resident batch)
    loader_step()    the next batch delivered to the device, no model: the loader-alone number
    loader           the torch.utils.data.DataLoader the batches come from: its settings are compared with the
                     recorded ones and its batches timed per sample inside its workers (loader/cost.py); a workload
                     with a loader_step must have it
    warmup_steps     steps before the pipeline reaches its steady state (the loader's prefetch drained)
    cycle_steps      batches arrive in bursts of this many (one per worker): loader-fed rounds hold whole bursts
    gpu_cycle_steps  the GPU-side step's own period (a phase that runs every k steps)
    loader_key       hashable: workloads with equal keys share a loader, measured once a session
    gpu_key          hashable: workloads with equal keys share a GPU-side step, measured once a session
    loader_cpu_s()   CPU seconds its loader's worker processes have run, None where none run: the
                     report's loader/CPU s, the loader's cost per sample (reported, not compared)
    loader_source    ("package.module:function", {keyword arguments}): a function returning the loader's
                     (dataset, collate_fn), which a callgrind process imports to count the loader's
                     instructions per sample (loader/instructions.py), and under --perf-against two processes,
                     one in REF's files, to time a sample's CPU time by turns (loader/turns.py); arguments
                     must be JSON
    close()          called when the test ends (stop the loader's workers)
    all_threads      its steps run on a thread of their own (a framework's loop, frameworks.py): the profiled
                     window records every thread's events, not only the harness's
    within(step, begin, end)
                     such a workload's way to count in that thread: one call of `step` (its step or gpu_step) with
                     begin() called in the thread that runs it as it starts and end() as it ends; the step's host
                     side, its FLOPs and its host reads are counted there. Without it, a workload with all_threads
                     has none of them counted
    """

    gpu_step: Callable[[], Any] | None = None
    loader_step: Callable[[], Any] | None = None
    loader: Any | None = None
    warmup_steps: int = 0
    cycle_steps: int = 1
    gpu_cycle_steps: int = 1
    loader_key: Hashable | None = None
    gpu_key: Hashable | None = None
    loader_cpu_s: Callable[[], float | None] | None = None
    loader_source: tuple[str, dict] | None = None
    close: Callable[[], None] | None = None
    all_threads: bool = False
    within: Callable[[Callable[[], Any], Callable[[], None], Callable[[], None]], Any] | None = None

    @property
    def countable(self) -> bool:
        """Whether what a tracer or a mode counts in the thread that calls begin() is the step's work."""
        return not self.all_threads or self.within is not None


def members(workload) -> Members:
    """The workload's optional members, read once: the default of each it does not have."""
    return Members(**{f.name: getattr(workload, f.name, f.default) for f in fields(Members)})


def loader_pacing(loader) -> tuple[int, int]:
    """(cycle_steps, warmup_steps) of a DataLoader: its workers deliver a batch each in turn, and its prefetch
    drains after each worker's prefetched batches and one more have been taken."""
    workers = getattr(loader, "num_workers", 0)
    return max(workers, 1), workers * ((getattr(loader, "prefetch_factor", None) or 2) + 1) + 2 if workers else 0


def end_workers(loader) -> None:
    """A persistent_workers DataLoader's workers ended now, as its last iterator would end them: a framework's objects
    hold each other (a Lightning Trainer and its module), so the loader is freed by the cycle collector, which waits
    5 s a worker for them (its queues are closed before its iterator asks the workers to stop)."""
    iterator = getattr(loader, "_iterator", None)  # torch keeps a persistent loader's iterator there
    if iterator is not None and hasattr(iterator, "_shutdown_workers"):
        iterator._shutdown_workers()
        loader._iterator = None


class TrainingStep:
    """A workload made of a model, its optimizer, a loss and a DataLoader that yields (inputs, targets).

    step() takes the loader's next batch to `device` (non-blocking), runs forward, loss, backward and the
    optimizer's step, and returns the loss; gpu_step() does the same on one batch kept on the device;
    loader_step() only delivers the next batch. Pass your own `train(inputs, targets)` to replace what
    runs on a batch (a GradScaler, gradient clipping, a metric update). At the end of an epoch the loader
    starts again: give it `persistent_workers=True` (or more batches than a window takes), or a timed round
    pays for starting its workers. Name the function that builds the loader's dataset and collate_fn in
    `loader_source` ("module:function", {keyword arguments}), and its instructions per sample are counted and,
    under --perf-against, its CPU time per sample timed by turns with REF's (Members above)."""

    def __init__(self, model, optimizer, loss_fn: Callable, loader, device, *,
                 train: Callable | None = None, non_blocking: bool = True,
                 loader_source: tuple[str, dict] | None = None):
        self.model, self.optimizer, self.loss_fn, self.loader = model, optimizer, loss_fn, loader
        self.loader_source = loader_source
        self.device, self.non_blocking = device, non_blocking
        self.batch_size = loader.batch_size
        self.cycle_steps, self.warmup_steps = loader_pacing(loader)
        self._own_train = train  # not self's bound method: kept on self, that holds self in a reference cycle, and a
        # persistent_workers loader that only the cycle collector frees waits 5 s a worker for its workers to end (its
        # queues are closed before its iterator's __del__ asks them to stop)
        self._batches: Iterator | None = None
        self._resident: tuple | None = None

    def _default_train(self, inputs, targets):
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(inputs), targets)
        loss.backward()
        self.optimizer.step()
        return loss

    def _next(self):
        while True:
            if self._batches is None:
                self._batches = iter(self.loader)
            try:
                return next(self._batches)
            except StopIteration:  # an epoch ended: start the next one
                self._batches = None

    def loader_cpu_s(self) -> float | None:
        return workers_cpu_s(self._batches)

    def loader_step(self):
        return tuple(t.to(self.device, non_blocking=self.non_blocking) for t in self._next())

    def step(self):
        return (self._own_train or self._default_train)(*self.loader_step())

    def gpu_step(self):
        if self._resident is None:
            self._resident = self.loader_step()
        return (self._own_train or self._default_train)(*self._resident)

    def close(self) -> None:
        self._batches = None  # a loader's workers stop with its iterator (a persistent_workers loader keeps its own)
