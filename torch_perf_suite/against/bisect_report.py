"""A bisection's report (bisecting.py): the first bad commit with its failures, every commit judged with its figures,
and their chart; the terminal shows it as plain text, --perf-report writes it as PATH.bisect.md."""

from __future__ import annotations

import math

from ..report import charts

PARTS = ("gpu", "pipeline", "loader")  # the samples/s a judged commit's figures show, in this order


def most_measured(n: int) -> int:
    """The bisection's bound: BAD, then halving n commits, and a repeat's worth for a skip: ceil(log2(n)) + 2."""
    return math.ceil(math.log2(max(n, 1))) + 2


def report(finding, good_name: str, bad_name: str) -> str:
    """The report of a `bisecting.Bisection`: the first bad commit with its failures, every commit tested with its
    figures, and their chart."""
    tested = [c for c in (finding.good, *finding.commits) if c.sha in finding.tested]  # GOOD's A/A first: the yardstick
    head = (f"perf bisect {good_name}..{bad_name}: {len(finding.commits)} commit(s) (first parent), "
            f"{len(finding.tested)} judged, {finding.measured} measured in this run "
            f"(at most {most_measured(len(finding.commits))} asked)")
    lines = [head, ""]
    bad = finding.commits[-1]
    if finding.first_bad is None and finding.at_good is not None:
        how = "fails" if finding.at_good.status == "bad" else "cannot run"
        lines.append(f"{finding.good.short} ({good_name}) {how} against itself: nothing to bisect")
        lines += [f"- {w}" for w in finding.at_good.why]
    elif finding.first_bad is None:
        lines.append(f"{bad.short} ({bad_name}) {finding.tested[bad.sha].status}: nothing to bisect")
    else:
        c = finding.first_bad
        lines.append(f"**first bad commit: {c.short} {c.subject!r} ({c.date})**")
        lines += [f"- {w}" for w in finding.tested[c.sha].why]
        if finding.suspects:
            lines.append("the commits before it could not be judged, so the first bad one is one of: "
                         + ", ".join(s.short for s in finding.suspects))
        for later in finding.later:
            c = later.first_bad
            lines.append(f"**a later regression, which {bad.short} ({bad_name}) has and the first bad commit does not: "
                         f"{c.short} {c.subject!r} ({c.date})**")
            lines += [f"- {w}" for w in later.why]
            if later.suspects:
                lines.append("the commits before it could not be judged, so it is one of: "
                             + ", ".join(s.short for s in later.suspects))
    lines += ["", "| commit | subject | date | verdict | figures |", "|---|---|---|---|---|"]
    for c in tested:
        o = finding.tested[c.sha]
        itself = " against itself" if c is finding.good else ""  # GOOD's A/A
        lines.append(f"| {c.short} | {c.subject[:50]} | {c.date[:10]} | {o.status}{itself}" + (" (cached)" if o.cached else "")
                     + f" | {_figure_text(o)} |")
    table = [{"commit": c.short, **_first_figures(finding.tested[c.sha])} for c in tested]
    series = tuple(p for p in PARTS if any(p in row for row in table))
    if series and all(all(p in row for p in series) for row in table):
        lines += ["", charts.mermaid("samples/s of the first test, by commit", table, charts.Chart(x="commit", lines=series))]
    return "\n".join(lines) + "\n"


def _first_figures(outcome) -> dict:
    return next(iter(outcome.figures.values()), {})


def _figure_text(outcome) -> str:
    figures = _first_figures(outcome)
    parts = [f"{p} {figures[p]:,.0f}/s" for p in PARTS if p in figures]
    if figures.get("syncs_per_step") is not None:
        parts.append(f"{figures['syncs_per_step']:g} syncs/step")
    return ", ".join(parts) or (outcome.why[0][:80] if outcome.status == "skip" and outcome.why else "-")
