"""The loader judged. Its instruction count (loader/instructions.py counts it): against the count recorded for the test in
this environment, or for another test of the same loader, within the margin; a count that grew names the loader's
functions that changed since it was recorded. Its cost per sample (cost.py measures it): blocks on any host, waiting
where timed against REF or this host's baseline. Plain functions that return findings (findings.py)."""

from __future__ import annotations

from dataclasses import replace

from ..findings import FAILED, NOT_CHECKED, NOT_COMPARED, PASSED, REPORTED, Finding, briefly
from .cost import UnitCost, cpu_line
from .described import BLOCKS_MARGIN
from .instructions import Counted, InstructionsFile


def verdict(counted: Counted, file: InstructionsFile, key: str, test_id: str, margin_pct: float,
            rerecord: str) -> Finding:
    """A loader's count against the one recorded for `test_id` under `key`, or where `test_id` has none, for another
    test that counted the same loader (a count is its loader's, whichever test ran it: a spread over GPUs feeds its
    ranks test_storage's loader): failed beyond the margin (`check`), else passed; not compared where the record is
    another environment's or another loader's; not checked where nothing was recorded (`rerecord` says how)."""

    recorded, of = file.get(key, test_id), ""
    if recorded is None and (same := file.of_source(key, counted.source)) is not None:
        other, recorded = same
        of = f" (counted for {other}, the same loader)"
    if recorded is None:
        others = file.keys_for(test_id)
        if others:  # another environment's count says nothing of this one's
            return Finding(NOT_COMPARED, f"loader instructions not comparable: recorded with {', '.join(others)}; "
                                         f"this is {key}")
        return Finding(NOT_CHECKED, f"no loader instruction count for {key} in {file.path}; {rerecord}",
                       f"no loader instruction count for {key} in {file.path}")
    if recorded["source"] != counted.source:
        return Finding(NOT_COMPARED, f"loader instructions not comparable: recorded for {recorded['source']}, this test "
                                     f"counts {counted.source}; {rerecord}")
    found = check(counted.per_sample, recorded["per_sample"], margin_pct)
    if not found:
        return Finding(PASSED, of and f"loader instructions compared{of}")
    where = _changed_since(counted.read, recorded) if counted.read is not None else []
    return replace(found[0], text=found[0].text + of + "".join(f"\n  changed since the count: {w}" for w in where))


def _changed_since(read, recorded: dict) -> list[str]:
    """Where the loader's code (a digest.Read) changed since the count `recorded` (an entry with `functions`): each
    function that ran then or now whose code differs, "tiny.py:21 in Images.__getitem__"; where the entry has no
    functions, the files that changed."""
    then = recorded.get("functions")
    if then is None:
        return [p for p, h in sorted(read.files.items()) if not h.startswith((recorded.get("files") or {}).get(p, "-"))]
    found = []
    for path in sorted({*read.functions, *then}):
        now, was = read.functions.get(path, {}), then.get(path, {})
        for fn in sorted({*now, *was}):
            if fn not in now:
                found.append(f"{path}: {fn} no longer runs")
            elif now[fn][0] != was.get(fn):
                found.append(f"{path}:{now[fn][1]} in {fn}" + ("" if fn in was else " (new)"))
    return found


INSTRUCTIONS_FLOOR = 2_000  # per sample: a light loader's count moves by up to 871 with what its process counted before
# (A/A, docs/measurements/counted-gates.md): 2.3 times that


def check(per_sample: float, recorded: float, margin_pct: float) -> list[Finding]:
    """The loader's instructions per sample no more than `margin_pct` over the record, or INSTRUCTIONS_FLOOR for a
    loader so light that a percent of it is the interpreter's own noise (a raw uint8 tensor a sample)."""
    if per_sample <= max(recorded * (1 + margin_pct / 100), recorded + INSTRUCTIONS_FLOOR):
        return []
    change = f"{recorded:,.0f} recorded ({100 * (per_sample / recorded - 1):+.1f}%; allowed +{margin_pct:g}%)"
    return [Finding(FAILED, f"the loader runs {per_sample:,.0f} instructions per sample (dataset item, transforms, "
                            f"collate; callgrind), {change}: more CPU work per sample in the dataset, its transforms or "
                            "the collate", f"the loader runs {per_sample:,.0f} instructions per sample, {change}")]


WAIT_FLOOR_US = 20.0  # waiting per sample below this much more is no verdict: a sleep or a read waits far longer


def unit_failure(now: dict, recorded: dict, tolerance_pct: float, *, timed: bool, compared_with: str) -> list[Finding]:
    """The unit cost against a recorded one, one failed finding naming every rise (none where nothing rose): more
    blocks per sample in the workers (a count, any host; allowed BLOCKS_MARGIN and one a tensor its batches hold, which
    the worker's queue moves into shared memory on its feeder thread while the worker makes the next batch: a wait for
    the interpreter's lock that comes and goes with the main process's pace), more blocks per sample made alone (no
    worker, no queue: BLOCKS_MARGIN), and, where
    `timed` (REF, or a baseline of this host), more waiting per sample alone than `tolerance_pct` of a sample's
    recorded wall time (and WAIT_FLOOR_US) allows. Waiting is wall minus CPU time of the same samples, so a host that
    runs the thread slower moves both and leaves it. The CPU time alone is not judged, in microseconds or in yardsticks:
    the yardsticks took out most of what the host moved, yet the first loader timed in a process still came out slower
    in yardsticks in A/A runs (docs/measurements/loader.md); the instruction count judges the CPU's work exactly, and
    against REF turns.py times it by turns with REF's."""
    lines, workers = [], now.get("batches", 1)  # lines: (its brief, the line); 0 batches: a smoke run's, made alone
    queue = max(now.get("shared", 0.0), recorded.get("shared", 0.0)) if workers else 0.0
    if now["blocks"] > recorded["blocks"] + BLOCKS_MARGIN + queue:
        allowed = "" if queue < 0.01 else f" (allowed +{BLOCKS_MARGIN + queue:.2f}: {queue:.2f} for the tensors the queue shares)"
        said = f"blocks {now['blocks']:.2f} times a sample {'in the workers' if workers else 'made alone'}"
        lines.append((f"{said}, {recorded['blocks']:.2f} at {briefly(compared_with)}",
                      f"{said} (sleep, I/O, a lock: voluntary context switches), {recorded['blocks']:.2f} at "
                      f"{compared_with}{allowed}"))
    alone = recorded.get("alone_blocks", recorded["blocks"])  # a record made before they were kept: its workers'
    if workers and now.get("alone_blocks", 0.0) > alone + BLOCKS_MARGIN:
        lines.append((f"blocks {now['alone_blocks']:.2f} times a sample made alone, {alone:.2f} at {briefly(compared_with)}",
                      f"blocks {now['alone_blocks']:.2f} times a sample made alone (sleep, I/O, a lock: voluntary "
                      f"context switches), {alone:.2f} at {compared_with}"))
    more = now["wait_us"] - recorded["wait_us"]
    waited = 100 * more / recorded["wall_us"]
    if timed and more > WAIT_FLOOR_US and waited > tolerance_pct:
        lines.append((f"waiting {now['wait_us']:,.1f} µs a sample alone, {recorded['wait_us']:,.1f} at {briefly(compared_with)}",
                      f"waiting {now['wait_us']:,.1f} µs a sample alone (wall minus CPU time), {recorded['wait_us']:,.1f} "
                      f"at {compared_with}: +{more:,.1f} µs, {waited:.1f}% of a sample's {recorded['wall_us']:,.1f} µs "
                      f"(allowed {tolerance_pct:g}%): sleep, I/O or a lock"))
    if not lines:
        return []
    return [Finding(FAILED, "the loader's cost per sample rose:\n" + "\n".join("  " + line for _, line in lines),
                    f"the loader's cost per sample rose: {lines[0][0]}")]


def unit_verdict(unit: UnitCost | None, entry: dict | None, tolerance_pct: float, *, why_not_timed: str,
                 compared_with: str) -> list[Finding]:
    """The loader's cost per sample against a baseline `entry`'s: its blocks judged on any host, its waiting only where
    `why_not_timed` is empty (REF, or a baseline recorded on this host); its CPU time reported (the instruction count
    and the turns judge that work). Not compared where one side has none."""
    recorded = (entry or {}).get("loader_unit")
    if unit is None or recorded is None:
        why = "none measured here" if unit is None else f"{compared_with} recorded none"
        return [Finding(NOT_COMPARED, f"loader cost per sample not compared: {why}")] \
            if unit is not None or recorded is not None else []
    reading = f"loader waiting per sample: {why_not_timed}" if why_not_timed else cpu_line(unit.entry(), recorded, compared_with)
    return unit_failure(unit.entry(), recorded, tolerance_pct, timed=not why_not_timed, compared_with=compared_with) + [
        Finding(REPORTED, reading)]
