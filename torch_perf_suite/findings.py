"""What a check found, as one kind of value. A verdict function (checks, gates, loader, turns, instructions) returns
its findings; the pytest layer (the fixture and its Judge) turns a failed one into the test's failure and the others
into the report's notes, warnings and, under --perf-against, the holes --perf-strict fails on."""

from __future__ import annotations

from dataclasses import dataclass

FAILED = "failed"  # the test fails with its text
PASSED = "passed"  # compared, and it held; its text, where it has one, is a line of the report
REPORTED = "reported"  # a reading: said in the report, not judged here (a number of another host, a count NVML lacks)
NOT_COMPARED = "not compared"  # nothing to compare it with here: a note, and against REF a hole unless covered
NOT_CHECKED = "not checked"  # a check that could not be made: a warning, and a failure under --perf-strict
OUTCOMES = (FAILED, PASSED, REPORTED, NOT_COMPARED, NOT_CHECKED)


@dataclass(frozen=True)
class Finding:
    outcome: str
    text: str = ""

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"Finding outcome {self.outcome!r}; expected one of {OUTCOMES}")


def failures(found: list[Finding]) -> str | None:
    """The failed findings' texts, a line each; None where none failed."""
    return "\n".join(f.text for f in found if f.outcome == FAILED) or None


class PerfWarning(UserWarning):
    """A check that could not be made: no baseline, no predecessor measured in this run."""
