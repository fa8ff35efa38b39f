"""The `perf` fixture: measure a workload's parts, then assert on syncs, gains and baselines.

    result = perf.measure(workload)                  # pipeline, GPU-side and loader windows, profiled window
    perf.assert_syncs(result, per_step=0)
    perf.assert_gain(result, over="amp_fp16", part="gpu", at_least=2.0)
    perf.assert_efficiency(result, at_least=0.8)
    perf.assert_tensor_cores(result, at_least=0.9)   # conv/matmul time on Tensor Cores (profiled window)
    perf.assert_no_layout_conversions(result)        # channels_last: no nchwToNhwc kernels
    perf.assert_utilization(result, at_least=90)     # nvidia-smi's GPU-Util over the rounds (NVML)
    perf.assert_baseline(result)

A throughput check that fails measures its part once more and fails only if that fails too; the
workload stays open until the test ends for that reason (the caller closes it at teardown).
"""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest

from . import checks, compiled, flops, gates, host, instructions, loader, settings
from .checks import parts_line as _parts_line
from .parts import PARTS, Parts, Windows
from .report import Chart
from .stats import compare
from .syncs import SyncCount
from .timing import Throughput, plain_rounds


class PerfWarning(UserWarning):
    """A check that could not be made: no baseline, no predecessor measured in this run."""


POWER_CAPPED = 0.95  # a GPU-side window that draws this share of the power limit runs at it


def _part_entry(t: Throughput) -> dict:
    spread = t.spread_pct
    entry = {"samples_per_s": round(t.median, 1), "spread_pct": None if spread is None else round(spread, 2),
             "rounds": [round(r, 1) for r in t.rounds]}
    if t.watts is not None:
        entry["watts"] = round(t.watts)
    return entry


def _power_note(gpu: Throughput | None, limit_w: float | None) -> str | None:
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
    verdicts: dict[str, gates.Verdict] = field(default_factory=dict)  # part -> comparison with the baseline
    extra: dict = field(default_factory=dict)  # columns a test adds to its report row
    compile: compiled.CompileCount | None = None  # what torch.compile did while the windows ran
    instructions: instructions.Counted | None = None  # the loader's instructions per sample (callgrind)
    instructions_note: str | None = None  # why they were not counted, where the workload has a loader_source
    mfu: dict | None = None  # model FLOPs, achieved TFLOP/s and MFU of each part (flops.StepFlops.reading): a reading
    loader_settings: dict | None = None  # what the workload's DataLoader is (loader.describe)
    seconds: dict[str, float] = field(default_factory=dict)  # where the test's time went, by phase (timing.Laps)

    @property
    def unit(self) -> loader.UnitCost | None:
        """The loader's cost per sample inside its workers, from the loader's window (the pipeline's where none)."""
        window = self.parts.loader or self.parts.pipeline
        return window.unit if window is not None else None

    def counts(self) -> dict:
        """What this test counted, as its baseline entry keeps it: kernel launches a step by family, bytes copied a
        step by kind, the steps' peak memory, and torch.compile's graphs where it compiled."""
        found: dict = {}
        k = self.syncs.kernels if self.syncs is not None else None
        if k is not None:
            found["kernels_per_step"] = {f: round(n, 3) for f, n in k.families.items()}
            found["copies_per_step"] = {kind: round(n) for kind, n in k.copies_per_step.items()}
        if self.syncs is not None and self.syncs.step_peak_bytes is not None:
            found["step_peak_bytes"] = self.syncs.step_peak_bytes
        if self.compile is not None and self.compile.compiled:
            found["compile"] = self.compile.as_entry()
        return found

    @property
    def samples_per_s(self) -> float:
        return self.parts.pipeline.median

    def baseline_entry(self, env: dict) -> dict:
        p = self.parts
        return {
            "parts": {name: _part_entry(t) for name in PARTS if (t := p.get(name)) is not None},
            "bottleneck": p.bottleneck,
            "efficiency": None if p.efficiency is None else round(p.efficiency, 3),
            "gpu_busy_pct": None if p.gpu_busy_pct is None else round(p.gpu_busy_pct, 1),
            "syncs_per_step": round(self.syncs.per_step, 3) if self.syncs else None,
            "peak_mem_gb": None if self.peak_mem_gb is None else round(self.peak_mem_gb, 2),
            "counts": self.counts(),
            "loader_unit": self.unit.entry() if self.unit else None,
            "env": env,
        }


class Perf:
    """The `perf` fixture: `measure` a workload, then state what it must show (syncs, gains, baseline).

    `device` is the device to build on ("cuda" on a GPU, "cpu" in a smoke run without one); `smoke` is
    true under --perf-smoke, where every check returns without asserting."""

    def __init__(self, session, request, benchmark):
        self._session = session
        self._request = request
        self._benchmark = benchmark
        self._windows: Windows | None = None
        self.test_id = request.node.nodeid
        try:
            self.measure_settings = settings.for_marker(session.settings.measure, request.node.iter_markers("perf"), self.test_id)
            problem = ""
        except ValueError as e:  # a marker applied after collection, which checks the others
            problem = str(e)
        if problem:  # failed outside the handler: the message once, without the ValueError it came from
            pytest.fail(problem, pytrace=False)

    @property
    def device(self) -> str:
        return self._session.device.name

    @property
    def smoke(self) -> bool:
        return self._session.settings.smoke

    @property
    def workers(self) -> int:
        return self._session.settings.workers

    @property
    def worker_start(self) -> str | None:
        return self._session.settings.worker_start

    @property
    def strict(self) -> bool:
        return self._session.settings.strict

    @property
    def sharded(self) -> bool:
        """True in a sharded run's pytest-xdist worker, which holds one GPU: a test that needs several skips itself."""
        return self._session.sharded

    def require(self, supported: bool, what: str) -> None:
        """Skip the test where this GPU lacks `what` (bf16, TF32); --perf-strict fails it instead."""
        if supported:
            return
        reason = f"{self._session.device.env.get('gpu')} has no {what}"
        if self.strict:
            pytest.fail(f"{self.test_id}: --perf-strict: {reason}", pytrace=False)
        pytest.skip(reason)

    # --- measuring ------------------------------------------------------------------------------

    def _pedantic(self, fn, setup, rounds):
        self._benchmark.pedantic(fn, setup=setup, rounds=rounds, iterations=1, warmup_rounds=0)
        if getattr(self._benchmark, "disabled", False):  # --benchmark-disable: pedantic ran one round, the rest run here
            plain_rounds(fn, setup, rounds - 1)

    def _count_flops(self, result: Result, m, workload) -> None:
        """The step's model FLOPs, counted in one more GPU-side step after the windows, and the MFU they make."""
        if m.all_threads:
            result.notes.append("model FLOPs not counted: the steps run on a thread of their own")
            return
        shared, key = self._session.shared, ("flops", m.gpu_key)
        counted = shared[key] if m.gpu_key is not None and key in shared else flops.count(m.gpu_step or workload.step)
        if m.gpu_key is not None:
            shared[key] = counted  # the same GPU-side step: counted once a session
        if counted is None:  # no matmul or convolution passed the dispatcher
            return
        timed = () if self.smoke else ("pipeline", "gpu")
        rates = {part: t.median for part in timed if (t := result.parts.get(part)) is not None}
        result.mfu = counted.reading(rates, workload.batch_size, self._session.device.env["gpu"])

    def measure(self, workload, parts: tuple[str, ...] | None = None) -> Result:
        """Time the workload's parts (all it has, or `parts`), then count its syncs in a profiled window."""
        session, dev = self._session, self._session.device
        laps = session.laps_of(self.test_id)
        laps.lap("build")
        windows = self._windows = Windows(workload, self.measure_settings, dev, self.smoke)
        # the same loader, or the same GPU-side step, measured the same way is measured once a session
        keys = {part: (part, key, self.measure_settings)
                for part, key in (("loader", windows.members.loader_key), ("gpu", windows.members.gpu_key)) if key is not None}
        # the loader's cost per sample comes with its window: timed where that window is measured in this test
        folder = None if self.smoke or keys.get("loader") in session.shared else session.loader_folder(self.test_id)
        try:
            described, windows.timer, unit_note = loader.observe(windows.members, folder, "the workload")
        except loader.Undescribable as e:
            described, unit_note = None, str(e)
        if described is None and unit_note:  # failed outside the handler: the message once
            pytest.fail(f"{self.test_id}: {unit_note}", pytrace=False)
        laps.lap("loader alone")
        # the GPU-side window first: the loader's workers do not exist yet to compete for the CPU; the
        # pipeline last: how it is timed depends on which of the other two is faster
        wanted = tuple(p for p in ("gpu", "loader", "pipeline") if p in (parts or windows.available()))  # this order
        timed_by_benchmark = "pipeline" if "pipeline" in wanted else wanted[0]  # pedantic runs once a test
        dev.reset_peak_memory()
        measured, measured_in = {}, {}
        with compiled.watch() as compile_count:
            for part in wanted:
                if keys.get(part) in session.shared:
                    measured[part], measured_in[part] = session.shared[keys[part]]
                    continue
                if part == "pipeline":
                    windows.gpu, windows.loader = measured.get("gpu"), measured.get("loader")
                measured[part] = windows.time(part, self._pedantic if part == timed_by_benchmark else None)
                if part in keys:
                    session.shared[keys[part]] = (measured[part], self.test_id)
        # a loader-only measurement (the worker sweep): what it delivers is its pipeline
        result_parts = Parts(workload.batch_size, **{"pipeline": measured[timed_by_benchmark], **measured},
                             measured_in=measured_in)
        if wanted == ("pipeline",) and windows.available() == ("pipeline",):
            result_parts.gpu = result_parts.pipeline  # a resident batch: the pipeline is the GPU-side step
        laps.lap("timed")
        warm = sum(t.warmup_s for part, t in measured.items() if part not in measured_in)
        laps.split("timed", compile=compile_count.compile_s, **{"warm-up": warm - compile_count.compile_s})
        peak = dev.peak_memory_gb()
        trace = syncs = None
        if not self.smoke and "pipeline" in wanted:
            trace = self._request.getfixturevalue("tmp_path") / (re.sub(r"[^\w.-]+", "_", self.test_id) + ".json")
            started = time.perf_counter()
            syncs = dev.count_syncs(workload.step, self.measure_settings.profile_steps, trace, windows.members.all_threads)
            self._benchmark.extra_info["profile_window_s"] = round(time.perf_counter() - started, 2)
            if syncs is not None:
                result_parts.gpu_busy_s = syncs.gpu_busy_s
        if windows.timer is not None:
            windows.timer.detach()
        laps.lap("profiled")
        result = Result(self.test_id, result_parts, syncs, peak, trace, compile=compile_count, loader_settings=described,
                        seconds=laps.seconds)
        result.notes.extend(filter(None, [unit_note, result.unit and self._parallelism(result, windows.members.loader)]))
        self._count_instructions(result, windows.members.loader_source)
        laps.lap("instructions")
        if syncs is not None or self.smoke:  # a smoke run counts them too, to try the counting on every scenario
            self._count_flops(result, windows.members, workload)
        laps.lap("FLOPs")
        for part, test in measured_in.items():
            result.notes.append(f"{part} measured in {test.rsplit('::', 1)[-1]}")
        power = _power_note(result_parts.gpu, dev.env.get("power_limit_w"))
        if power:
            result.notes.append(power)
        if any(t.extended for t in measured.values()):
            result.notes.append("rounds added: " + ", ".join(f"{n} +{t.extended}" for n, t in measured.items() if t.extended))
        session.results[self.test_id] = result
        self._benchmark.extra_info.update(
            samples_per_s=round(result.samples_per_s, 1),
            parts={n: _part_entry(t) for n in PARTS if (t := result_parts.get(n)) is not None},
            bottleneck=result_parts.bottleneck,
            syncs_per_step=syncs.per_step if syncs else None,
            peak_mem_gb=peak,
            gpu=dev.env["gpu"],
        )
        return result

    @staticmethod
    def _parallelism(result: Result, dataloader) -> str:
        window = result.parts.loader or result.parts.pipeline
        return f"{result.unit.line()}; " + loader.parallelism(asdict(result.unit), dataloader.num_workers, window.median)

    def _confirm(self, result: Result, part: str) -> Throughput:
        """Measure `part` of this test's workload once more (a failing check's confirmation)."""
        if self._windows is None or self._request.node.nodeid != result.test_id:
            raise RuntimeError(f"{self.test_id}: can only confirm a result measured by this test")
        available = self._windows.available()
        # a resident batch: its step is the GPU-side one
        window = "pipeline" if part == "gpu" and "gpu" not in available else part
        if window not in available:
            raise RuntimeError(f"{self.test_id}: cannot measure {part!r} again; this workload measures {', '.join(available)}")
        again = self._windows.time(window)
        result.notes.append(f"{part} measured again to confirm: {again.median:,.0f} samples/s")
        return again

    # --- failing ---------------------------------------------------------------------------------

    def _fail(self, message: str | None, result: Result | None = None) -> None:
        """Fail the test with a check's message (checks.py), naming the test and the kept trace; None passes."""
        if message:
            trace = f"\ntrace: {result.trace}" if result is not None and result.trace else ""
            pytest.fail(f"{self.test_id}: {message}{trace}", pytrace=False)

    # --- syncs ----------------------------------------------------------------------------------

    def assert_syncs(self, result: Result, per_step: float | None = None, *, at_least: float | None = None,
                     from_library: str | None = None) -> None:
        """Exactly `per_step` syncs per step, or `at_least` that many, optionally all from `from_library`.

        For a pitfall (`at_least`), fewer syncs than expected fails too: the pitfall is gone and the
        workaround that the scenario documents can be retired, knowingly.
        """
        if self.smoke:
            return
        if result.syncs is None:
            raise RuntimeError(f"{self.test_id}: no sync count; syncs are counted only on a CUDA GPU outside --perf-smoke")
        env = self._session.device.env
        self._fail(checks.syncs(result.syncs, per_step=per_step, at_least=at_least, from_library=from_library,
                                versions=f"torch {env['torch']} and torchmetrics {env['torchmetrics']}"), result)

    # --- kernels and utilization, from the profiled window and NVML -------------------------------

    def _kernels(self, result: Result):
        if result.syncs is None or result.syncs.kernels is None:
            raise RuntimeError(f"{self.test_id}: no profiled kernels; they are read only on a CUDA GPU outside --perf-smoke")
        return result.syncs.kernels

    def assert_no_layout_conversions(self, result: Result) -> None:
        """No NCHW<->NHWC conversion kernels in the steps (seed 001: channels_last removes them)."""
        if self.smoke:
            return
        k = self._kernels(result)
        result.extra["conversions/step"] = k.conversions_per_step
        self._fail(checks.layout_conversions(k), result)

    def assert_tensor_cores(self, result: Result, *, at_least: float | None = None, at_most: float | None = None) -> None:
        """The share of convolution and matmul GPU time spent in Tensor Core kernels is within bounds."""
        if self.smoke:
            return
        k = self._kernels(result)
        result.extra["tensor core share"] = k.tensor_core_share
        self._fail(checks.tensor_cores(k, at_least=at_least, at_most=at_most), result)

    def assert_utilization(self, result: Result, at_least: float, part: str = "gpu") -> None:
        """nvidia-smi's GPU-Util (NVML), median over `part`'s timed rounds, is at least `at_least` percent.
        Where NVML cannot say, the check is not made and the report says why; nothing fails for that, not
        even under --perf-strict (a GPU without NVML access measures everything else)."""
        if self.smoke:
            return
        t = result.parts.get(part)
        failure, note = checks.utilization(None if t is None else t.util, at_least, part)
        if note:
            result.notes.append(note)
        self._fail(failure and f"{failure}; {_parts_line(result.parts)}")

    # --- gains within one run -------------------------------------------------------------------

    def result_of(self, test: str) -> Result | None:
        """The result of another test measured in this run: a full test id, or a parameter id of
        this test function ("baseline" for test_ladder[baseline])."""
        return self._session.results.get(self._full_id(test))

    def _full_id(self, test: str) -> str:
        return test if "::" in test else f"{self.test_id.split('[', 1)[0]}[{test}]"

    @staticmethod
    def ratio(result: Result, other: Result | None, part: str = "pipeline") -> float | None:
        if other is None or result.parts.get(part) is None or other.parts.get(part) is None:
            return None
        return result.parts.get(part).median / other.parts.get(part).median

    def assert_gain(self, result: Result, over: str, at_least: float, part: str = "pipeline",
                    over_part: str | None = None) -> None:
        """`part` of this result is at least `at_least` times `over_part` (default: the same part) of test
        `over`, measured in this run (Mann-Whitney U on the rounds; a failure is measured once more before
        it fails)."""
        self._ratio_check(result, over, part, over_part or part, at_least=at_least)

    def assert_cost(self, result: Result, over: str, at_most: float, part: str = "gpu") -> None:
        """`part` of this result is at most `at_most` times the same part of test `over`: a pitfall that
        must still cost what the article says it costs."""
        self._ratio_check(result, over, part, part, at_most=at_most)

    def assert_not_slower(self, result: Result, than: str, noise_pct: float, part: str = "pipeline") -> None:
        """No slower than test `than` beyond `noise_pct` percent (a step the article says does not help)."""
        self.assert_gain(result, over=than, at_least=1 - noise_pct / 100, part=part)

    def _ratio_check(self, result: Result, over: str, part: str, over_part: str, *, at_least=None, at_most=None) -> None:
        if self.smoke:
            return
        other = self.result_of(over)
        name = over.rsplit("::", 1)[-1]
        label = f"{part} vs {name}" + (f" {over_part}" if over_part != part else "")
        if other is None or other.parts.get(over_part) is None or result.parts.get(part) is None:
            msg = f"{self.test_id}: the {over_part} number of {over} was not measured in this run, so {label} is not checked"
            left_out = self._full_id(over) in self._session.deselected
            if left_out:  # -k or -m chose a subset (the merge gate's, say): not a failure, even under --perf-strict
                msg = f"{self.test_id}: {over} was deselected (-k or -m) in this run, so {label} is not checked"
            elif self.strict:
                pytest.fail(msg, pytrace=False)
            result.notes.append(f"not compared with {name}" + (" (deselected)" if left_out else ""))
            warnings.warn(PerfWarning(msg), stacklevel=3)
            return
        ref = other.parts.get(over_part).rounds

        def check(mine: Throughput):
            if at_least is not None:
                return compare(mine.rounds, ref, at_least)
            return compare(ref, mine.rounds, 1 / at_most)  # ref >= mine / at_most

        wanted = f"at least {at_least:g}x" if at_least is not None else f"at most {at_most:g}x"
        ratio = result.parts.get(part).median / other.parts.get(over_part).median
        first = check(result.parts.get(part))
        result.extra[label] = ratio
        if first.inconclusive:
            result.notes.append(f"{label} {ratio:.3f}x, not {wanted} but not significantly so ({first.method})")
        if not first.failed:
            return
        again = self._confirm(result, part)
        second = check(again)
        ratio_again = again.median / other.parts.get(over_part).median
        if not second.reproduces:
            result.notes.append(f"{label}: {ratio:.3f}x at first, {ratio_again:.3f}x measured again: not confirmed")
            return
        pytest.fail(
            f"{self.test_id}: {part} {result.parts.get(part).median:,.0f} samples/s is {ratio:.3f}x the {over_part} number "
            f"of {name} ({other.parts.get(over_part).median:,.0f} samples/s in this run), expected {wanted} "
            f"({first.method}); measured again: {ratio_again:.3f}x ({second.method}).\n"
            f"  this test's rounds: {_rounds(result.parts.get(part))}\n  {name}'s rounds: {_rounds(other.parts.get(over_part))}",
            pytrace=False,
        )

    def assert_efficiency(self, result: Result, at_least: float, in_turns: bool = False) -> None:
        """The pipeline delivers at least `at_least` of its bottleneck part's samples/s. `in_turns`: the parts run one
        after the other (no DataLoader workers: one thread loads a batch, then trains on it), so what the pipeline is
        held to is the two in series, 1 / (1/loader + 1/GPU-side), whatever their ratio; below it, time is lost
        beyond the turns. A host-bound claim: checked where this test's baseline was recorded on this host."""
        if self.smoke:
            return
        p = result.parts
        if p.efficiency is None:
            raise RuntimeError(f"{self.test_id}: no GPU-side or loader number was measured, so there is no efficiency")
        if in_turns and (p.loader is None or p.gpu is None):
            raise RuntimeError(f"{self.test_id}: in_turns needs both the loader and the GPU-side number measured")
        self._host_claim(result, f"efficiency floor {at_least:g}", checks.efficiency(p, at_least, in_turns))

    def assert_bottleneck(self, result: Result, expected: str) -> None:
        """Which part limits the pipeline ("loader", "GPU"): a host-bound claim, checked where this test's baseline
        was recorded on this host (a host that decodes faster moves a loader-bound scenario to the GPU)."""
        if self.smoke:
            return
        self._host_claim(result, f"bottleneck {expected}", checks.bottleneck(result.parts, expected))

    def _host_claim(self, result: Result, claim: str, failure: str | None) -> None:
        session = self._session
        entry = session.baseline_file.get(self.test_id) if session.baseline_file else None
        same_host = host.why_not_comparable(entry["env"].get("host"), session.device.env.get("host")) if entry else ""
        scope = checks.host_scope(entry, same_host, session.settings.update_baselines, against=session.ref is not None)
        if scope:
            result.notes.append(f"{claim}: {scope}" + ("; it does not hold here" if failure else ""))
            return
        self._fail(failure, result)

    def add_row(self, section: str, chart: Chart | None = None, **columns) -> None:
        """Add a row to a table of its own in the session report (the ladder's, say), drawn as `chart` if given."""
        if self.smoke:
            return
        self._session.sections.setdefault(section, []).append(columns)
        if chart is not None:
            self._session.charts[section] = chart

    # --- the baseline ---------------------------------------------------------------------------

    def assert_baseline(self, result: Result, loader_changes: tuple[str, ...] = ()) -> None:
        """Each part against this GPU's baseline entry (or REF): the GPU-side number at `tolerance`, loader and
        pipeline numbers at `host_tolerance` where the entry was recorded on this host; what was counted; the loader's
        settings and instructions (any machine, smoke runs too) and its cost per sample. `loader_changes`: loader
        settings this change makes on purpose (compared, noted, not failed). Every failure is said at once."""
        failures = [self._instructions_failure(result), self._settings_failure(result, tuple(loader_changes))]
        entry = self._entry(result)  # None where nothing timed is compared: a note or a warning says why
        if entry is not None:
            failures += [self._count_failures(result, entry), self._unit_failure(result, entry),
                         self._timed_failure(result, entry)]
        self._fail("\n".join(filter(None, failures)), result)
        if entry is not None:
            self._timed_notes(result)

    def _settings_failure(self, result: Result, expected: tuple[str, ...]) -> str | None:
        session = self._session
        if session.settings.update_baselines:
            return None
        return self._note(loader.settings_verdict(
            result.loader_settings, session.loader_record(self.test_id), workers=self.workers, worker_start=self.worker_start,
            expected=expected, against=session.against_label,
            recorded_any=bool(session.ref or session.loaders_file and session.loaders_file.tests)), result)

    def _entry(self, result: Result) -> dict | None:
        """This test's baseline entry (REF's under --perf-against), where its timed numbers are to be compared."""
        session = self._session
        if session.ref and session.ref.status.get(self.test_id) != "passed":  # new in this change, or failed at REF
            result.notes.append(session.ref.why_missing(self.test_id))
            return None
        if self.smoke:
            return None
        entry = session.baseline_file.get(self.test_id) if session.baseline_file else None
        if session.settings.update_baselines:
            result.notes.append("baseline recorded" if entry is None else "baseline re-recorded")
        elif entry is None and session.ref:  # passed at REF, yet recorded nothing there
            result.notes.append(f"not compared: {session.ref.label} recorded nothing for it")
        elif entry is None:
            self._missing(result, f"no baseline for GPU {session.device.env['gpu']!r} in {session.baseline_file.path}, "
                                  "throughput not checked")
        return None if session.settings.update_baselines else entry

    def _unit_failure(self, result: Result, entry: dict) -> str | None:
        session = self._session
        same_host = "" if session.ref else host.why_not_comparable(entry["env"].get("host"), session.device.env.get("host"))
        m = self.measure_settings
        return self._note(loader.unit_verdict(result.unit, entry, m.unit_tolerance, m.cpu_tolerance, why_not_timed=same_host,
                                              against=session.against_label), result)

    def _timed_failure(self, result: Result, entry: dict) -> str | None:
        session = self._session
        for part in ("gpu", "loader", "pipeline"):  # not loader_cpu, a reading: the instruction count judges that work
            if result.parts.get(part) is None or part in result.parts.measured_in:
                continue  # a shared measurement is checked by the test that measured it
            v = result.verdicts[part] = gates.decide(part, result.parts, entry, self.measure_settings, session.device.env,
                                                     host_gated=session.ref is None)
            if v.failed:
                base = entry["parts"][part]
                v.confirmation = compare(self._confirm(result, part).rounds, base.get("rounds") or [base["samples_per_s"]],
                                         v.comparison.factor)
        failed = [v for v in result.verdicts.values() if v.failed]
        if not failed:
            return None
        lines = "\n".join(
            f"  {v.part}: {result.parts.get(v.part).median:,.1f} samples/s against a baseline of {v.baseline_sps:,.1f} "
            f"({v.change_pct:+.1f}%; allowed {100 * (v.comparison.factor - 1):+.0f}%" + (f", {v.scope}" if v.scope else "")
            + f", {v.comparison.method}); measured again: {100 * (v.confirmation.ratio - 1):+.1f}%\n"
            f"    this run's rounds: {_rounds(result.parts.get(v.part))}; baseline's: {_rounds_of(entry['parts'][v.part])}"
            for v in failed)
        return (f"throughput regression in {', '.join(v.part for v in failed)}:\n{lines}\n  baseline: {session.reference}, "
                f"recorded {entry['env'].get('date')} with torch {entry['env'].get('torch')} on "
                f"{host.describe(entry['env'].get('host'))}\n  {_parts_line(result.parts)}")

    def _timed_notes(self, result: Result) -> None:
        """What the timed verdicts that passed say: a shortfall not confirmed, a number reported, a part not compared."""
        result.notes.extend(v.describe() for v in result.verdicts.values() if v.qualified)
        result.notes.extend(f"{v.part} {v.reported}" for v in result.verdicts.values() if v.reported)
        why_not: dict[str, list[str]] = {}  # one note for the parts not compared for one reason
        for v in result.verdicts.values():
            if not v.compared and not v.reported:
                why_not.setdefault(v.why_not, []).append(v.part)
        if why_not:
            notes = [f"{', '.join(parts)}: {why}" for why, parts in why_not.items()]
            if self.strict:
                pytest.fail(f"{self.test_id}: --perf-strict: no comparable baseline: " + "; ".join(notes), pytrace=False)
            result.notes.extend(notes)

    def _count_failures(self, result: Result, entry: dict) -> str | None:
        """What the profiled window and torch.compile counted, against the entry (exact on any machine of this model)."""
        now, recorded = result.counts(), entry.get("counts")
        if now and not recorded:
            self._not_checked(result, "kernels, copies, step memory and compile graphs not checked: the baseline entry was "
                                      "recorded before they were counted; " + self._rerecord())
            return None
        failure = checks.counted(now, recorded, self.measure_settings.count_margin,
                                 result.compile or compiled.CompileCount())
        return failure and f"counted at this GPU model's baseline ({self._session.reference}):\n{failure}"

    def _instructions_failure(self, result: Result) -> str | None:
        """The loader's instructions per sample against the count recorded in this environment (instructions.key)."""
        session, counted = self._session, result.instructions
        if counted is None:
            if result.instructions_note:
                self._not_checked(result, result.instructions_note)
            return
        result.extra["loader instructions/sample"] = round(counted.per_sample)
        if session.settings.update_baselines:
            result.notes.append("loader instructions recorded")
            return
        failure, note, missing = instructions.verdict(counted, session.instructions_file, session.instructions_key,
                                                      self.test_id, self.measure_settings.count_margin, self._rerecord())
        if note:
            result.notes.append(note)
        if missing:
            self._not_checked(result, missing)
        return failure

    @staticmethod
    def _note(verdict: tuple[str | None, str | None], result: Result | None = None) -> str | None:
        """A (failure, note) verdict: the note kept on the result where one is given, the failure returned."""
        failure, note = verdict
        if note and result is not None:
            result.notes.append(note)
        return failure

    def _rerecord(self) -> str:
        smoke = " --perf-smoke" if self.smoke else ""
        return f"record them with: pytest '{self.test_id}'{smoke} --perf-update-baselines"

    def _not_checked(self, result: Result, why: str) -> None:
        """A counted check that could not be made: a failure under --perf-strict, else a note and a warning."""
        if self.strict:
            pytest.fail(f"{self.test_id}: --perf-strict: {why}", pytrace=False)
        result.notes.append(why)
        warnings.warn(PerfWarning(f"{self.test_id}: {why}"), stacklevel=3)

    def _count_instructions(self, result: Result, source: tuple[str, dict] | None) -> None:
        if source is None or not self._session.settings.instructions:
            return
        try:
            result.instructions = self._session.count_instructions(source)
        except instructions.Unavailable as e:
            result.instructions_note = str(e)
        if result.instructions is not None and result.instructions.reused:
            result.notes.append(f"loader instructions: its code unchanged since counted ({result.instructions.content}), "
                                "not counted again")

    def _missing(self, result: Result, what: str) -> None:
        msg = f"{self.test_id}: {what}. Record one on this GPU: pytest '{self.test_id}' --perf-update-baselines"
        if self.sharded:  # a worker's loader and pipeline numbers are its share of the cores': recorded without -n, all
            msg += " -n <as now> --dist loadfile (run sharded, as this run: a worker's host is its share of the cores)"
        if self.strict:
            pytest.fail(msg, pytrace=False)
        result.notes.append("no baseline")
        warnings.warn(PerfWarning(msg), stacklevel=3)


def _rounds(t: Throughput) -> str:
    return ", ".join(f"{r:,.0f}" for r in t.rounds)


def _rounds_of(part: dict) -> str:
    return ", ".join(f"{r:,.0f}" for r in part["rounds"]) if part.get("rounds") else f"{part['samples_per_s']:,.0f} (median only)"

