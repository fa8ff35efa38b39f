"""A failure's first line: what failed, briefly. pytest's short summary (`-r`, `FAILED test - ...`) shows only the first
line of a failure's message, so the fixture puts this line above the whole text: each failed finding's brief
(`Finding.brief`, with the user's file:line it came from), `; `-separated, the whole texts unchanged on the lines below.
A report row keeps the whole text only (`whole`). The line is rendered from the findings; no text is read back."""

from __future__ import annotations

from ..findings import FAILED, Finding

BRIEF = 120  # characters at most of one finding's brief


def brief(found: Finding) -> str:
    """One finding in a line: its brief (its text's first line where it has none) and where the user's code made it."""
    said = found.said
    if found.where and found.where not in said:
        said += f", from {found.where}"
    return said if len(said) <= BRIEF else said[:BRIEF - 1] + "…"


def cause_line(found: list[Finding]) -> str:
    """The first line of a failure of these findings: each one's brief, `; `-separated, each said once."""
    return "; ".join(dict.fromkeys(brief(f) for f in found if f.brief or f.text.strip()))


def message(test_id: str, whole: str, found: list[Finding]) -> str:
    """A test's failure message: the cause line of `found`, then `whole` unchanged."""
    return f"{cause_line(found)}\n{whole}"


def stated(test_id: str, whole: str) -> str:
    """The failure message of a text the pytest layer states itself (a marker or a workload it cannot use), its first
    line its brief."""
    return message(test_id, whole, [Finding(FAILED, whole.removeprefix(f"{test_id}: "))])


def whole(failure: str, test_id: str) -> str:
    """A failure's text as the report keeps it: without the cause line above the text that starts with the test's id."""
    head, _, rest = failure.partition("\n")
    return rest if rest.startswith(f"{test_id}: ") and not head.startswith(f"{test_id}: ") else failure


def together(test_id: str, failed: list[tuple[str, list[Finding]]], raised: Finding | None = None) -> str:
    """A test's failure made of every check that failed in it ((whole text, its failed findings) in the order they
    failed) and, where the test then raised, what it raised (`raised`): one cause line for them all, then each whole
    text."""
    found = [f for _, of in failed for f in of] + ([raised] if raised else [])
    wholes = [w for w, _ in failed] + ([f"{test_id}: then the test raised {raised.text}"] if raised else [])
    return message(test_id, "\n".join(wholes), found)
