"""Training loops that a framework runs, measured as the framework trains: Lightning's `Trainer.fit` and Hugging
Face's `Trainer.train`.

The framework keeps its loop (its precision plugin, optimizer step, hooks and callbacks): it runs in a thread of its
own, and a callback holds it at the end of each batch until the harness asks for the next step. So each `step()` is
one batch of the framework's own loop, the next batch's fetch included, and the harness times and profiles steps as
it does a hand-built `TrainingStep` (the profiled window records every thread: `Members.all_threads`).

Why driven, not observed: a callback that only watched a free-running `fit` could time its pipeline, but not the same
steps on a resident batch (the GPU-side number), the loader alone, or the profiled window, which the harness opens
and closes between steps. Holding the loop costs two thread hand-overs a step (microseconds, against steps of
milliseconds); docs/measurements/frameworks.md has the comparison with an unobserved `fit`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import threading
from typing import Any, Callable, Iterable

from .counts import uncounted
from .workload import end_workers, loader_pacing


class LoopEnded(RuntimeError):
    """The framework's loop stopped on its own while the harness wanted more steps."""


class _Source:
    """The iterable the framework trains from: the user's loader, over and over (one endless epoch), or one batch
    kept on the device while `resident` is set (the GPU-side step: the framework's own move to the device is then a
    no-op)."""

    def __init__(self, loader: Iterable, to_device: Callable[[Any], Any]):
        self.loader, self.to_device = loader, to_device
        self.resident = False
        self._kept = None

    def kept(self):
        if self._kept is None:
            self._kept = self.to_device(next(iter(self.loader)))
        return self._kept

    def __iter__(self):
        while True:
            if self.resident:
                yield self.kept()
                continue
            for batch in self.loader:
                yield batch
                if self.resident:
                    break


class DrivenLoop:
    """A workload whose steps are a framework's loop, run in a thread and held between steps.

    `run()` runs the loop (it does not return while steps are wanted); the framework's callback calls `batch_done()`
    at the end of each batch, which returns False once the harness is done (stop the loop there). `within(step, begin,
    end)`: one step with begin() and end() called in the loop's own thread as it starts and ends (a tracer, a dispatch
    mode and a thread's context switches are that thread's own): its host side, FLOPs and host reads are counted there.
    """

    all_threads = True

    def __init__(self, run: Callable[[], Any], batch_size: int, loader: Iterable, to_device: Callable[[Any], Any],
                 what: str, loader_source: tuple[str, dict] | None = None):
        self.batch_size, self.what, self.loader, self.loader_source = batch_size, what, loader, loader_source
        self.source = _Source(loader, to_device)
        self.cycle_steps, self.warmup_steps = loader_pacing(loader)
        self._run, self._thread = run, None
        self._go, self._done = threading.Semaphore(0), threading.Semaphore(0)
        self._stop, self._error, self._steps = False, None, 0
        self._thread_ended, self._batches = False, None
        self._around: tuple[Callable[[], None], Callable[[], None]] | None = None  # begin and end of the next step
        self._ending: Callable[[], None] | None = None  # end() of the step running in the loop's thread

    # the framework's side
    @uncounted
    def batch_done(self) -> bool:
        self._steps += 1
        self._end()
        self._done.release()
        self._go.acquire()
        self._begin()
        return not self._stop

    @uncounted
    def _begin(self):
        """In the loop's thread, as a step begins: begin() of a step run `within`."""
        if self._around is not None:
            begin, self._ending = self._around
            self._around = None
            begin()

    @uncounted
    def _end(self):
        """In the loop's thread, as a step ends, before the harness goes on: its end()."""
        if self._ending is not None:
            end, self._ending = self._ending, None
            end()

    def _target(self):
        try:
            self._begin()
            self._run()
        except BaseException as e:  # noqa: BLE001 - handed to the harness's thread, which raises it
            self._error = e
        finally:
            self._thread_ended = True
            self._done.release()

    # the harness's side
    def step(self):
        self.source.resident = False
        return self._one()

    def within(self, step: Callable[[], Any], begin: Callable[[], None], end: Callable[[], None]):
        """`step` (self.step or self.gpu_step) with begin() called in the loop's thread as the step starts and end() as
        it ends (Members.within)."""
        self._around = (begin, end)
        return step()

    def gpu_step(self):
        self.source.resident = True
        return self._one()

    def loader_step(self):
        if self._batches is None:
            self._batches = iter(_Source(self.source.loader, self.source.to_device))
        return self.source.to_device(next(self._batches))

    def _one(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._target, name=f"perf: {self.what}", daemon=True)
            self._thread.start()
        else:
            self._go.release()
        self._done.acquire()
        if self._thread_ended:
            if self._error is not None:
                raise self._error
            raise LoopEnded(f"{self.what} ended after {self._steps} step(s) while the harness wanted more: build it "
                            "without a step or epoch limit, and let no callback stop it (Lightning: max_steps=-1, "
                            "max_epochs=-1; Hugging Face: max_steps=10**9); the harness stops it")

    def close(self) -> None:
        self._batches = None
        if self._thread is not None and not self._thread_ended:
            self._stop = True
            self._go.release()
            self._thread.join()
        end_workers(self.loader)


LIGHTNING_FROM = (2, 0)  # the releases whose loop the harness drives: Callback.on_train_batch_end, should_stop
TRANSFORMERS_FROM = (4, 40)  # TrainerCallback.on_step_end, get_train_dataloader, add_callback, max_steps


def _supported(what: str, distribution: str, least: tuple[int, int]) -> None:
    """A framework of a release the harness does not drive refused at once, in a line."""
    version = importlib.metadata.version(distribution)
    numbers = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    if numbers < least:
        raise ValueError(f"{what}: {distribution} {version} is older than the harness drives ({'.'.join(map(str, least))} "
                         f"or later): its loop's hooks differ; upgrade it (pip install -U {distribution})")


def _to_device(device) -> Callable[[Any], Any]:
    import torch
    from torch.utils._pytree import tree_map_only

    return lambda batch: tree_map_only(torch.Tensor, lambda t: t.to(device, non_blocking=True), batch)


def lightning_fit(trainer, module, loader, device, *, batch_size: int | None = None,
                  loader_source: tuple[str, dict] | None = None) -> DrivenLoop:
    """A workload of `trainer.fit(module, loader)`: each step is one batch of Lightning's own loop. Give the Trainer
    no step or epoch limit (`max_steps=-1`); the harness stops it when the test's measurements are done.
    `loader_source`, as TrainingStep's: the loader's factory, counted and timed by turns."""
    # Lightning's Trainer as `lightning` ships it, or as the older `pytorch_lightning` does: the callback is its own kind
    package = type(trainer).__module__.partition(".")[0]
    framework = importlib.import_module("lightning.pytorch" if package == "lightning" else package)
    _supported("lightning_fit", "lightning" if package == "lightning" else "pytorch-lightning", LIGHTNING_FROM)
    if getattr(trainer, "max_steps", -1) not in (-1, None):
        raise ValueError(f"lightning_fit: the Trainer stops after max_steps={trainer.max_steps}; build it with "
                         "max_steps=-1, max_epochs=-1 (the harness stops it)")

    class Held(framework.Callback):
        @uncounted
        def on_train_batch_end(self, trainer, *args):
            if not loop.batch_done():
                trainer.should_stop = True

    trainer.callbacks.append(Held())
    size = batch_size or getattr(loader, "batch_size", None)
    if not size:
        raise ValueError("lightning_fit: the loader has no batch_size; pass batch_size=")
    loop = DrivenLoop(lambda: trainer.fit(module, train_dataloaders=loop.source), size, loader, _to_device(device),
                      "Lightning's Trainer.fit", loader_source)
    return loop


def hf_train(trainer, *, batch_size: int | None = None, loader_source: tuple[str, dict] | None = None) -> DrivenLoop:
    """A workload of Hugging Face's `trainer.train()`: each step is one optimizer step of its own loop (its
    `gradient_accumulation_steps` batches). Give its `TrainingArguments` a `max_steps` beyond any test's (10**9):
    the harness stops it when the test's measurements are done. `loader_source`, as TrainingStep's: a function that
    builds the Trainer's dataset and data collator, counted and timed by turns."""
    _supported("hf_train", "transformers", TRANSFORMERS_FROM)
    from transformers import TrainerCallback

    class Held(TrainerCallback):
        @uncounted
        def on_step_end(self, args, state, control, **kwargs):
            if not loop.batch_done():
                control.should_training_stop = True

    args = trainer.args
    if args.max_steps <= 0:
        raise ValueError("hf_train: the Trainer's max_steps is not set; give its TrainingArguments max_steps=10**9 "
                         "(the harness stops it)")
    loader = trainer.get_train_dataloader()  # the Trainer's own, which also moves each batch to the device
    trainer.get_train_dataloader = lambda: loop.source  # one endless epoch of it
    trainer.add_callback(Held())
    size = batch_size or args.per_device_train_batch_size * args.gradient_accumulation_steps
    loop = DrivenLoop(trainer.train, size, loader, _to_device(args.device), "Hugging Face's Trainer.train", loader_source)
    return loop
