"""The syncs' verdicts: a step's host-device syncs (or, with no GPU, its host reads) against what the test
expects, and a smoke run's reads against REF's. Plain functions that return findings (findings.py)."""

from __future__ import annotations

from dataclasses import replace

from ..counts import host_side
from ..findings import FAILED, NOT_CHECKED, Finding, briefly


def syncs(counted, *, per_step: float | None = None, at_least: float | None = None, at_most: float | None = None,
          from_library: str | None = None, versions: str = "", compared_with: str = "the baseline") -> list[Finding]:
    """Exactly `per_step` syncs per step, or `at_least` that many (a pitfall) and no more than `at_most`, what its
    baseline entry (REF's, under --perf-against: `compared_with`) recorded; optionally all from `from_library`.

    For a pitfall, fewer syncs than expected fails too: the pitfall is gone, and the workaround the scenario
    documents can be retired, knowingly. `versions` names the libraries the pitfall was seen with."""
    if (per_step is None) == (at_least is None):
        raise TypeError("assert_syncs takes exactly one of per_step= and at_least=")
    every_step = periodic_every_step(counted)
    if any(f.outcome == FAILED for f in every_step):
        return every_step
    return every_step + _expected(counted, per_step, at_least, at_most, from_library, versions, compared_with)


def _expected(counted, per_step, at_least, at_most, from_library, versions, compared_with) -> list[Finding]:
    """`syncs` once a periodic phase is known not to hide per-step syncs."""
    measured = counted.per_step
    said = f"{measured:.2f} host-device syncs per step"
    head = f"measured {said} ({counted.total} in {counted.steps} profiled steps)"
    where = f"\n{counted.describe()}"
    if per_step is not None and abs(measured - per_step) > 1e-9:
        more = "a new sync appeared" if measured > per_step else "fewer syncs than this scenario documents"
        return [Finding(FAILED, f"{head}, expected {per_step:g} ({more}):{where}", f"{said}, expected {per_step:g}",
                        counted.where)]
    if at_least is not None and measured < at_least:
        return [Finding(FAILED, f"{head}, expected at least {at_least:g}: the pitfall this scenario documents no longer "
                                f"syncs with {versions}. If that is an upgrade's doing, retire the workaround and this "
                                f"expectation together.{where}", f"{said}, expected at least {at_least:g}", counted.where)]
    if at_least is not None and at_most is not None and measured > at_most + 1e-9:
        return [Finding(FAILED, f"{head}, {at_most:g} recorded by {compared_with}: the pitfall syncs more than it did "
                                f"(a new sync beside it){where}", f"{said}, {at_most:g} recorded by {briefly(compared_with)}",
                        counted.where)]
    if from_library is not None:
        stray = [s for s in counted.sources if from_library not in s.library_line]
        if stray:
            listing = "\n".join(s.describe() for s in stray)
            expected = f"expected every sync to come from {from_library!r}, these do not"
            return [Finding(FAILED, f"{head}; {expected}:\n{listing}", f"{said}; {expected}",
                            next((s.at for s in stray if s.at), ""))]
    return []


def with_switches(found: list[Finding], switched: list[str]) -> list[Finding]:
    """The syncs' failures, each saying which debugging switches were on in the steps (machine/torch_state.DEBUGGING):
    anomaly detection reads every backward op's output, a sync the `.item()` advice above it does not fix."""
    if not switched:
        return found
    line = "\n  debugging switched on in these steps, whose checks sync too: " + "; ".join(switched)
    return [replace(f, text=f.text + line) if f.outcome == FAILED else f for f in found]


def periodic_every_step(counted) -> list[Finding]:
    """A phase marked periodic (`periodic()`, a `perf_periodic:` range) whose syncs are counted apart from the steps'
    must not run on every step: there its syncs are per-step syncs, and marking them would hide them. One profiled step
    cannot tell (not checked: --perf-strict fails on it)."""
    steps = counted.steps
    every = sorted(name for name, runs in counted.periodic_runs.items() if runs >= steps)
    if every and steps == 1:
        return [Finding(NOT_CHECKED, f"a phase marked periodic ({', '.join(every)}) ran in the one profiled step: one "
                                     "step cannot tell a phase that runs every step from one that runs every k steps; "
                                     "profile 2 or more (--perf-profile-steps)",
                        "a phase marked periodic ran in the one profiled step")]
    if not every:
        return []
    said = f"a phase marked periodic ran in every one of the {steps} profiled steps"
    return [Finding(FAILED, f"{said} ({', '.join(every)}): its syncs are per-step syncs. Mark only what runs every k > 1 "
                            f"steps, or count more steps (--perf-profile-steps) than its period:\n{counted.describe()}",
                    said, counted.where)]


def host_reads(counted, *, per_step: float | None = None) -> list[Finding]:
    """A smoke run's syncs: no more host reads a step (host_reads.py) than the syncs the test expects on a GPU.

    Only an upper bound holds: a pitfall's sync that is not a read (a pageable copy) has no read to see, and which
    reads sync depends on where the tensor would live."""
    every_step = periodic_every_step(counted)
    if any(f.outcome == FAILED for f in every_step) or per_step is None or counted.per_step <= per_step + 1e-9:
        return every_step
    return every_step + [Finding(FAILED, f"measured {counted.per_step:.2f} host reads per step ({counted.total} in "
                                         f"{counted.steps} steps) with no GPU, expected at most {per_step:g}: each reads a "
                                         f"tensor's value on the host, which on a GPU is a host-device sync:\n"
                                         f"{counted.describe()}",
                                 f"{counted.per_step:.2f} host reads per step with no GPU, expected at most {per_step:g}",
                                 counted.where)]


def host_reads_against(now: dict, recorded: dict, compared_with: str, counted) -> list[Finding]:
    """A smoke run's host reads a step (smoke_counts.reads_entry) against REF's smoke run's: more reads a step than
    REF's fails, naming the lines whose reads grew, most first (a read that an edit above it moved, with none added,
    does not); `counted`: the head's reads (a SyncCount), listed as the syncs' check lists them."""
    mine, was = now["per_step"], recorded["per_step"]
    if mine <= was + 1e-9:
        return []
    rows = host_side.grown(now["lines"], recorded["lines"], complete=True)
    said = f"{mine:.2f} host reads per step with no GPU, {was:.2f} at {{}} ({mine - was:+.2f})"
    return [Finding(FAILED, f"measured {said.format(compared_with)}: each reads a tensor's value on the host, which on a GPU "
                            "is a host-device sync; reads a step by line, most grown first:\n" + "\n".join(rows)
                            + f"\n{counted.describe()}",
                    said.format(briefly(compared_with)), counted.where)]


DTYPE_MARGIN_PCT, DTYPE_FLOOR = 1.0, 0.5  # a dtype's ops a step may grow by this much, or this many, before it counts
DTYPE_SHARE_PP = 2.0  # and its share of the step's ops by this many points: more ops in the same dtype are no move


def dtypes_against(now: dict, recorded: dict, compared_with: str) -> list[Finding]:
    """A smoke run's ops a step by the floating dtype they make (smoke_counts.reads_entry's `dtypes`) against the
    record's: a dtype new to the step, or whose share of the step's ops grew by DTYPE_SHARE_PP points or more than
    doubled (a minority dtype multiplied), its ops grown past
    DTYPE_MARGIN_PCT and DTYPE_FLOOR, fails, naming it (a model or a tensor moved to float64 runs every op at a fraction
    of the speed on a GPU; autocast left off runs float32 where bfloat16 was). An op more in the step's own dtype (a
    `* 1.0` in the loss) is no change of precision: the host side's lines judge it."""
    total_now, total_then = sum(now.values()) or 1.0, sum(recorded.values()) or 1.0
    shares = {dtype: (n / total_now, recorded.get(dtype, 0.0) / total_then) for dtype, n in now.items()}
    grown = {dtype: (n, recorded.get(dtype, 0.0)) for dtype, n in now.items()
             if n > max(recorded.get(dtype, 0.0) * (1 + DTYPE_MARGIN_PCT / 100), recorded.get(dtype, 0.0) + DTYPE_FLOOR)
             and (not shares[dtype][1] or 100 * (shares[dtype][0] - shares[dtype][1]) > DTYPE_SHARE_PP
                  or shares[dtype][0] > 2 * shares[dtype][1])}  # its share grew by the points, or more than doubled
    if not grown:
        return []
    rows = "; ".join(f"{dtype} {n:,.2f} a step, {was:,.2f} at {compared_with}" for dtype, (n, was) in sorted(grown.items()))
    said = "the step computes in another dtype"
    return [Finding(FAILED, f"{said}: ops a step by the dtype they make grew: {rows} (all "
                            f"dtypes now: {', '.join(f'{d} {n:,.2f}' for d, n in sorted(now.items()))}): a model, a "
                            "tensor or a loss moved to another precision (.double(), a float64 constant, autocast off)", said)]
