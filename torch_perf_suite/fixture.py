"""The `perf` fixture: measure a workload's parts, then assert on syncs, gains and baselines.

    result = perf.measure(workload)                  # pipeline, GPU-side and loader windows, profiled window
    perf.assert_syncs(result, per_step=0)
    perf.assert_gain(result, over="amp_fp16", part="gpu", at_least=2.0)
    perf.assert_efficiency(result, at_least=0.8)
    perf.assert_tensor_cores(result, at_least=0.9)   # conv/matmul time on Tensor Cores (profiled window)
    perf.assert_no_layout_conversions(result)        # channels_last: no nchwToNhwc kernels
    perf.assert_utilization(result, at_least=90)     # nvidia-smi's GPU-Util over the rounds (NVML)
    perf.assert_baseline(result)

`Perf` is the face: measuring is measuring.py's, comparing judging.py's, each decision a plain function of checks.py,
gates.py, loader.py or instructions.py that returns findings (findings.py); here they become failures and notes. A
throughput check that fails measures its part once more and fails only if that fails too; the workload stays open until
the test ends for that reason (the caller closes it at teardown).
"""

from __future__ import annotations

import pytest

from . import causes, checks, gpu_util, host, loader, ranks, settings
from .charts import Chart
from .checks import parts_line as _parts_line
from .findings import FAILED, REPORTED, Finding, failures
from .judging import Judge, PerfWarning, gain
from .measuring import Measuring, measured_again
from .parts import BRIEF, Windows
from .result import Result
from .session_view import SessionView
from .timing import Throughput, plain_rounds

__all__ = ["Perf", "PerfWarning", "Result"]


class _Claims:
    """What a test states of its result beside another test's result measured in this run (`assert_gain`,
    `assert_cost`, `assert_not_slower`) and of its host (`assert_efficiency`, `assert_bottleneck`: held where this
    test's baseline was recorded on this host). `Perf` gives the session, the judge and the failing."""

    _session: SessionView
    test_id: str
    smoke: bool
    _judge: Judge

    def _fail(self, found: list[Finding], result: Result | None = None) -> None:
        """Fail the test with its failed findings' texts (checks.py), a line each, naming the test and the kept trace,
        under a line of their causes (causes.py: pytest's short summary shows the first line); none failed passes."""
        message = failures(found)
        if message:
            trace = f"\ntrace: {result.trace}" if result is not None and result.trace else ""
            texts = [f.text for f in found if f.outcome == FAILED]
            pytest.fail(causes.message(self.test_id, f"{self.test_id}: {message}{trace}", texts), pytrace=False)

    # --- gains within one run -------------------------------------------------------------------

    def result_of(self, test: str) -> Result | None:
        """The result of another test measured in this run: a full test id, or a parameter id of
        this test function ("baseline" for test_ladder[baseline])."""
        full = test if "::" in test else f"{self.test_id.split('[', 1)[0]}[{test}]"
        return self._session.results.get(full)

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
        if not self.smoke:
            gain(self._judge, result, self.result_of(over), over, part, over_part, at_least=at_least, at_most=at_most)

    def assert_efficiency(self, result: Result, at_least: float, in_turns: bool = False) -> None:
        """The pipeline delivers at least `at_least` of its bottleneck part's samples/s. `in_turns`: the parts run one
        after the other (no DataLoader workers: one thread loads a batch, then trains on it), so what the pipeline is
        held to is the two in series, 1 / (1/loader + 1/GPU-side), whatever their ratio; below it, time is lost
        beyond the turns. A host-bound claim: checked where this test's baseline was recorded on this host."""
        if self.smoke:
            return
        p = result.parts
        if p.brief and p.efficiency is None:  # against REF, where a host claim is a reading (_host_claim)
            self._judge.left(result, f"efficiency floor {at_least:g} not checked: {BRIEF[p.brief[0]]}",
                             covered_by=result.cover_of("pipeline"))
            return
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

    def _host_claim(self, result: Result, claim: str, found: list[Finding]) -> None:
        session = self._session
        entry = session.records.baseline(self.test_id)
        same_host = host.why_not_comparable(entry["env"].get("host"), session.device.env.get("host")) if entry else ""
        scope = checks.host_scope(entry, same_host, session.settings.update_baselines, against=session.ref is not None)
        if scope:  # against REF a reading, covered as the pipeline's number is
            self._judge.left(result, f"{claim}: {scope}" + ("; it does not hold here" if failures(found) else ""),
                             covered_by=result.cover_of("pipeline"))
            return
        self._fail(found, result)


class Perf(_Claims):
    """The `perf` fixture: `measure` a workload, then state what it must show (syncs, gains, baseline).

    `device` is the device to build on ("cuda" on a GPU, "cpu" in a smoke run without one); `smoke` is
    true under --perf-smoke, where only the syncs (host reads without a GPU) and the loader's settings and counts are
    checked."""

    def __init__(self, session, request, benchmark):
        self._session = session
        self._request = request
        self._benchmark = benchmark
        self._windows: Windows | None = None
        self._again = None  # a test over several GPUs: its timing once more (measured_ranks)
        self.test_id = request.node.nodeid
        try:
            self.measure_settings = settings.for_marker(session.settings.measure, request.node.iter_markers("perf"), self.test_id)
            problem = ""
        except ValueError as e:  # a marker applied after collection, which checks the others
            problem = str(e)
        if problem:  # failed outside the handler: the message once, without the ValueError it came from
            pytest.fail(causes.message(self.test_id, problem), pytrace=False)

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
            pytest.fail(causes.message(self.test_id, f"{self.test_id}: --perf-strict: {reason}"), pytrace=False)
        pytest.skip(reason)

    # --- measuring ------------------------------------------------------------------------------

    def _pedantic(self, fn, setup, rounds):
        self._benchmark.pedantic(fn, setup=setup, rounds=rounds, iterations=1, warmup_rounds=0)
        if getattr(self._benchmark, "disabled", False):  # --benchmark-disable: pedantic ran one round, the rest run here
            plain_rounds(fn, setup, rounds - 1)

    def measure(self, workload, parts: tuple[str, ...] | None = None) -> Result:
        """Time the workload's parts (all it has, or `parts`), then count its syncs in a profiled window."""
        measuring = Measuring(self._session, self.test_id, self.measure_settings, self.smoke, self._pedantic,
                              lambda: self._request.getfixturevalue("tmp_path"), self._benchmark.extra_info)
        try:
            result, self._windows = measuring.run(workload, parts)
            problem = ""
        except loader.Undescribable as e:  # a loader the suite cannot read: never an empty message, so never passes
            problem = str(e) or "its loader cannot be described"
        # outside the handler: the message once, without the error it came from
        self._fail([Finding(FAILED, problem)] if problem else [])
        self._session.results[self.test_id] = result
        return result

    def measured_ranks(self, timed: Throughput, again, **spread) -> Result:
        """A test spread over several GPUs, measured in processes of its own, as one result (ranks.result's arguments),
        kept for the report and the baseline: compare it with perf.assert_baseline. `again()` times it once more
        (a failing throughput check's confirmation)."""
        self._again = again
        result = ranks.result(self.test_id, timed=timed, on_gpu=self.device == "cuda", **spread)
        self._session.results[self.test_id] = result
        return result

    def _confirm(self, result: Result, part: str) -> Throughput:
        """Measure `part` of this test's workload once more (a failing check's confirmation)."""
        if (self._windows is None and self._again is None) or self._request.node.nodeid != result.test_id:
            raise RuntimeError(f"{self.test_id}: can only confirm a result measured by this test")
        return measured_again(result, part, self._windows, self._again)

    # --- syncs ----------------------------------------------------------------------------------

    def assert_syncs(self, result: Result, per_step: float | None = None, *, at_least: float | None = None,
                     from_library: str | None = None) -> None:
        """Exactly `per_step` syncs per step, or `at_least` that many, optionally all from `from_library`.

        For a pitfall (`at_least`), fewer syncs than expected fails too: the pitfall is gone and the
        workaround that the scenario documents can be retired, knowingly.
        """
        if self.smoke and result.syncs is None:  # no GPU: the host reads the dispatcher saw, where the loop let it watch
            if result.reads is not None:
                self._fail(checks.host_reads(result.reads, per_step=per_step))
            return
        if result.syncs is None:
            raise RuntimeError(f"{self.test_id}: no sync count; syncs are counted in the pipeline's profiled steps, and "
                               "this test measured no pipeline part")
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
        """GPU-Util (NVML) over `part`'s rounds is at least `at_least`%, a shortfall measured again (gpu_util.py)."""
        if self.smoke:
            return
        t = result.parts.get(part)
        found = gpu_util.verdict(None if t is None else t.util, at_least, part)
        if found.outcome == FAILED:
            found = gpu_util.confirmed(found, self._confirm(result, part).util, at_least, part)
        if found.outcome == REPORTED:
            result.notes.append(found.text)
        self._fail([Finding(FAILED, f"{found.text}; {_parts_line(result.parts)}")] if found.outcome == FAILED else [])

    def add_row(self, section: str, chart: Chart | None = None, **columns) -> None:
        """Add a row to a table of its own in the session report (the ladder's, say), drawn as `chart` if given."""
        if self.smoke:
            return
        self._session.sections.setdefault(section, []).append(columns)
        if chart is not None:
            self._session.charts[section] = chart

    # --- the baseline ---------------------------------------------------------------------------

    @property
    def _judge(self) -> Judge:
        return Judge(self._session, self.test_id, self.measure_settings, self._confirm)

    def assert_baseline(self, result: Result, loader_changes: tuple[str, ...] = ()) -> None:
        """Each part against this GPU's baseline entry (or REF): the GPU-side number at `tolerance`, loader and
        pipeline numbers at `host_tolerance` where the entry was recorded on this host; what was counted; the loader's
        settings and instructions (any machine, smoke runs too) and its cost per sample. `loader_changes`: loader
        settings this change makes on purpose (compared, noted, not failed). Every failure is said at once."""
        judge = self._judge
        found, entry = judge.baseline(result, tuple(loader_changes))
        self._fail(found, result)
        if entry is not None:
            judge.timed_notes(result)
