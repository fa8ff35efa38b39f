"""The nightly's numbers read as series, one a test, number and GPU model, and the change points found in them
(changes.py): a number that got worse below every night's tolerance is a creep, alerted once, on the night it is
found, with the nights around it, the commits between them and the options that bisect it; one that got better is
said, so that a baseline can be recorded again on purpose.

A night keeps each test's samples/s by part (`Night.samples`) and its other numbers (`Night.numbers`, from the report's
row by `numbers`), each with the way that is worse and the option that judges a commit by it at the creep's size."""

from __future__ import annotations

from dataclasses import dataclass

from ..report.charts import Chart, mermaid
from ..report.rows import is_number
from . import changes

SAMPLES = " samples/s"  # a part's number: "gpu samples/s", higher is better


@dataclass(frozen=True)
class Number:
    """One number a night keeps of a test besides its samples/s: how to read it from the report's row."""

    path: tuple[str, ...]  # keys into the row; a dict at the end is summed
    option: str | None  # the pytest option that sets how far a commit may move it (None: compared exactly)


NUMBERS = {
    "host-device syncs a step": Number(("syncs_per_step",), None),
    "kernel launches a step": Number(("kernels", "launches_per_step"), None),
    "GPU kernel ms a step": Number(("kernels", "kernel_ms_per_step"), "--perf-tolerance"),
    "bytes copied a step": Number(("kernels", "copied_bytes_per_step"), "--perf-count-margin"),
    "peak GPU memory GB": Number(("peak_mem_gb",), "--perf-count-margin"),
    "Python lines a step": Number(("host", "lines_per_step"), None),
    "loader instructions a sample": Number(("extra", "loader instructions/sample"), "--perf-count-margin"),
}
PART_OPTION = {"gpu": "--perf-tolerance"}  # the loader's and the pipeline's: --perf-host-tolerance


def numbers(row: dict) -> dict[str, float]:
    """A report row's numbers that a night keeps (NUMBERS), those it has."""
    found = {}
    for name, number in NUMBERS.items():
        value = row
        for key in number.path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, dict):
            value = sum(v for v in value.values() if is_number(v)) if value else None
        if is_number(value):
            found[name] = float(value)
    return found


def _worse(name: str, change_pct: float) -> bool:
    return change_pct < 0 if name.endswith(SAMPLES) else change_pct > 0


def option(name: str) -> str | None:
    if name.endswith(SAMPLES):
        return PART_OPTION.get(name[: -len(SAMPLES)], "--perf-host-tolerance")
    return NUMBERS[name].option


def series(nights: list, test: str) -> dict[str, list[tuple[int, float]]]:
    """Each number of `test` over `nights` (one GPU model's, oldest first): name -> (night's index, value), the
    nights that measured it."""
    found: dict[str, list[tuple[int, float]]] = {}
    for i, night in enumerate(nights):
        values = {f"{part}{SAMPLES}": v for part, v in night.samples.get(test, {}).items()}
        for name, value in {**values, **night.numbers.get(test, {})}.items():
            found.setdefault(name, []).append((i, value))
    return found


@dataclass(frozen=True)
class Creep:
    test: str
    number: str
    change: changes.Change
    before: int  # index of the last night on the old level
    at: int  # index of the first night on the new level

    @property
    def worse(self) -> bool:
        return _worse(self.number, self.change.change_pct)

    def args(self) -> list[str]:
        """The options that judge a commit by this number at half the creep's size (at least a tenth of a percent)."""
        name = option(self.number)
        return [f"{name}={max(abs(self.change.change_pct) / 2, 0.1):.2f}"] if name else []


def found(nights: list) -> list[Creep]:
    """The change points in every test's numbers over `nights` (one GPU model's, oldest first) found with the last
    night and not without it: each creep is said once, on the night it is first found."""
    if len(nights) < 2 * changes.MIN_NIGHTS:
        return []
    new = []
    for test in nights[-1].samples:
        for name, points in series(nights, test).items():
            if len(points) < 2 * changes.MIN_NIGHTS or points[-1][0] != len(nights) - 1:
                continue  # not measured tonight: nothing new is known of it
            index, values = [i for i, _ in points], [v for _, v in points]
            known = {c.at for c in changes.change_points(values[:-1])}
            for c in changes.change_points(values):
                if not known & {c.at - 1, c.at, c.at + 1}:  # a change point may move a night as nights are added
                    new.append(Creep(test, name, c, before=index[c.at - 1], at=index[c.at]))
    return new


def describe(creep: Creep, nights: list, commits: str) -> str:
    """The alert's body: the number, its size against its noise, the nights around it and the commits between them."""
    c, before, at = creep.change, nights[creep.before], nights[creep.at]
    return "\n".join([
        f"`{creep.test}`: {creep.number} moved {c.change_pct:+.2f}% on {at.gpu}, from a median of {c.before:,.4g} to "
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
