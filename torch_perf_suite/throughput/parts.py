"""A scenario's parts, measured in one run, and which of them limits it.

- pipeline: the training step as the user runs it, pulling each batch from its loader;
- gpu:      the same step on a batch already on the device (nothing else changes), what the GPU and
            the host's kernel launches can do with this recipe;
- loader:   the loader alone delivering batches to the device (the copy included), no model;
- loader_cpu: the loader window's samples per CPU second of its worker processes: what loading costs,
            which the workers' waiting leaves alone (where the workload reads its workers' CPU time).
            Reported and recorded, not compared: on the H200 machines measured it moved with the
            host's load as much as the wall-clock number did.

The slower of gpu and loader is the bottleneck; pipeline / min(gpu, loader) is the pipeline's
efficiency: how well it overlaps loading with computing. Where the GPU's kernels run for less than
LAUNCH_BOUND of the GPU-side step (kernel time per step from the profiled window), the GPU waits for
the host to launch work: the bottleneck is then "host launch overhead", and the GPU-side number
follows the host's CPU, not the GPU.

A workload is any object with `step()` and `batch_size`; its optional members, and their defaults, are
workload.Members.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from ..settings import Measure
from ..workload import members
from .timing import Throughput, measure_throughput

PARTS = ("pipeline", "gpu", "loader", "loader_cpu")
TIMED = ("pipeline", "gpu", "loader")  # the parts with a window of their own; loader_cpu is the loader's
NAMES = {"pipeline": "pipeline", "gpu": "GPU-side", "loader": "loader"}  # each timed part as a sentence names it
LAUNCH_BOUND = 0.8
# A loader this much faster than the GPU-side step keeps its prefetch queue full through the
# pipeline: the batches wait for the GPU, not the GPU for the next burst of batches, so the
# pipeline's rounds need not hold whole bursts nor its warm-up drain the queue (the uint8 ladder steps' loaders,
# docs/measuring.md).
LOADER_HEADROOM = 1.25
# against REF a loader-fed window is a host-bound reading (gates.part_verdict): timed only as long as what is judged needs
BRIEF = {
    "pipeline": "pipeline timed briefly (its warm-up and one round): against REF a loader-fed pipeline is a reading; "
                "its GPU-side step and its loader are judged",
    "loader": "loader timed briefly (its warm-up and one round): against REF its number is a reading; its settings, "
              "blocks, waiting and CPU work are judged",
}
GPU_WARMUP = 3  # the GPU-side step reuses the compiled model: a few steps settle clocks and caches


@dataclass
class Parts:
    batch_size: int
    pipeline: Throughput
    gpu: Throughput | None = None
    loader: Throughput | None = None
    gpu_busy_s: float | None = None  # GPU kernel time per step, from the profiled window
    measured_in: dict[str, str] = field(default_factory=dict)  # part -> the test that measured it, where another did

    @property
    def loader_from(self) -> str | None:
        return self.measured_in.get("loader")

    def get(self, name: str) -> Throughput | None:
        return getattr(self, name)

    @property
    def loader_cpu(self) -> Throughput | None:
        return None if self.loader is None else self.loader.per_cpu_s

    @property
    def gpu_busy_pct(self) -> float | None:
        """GPU kernel time as a share of the GPU-side step's wall time."""
        if self.gpu_busy_s is None or self.gpu is None:
            return None
        return 100 * self.gpu_busy_s * self.gpu.median / self.batch_size

    @property
    def launch_bound(self) -> bool:
        pct = self.gpu_busy_pct
        return pct is not None and pct < 100 * LAUNCH_BOUND

    @property
    def bottleneck(self) -> str | None:
        limits = {name: t.median for name, t in (("loader", self.loader), ("gpu", self.gpu)) if t is not None}
        if not limits:
            return None
        if min(limits, key=limits.get) == "loader":
            return "loader"
        return "host launch overhead" if self.launch_bound else "GPU"

    @property
    def efficiency(self) -> float | None:
        """None where nothing else was timed, or the pipeline or its bottleneck was only timed briefly (`BRIEF`)."""
        limits = [t for t in (self.loader, self.gpu) if t is not None]
        least = min(limits, key=lambda t: t.median, default=None)
        return None if least is None or least.brief or self.pipeline.brief else self.pipeline.median / least.median

    @property
    def brief(self) -> tuple[str, ...]:
        """The parts timed briefly against REF (`BRIEF`)."""
        return tuple(name for name in TIMED if (t := self.get(name)) is not None and t.brief)


def loader_ahead(gpu: Throughput | None, loader: Throughput | None) -> bool:
    """Whether the loader outruns the GPU-side step by LOADER_HEADROOM (both measured)."""
    return gpu is not None and loader is not None and loader.median >= LOADER_HEADROOM * gpu.median


def for_smoke(measure: Measure) -> Measure:
    """One round of two steps, no growing: proves the windows run, measures nothing."""
    return replace(measure, warmup=1, rounds=1, max_rounds=1, steps=2, round_s=0.0)


class Windows:
    """The timed windows of one workload, with the settings of one test."""

    def __init__(self, workload, measure: Measure, device, smoke: bool, as_ref: bool = False, vs_ref: bool = False,
                 parts: tuple[str, ...] | None = None):
        """`device` gives `synchronize()`, which ends each round, and `clock()`, which times it. `as_ref`: REF's run
        under --perf-against, which times what the head gates against it (against/ref.py's AS_REF); `vs_ref`: the
        head's run under --perf-against. `parts`: those the test times, of those its workload has (all where None)."""
        self.workload, self.device, self.smoke, self.as_ref, self.vs_ref = workload, device, smoke, as_ref, vs_ref
        self.members = members(workload)  # its optional members, read once
        self.measure = for_smoke(measure) if smoke else measure
        # the GPU-side and loader numbers, where measured: set by the caller before the pipeline's window
        self.gpu: Throughput | None = None
        self.loader: Throughput | None = None
        self.timer = None  # a loader.Timer attached to the workload's DataLoader: its cost per sample, per window
        # the parts this test times, in the order they are timed (Measuring._time): a loader alone is its pipeline
        self.wanted = tuple(p for p in ("gpu", "loader", "pipeline") if p in (parts or self.available()))

    @property
    def loader_ahead(self) -> bool:
        return loader_ahead(self.gpu, self.loader)

    @property
    def pipeline_brief(self) -> bool:
        """Against REF a loader-fed pipeline is a host-bound reading, never gated (gates.part_verdict): where its GPU-side
        number and its loader's window are timed apart (and judged), its steps only warm the profiled ones. So in
        REF's run, and in the head's unless the loader outruns the GPU-side step: that pipeline is the GPU's, which a
        claim in the run holds to (the ladder's ceiling), and takes seconds, not the drain and the bursts of a
        loader-bound one (docs/measurements/merge-gate.md)."""
        if self.gpu is None or self.loader is None:
            return False
        return self.as_ref or (self.vs_ref and not self.loader_ahead)

    @property
    def loader_brief(self) -> bool:
        """Against REF the loader's number is a reading too (gates.part_verdict): what is judged of its window is its cost per
        sample in the workers (its blocks), which a round of whole bursts gives; its samples/s decide only whether
        the pipeline is the GPU's (`loader_ahead`). Timed whole where it is the test's pipeline (a worker sweep's claims
        are ratios within the run) or in a smoke run (one round already)."""
        return (self.as_ref or self.vs_ref) and not self.smoke and "pipeline" in self.wanted

    def _time(self, step, warmup: int, runner=None, cycle: int = 1, energy=None, extend: bool = False,
              least_step_s: float = 0.0, cpu=None, monitor=None, measure: Measure | None = None) -> Throughput:
        """`extend`: add rounds up to max_rounds while the median's interval is wider than ci_pct. Only
        GPU-side numbers are: host-bound rounds spread too widely for two more rounds to narrow them
        (docs/measuring.md, "The windows"), and the confirmation of a failure is what guards those gates."""
        m = measure or self.measure
        kwargs = {"runner": runner} if runner is not None else {}
        return measure_throughput(
            step, self.device.synchronize, clock=self.device.clock, batch_size=self.workload.batch_size, warmup=warmup,
            rounds=m.rounds, steps=m.steps, cycle=1 if self.smoke else cycle, round_s=m.round_s,
            max_rounds=m.max_rounds if extend else m.rounds, ci_pct=m.ci_pct, energy=energy, least_step_s=least_step_s,
            cpu=cpu, monitor=monitor, **kwargs,
        )

    def available(self) -> tuple[str, ...]:
        o = self.members
        return ("pipeline",) + tuple(p for p, step in (("gpu", o.gpu_step), ("loader", o.loader_step)) if step is not None)

    def time(self, part: str, runner=None) -> Throughput:
        """Warm up and time one part; `runner` (pytest-benchmark's pedantic) drives its first rounds. The loader's
        window (the pipeline's, where it has none) carries the loader's cost per sample inside its workers."""
        unit_window = part == ("loader" if "loader" in self.available() else "pipeline")
        if self.timer is None or not unit_window:
            return self._time_part(part, runner)
        since = time.monotonic_ns()
        measured = self._time_part(part, runner)
        return replace(measured, unit=self.timer.cost(since, time.monotonic_ns(), alone_only=self.smoke))

    def _time_briefly(self, step, runner, **kwargs) -> Throughput:
        """A brief window (`BRIEF`): its warm-up, then one round of the least steps (in whole `cycle`s)."""
        brief = replace(self.measure, rounds=1, max_rounds=1, round_s=0.0)
        return replace(self._time(step, self.measure.warmup, runner, measure=brief, **kwargs), brief=True)

    def _time_part(self, part: str, runner=None) -> Throughput:
        w, o, m = self.workload, self.members, self.measure
        cycle = o.cycle_steps
        monitor = getattr(self.device, "monitor", None)  # what nvidia-smi shows while the GPU trains (not for the loader)
        if part == "pipeline":
            if self.pipeline_brief:
                return self._time_briefly(w.step, runner)
            resident = "gpu" not in self.available()  # the pipeline is the GPU-side step
            if self.loader_ahead:  # whole metric cycles still, not whole bursts of batches
                return self._time(w.step, m.warmup, runner, cycle=o.gpu_cycle_steps, monitor=monitor)
            warmup = m.warmup if self.smoke else max(m.warmup, o.warmup_steps)
            least = w.batch_size / self.loader.median if self.loader is not None else 0.0  # no faster than the loader
            return self._time(w.step, warmup, runner, cycle=cycle, extend=resident, least_step_s=least,
                              energy=getattr(self.device, "energy_j", None) if resident else None, monitor=monitor)
        if part == "gpu":
            return self._time(o.gpu_step, m.warmup if self.smoke else GPU_WARMUP, runner,
                              cycle=o.gpu_cycle_steps, energy=getattr(self.device, "energy_j", None),
                              extend=True, monitor=monitor)
        if part == "loader":
            if self.loader_brief:  # one round of whole bursts: the queue's drain moves the reading only
                return self._time_briefly(o.loader_step, runner, cycle=cycle, cpu=o.loader_cpu_s)
            # the workers refilled their prefetch queue while the loader was not read: drain it first
            warmup = m.warmup if self.smoke else o.warmup_steps
            return self._time(o.loader_step, warmup, runner, cycle=cycle, cpu=o.loader_cpu_s)
        raise ValueError(f"unknown part {part!r}; expected one of {TIMED}")


def parts_line(p: Parts) -> str:
    names = [("pipeline", p.pipeline), ("GPU-side", p.gpu), ("loader", p.loader)]
    shown = ", ".join(f"{n} {t.median:,.0f}" for n, t in names if t is not None)
    cpu = f"; loader {p.loader_cpu.median:,.0f} samples per worker CPU second" if p.loader_cpu is not None else ""
    return f"parts (samples/s): {shown}; bottleneck: {p.bottleneck}{cpu}"
