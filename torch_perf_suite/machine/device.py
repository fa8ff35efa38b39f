"""The device a session measures on: a CUDA GPU, or the CPU for smoke runs."""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass, field
from typing import Callable

from . import nvml
from .environment import environment

_environment = functools.lru_cache(maxsize=1)(environment)  # read once a process


@dataclass
class Device:
    name: str  # torch device string: "cuda" or "cpu"
    env: dict
    # profiles steps and counts their syncs on a GPU (syncs.recording.count_steps, which the session gives it)
    count_steps: Callable | None = field(default=None, repr=False)

    @property
    def is_gpu(self) -> bool:
        return self.name.startswith("cuda")

    def synchronize(self) -> None:
        if self.is_gpu:
            import torch

            torch.cuda.synchronize()

    def clock(self) -> float:
        """Seconds, for timing rounds (each round ends with `synchronize`)."""
        return time.perf_counter()

    def energy_j(self) -> float | None:
        """Joules the GPU used since its driver loaded, where NVML can say (the GPU-side window's power)."""
        return nvml.energy_j(self.env.get("gpu_uuid")) if self.is_gpu else None

    @property
    def monitor(self) -> Callable[[], nvml.Sampler] | None:
        """Makes an NVML sampler to hold around timed rounds; None on the CPU, where there is nothing to sample."""
        uuid = self.env.get("gpu_uuid")
        return (lambda: nvml.Sampler(uuid)) if self.is_gpu else None

    def free_cached_memory(self) -> None:
        """Give back to the GPU what torch's allocator keeps cached after the tests so far (another process is to use
        the GPU: REF's run in a sharded run's worker)."""
        if self.is_gpu:
            import gc

            import torch

            gc.collect()
            torch.cuda.empty_cache()

    def reset_peak_memory(self) -> None:
        if self.is_gpu:
            import torch

            torch.cuda.reset_peak_memory_stats()

    def peak_memory_gb(self) -> float | None:
        if not self.is_gpu:
            return None
        import torch

        return torch.cuda.max_memory_allocated() / 1e9

    def count_syncs(self, step, steps: int, trace_path, all_threads: bool = False):
        """The steps profiled and their syncs counted on this device (`count_steps`, a syncs.SyncCount); None without a
        GPU."""
        if not self.is_gpu:
            return None
        if self.count_steps is None:
            raise RuntimeError(f"{self.name}: a GPU device made without a sync counter (Device.count_steps)")
        return self.count_steps(step, steps, trace_path, all_threads)


def gpu_visible() -> bool:
    """Whether CUDA may find a GPU, told without importing torch: NVML counts one, and CUDA_VISIBLE_DEVICES does not
    hide them all."""
    return bool(nvml.gpus_on_node()) and os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() not in ("", "-1")


def detect_device() -> Device:
    import torch

    return Device("cuda" if torch.cuda.is_available() else "cpu", _environment())


def gpu_count() -> int:
    """CUDA GPUs this process sees (CUDA_VISIBLE_DEVICES applied). It starts CUDA's driver but makes no
    context on any GPU, so the controller of a sharded run may count them before it starts the workers."""
    import torch

    return torch.cuda.device_count()


def gpu_for_worker(index: int, visible: str | None, count: int) -> str:
    """The CUDA_VISIBLE_DEVICES value of the `index`-th pytest-xdist worker of a sharded run: the index-th
    GPU this process sees, named as this process's CUDA_VISIBLE_DEVICES (`visible`) names it, an index or a
    UUID ("GPU-..."), or its plain index where that is unset. `count` is how many GPUs CUDA sees: CUDA
    ignores the entries after one that names no GPU, so only the first `count` entries are real."""
    entries = [e.strip() for e in visible.split(",")][:count] if visible and visible.strip() else [str(i) for i in range(count)]
    if not 0 <= index < len(entries):
        raise ValueError(f"worker {index} has no GPU: {len(entries)} visible"
                         + (f" (CUDA_VISIBLE_DEVICES={visible})" if visible else ""))
    return entries[index]
