"""How the `perf` fixture measures a workload, phase by phase, each phase's seconds lapped (timing.Laps):

    build          the test's own code before `measure` (the recipe built, the model moved)
    loader alone   the loader described and a sample's cost timed alone (loader.observe); against REF, a sample's CPU
                   time timed by turns with REF's (turns.py)
    compile, warm-up, timed
                   the GPU-side, loader and pipeline windows (a part measured in another test is taken from it)
    profiled       the profiled steps: syncs, kernels, bytes copied, peak memory
    host counted   the step's host side: Python lines and blocks a step, over GPU-side steps under a tracer
    instructions   the loader's instructions per sample (callgrind; a recorded count where its code is unchanged)
    FLOPs          the step's model FLOPs

No verdict is made here; `Measuring.run` returns what was measured as a `Result`.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

from . import compiled, flops, gates, host_reads, host_side, instructions, loader, turns
from .parts import BRIEF, PARTS, Parts, Windows
from .result import Result, part_entry, power_note
from .session_view import SessionView
from .settings import Measure

READS_NOT_COUNTED = "host reads not counted (the smoke run's sync check)"


@dataclass
class Measuring:
    session: SessionView
    test_id: str
    settings: Measure
    smoke: bool
    pedantic: Callable  # pytest-benchmark's pedantic runner, which times the first rounds of one part a test
    tmp_path: Callable[[], Path]  # where the profiled window's trace is written
    info: dict  # pytest-benchmark's extra_info

    def run(self, workload, parts: tuple[str, ...] | None) -> tuple[Result, Windows]:
        laps = self.session.laps_of(self.test_id)
        laps.lap("build")
        dev = self.session.device
        windows = Windows(workload, self.settings, dev, self.smoke, self.session.as_ref, self.session.ref is not None, parts)
        # a count beside a launch-bound GPU-side window takes the host's time from its launches (docs/counted-gates.md):
        # there, it starts after the timed windows
        count_after = gates.launch_bound(self.session.records.baseline(self.test_id))
        if not count_after:
            self._begin_instructions(windows.members.loader_source)
        laps.lap("instructions")  # the digest of the loader's code, and callgrind's process started
        keys = self._shared_keys(windows)
        described, unit_note = self._observe(windows, keys)
        by_turns, turns_note = self._by_turns(windows, keys)
        self._turns_settled()
        laps.lap("loader alone")
        wanted = windows.wanted
        with compiled.watch() as compile_count:
            measured, measured_in = self._time(windows, wanted, keys)
        laps.lap("timed")
        if count_after:
            self._begin_instructions(windows.members.loader_source)
        warm = sum(t.warmup_s for part, t in measured.items() if part not in measured_in)
        laps.split("timed", compile=compile_count.compile_s, **{"warm-up": warm - compile_count.compile_s})
        parts = self._parts(workload, windows, wanted, measured, measured_in)
        # a smoke run on a GPU profiles its steps too: its syncs are checked as a measured run's (the merge gate's sync
        # pass); without a GPU, the dispatcher counts the steps' host reads instead
        on_gpu = dev.is_gpu
        result = self._profile(workload, windows, parts, profiled="pipeline" in wanted and (on_gpu or not self.smoke))
        if self.smoke and not on_gpu:
            count_reads(result, workload, windows.members, self.settings.profile_steps)
        laps.lap("profiled")
        if "gpu" in wanted or windows.available() == ("pipeline",):  # a GPU-side step, or a pipeline that is one
            # in every test that has it: cheap, and REF's has it too
            count_host(result, workload, windows.members, self.settings.profile_steps, self.smoke, dev.synchronize)
        laps.lap("host counted")
        result.compile, result.loader_settings, result.seconds = compile_count, described, laps.seconds
        result.turns = by_turns
        # a shared window: said where it was measured; a smoke run times only the samples made alone
        timed_here = result.unit is not None and result.parts.loader_from is None and not self.smoke
        result.notes.extend(filter(None, [unit_note, turns_note, timed_here and _parallelism(result, windows.members.loader),
                                          compile_count.cache_hits and f"compiled model taken from the on-disk compile cache "
                                          f"({compile_count.cache_hits} lookups answered)"]))
        self._count_instructions(result, windows.members.loader_source)
        laps.lap("instructions")
        if result.syncs is not None or self.smoke:  # a smoke run counts them too, to try the counting on every scenario
            count_flops(result, windows.members, workload, self.session.shared, self.smoke, dev.env["gpu"])
        laps.lap("FLOPs")
        self._note_measured(result, measured, measured_in)
        return result, windows

    def _shared_keys(self, windows: Windows) -> dict:
        """The same loader, or the same GPU-side step, measured the same way is measured once a session: its key."""
        members = windows.members
        return {part: (part, key, self.settings)
                for part, key in (("loader", members.loader_key), ("gpu", members.gpu_key)) if key is not None}

    def _observe(self, windows: Windows, keys: dict) -> tuple[dict | None, str | None]:
        """The loader described, and timed per sample where its window is measured in this test."""
        shared = keys.get("loader") in self.session.shared
        # a smoke run times it only against REF (its blocks and waiting a sample, on this host): on a CPU that is the
        # loader's one timed judgement (CI's job against the base)
        untimed = self.smoke and not (self.session.ref or self.session.as_ref)
        folder = None if untimed or shared else self.session.loader_folder(self.test_id)
        described, windows.timer, unit_note = loader.observe(windows.members, folder, "the workload")  # or Undescribable
        return described, unit_note

    def _by_turns(self, windows: Windows, keys: dict) -> tuple[turns.ByTurns | None, str | None]:
        """Against REF, where this test times its loader and names it by a `loader_source`: a sample's CPU time timed by
        turns with REF's, and once more in fresh processes where it rose past the tolerance (turns.verdict judges both)."""
        session, source = self.session, windows.members.loader_source
        if session.turns is None or self.smoke or keys.get("loader") in session.shared \
                or session.ref.status.get(self.test_id) != "passed":  # REF recorded nothing to judge it against
            return None, None
        if source is None:
            return None, None if windows.members.loader is None else (
                "loader CPU time not timed by turns: the workload names no loader_source, the function that builds its "
                "dataset and collate_fn (TrainingStep(..., loader_source=(\"module:function\", {...})))")
        try:
            first = session.turns.time(source)
        except turns.Unavailable as e:
            return None, f"loader CPU time not timed by turns: {e}"
        if not turns.rose(first, self.settings.unit_tolerance):
            return first, None
        try:
            return replace(first, again=session.turns.time(source, fresh=True)), None
        except turns.Unavailable as e:  # judged on the first measurement alone
            return first, f"loader CPU time not measured again by turns: {e}"

    def _turns_settled(self) -> None:
        """The turns' processes, started with the session (session_ref.compare_against), done importing before a window
        is timed; where they failed, the loader's note says why (`_by_turns`)."""
        if self.session.turns is not None:
            with contextlib.suppress(turns.Unavailable):
                self.session.turns.settle()

    def _time(self, windows: Windows, wanted: tuple[str, ...], keys: dict) -> tuple[dict, dict]:
        """Each wanted part timed, or taken from the test that measured it. The GPU-side window first: the loader's
        workers do not exist yet to compete for the CPU; the pipeline last: how it is timed depends on the others."""
        shared, measured, measured_in = self.session.shared, {}, {}
        by_benchmark = "pipeline" if "pipeline" in wanted else wanted[0]  # pedantic runs once a test
        self.session.device.reset_peak_memory()
        for part in wanted:
            if keys.get(part) in shared:
                measured[part], measured_in[part] = shared[keys[part]]
                continue
            if part == "pipeline":
                windows.gpu, windows.loader = measured.get("gpu"), measured.get("loader")
            measured[part] = windows.time(part, self.pedantic if part == by_benchmark else None)
            if part in keys:
                shared[keys[part]] = (measured[part], self.test_id)
        return measured, measured_in

    @staticmethod
    def _parts(workload, windows: Windows, wanted: tuple, measured: dict, measured_in: dict) -> Parts:
        by_benchmark = "pipeline" if "pipeline" in wanted else wanted[0]
        # a loader-only measurement (the worker sweep): what it delivers is its pipeline
        parts = Parts(workload.batch_size, **{"pipeline": measured[by_benchmark], **measured}, measured_in=measured_in)
        if wanted == ("pipeline",) and windows.available() == ("pipeline",):
            parts.gpu = parts.pipeline  # a resident batch: the pipeline is the GPU-side step
        return parts

    def _profile(self, workload, windows: Windows, parts: Parts, profiled: bool) -> Result:
        """The steps profiled (syncs, kernels, bytes, peak memory) after the timed windows, never inside them."""
        dev = self.session.device
        peak = dev.peak_memory_gb()
        trace = syncs = None
        if profiled:
            trace = self.tmp_path() / (re.sub(r"[^\w.-]+", "_", self.test_id) + ".json")
            started = time.perf_counter()
            syncs = dev.count_syncs(workload.step, self.settings.profile_steps, trace, windows.members.all_threads)
            self.info["profile_window_s"] = round(time.perf_counter() - started, 2)
            if syncs is not None:
                parts.gpu_busy_s = syncs.gpu_busy_s
        if windows.timer is not None:
            windows.timer.detach()
        return Result(self.test_id, parts, syncs, peak, trace)

    def _begin_instructions(self, source: tuple[str, dict] | None) -> None:
        """The loader's count started before the windows where it is to be taken (its code changed since counted):
        callgrind's start runs beside them; `_count_instructions` collects it, and says why where it could not."""
        if source is not None and self.session.settings.instructions:
            with contextlib.suppress(instructions.Unavailable):
                self.session.records.begin_count(source)

    def _count_instructions(self, result: Result, source: tuple[str, dict] | None) -> None:
        if source is None or not self.session.settings.instructions:
            return
        try:
            result.instructions = self.session.records.count_instructions(source)
        except instructions.Unavailable as e:
            result.instructions_note = str(e)
        if result.instructions is not None and result.instructions.reused:
            result.notes.append(f"loader instructions: its code unchanged since counted ({result.instructions.content}), "
                                "not counted again")

    def _note_measured(self, result: Result, measured: dict, measured_in: dict) -> None:
        """Where a shared part was measured, the power limit, rounds added; the pytest-benchmark record."""
        env = self.session.device.env
        result.notes.extend(f"{part} measured in {test.rsplit('::', 1)[-1]}" for part, test in measured_in.items())
        result.notes.extend(filter(None, [power_note(result.parts.gpu, env.get("power_limit_w"))]))
        result.notes.extend(BRIEF[part] for part in result.parts.brief if part not in measured_in)
        if any(t.extended for t in measured.values()):
            result.notes.append("rounds added: " + ", ".join(f"{n} +{t.extended}" for n, t in measured.items() if t.extended))
        self.info.update(samples_per_s=round(result.samples_per_s, 1),
                         parts={n: {**part_entry(t), "window_s": round(t.window_s, 2), "warmup_s": round(t.warmup_s, 2)}
                                for n in PARTS if (t := result.parts.get(n)) is not None},
                         bottleneck=result.parts.bottleneck, syncs_per_step=result.syncs.per_step if result.syncs else None,
                         peak_mem_gb=result.peak_mem_gb, gpu=env["gpu"])


def measured_again(result: Result, part: str, windows: Windows | None, again: Callable[[], object] | None):
    """`part` of a test's workload timed once more (a failing check's confirmation), noted on its result: its window
    (a resident batch's GPU-side number is its pipeline's), or, for a test over several GPUs, all of it (`again`)."""
    if windows is None:
        timed = again()
    else:
        available = windows.available()
        window = "pipeline" if part == "gpu" and "gpu" not in available else part
        if window not in available:
            raise RuntimeError(f"{result.test_id}: cannot measure {part!r} again; this workload measures "
                               f"{', '.join(available)}")
        timed = windows.time(window)
    result.notes.append(f"{part} measured again to confirm: {timed.median:,.0f} samples/s")
    return timed


def count_reads(result: Result, workload, members, steps: int) -> None:
    """A smoke run's syncs without a GPU: the steps' host reads, which the dispatcher sees (host_reads.count); a loop
    on a thread of its own counts them in that thread (a mode is its thread's own: frameworks.DrivenLoop.count_reads)."""
    if not members.all_threads:
        result.reads = host_reads.count(workload.step, steps)
    elif callable(getattr(workload, "count_reads", None)):
        result.reads = workload.count_reads(steps)
    else:
        result.notes.append(f"{READS_NOT_COUNTED}: the loop runs its steps on a thread of its own")


def count_host(result: Result, workload, members, steps: int, smoke: bool, settle: Callable[[], None]) -> None:
    """The step's host side counted over whole GPU-side cycles (host_side.count), after every timed window."""
    why_not = host_side.why_uncountable(members, has_loader=members.loader_step is not None or members.loader is not None)
    if why_not is not None:
        result.notes.append(why_not)
        return
    cycle = members.gpu_cycle_steps
    steps = cycle if smoke else -(-steps // cycle) * cycle
    result.host = host_side.count(members.gpu_step or workload.step, steps, settle=settle)


def count_flops(result: Result, members, workload, shared: dict, smoke: bool, gpu: str) -> None:
    """The step's model FLOPs, counted in one more GPU-side step after the windows (once a session for a GPU-side step
    shared by several tests), and the MFU they make."""
    if members.all_threads:
        result.notes.append("model FLOPs not counted: the steps run on a thread of their own")
        return
    key = ("flops", members.gpu_key)
    counted = shared[key] if members.gpu_key is not None and key in shared else flops.count(members.gpu_step or workload.step)
    if members.gpu_key is not None:
        shared[key] = counted
    if counted is None:  # no matmul or convolution passed the dispatcher
        return
    timed = () if smoke else ("pipeline", "gpu")
    rates = {part: t.median for part in timed if (t := result.parts.get(part)) is not None and not t.brief}
    result.mfu = counted.reading(rates, workload.batch_size, gpu)


def _parallelism(result: Result, dataloader) -> str:
    window = result.parts.loader or result.parts.pipeline
    return f"{result.unit.line()}; " + loader.parallelism(asdict(result.unit), dataloader.num_workers, window.median)
