"""The slow creep: change points in one number's series over the nights, found below every night's tolerance.

A night's verdicts compare one run with one record against a tolerance (3% on a GPU-side number, +1% on a count with a
margin); a step that loses half a percent a week passes every night. A series of nights holds what one night cannot:
where its level moved. The change points are placed by ruptures' PELT (Killick et al. 2012; `KernelCPD` with the
linear kernel, the l2 cost of a shift of the mean, in C) on the series in percent of its median, with a penalty scaled
by the series' own noise, so that a GPU-side number of 0.1% noise and a loader's of 2% are each judged by their own
spread. ruptures rather than Apache Otava, whose E-divisive means does the same with a permutation test: Otava 0.8
pins numpy 2.2 and scipy below 1.17 (the GPU image has numpy 2.5) and brings its BigQuery, Postgres and Slack
clients, where ruptures needs numpy and scipy only.

Each change point PELT finds is then placed where the levels on its two sides are furthest apart (the least-squares
split between its neighbours, a level of one night allowed: PELT's shortest level would put a change with fewer nights
on its new level too early) and held to the nights around it, the weakest dropped until every one left holds: the
nights from it to the next change point against those back to the one before, by Student's t-test with the noise
read within the levels, its p multiplied by the nights the split could have been placed at (the split chosen is the
one that looks most apart) and below ALPHA, their medians apart by more than NOISE_FACTOR noises and MIN_SHIFT_PCT. A
night far from the nights on both sides of it is one bad night, left out before. A change is said once it has
MIN_NIGHTS nights on its new level; until then it is placed, so that the level before it is read without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_NIGHTS = 4  # the fewest nights on each side of a change point said: a change is found on its fourth night
PENALTY = 3.0  # PELT's penalty per change point, in noise variances times log(nights)
ALPHA = 1e-3  # how likely noise alone may make a change point's shift of the means, its split chosen: one in a thousand
NOISE_FACTOR = 2.0  # how many noises a change point's medians must be apart
MIN_SHIFT_PCT = 0.3  # and in percent: a change smaller than this is no creep a user feels
NOISE_FLOOR_PCT = 0.02  # the least noise assumed: a count that never moves would otherwise make any wobble a change
LONE_FACTOR = 5.0  # a night this many noises from the two nights before it and the two after is one bad night
LAST_NIGHTS = 120  # the nights a series is read over: older change points were reported when they were found


@dataclass(frozen=True)
class Change:
    """One change point: the series' level moved from `before` to `after` at night `at` (the first on the new level)."""

    at: int  # index of the first night on the new level
    before: float  # the median of the nights before it, back to the previous change point
    after: float  # the median of the nights from it on, up to the next change point
    noise_pct: float  # the series' night-to-night noise, one standard deviation in percent of its median

    @property
    def change_pct(self) -> float:
        return 100 * (self.after / self.before - 1) if self.before else math.copysign(math.inf, self.after)

    @property
    def shown(self) -> str:
        """Its size as the alert says it: in percent, or from a level of 0."""
        return f"{self.change_pct:+.2f}%" if self.before else f"from 0 to {self.after:,.4g}"


def noise_pct(values: list[float]) -> float:
    """One night's noise, in percent of the series' median: the median absolute deviation of the nights' differences
    (a step moves one difference of many, so the noise is read past a change point), or their interquartile range
    where it is the larger, as a standard deviation."""
    level = float(np.median(values))
    if len(values) < 3 or not level:
        return NOISE_FLOOR_PCT
    diffs = np.diff(np.asarray(values, dtype=float)) / abs(level) * 100
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    q1, q3 = np.percentile(diffs, [25, 75])  # a count that alternates between two values has a MAD of 0, not its IQR
    return max(1.4826 * mad / math.sqrt(2), float(q3 - q1) / 1.349 / math.sqrt(2), NOISE_FLOOR_PCT)


def change_points(values: list[float]) -> list[Change]:
    """The change points of a series (oldest night first) with MIN_NIGHTS nights on each side, each held to the nights
    around it; a change with fewer nights on its new level is waited for (it is placed, not said)."""
    shift = max(0, len(values) - LAST_NIGHTS)
    values = [float(v) for v in values[shift:]]
    if len(values) < 2 * MIN_NIGHTS:
        return []
    level, noise = float(np.median(values)), noise_pct(values)
    if not level:
        return []
    kept = np.flatnonzero(~_lone(np.asarray(values) / abs(level) * 100, noise))  # the nights read, one bad night left out
    values = [values[i] for i in kept]
    percent = (np.asarray(values) / abs(level) - 1) * 100
    edges, noise = _segments(percent, noise)
    return [Change(at=shift + int(kept[edges[i]]), before=float(np.median(values[edges[i - 1]:edges[i]])),
                   after=float(np.median(values[edges[i]:edges[i + 1]])), noise_pct=noise)
            for i in range(1, len(edges) - 1) if min(edges[i] - edges[i - 1], edges[i + 1] - edges[i]) >= MIN_NIGHTS]


def _segments(percent, noise: float) -> tuple[list[int], float]:
    """The edges of the levels of `percent` (0 first, its length last) and the noise read within them: PELT's change
    points, each placed where the two levels around it are furthest apart (`_placed`), the weakest dropped until each
    left holds (`_weakness`). A level of fewer than MIN_NIGHTS holds only as the last, still growing."""
    import ruptures  # only the nightly's record step reads series

    found = ruptures.KernelCPD(kernel="linear", min_size=2, jump=1).fit(percent.reshape(-1, 1))
    edges = _placed(percent, [0, *found.predict(pen=PENALTY * noise**2 * math.log(len(percent)))])
    while True:
        within = np.concatenate([percent[a:b] - np.mean(percent[a:b]) for a, b in zip(edges, edges[1:])])
        dof = max(len(percent) - (len(edges) - 1), 1)  # the spread within the levels, which no step is part of
        read = max(noise, float(np.sqrt(np.sum(within**2) / dof)))
        weak = [(w, i) for i in range(1, len(edges) - 1) if (w := _weakness(percent, edges, i, read, dof)) is not None]
        if not weak:
            return edges, read
        del edges[max(weak)[1]]
        edges = _placed(percent, edges)


def _placed(percent, edges: list[int]) -> list[int]:
    """Each change point moved to the night between its neighbours where the levels before and after it are furthest
    apart in noises (the least-squares split, a level of one night allowed): PELT's levels are at least two nights
    long, so with one night on a new level it placed the change a night early."""
    edges = list(edges)
    for _ in range(3):
        moved = False
        for i in range(1, len(edges) - 1):
            a, b = edges[i - 1], edges[i + 1]
            part = percent[a:b]
            k = np.arange(1, len(part))
            sums = np.cumsum(part)[:-1]
            apart = np.abs(sums / k - (part.sum() - sums) / (len(part) - k)) * np.sqrt(k * (len(part) - k) / len(part))
            best = a + 1 + int(np.argmax(apart))
            moved |= best != edges[i]
            edges[i] = best
        if not moved:
            break
    return edges


def _weakness(percent, edges: list[int], i: int, noise: float, dof: int) -> float | None:
    """None where the change point edges[i] holds; where it does not, its weakness (the higher, the weaker). It holds
    where the nights from it to the next and those back to the one before are apart by Student's t-test with the
    noise read within the levels (`dof` degrees of freedom), its p multiplied by the nights it could have been placed
    at (Bonferroni: the split is the one that looks most apart), below ALPHA, and by their medians; a level before
    the last needs MIN_NIGHTS nights."""
    from scipy.stats import t

    before, after = percent[edges[i - 1]:edges[i]], percent[edges[i]:edges[i + 1]]
    if len(before) < MIN_NIGHTS or (len(after) < MIN_NIGHTS and edges[i + 1] < len(percent)):
        return 2.0  # a short level between two others: a blip of a night or two, not a change
    score = abs(np.mean(after) - np.mean(before)) / (noise * math.sqrt(1 / len(before) + 1 / len(after)))
    p = min(1.0, float(2 * t.sf(score, dof)) * (len(before) + len(after) - 1))
    shift = abs(float(np.median(after) - np.median(before)))
    return None if p < ALPHA and shift > max(NOISE_FACTOR * noise, MIN_SHIFT_PCT) else p


def _lone(percent, noise: float):
    """The nights far (LONE_FACTOR noises) from both the two nights before them and the two after (the middle of
    each pair): one bad night."""
    lone = np.zeros(len(percent), dtype=bool)
    if len(percent) >= 5:
        middle = percent[2:-2]
        before, after = (percent[:-4] + percent[1:-3]) / 2, (percent[3:-1] + percent[4:]) / 2
        lone[2:-2] = np.minimum(abs(middle - before), abs(middle - after)) > LONE_FACTOR * noise
    return lone
