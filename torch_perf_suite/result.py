"""What a perf test measured (`Result`): its parts, syncs, counts and notes, and its baseline entry."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import compiled, gates, host_side, instructions, loader, turns
from .parts import PARTS, Parts
from .syncs import SyncCount
from .timing import Throughput

POWER_CAPPED = 0.95  # a GPU-side window that draws this share of the power limit runs at it


def part_entry(t: Throughput) -> dict:
    spread = t.spread_pct
    entry = {"samples_per_s": round(t.median, 1), "spread_pct": None if spread is None else round(spread, 2),
             "rounds": [round(r, 1) for r in t.rounds]}
    if t.watts is not None:
        entry["watts"] = round(t.watts)
    return entry


def power_note(gpu: Throughput | None, limit_w: float | None) -> str | None:
    """Say so where the GPU-side rounds ran at the power limit: there, chips of one model differ."""
    if gpu is None or gpu.watts is None or not limit_w or gpu.watts < POWER_CAPPED * limit_w:
        return None
    return f"GPU-side at the power limit: {gpu.watts:,.0f} of {limit_w:,.0f} W"


@dataclass
class Result:
    test_id: str
    parts: Parts
    syncs: SyncCount | None  # None where nothing was profiled (smoke runs, CPU)
    peak_mem_gb: float | None
    trace: Path | None
    notes: list[str] = field(default_factory=list)
    outcome: str | None = None  # "passed" or "FAILED" once the test's call ended (PerfSession.test_done)
    failure: str | None = None  # a failed test's whole message, every line (the summary line keeps the first only)
    verdicts: dict[str, gates.Verdict] = field(default_factory=dict)  # part -> comparison with the baseline
    extra: dict = field(default_factory=dict)  # columns a test adds to its report row
    compile: compiled.CompileCount | None = None  # what torch.compile did while the windows ran
    instructions: instructions.Counted | None = None  # the loader's instructions per sample (callgrind)
    instructions_note: str | None = None  # why they were not counted, where the workload has a loader_source
    mfu: dict | None = None  # model FLOPs, achieved TFLOP/s and MFU of each part (flops.StepFlops.reading): a reading
    loader_settings: dict | None = None  # what the workload's DataLoader is (loader.describe)
    turns: turns.ByTurns | None = None  # a sample's CPU time timed by turns with REF's (--perf-against)
    seconds: dict[str, float] = field(default_factory=dict)  # where the test's time went, by phase (timing.Laps)
    host: host_side.HostCount | None = None  # the step's host side: Python lines and blocks a step
    reads: SyncCount | None = None  # smoke runs: host reads a step, seen by the dispatcher (host_reads.py)
    # what was left uncompared, each with what covers it where that was judged instead ("" where nothing can): a part,
    # "host" (the step's host side) or "loader" (its settings with its cost per sample). Under --perf-against
    # --perf-strict a test fails on every one that `judged` does not cover (`holes`)
    unjudged: list[tuple[str, str]] = field(default_factory=list)
    judged: set[str] = field(default_factory=set)  # the parts compared, and "host", "loader" where they were
    compared: bool = False  # perf.assert_baseline(result) was called
    # a test spread over several GPUs (ranks.py): each rank's own count, its key in the baseline file (the GPUs' count
    # and topology in it), the GPUs it ran on, and its samples/s per GPU over one GPU's in the same run
    ranks: dict[int, SyncCount | None] | None = None
    key: str = ""
    env: dict = field(default_factory=dict)  # what differs from the session's environment: the GPUs of a spread test
    scaling: float | None = None

    @property
    def baseline_key(self) -> str:
        return self.key or self.test_id

    def holes(self) -> list[str]:
        never = [] if self.compared else ["perf.assert_baseline(result) was never called: nothing of it was compared"]
        return never + [what for what, covered_by in self.unjudged if not self.is_judged(covered_by)]

    def is_judged(self, what: str) -> bool:
        """Whether `what` ("host", "loader" or a part) was judged: a part compared, or its reading covered."""
        return what in self.judged or what in PARTS and self.cover_of(what) in self.judged

    def cover_of(self, part: str) -> str:
        """What judges a host-bound `part` where its number is a reading: the GPU-side step by its host side, a
        loader-fed pipeline or the loader by the loader's CPU work (its instructions or its CPU time by turns)."""
        fed = self.loader_settings is not None or self.parts.loader is not None
        return "loader" if part == "loader" or part == "pipeline" and fed else "host"

    @property
    def unit(self) -> loader.UnitCost | None:
        """The loader's cost per sample inside its workers, from the loader's window (the pipeline's where none)."""
        window = self.parts.loader or self.parts.pipeline
        return window.unit if window is not None else None

    def counts(self) -> dict:
        """What this test counted, as its baseline entry keeps it: kernel launches a step by family, bytes copied a
        step by kind, the steps' peak memory, torch.compile's graphs where it compiled, and the host side's Python
        lines and blocks a step; a test over several GPUs, each rank's count under "ranks"."""
        if self.ranks is not None:
            return {"ranks": {str(rank): _counted(s) for rank, s in sorted(self.ranks.items()) if s is not None}}
        found = _counted(self.syncs)
        if self.compile is not None and self.compile.compiled:
            found["compile"] = self.compile.as_entry()
        if self.host is not None:
            found["host"] = self.host.entry()
        return found

    @property
    def samples_per_s(self) -> float:
        return self.parts.pipeline.median

    def baseline_entry(self, env: dict) -> dict:
        p = self.parts
        return {
            "parts": {name: part_entry(t) for name in PARTS if (t := p.get(name)) is not None and not t.brief},
            "bottleneck": p.bottleneck,
            "efficiency": None if p.efficiency is None else round(p.efficiency, 3),
            "gpu_busy_pct": None if p.gpu_busy_pct is None else round(p.gpu_busy_pct, 1),
            "syncs_per_step": round(self.syncs.per_step, 3) if self.syncs else None,
            "peak_mem_gb": None if self.peak_mem_gb is None else round(self.peak_mem_gb, 2),
            "counts": self.counts(),
            "loader_unit": self.unit.entry() if self.unit else None,
            **({} if self.scaling is None else {"scaling": round(self.scaling, 3)}),
            "env": {**env, **self.env},
        }


def _counted(syncs: SyncCount | None) -> dict:
    """Kernel launches a step by family, bytes copied a step by kind and the steps' peak memory, from one profiled
    window (one process's)."""
    found: dict = {}
    k = syncs.kernels if syncs is not None else None
    if k is not None:
        found["kernels_per_step"] = {f: round(n, 3) for f, n in k.families.items()}
        found["copies_per_step"] = {kind: round(n) for kind, n in k.copies_per_step.items()}
    if syncs is not None and syncs.step_peak_bytes is not None:
        found["step_peak_bytes"] = syncs.step_peak_bytes
    return found
