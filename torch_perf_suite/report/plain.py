"""The report as the terminal shows it: the Markdown that saved.render writes (PATH.md, the CI job summary) said again
in plain text. Headings are underlined, pipe tables become columns aligned by spaces, each test's collapsed
<details> block its summary line with its lines indented under it, code and bold marks are dropped, a link is its
text and address, and a Mermaid chart (drawn only where Markdown is) is left out with its legend: its table is
above it."""

from __future__ import annotations

import html
import re

_SUMMARY = re.compile(r"<details><summary>(.*)</summary>$")
_RULE = re.compile(r":?-+:?$")
_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`\n]*)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
GAP = "  "  # between two columns of a table


def inline(text: str) -> str:
    """A line without its Markdown marks: `code` -> code, **bold** -> bold, [text](address) -> text: address."""
    return _BOLD.sub(r"\1", _CODE.sub(r"\1", _LINK.sub(r"\1: \2", text)))


def _cells(line: str) -> list[str]:
    """A table line's cells, each as padded as markdown._table left it (a number aligned within its column)."""
    return [cell.removeprefix(" ").rstrip() for cell in line.strip()[1:-1].split("|")]


def table(lines: list[str]) -> list[str]:
    """A Markdown pipe table (its head, its rule, its rows) as columns aligned by spaces; a column the rule aligns
    right ("---:") is aligned right, and the rule becomes dashes as wide as each column."""
    rows = [_cells(line) for line in lines]
    rule = next((i for i, cells in enumerate(rows) if cells and all(_RULE.match(c.strip()) for c in cells)), None)
    right = {i for i, c in enumerate(rows[rule]) if c.endswith(":")} if rule is not None else set()
    rows = [[inline(c) for c in cells] for cells in rows]
    width = max(map(len, rows))
    widths = [max((len(cells[i]) for n, cells in enumerate(rows) if n != rule and i < len(cells)), default=0)
              for i in range(width)]

    def line(cells: list[str]) -> str:
        return GAP.join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [GAP.join("-" * w for w in widths) if n == rule else line(cells) for n, cells in enumerate(rows)]


def text(markdown: str) -> str:
    """The report's Markdown in plain text (the module's docstring says how)."""
    lines, out = markdown.splitlines(), []
    i, block, fenced = 0, False, False
    while i < len(lines):
        line = lines[i]
        i += 1
        if fenced or line.startswith("```"):
            fenced = fenced != line.startswith("```")  # in a fence until its closing line
            if not fenced and i + 1 < len(lines) and not lines[i] and lines[i + 1].startswith(("bars:", "line 1:")):
                i += 2  # the chart's legend
            continue
        if line.startswith("|"):
            rows = [line]
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(lines[i])
                i += 1
            out += table(rows)
        elif m := re.match(r"#{1,6} (.*)", line):
            out += [inline(m[1]), "-" * len(inline(m[1]))]
        elif m := _SUMMARY.match(line):
            out.append(html.unescape(m[1]))
            block = True
        elif line == "</details>":
            block = False
        elif block:
            if line:
                out.append("  " + inline(line))
        else:
            out.append(inline(line))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n") + "\n"
