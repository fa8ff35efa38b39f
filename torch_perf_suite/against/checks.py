"""What a run against REF left uncompared: the holes that --perf-strict fails on."""

from __future__ import annotations

from ..counts import registry
from ..findings import FAILED, NOT_COMPARED, Finding, briefly


def smoke_holes(now: dict, reads: dict | None, recorded: dict | None, compared_with: str, why: str) -> list[Finding]:
    """A smoke run against REF, or against the smoke counts recorded in this environment: what it counted
    (Result.counts, its host reads) that the record of the test (smoke_counts.entry) lacks, NOT_COMPARED each: a hole
    that --perf-strict fails on, never a silent pass. `why`: why a record may lack the test, or how to record it."""
    had = [(c.hole, c.key in now, recorded and c.key in recorded["counts"]) for c in registry.COUNTS if c.hole]
    had.append(("host reads", reads is not None, recorded and recorded.get("reads") is not None))
    if recorded is None and any(has for _, has, _ in had):
        what = " and ".join(name for name, has, _ in had if has)
        return [Finding(NOT_COMPARED, f"{what} not compared: {compared_with} recorded no smoke counts for this test ({why})")]
    return [Finding(NOT_COMPARED, f"{name} not compared: {compared_with} recorded none for this test")
            for name, has, at_ref in had if has and not at_ref]


def holes(left: list[str], compared_with: str) -> list[Finding]:
    """--perf-strict: what a test left uncompared with `compared_with` ("REF abc123", "the baseline") and nothing else
    judged, one line each."""
    if not left:
        return []
    said = f"--perf-strict: {len(left)} check(s) not made against {{}}, and nothing else judged what they cover"
    return [Finding(FAILED, said.format(compared_with) + ":\n" + "\n".join(f"  {what}" for what in left),
                    said.format(briefly(compared_with)))]
