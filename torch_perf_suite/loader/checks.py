"""The loader's instruction count judged (loader/instructions.py counts it): against the count recorded for the test in
this environment, or for another test of the same loader, within the margin; a count that grew names the loader's
functions that changed since it was recorded. Plain functions that return findings (findings.py)."""

from __future__ import annotations

from ..findings import FAILED, NOT_CHECKED, NOT_COMPARED, PASSED, Finding
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
        return Finding(NOT_CHECKED, f"no loader instruction count for {key} in {file.path}; {rerecord}")
    if recorded["source"] != counted.source:
        return Finding(NOT_COMPARED, f"loader instructions not comparable: recorded for {recorded['source']}, this test "
                                     f"counts {counted.source}; {rerecord}")
    found = check(counted.per_sample, recorded["per_sample"], margin_pct)
    if not found:
        return Finding(PASSED, of and f"loader instructions compared{of}")
    where = _changed_since(counted.read, recorded) if counted.read is not None else []
    return Finding(FAILED, found[0].text + of + "".join(f"\n  changed since the count: {w}" for w in where))


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
    return [Finding(FAILED, f"the loader runs {per_sample:,.0f} instructions per sample (dataset item, transforms, "
                            f"collate; callgrind), {recorded:,.0f} recorded ({100 * (per_sample / recorded - 1):+.1f}%; "
                            f"allowed +{margin_pct:g}%): more CPU work per sample in the dataset, its transforms or the "
                            "collate")]
