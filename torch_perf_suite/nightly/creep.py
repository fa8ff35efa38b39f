"""The nightly's numbers read as series, one a test, number and GPU model, and the change points found in them
(changes.py): a number that got worse below every night's tolerance is a creep, alerted once, on the night it is
found, with the nights around it, the commits between them and the options that bisect it; one that got better is
said, so that a baseline can be recorded again on purpose.

A night keeps each test's samples/s by part (`Night.samples`) and its other numbers (`Night.numbers`, from the report's
row by `numbers`), each with the way that is worse and the option that judges a commit by it at the creep's size."""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass

from ..counts import registry
from ..report.charts import Chart, mermaid
from ..report.rows import is_number
from . import changes

SAMPLES = " samples/s"  # a part's number: "gpu samples/s", higher is better


@dataclass(frozen=True)
class Number:
    """One number a night keeps of a test besides its samples/s: how to read it from the report's row."""

    path: tuple[str, ...]  # keys into the row; a dict at the end is summed
    option: str | None  # the pytest option that sets how far a commit may move it (None: compared exactly)


OWN = {  # the numbers a night keeps besides its counts' (counts/registry.py: each count's `series`)
    "host-device syncs a step": Number(("syncs_per_step",), None),
    "GPU kernel ms a step": Number(("kernels", "kernel_ms_per_step"), "--perf-tolerance"),
    "peak GPU memory GB": Number(("peak_mem_gb",), "--perf-count-margin"),
    "loader instructions a sample": Number(("extra", "loader instructions/sample"), "--perf-count-margin"),
}


def kept() -> dict[str, Number]:
    """Every number a night keeps of a test besides its samples/s: its own, then each count's series."""
    return {**OWN, **{name: Number(path, option) for name, path, option in (c.series for c in registry.COUNTS if c.series)}}


PART_OPTION = {"gpu": "--perf-tolerance"}  # the loader's and the pipeline's: --perf-host-tolerance


def numbers(row: dict) -> dict[str, float]:
    """A report row's numbers that a night keeps (`kept`), those it has."""
    found = {}
    for name, number in kept().items():
        value = row
        for key in number.path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, dict):
            value = sum(v for v in value.values() if is_number(v)) if value else None
        if is_number(value):
            found[name] = float(value)
    return found


def is_worse(name: str, change_pct: float) -> bool:
    return change_pct < 0 if name.endswith(SAMPLES) else change_pct > 0


def option(name: str) -> str | None:
    if name.endswith(SAMPLES):
        return PART_OPTION.get(name[: -len(SAMPLES)], "--perf-host-tolerance")
    return kept()[name].option


def series(nights: list, test: str) -> dict[str, list[tuple[int, float]]]:
    """Each number of `test` over `nights` (one GPU model's, oldest first): name -> (night's index, value), the
    nights that measured it."""
    found: dict[str, list[tuple[int, float]]] = {}
    for i, night in enumerate(nights):
        values = {f"{part}{SAMPLES}": v for part, v in night.samples.get(test, {}).items()}
        for name, value in {**values, **night.numbers.get(test, {})}.items():
            found.setdefault(name, []).append((i, value))
    return found


MOVE = 2  # a change point may move this many of its series' nights as nights are added and still be the one said
DRIFT_NIGHTS = 12  # a change the same way as the one before it, that level shorter than this: the series drifts
FROM_ZERO = 1e9  # the change in percent kept for a number that moved from a level of 0 (its sign, the way it moved)


@dataclass(frozen=True)
class Creep:
    test: str
    number: str
    change: changes.Change
    before: int  # index of the last night on the old level
    at: int  # index of the first night on the new level
    drift_from: int | None = None  # a drift's: index of the first night of its first change point
    slope_pct: float = 0.0  # a drift's: its change a night, in percent, from drift_from to the last night
    alerted: bool = True  # False for a drift's next change point, which is kept as said, not said again

    @property
    def worse(self) -> bool:
        return is_worse(self.number, self.change.change_pct)

    def args(self) -> list[str]:
        """The options that judge a commit by this number at half the creep's size (at least a tenth of a percent)."""
        name, pct = option(self.number), self.change.change_pct
        return [f"{name}={max(abs(pct) / 2, 0.1):.2f}"] if name and math.isfinite(pct) else []

    def said(self, nights: list) -> dict:
        """What the history keeps of it, on the night it is found (`Night.said`): where it is, so that it is said
        once, however its change point moves a night or drops out and comes back."""
        at = nights[self.at]
        return {"test": self.test, "number": self.number, "date": at.date, "commit": at.commit,
                "change_pct": round(self.change.change_pct, 4) if self.change.before
                else math.copysign(FROM_ZERO, self.change.after), "drift": self.drift_from is not None}


def found(nights: list) -> list[Creep]:
    """The change points in every test's numbers over `nights` (one GPU model's, oldest first) that no earlier night
    said (`Night.said`, matched by their place within MOVE of the series' nights and their direction) and that were
    not found without tonight. A third change the same way
    as the two before it, each level between them shorter than DRIFT_NIGHTS, is a drift: said once, as a drift, with
    its start and slope; its next change points are kept, not said. (Two steps a few nights apart are two creeps, each
    bisected to its commits.)"""
    if len(nights) < 2 * changes.MIN_NIGHTS:
        return []
    place = {(n.date, n.commit): i for i, n in enumerate(nights)}
    said: dict[tuple[str, str], list[tuple[int, bool, bool]]] = {}  # (test, number) -> (night, up, drift) of each
    for night in nights[:-1]:
        for s in night.said:
            if (s["date"], s["commit"]) in place:
                said.setdefault((s["test"], s["number"]), []).append(
                    (place[s["date"], s["commit"]], s["change_pct"] > 0, s["drift"]))
    new = []
    for test in nights[-1].samples:
        for name, points in series(nights, test).items():
            if len(points) < 2 * changes.MIN_NIGHTS or points[-1][0] != len(nights) - 1:
                continue  # not measured tonight: nothing new is known of it
            index, values = [i for i, _ in points], [v for _, v in points]
            # (point, up, drift) of each change point said, by its place among the series' own nights; and those
            # found without tonight, known too (a history kept before change points were said has no marks)
            marks = sorted((bisect_left(index, night), up, drift) for night, up, drift in said.get((test, name), []))
            before = [(c.at, c.change_pct > 0) for c in changes.change_points(values[:-1])]
            for c in changes.change_points(values):
                up = c.change_pct > 0
                if any(abs(m[0] - c.at) <= MOVE and m[1] == up for m in [*marks, *before]):
                    continue
                run = _run(marks, c.at, up)
                drift = {} if len(run) < 2 else {"drift_from": index[run[0][0]],
                                                 "slope_pct": _slope(points, index[run[0][0]])}
                said_drift = drift and any(m[2] and m[1] == up and m[0] >= run[0][0] - MOVE for m in marks)
                new.append(Creep(test, name, c, before=index[c.at - 1], at=index[c.at], **drift,
                                 alerted=not said_drift))
                marks = sorted([*marks, (c.at, up, bool(drift))])
    return new


def _run(marks: list[tuple[int, bool, bool]], at: int, up: bool) -> list[tuple[int, bool, bool]]:
    """The change points said before point `at` of the series that it continues, oldest first: each the same way as
    the next and fewer than DRIFT_NIGHTS of the series' nights before it; none where the last before it is not so."""
    run: list[tuple[int, bool, bool]] = []
    for m in reversed([m for m in marks if m[0] < at - MOVE]):
        if m[1] != up or (run[0][0] if run else at) - m[0] >= DRIFT_NIGHTS:
            break
        run.insert(0, m)
    return run


def _slope(points: list[tuple[int, float]], start: int) -> float:
    """The least-squares change a night from night `start` on, in percent of the level there."""
    import numpy as np

    nights, values = zip(*[(i, v) for i, v in points if i >= start - 1])
    slope, level = np.polyfit(nights, values, 1)
    return float(100 * slope / (level + slope * (start - 1))) if len(nights) > 1 else 0.0


def alert_body(creep: Creep, nights: list, commits: str) -> str:
    """The alert's body: the number, its size against its noise, the nights around it and the commits between them;
    a drift's start and slope."""
    c, before, at = creep.change, nights[creep.before], nights[creep.at]
    if creep.drift_from is not None:
        start = nights[creep.drift_from]
        return "\n".join([
            f"`{creep.test}`: {creep.number} drifts on {at.gpu}: {creep.slope_pct:+.3f}% a night since {start.date} "
            f"({start.commit[:12]}), one level after another (the last {c.shown}, from a median of "
            f"{c.before:,.4g} to {c.after:,.4g}; the nights' noise {c.noise_pct:.2f}%): no single night failed, and no "
            "single commit holds it all, so it is not bisected. Said once; its next levels are not alerted.",
            "",
            f"Commits since it started: {commits}. Run: {nights[-1].run_url or '(no run URL)'}",
            "",
            chart(creep, nights),
        ])
    return "\n".join([
        f"`{creep.test}`: {creep.number} moved {c.shown} on {at.gpu}, from a median of {c.before:,.4g} to "
        f"{c.after:,.4g} (the nights' noise {c.noise_pct:.2f}%), below the night's tolerance: no single night failed.",
        "",
        f"- the last night on the old level: {before.date} ({before.commit[:12]})",
        f"- the first night on the new level: {at.date} ({at.commit[:12]})",
        "",
        f"Commits: {commits}. Run: {nights[-1].run_url or '(no run URL)'}",
        f"Reproduce: `pytest '{creep.test}' --perf-bisect {before.commit[:12]}..{at.commit[:12]} {' '.join(creep.args())}` "
        f"on a {at.gpu}.",
        "",
        chart(creep, nights),
    ])


def chart(creep: Creep, nights: list, last: int = 30) -> str:
    """The number over the last nights with the level the change points give it, in Mermaid."""
    points = series(nights, creep.test)[creep.number]
    values = [v for _, v in points]
    edges = [0, *(c.at for c in changes.change_points(values)), len(values)]
    level = {}
    for a, b in zip(edges, edges[1:]):
        level.update({i: sorted(values[a:b])[(b - a) // 2] for i in range(a, b)})
    table = [{"night": f"{nights[i].date} {nights[i].commit[:7]}", creep.number: v, "level": level[k]}
             for k, (i, v) in enumerate(points)][-last:]
    return mermaid(f"{creep.test}: {creep.number}", table,
                   Chart(x="night", lines=(creep.number, "level"), unit=creep.number, decimals=_decimals(values)))


def _decimals(values: list[float]) -> int:
    """Enough decimals that a tenth of a percent of the values shows."""
    smallest = min((abs(v) for v in values if v), default=1.0)
    return max(0, min(6, 3 - int(f"{smallest:e}".split("e")[1])))
