"""The step's counts, a line each (COUNTS): what one count is to every place that handles counts. A `Count` says what
it measures of a test's result, its value in a baseline entry's "counts" (and a smoke record's), what a malformed
recorded value is, and its judgement against a recorded value. The fixture's entry (Result.counts), the baseline file's
validation, the comparison with a baseline or with REF (`counted`), a smoke run's record and holes, and the nightly's
series loop over COUNTS: a new count is a module of this folder (what it measures, its verdict) and a line here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..findings import NOT_COMPARED, Finding
from ..store import number_problem, quoted
from . import checks, host_side
from .compiled import CompileCount

MAX_STEP_BYTES = 10_000 * 1e9  # no GPU holds 10 TB


@dataclass(frozen=True)
class Judging:
    """What a count is judged with beside its two values: the margin of counts that move between two machines of one
    model, what it is compared with ("the baseline", "REF HEAD (abc)"), and torch.compile's count of this run (the
    reasons of its breaks)."""

    margin_pct: float
    compared_with: str = "the baseline"
    compile_count: CompileCount | None = None


def numbers_by_name(value) -> str | None:
    """What is wrong with a recorded table of counts by name ({"aten::add": 3.0}), after "'counts' 'key'"; None if
    nothing."""
    if not isinstance(value, dict):
        return f" is {quoted(value)}, expected an object"
    return next((f" {name!r} {problem}" for name, v in value.items() if (problem := number_problem(v))), None)


@dataclass(frozen=True)
class Count:
    key: str  # its key in a test's counts (Result.counts), a baseline entry's and a smoke record's
    measure: Callable[[Any], Any]  # a result (or one rank's view of it) -> its value; None where this run did not count it
    judge: Callable[[Any, Any, Judging], list[Finding]]  # (now, recorded: None where the record lacks it) -> findings
    missing: str = ""  # what "not compared" names where the record has it and this run did not count it ("": none then)
    validate: Callable[[Any], str | None] = numbers_by_name  # a recorded value -> what is wrong with it, after "'counts' 'key'"
    explains: bool = False  # judged first: it explains the others
    hole: str = ""  # a smoke run's name for it where REF's smoke record lacks it: a hole ("": not a smoke count)
    series: tuple[str, tuple[str, ...], str | None] | None = None  # the nightly's: its name, its path in a report row,
    # the option that sets how far a commit may move it (None: exactly)


def _kernels(syncs):
    return syncs.kernels if syncs is not None else None


def _of_kernels(field: str, digits: int | None):
    def measure(r):
        k = _kernels(r.syncs)
        return None if k is None else {name: round(n, digits) for name, n in getattr(k, field).items()}
    return measure


def _peak(now, recorded, a: Judging) -> list[Finding]:
    if recorded is None:
        return [Finding(NOT_COMPARED, f"step memory not compared: {a.compared_with} recorded none for this test")]
    return checks.step_memory(now, recorded, a.margin_pct)


def _peak_problem(value) -> str | None:
    problem = number_problem(value, optional=True, at_most=MAX_STEP_BYTES)
    return problem and f" {problem}"


def _switches_problem(value) -> str | None:
    if isinstance(value, list) and all(isinstance(name, str) for name in value):
        return None
    return f" is {quoted(value)}, expected a list of the debugging switches that were on"


def _host_problem(value) -> str | None:
    problem = host_side.validate(value)
    return problem and f": {problem}"


COUNTS: list[Count] = [
    Count("kernels_per_step", _of_kernels("families", 3), lambda now, was, a: checks.kernel_launches(now, was or {}),
          "kernel launches a step", series=("kernel launches a step", ("kernels", "launches_per_step"), None)),
    Count("copies_per_step", _of_kernels("copies_per_step", None),
          lambda now, was, a: checks.copies(now, was or {}, a.margin_pct), "bytes copied a step",
          series=("bytes copied a step", ("kernels", "copied_bytes_per_step"), "--perf-count-margin")),
    Count("allocator_per_step", _of_kernels("allocator_per_step", 3),
          lambda now, was, a: checks.allocator_calls(now or {}, was or {})),
    Count("step_peak_bytes", lambda r: r.syncs.step_peak_bytes if r.syncs is not None else None, _peak, "step memory",
          _peak_problem),
    Count("compile", lambda r: r.compile.as_entry() if r.compile is not None and r.compile.compiled else None,
          lambda now, was, a: checks.compile_counts(a.compile_count or CompileCount(), was or {})),
    Count("host", lambda r: r.host.entry() if r.host is not None else None,
          lambda now, was, a: host_side.failure(now, was, a.compared_with) if now and was else [],
          "the step's host side", _host_problem, hole="host side",
          series=("Python lines a step", ("host", "lines_per_step"), None)),
    Count("debugging", lambda r: r.debugging or None,
          lambda now, was, a: checks.debugging(now or [], was or [], a.compared_with), validate=_switches_problem,
          explains=True),
]


def measured(result) -> dict:
    """A result's counts (or one rank's: a view with its syncs and host side), as its baseline entry keeps them."""
    return {c.key: value for c in COUNTS if (value := c.measure(result)) is not None}


def counted(now: dict, recorded: dict | None, judging: Judging) -> list[Finding]:
    """Every count of a test against its recorded entry, each by its own judgement (what explains the others first); a
    count the record has that this run did not take (no profiled window, a step no longer counted) not compared.
    Nothing recorded: none. A test over several GPUs: fixture/ranks.counted."""
    if not recorded:
        return []
    found = [Finding(NOT_COMPARED, f"{c.missing} not compared: {judging.compared_with} counted it, this run did not")
             for c in COUNTS if c.missing and c.key in recorded and c.key not in now]
    if not now:
        return found
    judged = {c.key: c.judge(now.get(c.key), recorded.get(c.key), judging) for c in COUNTS
              if c.key in now or (not c.missing and c.key in recorded)}
    first = [f for c in COUNTS if c.explains for f in judged.get(c.key, [])]
    return first + found + [f for c in COUNTS if not c.explains for f in judged.get(c.key, [])]


def problem(counts: dict) -> str | None:
    """What is wrong with a recorded entry's counts, "'counts' 'key' ..."; None if nothing."""
    return next((f"'counts' {c.key!r}{p}" for c in COUNTS if c.key in counts and (p := c.validate(counts[c.key]))), None)
