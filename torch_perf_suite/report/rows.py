"""A report's rows as the JSON holds them, read the same whatever their age: a row's outcome and its own notes.
Standard library only: the nightly's alert half reads them on a runner with nothing installed."""

import datetime
import math

from ..store import quoted


def outcome(row: dict) -> str:
    """"passed" or "FAILED" where the session knew the outcome, else "-". A report written before rows had an
    "outcome" (the nightly's history) kept it as the first note."""
    notes = row.get("notes") or []
    legacy = notes[0] if notes and notes[0] in ("passed", "FAILED") else "-"
    return (row["outcome"] or "-") if "outcome" in row else legacy


def own_notes(row: dict) -> list[str]:
    """The row's notes, without an older report's outcome among them."""
    notes = row.get("notes") or []
    return notes[1:] if "outcome" not in row and outcome(row) != "-" else notes


def report_problem(report) -> str | None:
    """What makes `report` no perf report that `summarize` can read, naming the entry; None where it is one."""
    if not isinstance(report, dict):
        return f"the top level is {type(report).__name__}, expected an object"
    env = report.get("env")
    if not isinstance(env, dict) or not isinstance(env.get("gpu"), str) or not env["gpu"].strip():
        return f"'env' is {quoted(env)}, expected the environment with its 'gpu' and 'date'"
    if not isinstance(env.get("date"), str) or not is_date(env["date"]):
        return f"env 'date' is {quoted(env.get('date'))}, expected a date such as 2026-11-22"
    tests = report.get("tests")
    if not isinstance(tests, list):
        return f"'tests' is {quoted(tests)}, expected a list of rows"
    for i, row in enumerate(tests):
        problem = _row_problem(row)
        if problem:
            name = row.get("test") if isinstance(row, dict) and isinstance(row.get("test"), str) else None
            return f"tests[{i}]" + (f" {name!r}" if name else "") + f": {problem}"
    return None


def _row_problem(row) -> str | None:
    if not isinstance(row, dict):
        return f"is {quoted(row)}, expected an object"
    if not isinstance(row.get("test"), str) or not row["test"]:
        return f"'test' is {quoted(row.get('test'))}, expected the test's id"
    notes = row.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        return f"'notes' is {quoted(notes)}, expected a list of lines"
    if row.get("outcome") not in (None, "passed", "FAILED"):
        return f"'outcome' is {quoted(row.get('outcome'))}, expected \"passed\", \"FAILED\" or null"
    parts = row.get("parts")
    if not isinstance(parts, dict):
        return f"'parts' is {quoted(parts)}, expected an object of parts"
    for name, part in parts.items():
        if part is not None and (not isinstance(part, dict) or not is_number(part.get("samples_per_s"))):
            return f"part {name!r} is {quoted(part)}, expected null or an object with a 'samples_per_s' number"
    for name in ("syncs_per_step", "efficiency"):
        if row.get(name) is not None and not is_number(row[name]):
            return f"{name!r} is {quoted(row[name])}, expected a number or null"
    verdicts = row.get("baseline", {})
    if not isinstance(verdicts, dict):
        return f"'baseline' is {quoted(verdicts)}, expected an object of parts"
    for name, v in verdicts.items():
        if not isinstance(v, dict) or (v.get("compared") and not all(is_number(v.get(k)) for k in CHANGE)):
            return f"baseline {name!r} is {quoted(v)}, expected an object with {CHANGE} numbers where compared"
    return None


CHANGE = ("change_pct", "allowed_pct")  # of a part compared with its baseline


def is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def is_date(text: str) -> bool:
    try:
        return datetime.date.fromisoformat(text).isoformat() == text
    except ValueError:
        return False
