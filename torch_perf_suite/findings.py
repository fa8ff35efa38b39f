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
    """A failed one carries, beside its whole `text`, what a test's failure says first: its `brief`, the statement in
    a line without its asides (report/causes.py renders it; nothing reads a text back), and `where`, the user's
    file:line it came from (the first sync or host read its text lists), where one is known."""

    outcome: str
    text: str = ""
    brief: str = ""  # "" for a finding that is not a failure, or whose text is a line already
    where: str = ""

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"Finding outcome {self.outcome!r}; expected one of {OUTCOMES}")

    @property
    def said(self) -> str:
        """Its brief, or its text's first line where it has none."""
        return self.brief or self.text.strip().split("\n", 1)[0].strip()


def briefly(label: str) -> str:
    """A reference's label as a brief names it, without the commit its text gives: "REF HEAD (561653b82f5b)" -> "REF
    HEAD"; "the baseline" as it is."""
    return label.split(" (", 1)[0]


def failures(found: list[Finding]) -> str | None:
    """The failed findings' texts, a line each; None where none failed."""
    return "\n".join(f.text for f in found if f.outcome == FAILED) or None


class PerfWarning(UserWarning):
    """A check that could not be made: no baseline, no predecessor measured in this run."""
