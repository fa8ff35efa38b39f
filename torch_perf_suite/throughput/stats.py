"""Comparing two sets of timed rounds: is `new` at least `factor` times `ref`?

The method is asv's (airspeed velocity, `asv.statistics.is_different` used by `asv compare`), made
one-sided and given a factor:

- the claim holds if the ratio of the medians is at least `factor`;
- otherwise the shortfall counts only if it is significant: a one-sided Mann-Whitney U test
  (scipy.stats.mannwhitneyu, exact distribution) of `new / factor` against `ref`, at `ALPHA`;
- where the two sizes cannot reach that level at all (1 / C(n+m, n) >= ALPHA: a baseline stored
  without its rounds, or fewer than 4 + 5 rounds), it falls back to confidence intervals: the
  shortfall counts if the distribution-free confidence interval of `new`'s median lies wholly
  below `factor` times the interval of `ref`'s median (a single number is its own interval).

A shortfall that is not significant is "inconclusive": it does not fail, and the report says so.
A significant shortfall is then measured once more (by the caller): it stands if the second
measurement's median ratio is below the factor too (`Comparison.reproduces`); significance was
shown once, the second measurement shows it was not a passing disturbance.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

# One-sided. A significant shortfall is measured again before it fails (the caller's confirmation),
# which keeps clean runs from failing; 0.01 let a planted loader slowdown through (docs/statistics.md).
ALPHA = 0.05
CONFIDENCE = 0.95  # of a median's interval


@dataclass(frozen=True)
class Comparison:
    ratio: float  # median(new) / median(ref)
    factor: float  # the least ratio claimed
    significant: bool  # the shortfall below `factor`, if any, is not noise
    method: str  # "Mann-Whitney U, p=0.004" or "median intervals"

    @property
    def failed(self) -> bool:
        return self.ratio < self.factor and self.significant

    @property
    def reproduces(self) -> bool:
        """As a confirmation of an earlier failure: the shortfall is there again."""
        return self.ratio < self.factor

    @property
    def inconclusive(self) -> bool:
        return self.ratio < self.factor and not self.significant


def median_ci(samples: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Distribution-free interval for the median: the order statistics x(k), x(n+1-k) with the
    largest k whose binomial coverage 1 - 2 P(Bin(n, 1/2) < k) is still at least `confidence`;
    where no k reaches it (n < 6 at 95%), the whole range."""
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        raise ValueError("median_ci of no samples")
    k, at_most_k = 0, 1 / 2**n  # at_most_k = P(Bin(n, 1/2) <= k): [x(k), x(n-1-k)] covers 1 - 2 of it
    while 2 * (k + 1) < n - 1:
        next_at_most = at_most_k + math.comb(n, k + 1) / 2**n
        if 1 - 2 * next_at_most < confidence:
            break
        k, at_most_k = k + 1, next_at_most
    return xs[k], xs[n - 1 - k]


def ci_halfwidth_pct(samples: Sequence[float]) -> float:
    """Half the width of the median's interval, in percent of the median."""
    lo, hi = median_ci(samples)
    return 50 * (hi - lo) / statistics.median(samples)


def _min_p(n: int, m: int) -> float:
    return 1 / math.comb(n + m, n)


def compare(new: Sequence[float], ref: Sequence[float], factor: float) -> Comparison:
    """Is `new` (samples/s per round) at least `factor` times `ref`? See the module's text."""
    if not new or not ref:
        raise ValueError("compare needs samples on both sides")
    ratio = statistics.median(new) / statistics.median(ref)
    if ratio >= factor:
        return Comparison(ratio, factor, False, "")
    if _min_p(len(new), len(ref)) < ALPHA:
        from scipy.stats import mannwhitneyu

        p = float(mannwhitneyu([x / factor for x in new], list(ref), alternative="less", method="exact").pvalue)
        return Comparison(ratio, factor, p < ALPHA, f"Mann-Whitney U, p={p:.3f}")
    new_hi = median_ci(new)[1]
    ref_lo = median_ci(ref)[0]
    return Comparison(ratio, factor, new_hi < factor * ref_lo, "median intervals")
