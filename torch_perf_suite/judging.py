"""What the `perf` fixture compares a result with, and how: the baseline entry (or REF's) found and each of its checks
asked of the plain functions that decide it (instructions, loader, checks, gates), and a gain over another test of
this run. A check returns its failed findings (none where it holds) and keeps its other findings on the result as
notes; the fixture fails the test with all of them at once."""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from typing import Callable

import pytest

from . import causes, checks, compiled, gates, host, instructions, loader, ranks, smoke_counts, turns
from .checks import parts_line
from .findings import FAILED, NOT_CHECKED, NOT_COMPARED, PASSED, REPORTED, Finding, failures
from .parts import BRIEF
from .result import Result
from .session_view import SessionView
from .settings import Measure
from .stats import compare
from .timing import Throughput

# a smoke run's host is often busy (CI's 2 cores): a sample's waiting moves with its load (docs/loader.md, "Smoke runs
# against REF"); its blocks, a count, are compared
SMOKE_WAITING = "not compared in a smoke run (its waiting moves with the host's load; its blocks are a count)"


class PerfWarning(UserWarning):
    """A check that could not be made: no baseline, no predecessor measured in this run."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def fail(test_id: str, whole: str) -> None:
    """The test failed with `whole`, its causes in a line above it (causes.message: pytest's short summary shows that
    line; the report keeps `whole`)."""
    pytest.fail(causes.message(test_id, whole), pytrace=False)


def warn(message: str) -> None:
    """A PerfWarning shown at the first caller outside this package: the test's line."""
    frame, level = sys._getframe(0), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(PerfWarning(message), stacklevel=level)


@dataclass
class Judge:
    session: SessionView
    test_id: str
    settings: Measure
    confirm: Callable[[Result, str], Throughput]  # measure a part of this test's workload once more

    @property
    def strict(self) -> bool:
        return self.session.settings.strict

    # --- the baseline ---------------------------------------------------------------------------

    def baseline(self, result: Result, loader_changes: tuple[str, ...]) -> tuple[list[Finding], dict | None]:
        """(every failed finding against the baseline; the entry compared with, None where none was)."""
        result.compared = True
        found = self._instructions(result) + self._loader_settings(result, loader_changes)
        if self.session.settings.smoke and self.session.ref:  # CI's job against the base: the loader's blocks a sample,
            recorded = (self.session.records.loader_record(self.test_id) or {}).get("unit")  # and every count it has
            found += self._unit(result, {"loader_unit": recorded}, why_not_timed=SMOKE_WAITING) + smoke_counted(self, result)
        entry = self._entry(result)
        if entry is not None:
            found += (self._counts(result, entry) + self._scaling(result, entry) + self._unit(result, entry)
                      + self._timed(result, entry))
        return found, entry

    def _instructions(self, result: Result) -> list[Finding]:
        """The loader's instructions per sample against the count recorded in this environment (instructions.key)."""
        session, counted = self.session, result.instructions
        if counted is None:
            if result.instructions_note:
                self.not_checked(result, result.instructions_note)
            return []
        result.extra["loader instructions/sample"] = round(counted.per_sample)
        if session.settings.update_baselines:
            result.notes.append("loader instructions recorded")
            return []
        records = session.records
        found = instructions.verdict(counted, records.instructions_file, records.instructions_key, self.test_id,
                                     self.settings.count_margin, self.rerecord())
        if found.outcome in (FAILED, PASSED):
            result.judged.add("loader")
        return self.take(result, [found])

    def _loader_settings(self, result: Result, expected: tuple[str, ...]) -> list[Finding]:
        session = self.session
        if session.settings.update_baselines:
            return []
        loaders, recorded = session.records.loaders_file, session.records.loader_record(self.test_id)
        recorded_any = bool(session.ref or loaders and loaders.tests)
        return self.take(result, loader.settings_verdict(
            result.loader_settings, recorded, workers=session.settings.workers, worker_start=session.settings.worker_start,
            expected=expected, against=session.against_label, recorded_any=recorded_any))

    def _entry(self, result: Result) -> dict | None:
        """This test's baseline entry (REF's under --perf-against), where its timed numbers are to be compared."""
        session = self.session
        if session.ref and session.ref.status.get(self.test_id) != "passed":  # new in this change, or failed at REF
            why = session.ref.why_missing(self.test_id, session.collected)
            if self.strict:  # the merge gate: a test compared with nothing is a hole in it, renamed or not
                fail(self.test_id, f"{self.test_id}: {why} (--perf-strict: nothing of it was compared with REF)")
            self.left(result, why)
            return None
        if session.settings.smoke:
            return None
        entry = session.records.baseline(result.baseline_key)
        if session.settings.update_baselines:
            result.notes.append("baseline recorded" if entry is None else "baseline re-recorded")
        elif entry is None and session.ref:  # passed at REF, yet recorded nothing there
            self.left(result, f"not compared: {session.ref.label} recorded nothing for it")
        elif entry is None:
            spread = " on " + result.key.rsplit(" on ", 1)[1] if result.key else ""  # "2 GPUs (GPU0-GPU1 NV18)"
            self.missing(result, f"no baseline for GPU {session.device.env['gpu']!r}{spread} in "
                                 f"{session.records.baseline_file.path}, throughput not checked")
        return None if session.settings.update_baselines else entry

    def _counts(self, result: Result, entry: dict) -> list[Finding]:
        """What the profiled window and torch.compile counted, against the entry (exact on any machine of this model)."""
        now, recorded = result.counts(), entry.get("counts")
        if now and not recorded:
            self.not_checked(result, "kernels, copies, step memory and compile graphs not checked: the baseline entry was "
                                     "recorded before they were counted; " + self.rerecord())
            return []
        if "host" in now and "host" not in recorded:
            self.left(result, f"host side not compared: {self.session.against_label} recorded none (its entry is older "
                              "than the count); " + self.rerecord())
        elif "host" in now:
            result.judged.add("host")
        text = failures((ranks.counted if "ranks" in now else checks.counted)(  # a test over several GPUs: rank by rank
            now, recorded, self.settings.count_margin, result.compile or compiled.CompileCount(), self.session.against_label))
        return [Finding(FAILED, f"counted at this GPU model's baseline ({self.session.reference}):\n{text}")] if text else []

    def _scaling(self, result: Result, entry: dict) -> list[Finding]:
        """A test over several GPUs: its scaling efficiency, a ratio within one run, against the recorded one."""
        if result.scaling is None:
            return []
        if entry.get("scaling") is None:
            self.left(result, f"scaling efficiency not compared: {self.session.against_label} recorded none; " + self.rerecord())
            return []
        return ranks.scaling(result.scaling, entry["scaling"], self.settings.tolerance, self.session.against_label)

    def _unit(self, result: Result, entry: dict, why_not_timed: str | None = None) -> list[Finding]:
        """The loader's cost per sample, judged by the test that timed its window (a shared window: by the one that
        measured it). Its waiting only against REF or an entry of this host, unless `why_not_timed` says why not."""
        session = self.session
        if result.parts.loader_from is not None:
            result.judged.add("loader")  # by the test that timed its window
            return []
        same_host = why_not_timed if why_not_timed is not None else "" if session.ref else host.why_not_comparable(
            entry["env"].get("host"), session.device.env.get("host"))
        found = loader.unit_verdict(result.unit, entry, self.settings.unit_tolerance, why_not_timed=same_host,
                                    against=session.against_label)
        if result.turns is not None:
            result.judged.add("loader")
            found.append(turns.verdict(result.turns, self.settings.unit_tolerance, session.against_label))
        return self.take(result, found)

    def _timed(self, result: Result, entry: dict) -> list[Finding]:
        for part in ("gpu", "loader", "pipeline"):  # not loader_cpu, a reading: the instruction count judges that work
            if result.parts.get(part) is None or part in result.parts.measured_in:
                continue  # a shared measurement is checked by the test that measured it
            v = result.verdicts[part] = gates.decide(part, result.parts, entry, self.settings,
                                                     {**self.session.device.env, **result.env},
                                                     host_gated=self.session.ref is None)
            if v.compared:
                result.judged.add(part)
            if v.failed:
                base = entry["parts"][part]
                v.confirmation = compare(self.confirm(result, part).rounds, base.get("rounds") or [base["samples_per_s"]],
                                         v.comparison.factor)
        failed = [v for v in result.verdicts.values() if v.failed]
        if not failed:
            return []
        env = entry["env"]
        return [Finding(FAILED, f"throughput regression in {', '.join(v.part for v in failed)}:\n"
                        + "\n".join(_shortfall(v, result, entry) for v in failed)
                        + f"\n  baseline: {self.session.reference}, recorded {env.get('date')} with torch "
                          f"{env.get('torch')} on {host.describe(env.get('host'))}\n  {parts_line(result.parts)}")]

    def timed_notes(self, result: Result) -> None:
        """What the timed verdicts that passed say: a shortfall not confirmed, a number reported, a part not compared."""
        result.notes.extend(v.describe() for v in result.verdicts.values() if v.qualified)
        for v in result.verdicts.values():
            if v.reported:  # a host-bound reading against REF: judged where the host side or the loader was
                self.left(result, f"{v.part} {v.reported}", covered_by=result.cover_of(v.part))
        why_not: dict[str, list[str]] = {}  # one note for the parts not compared for one reason
        for v in result.verdicts.values():
            if not v.compared and not v.reported:
                why_not.setdefault(v.why_not, []).append(v.part)
        # another host's baseline: said, not a failure (a new runner); REF measured on another host (its cache's cores)
        # is a hole where nothing else judged the part
        found = [(f"{', '.join(parts)}: {why}", parts, all(result.verdicts[p].host_changed for p in parts))
                 for why, parts in why_not.items()]
        holes = [text for text, _, moved in found if not moved]
        if holes and self.strict:
            fail(self.test_id, f"{self.test_id}: --perf-strict: no comparable baseline: " + "; ".join(holes))
        for text, parts, moved in found:
            self.left(result, text, covered_by=result.cover_of(parts[0]) if moved else "")

    # --- what the verdicts found -----------------------------------------------------------------

    def take(self, result: Result, found: list[Finding]) -> list[Finding]:
        """The findings kept on the result: a passed or reported one's text as a note, a not compared one `left`, a not
        checked one as `not_checked` says; the failed ones returned."""
        for f in found:
            if f.outcome == NOT_COMPARED:
                self.left(result, f.text)
            elif f.outcome == NOT_CHECKED:
                self.not_checked(result, f.text)
            elif f.outcome in (PASSED, REPORTED) and f.text:
                result.notes.append(f.text)
        return [f for f in found if f.outcome == FAILED]

    # --- what could not be checked ----------------------------------------------------------------

    def rerecord(self) -> str:
        smoke = " --perf-smoke" if self.session.settings.smoke else ""
        return f"record them with: pytest '{self.test_id}'{smoke} --perf-update-baselines"

    def left(self, result: Result, what: str, covered_by: str = "") -> None:
        """A note of what was not compared. Against REF it is a hole unless `covered_by` was judged: the merge gate
        (--perf-strict) fails on it when the test ends (PerfSession.call_passed)."""
        result.notes.append(what)
        if self.session.ref:
            result.unjudged.append((what, covered_by))

    def not_checked(self, result: Result, why: str) -> None:
        """A check that could not be made: a failure under --perf-strict, else a note and a warning."""
        if self.strict:
            fail(self.test_id, f"{self.test_id}: --perf-strict: {why}")
        result.notes.append(why)
        warn(f"{self.test_id}: {why}")

    def missing(self, result: Result, what: str) -> None:
        msg = f"{self.test_id}: {what}. Record one on this GPU: pytest '{self.test_id}' --perf-update-baselines"
        if self.session.sharded:  # a worker's loader and pipeline numbers are its share of the cores': recorded without -n, all
            msg += " -n <as now> --dist loadfile (run sharded, as this run: a worker's host is its share of the cores)"
        if self.strict:
            fail(self.test_id, msg)
        result.notes.append("no baseline")
        warn(msg)


def smoke_counted(judge: Judge, result: Result) -> list[Finding]:
    """A smoke run against REF, on any machine: every count it has against REF's smoke run's record of the test
    (smoke_counts.py): the host side (lines and blocks a step), compile graphs where it compiled, on a GPU what the
    profiled window counted (checks.counted, as against a baseline entry), and without a GPU its host reads a step.
    What REF's record lacks is a hole (checks.smoke_holes). Without a GPU there are no kernels, copies or GPU memory to
    count: the smoke report says so once (report.NOT_WITHOUT_GPU)."""
    session = judge.session
    if session.ref.status.get(judge.test_id) != "passed":  # said where its entry is looked for (Judge._entry)
        return []
    kept = session.records.smoke_file
    recorded = kept.get(judge.test_id) if kept is not None else None
    now, reads, label = result.counts(), smoke_counts.reads_entry(result.reads), session.against_label
    found = checks.smoke_holes(now, reads, recorded, label)
    if recorded is not None:
        found += (ranks.counted if "ranks" in now else checks.counted)(
            now, recorded["counts"], judge.settings.count_margin, result.compile or compiled.CompileCount(), label)
        if reads is not None and recorded.get("reads") is not None:
            found += checks.host_reads_against(reads, recorded["reads"], label, result.reads.describe())
        if "host" in now and "host" in recorded["counts"]:
            result.judged.add("host")
    return judge.take(result, found)

def gain(judge: Judge, result: Result, other: Result | None, over: str, part: str, over_part: str, *, at_least=None,
         at_most=None) -> None:
    """A gain over another test of this run: `part` of `result` against `over_part` of test `over` (`other`, None where
    it was not measured in this run); a failure is measured once more (`judge.confirm`) and fails only if that fails
    too."""
    name = over.rsplit("::", 1)[-1]
    label = f"{part} vs {name}" + (f" {over_part}" if over_part != part else "")
    if other is None or other.parts.get(over_part) is None or result.parts.get(part) is None:
        return _not_compared(judge, result, over, name, label, part, over_part)
    ref, mine = other.parts.get(over_part), result.parts.get(part)
    if ref.brief or mine.brief:  # timed briefly against REF (parts.BRIEF): no number to hold a claim to
        why = BRIEF[part if mine.brief else over_part]
        return judge.left(result, f"{label} not checked: {why}", covered_by=result.cover_of(part))

    def check(t: Throughput):
        return compare(t.rounds, ref.rounds, at_least) if at_least is not None else compare(ref.rounds, t.rounds, 1 / at_most)

    wanted = f"at least {at_least:g}x" if at_least is not None else f"at most {at_most:g}x"
    first, ratio = check(mine), mine.median / ref.median
    result.extra[label] = ratio
    if first.inconclusive:
        result.notes.append(f"{label} {ratio:.3f}x, not {wanted} but not significantly so ({first.method})")
    again = judge.confirm(result, part) if first.failed else None
    second = again and check(again)
    if again is not None and not second.reproduces:
        result.notes.append(f"{label}: {ratio:.3f}x at first, {again.median / ref.median:.3f}x measured again: not confirmed")
    elif again is not None:
        fail(judge.test_id, f"{judge.test_id}: {part} {mine.median:,.0f} samples/s is {ratio:.3f}x the {over_part} number "
                            f"of {name} ({ref.median:,.0f} samples/s in this run), expected {wanted} ({first.method}); "
                            f"measured again: {again.median / ref.median:.3f}x ({second.method}).\n  this test's rounds: "
                            f"{rounds(mine)}\n  {name}'s rounds: {rounds(ref)}")


def _not_compared(judge: Judge, result: Result, over: str, name: str, label: str, part: str, over_part: str) -> None:
    full = over if "::" in over else f"{judge.test_id.split('[', 1)[0]}[{over}]"
    msg = f"{judge.test_id}: the {over_part} number of {over} was not measured in this run, so {label} is not checked"
    left_out = full in judge.session.deselected
    if left_out:  # -k or -m chose a subset (the merge gate's, say): not a failure, even under --perf-strict
        msg = f"{judge.test_id}: {over} was deselected (-k or -m) in this run, so {label} is not checked"
    elif judge.strict:
        fail(judge.test_id, msg)
    judge.left(result, f"not compared with {name}" + (" (deselected)" if left_out else ""), covered_by=part)
    warn(msg)


def _shortfall(v: gates.Verdict, result: Result, entry: dict) -> str:
    return (f"  {v.part}: {result.parts.get(v.part).median:,.1f} samples/s against a baseline of {v.baseline_sps:,.1f} "
            f"({v.change_pct:+.1f}%; allowed {100 * (v.comparison.factor - 1):+.0f}%" + (f", {v.scope}" if v.scope else "")
            + f", {v.comparison.method}); measured again: {100 * (v.confirmation.ratio - 1):+.1f}%\n"
            f"    this run's rounds: {rounds(result.parts.get(v.part))}; baseline's: {rounds_of(entry['parts'][v.part])}")


def rounds(t: Throughput) -> str:
    return ", ".join(f"{r:,.0f}" for r in t.rounds)


def rounds_of(part: dict) -> str:
    return ", ".join(f"{r:,.0f}" for r in part["rounds"]) if part.get("rounds") else f"{part['samples_per_s']:,.0f} (median only)"
