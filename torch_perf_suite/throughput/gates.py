"""Which baseline numbers a run's parts are compared with, at what tolerance, and the verdicts.

- The GPU-side number is a property of the GPU and the software: it is compared with the baseline
  at `tolerance` (3% by default) where the baseline was recorded on this chip (its UUID), and at
  `chip_tolerance` (20%) where it was recorded on another chip of the model, unless the host's
  launches bind it (then it follows the host like the others). Chips of one model are not equal
  under their power limit: on the H200 machines measured, all at the same limit, the compiled bf16
  step's GPU-side number was lower on some machines than on the others by more than `tolerance`, for
  a reason not established (docs/seed-000-ladder.md, "GPU-side numbers across chips").
- Loader and pipeline numbers follow the host's CPUs: they are compared only with a baseline
  recorded on the same host (machine/host.py says why not merely the same CPU model), at `host_tolerance`
  (10% by default).
  Otherwise the verdict says "not comparable: recorded on ..." and neither passes nor fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..findings import FAILED, Finding
from ..machine import host as hosts
from ..settings import Measure
from .parts import LAUNCH_BOUND, Parts, parts_line
from .stats import Comparison, compare
from .timing import Throughput


@dataclass
class Verdict:
    part: str
    baseline_sps: float | None  # the baseline's median, when the part was compared
    comparison: Comparison | None = None  # None when not compared
    why_not: str = ""  # why it was not compared
    confirmation: Comparison | None = None  # a second measurement's comparison, made when the first failed
    scope: str = ""  # what the baseline was recorded on, where that set a wider tolerance
    reported: str = ""  # a change read, not judged (a host-bound number against REF: loader/ judges the loader)
    host_changed: bool = False  # not compared because the baseline was recorded on another host: no hole, said once
    host_bound: bool = False  # the number follows the host (a loader, a pipeline, a launch-bound GPU-side step)

    @property
    def compared(self) -> bool:
        return self.comparison is not None

    @property
    def failed(self) -> bool:
        """A significant shortfall that a second measurement shows again; or an inconclusive one (`doubtful`) whose second
        measurement's shortfall is significant."""
        if self.comparison is not None and self.comparison.failed:
            return self.confirmation is None or self.confirmation.reproduces
        return self.doubtful and self.confirmation is not None and self.confirmation.failed

    @property
    def doubtful(self) -> bool:
        """A shortfall that is not significant, which is measured again (judging.Judge._timed)."""
        return self.comparison is not None and self.comparison.inconclusive

    @property
    def unsettled(self) -> bool:
        """Measured again, and still a shortfall that is not significant: no verdict (a hole under --perf-strict, unless
        what covers the part was judged)."""
        return self.doubtful and self.confirmation is not None and self.confirmation.inconclusive

    @property
    def change_pct(self) -> float | None:
        return None if self.comparison is None else 100 * (self.comparison.ratio - 1)

    @property
    def qualified(self) -> bool:
        """Whether describe() says more than the change: a wider scope, a shortfall that is not significant, or a
        second measurement."""
        return bool(self.scope) or (self.comparison is not None and self.comparison.inconclusive) or (
            self.confirmation is not None)

    def describe(self) -> str:
        if self.comparison is None:
            return f"{self.part}: {self.why_not}"
        allowed = f"allowed {100 * (self.comparison.factor - 1):+.0f}%"
        if self.scope and not self.comparison.inconclusive and self.confirmation is None:
            # the change is in the report's table: the same words for every test compared so, said once above it
            return f"{self.part} against a baseline {self.scope}: {allowed}"
        text = f"{self.part} {self.change_pct:+.1f}%"
        if self.scope:
            text += f" ({self.scope}: {allowed})"
        if self.comparison.inconclusive:
            text += f" (below the allowed {100 * (self.comparison.factor - 1):+.0f}%, not significant: {self.comparison.method})"
        if self.confirmation is not None:
            again = round(100 * (self.confirmation.ratio - 1), 1) + 0.0  # no "-0.0"
            text += f", confirmed by a second measurement ({again:+.1f}%)" if self.failed else (
                f", measured again: {again:+.1f}%, not significant either ({self.confirmation.method}): no verdict"
                if self.unsettled else f", not confirmed by a second measurement ({again:+.1f}%)")
        return text


def launch_bound(entry: dict | None) -> bool:
    """Whether the entry's GPU-side step waited on the host's launches (its kernels busy less than LAUNCH_BOUND)."""
    busy = (entry or {}).get("gpu_busy_pct")
    return busy is not None and busy < 100 * LAUNCH_BOUND


def tolerance_for(part: str, parts: Parts, entry: dict, measure: Measure, gpu_uuid: str | None) -> tuple[float, bool]:
    """(tolerance in percent, whether the number depends on the host) for one part, on chip `gpu_uuid`."""
    host_bound = part != "gpu" or parts.launch_bound or launch_bound(entry)
    if host_bound:
        return measure.host_tolerance, True
    return (measure.tolerance if same_chip(entry, gpu_uuid) else measure.chip_tolerance), False


def same_chip(entry: dict, gpu_uuid: str | None) -> bool:
    recorded = entry.get("env", {}).get("gpu_uuid")
    return recorded is not None and recorded == gpu_uuid


def chip_scope(entry: dict) -> str:
    """What a GPU-side comparison with another chip's baseline says of it."""
    recorded = entry.get("env", {}).get("gpu_uuid")
    return f"recorded on chip {recorded[:12]}, not this one" if recorded else "recorded before chips were (an old entry)"


def part_not_comparable(part: str, entry: dict, host: dict, host_bound: bool) -> str:
    """'' if this part may be compared with the entry; else why not."""
    base = entry.get("parts", {}).get(part)
    if base is None:
        return "no baseline number for this part (recorded before it was measured); re-record to add it"
    if not host_bound:
        return ""
    return hosts.why_not_comparable(entry.get("env", {}).get("host"), host)


def verdict(part: str, now: list[float], entry: dict, tolerance_pct: float, why_not: str, scope: str = "") -> Verdict:
    base = entry.get("parts", {}).get(part)
    if why_not:
        return Verdict(part, None, why_not=why_not)
    ref = base.get("rounds") or [base["samples_per_s"]]
    return Verdict(part, base["samples_per_s"], compare(now, ref, 1 - tolerance_pct / 100), scope=scope)


def part_verdict(part: str, parts: Parts, entry: dict, measure: Measure, env: dict, host_gated: bool = True) -> Verdict:
    """One part of this run (`parts`, on the GPU and host of `env`) against the baseline entry: at the tolerance its
    kind and the entry's chip and host allow, or not compared, saying why. Without `host_gated` (against REF) a
    host-bound part's change is a reading: loader and pipeline numbers move between rounds by more than a regression to
    catch (docs/seed-000-ladder.md, "A loader regression of 15%"), so the loader is judged by what does not move
    (loader/: its settings, blocks and waiting per sample; its instructions)."""
    tolerance, host_bound = tolerance_for(part, parts, entry, measure, env.get("gpu_uuid"))
    if host_bound and not host_gated and part not in entry.get("parts", {}):
        return Verdict(part, None, reported="not timed at REF (host-bound: a reading, never gated against REF)")
    scope = "" if host_bound or same_chip(entry, env.get("gpu_uuid")) else chip_scope(entry)
    why_not = part_not_comparable(part, entry, env.get("host"), host_bound)
    v = verdict(part, list(parts.get(part).rounds), entry, tolerance, why_not, scope)
    v.host_bound = host_bound
    v.host_changed = bool(why_not) and host_bound and part in entry.get("parts", {}) and bool(entry.get("env", {}).get("host"))
    if host_bound and not host_gated and v.compared:
        return Verdict(part, v.baseline_sps, reported=f"{v.change_pct:+.1f}% (host-bound, a reading: the step's host side is "
                       "judged by its Python lines and blocks a step, the loader by its settings, blocks and waiting, and "
                       "its CPU work by its instructions per sample or, against REF, its CPU time by turns)")
    return v


def regression(failed: list[Verdict], parts: Parts, entry: dict, reference: str) -> Finding:
    """The timed parts that fell short of the baseline entry and fell short again when measured again, as one failure."""
    env = entry["env"]
    brief = "; ".join(f"{v.part} {parts.get(v.part).median:,.1f} samples/s against a baseline of "
                      f"{v.baseline_sps:,.1f} ({v.change_pct:+.1f}%)" for v in failed)
    return Finding(FAILED, f"throughput regression in {', '.join(v.part for v in failed)}:\n"
                   + "\n".join(_shortfall(v, parts, entry) for v in failed)
                   + f"\n  baseline: {reference}, recorded {env.get('date')} with torch {env.get('torch')} on "
                     f"{hosts.host_line(env.get('host'))}\n  {parts_line(parts)}", f"throughput regression: {brief}")


def _shortfall(v: Verdict, parts: Parts, entry: dict) -> str:
    return (f"  {v.part}: {parts.get(v.part).median:,.1f} samples/s against a baseline of {v.baseline_sps:,.1f} "
            f"({v.change_pct:+.1f}%; allowed {100 * (v.comparison.factor - 1):+.0f}%" + (f", {v.scope}" if v.scope else "")
            + f", {v.comparison.method}); measured again: {100 * (v.confirmation.ratio - 1):+.1f}%\n"
            f"    this run's rounds: {rounds(parts.get(v.part))}; baseline's: {rounds_of(entry['parts'][v.part])}")


def rounds(t: Throughput) -> str:
    return ", ".join(f"{r:,.0f}" for r in t.rounds)


def rounds_of(part: dict) -> str:
    return ", ".join(f"{r:,.0f}" for r in part["rounds"]) if part.get("rounds") else f"{part['samples_per_s']:,.0f} (median only)"
