"""A failure's first line: what failed, briefly. pytest's short summary (`-r`, `FAILED test - ...`) shows only the first
line of a failure's message, so the fixture puts this line above the whole text: each failed finding in a few words
(`; `-separated), the whole texts unchanged on the lines below. A report row keeps the whole text only (`whole`)."""

from __future__ import annotations

import re

WHERE_COUNTED = "counted at "  # a heading that says only which record the counts below were compared with
BRIEF = 120  # characters at most of one finding's brief
_ASIDE = re.compile(r" \((?![+-]\d)[^()]*\)")  # a parenthesis: how many in how many steps, which file, why; not
# the change against the record ("(+301, +32.4%; allowed +1% or +20)"), which says how far it went
_WHERE = re.compile(r"^\s*user code: ([^\s(]\S*)", re.MULTILINE)  # a sync's file:line, as SyncSource.describe names it
_RANK = re.compile(r"^rank \d+: ")  # a spread's rank, before each line of its count (fixture/ranks.counted)


def _statement(line: str) -> str:
    """A line's statement without the explanation after its colon ("...expected at most 0: each reads a tensor's value
    ..." -> "...expected at most 0"); a colon after a label of one word ("--perf-strict: ...") or a rank is kept."""
    if rank := _RANK.match(line):
        return rank[0] + _statement(line[rank.end():])
    for m in re.finditer(r": ", line):
        if " " in line[:m.start()].strip():
            return line[:m.start()]
    return line.rstrip(":")


def brief(text: str) -> str:
    """One finding's text in a line: its first line's statement without its asides (a first line without a number that
    introduces the lines below, "throughput regression in gpu:", with the first of them), and the user code's
    file:line where the first sync or host read listed below it was made."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()] or [""]
    said = _ASIDE.sub("", _statement(lines[0])).removeprefix("measured ").strip()
    if lines[0].endswith(":") and not re.search(r"\d", said) and len(lines) > 1:  # a heading: its numbers are below
        below = _ASIDE.sub("", _statement(lines[1])).strip()
        said = below if said.startswith(WHERE_COUNTED) else f"{said}: {below}"  # where it was counted: the line says
    where = _WHERE.search(text)
    if where and where[1] not in said:
        said += f", from {where[1]}"
    return said if len(said) <= BRIEF else said[:BRIEF - 1] + "…"


def cause_line(texts: list[str]) -> str:
    """The first line of a failure of these findings: each one's brief, `; `-separated."""
    return "; ".join(dict.fromkeys(brief(t) for t in texts if t.strip()))


def message(test_id: str, whole: str, texts: list[str] | None = None) -> str:
    """A test's failure message: the cause line of `texts` (or of `whole`, without the test's id that starts it), then
    `whole` unchanged."""
    return f"{cause_line(texts or [whole.removeprefix(f'{test_id}: ')])}\n{whole}"


def whole(failure: str, test_id: str) -> str:
    """A failure's text as the report keeps it: without the cause line above the text that starts with the test's id."""
    head, _, rest = failure.partition("\n")
    return rest if rest.startswith(f"{test_id}: ") and not head.startswith(f"{test_id}: ") else failure


def together(test_id: str, failed: list[tuple[str, list[str]]], raised: str = "") -> str:
    """A test's failure made of every check that failed in it ((whole text, its findings' texts) in the order they
    failed) and, where the test then raised, what it raised (`raised`): one cause line for them all, then each whole
    text."""
    texts = [t for _, found in failed for t in found] + ([raised] if raised else [])
    wholes = [w for w, _ in failed] + ([f"{test_id}: then the test raised {raised}"] if raised else [])
    return message(test_id, "\n".join(wholes), texts)
