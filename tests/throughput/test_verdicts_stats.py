"""stats.py at its edges: the median's interval keeps two order statistics, and its half-width in percent."""

import pytest

from torch_perf_suite.throughput.stats import ci_halfwidth_pct, median_ci


@pytest.mark.parametrize("n, interval", [(1, (0, 0)), (2, (0, 1)), (3, (0, 2)), (4, (1, 2)), (5, (1, 3)), (6, (2, 3)),
                                         (7, (2, 4))])
def test_at_no_confidence_the_interval_is_the_narrowest_pair_of_order_statistics(n, interval):
    """Any coverage is at least 0, so k is the largest with x(k) still below x(n-1-k): 2k < n - 1. The interval never
    shrinks to a single order statistic (its coverage of a continuous median would be nil)."""
    assert median_ci(list(range(n)), 0.0) == interval


def test_the_half_width_of_the_whole_range_below_six_rounds():
    # 5 rounds: the whole range, 90 to 110, half of it 10 of the median 100
    assert ci_halfwidth_pct([110.0, 95.0, 100.0, 90.0, 105.0]) == 10.0


def test_the_half_width_uses_the_order_statistics_not_the_range():
    # 10 rounds at 95%: x(1) = 90 and x(8) = 110 (not 80 and 120); median (99 + 101) / 2 = 100: 50 x 20 / 100
    assert ci_halfwidth_pct([120.0, 80.0, 90.0, 92.0, 96.0, 99.0, 101.0, 104.0, 108.0, 110.0]) == 10.0


def test_the_half_width_is_relative_to_the_median():
    assert ci_halfwidth_pct([900.0, 950.0, 1000.0, 1050.0, 1100.0]) == 10.0  # ten times the numbers, the same percent
    assert ci_halfwidth_pct([7.0] * 5) == 0.0
