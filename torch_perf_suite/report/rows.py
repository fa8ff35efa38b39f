"""A report's rows as the JSON holds them, read the same whatever their age: a row's outcome and its own notes.
Standard library only: the nightly's alert half reads them on a runner with nothing installed."""


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
