"""The comparison of two sets of rounds: a claim holds, fails, or is inconclusive, by the method named."""

import pytest

from perf_tests.harness.stats import ALPHA, compare, median_ci

BASE = [1000.0, 1001.0, 999.0, 1000.5, 999.5]


@pytest.mark.parametrize("n, interval", [(1, (0, 0)), (5, (0, 4)), (8, (0, 7)), (10, (1, 8)), (15, (3, 11)), (20, (5, 14))])
def test_median_interval_is_the_binomial_order_statistics(n, interval):
    # 95%: n=10 -> x(2), x(9) (coverage 97.9%, the next pair 89%); below 6 samples, the whole range
    assert median_ci(list(range(n))) == interval


def test_a_ratio_at_or_above_the_factor_passes_without_a_test():
    c = compare([980.0, 981, 979, 980, 980], BASE, 0.97)
    assert c.ratio == pytest.approx(0.98) and not c.failed and not c.inconclusive and c.method == ""


def test_a_clear_shortfall_fails_by_mann_whitney():
    c = compare([950.0, 951, 949, 950.5, 949.5], BASE, 0.97)  # -5% against an allowed -3%
    assert c.failed and c.method.startswith("Mann-Whitney U, p=")
    assert float(c.method.split("p=")[1]) < ALPHA


def test_the_factor_is_applied_before_testing():
    """-2% against an allowed -3% passes; the same samples against a 0.99 factor fail."""
    new = [980.0, 980.5, 979.5, 980.2, 979.8]
    assert not compare(new, BASE, 0.97).failed
    assert compare(new, BASE, 0.99).failed


def test_a_noisy_shortfall_is_inconclusive_not_failed():
    new = [800.0, 1200, 900, 1100, 960]  # median 960: -4%, but the rounds overlap the baseline's
    c = compare(new, BASE, 0.97)
    assert c.ratio == pytest.approx(0.96) and not c.failed and c.inconclusive


def test_too_few_rounds_fall_back_to_median_intervals():
    """3 + 1 rounds cannot reach ALPHA (1 / C(4, 1) = 0.25): the intervals decide."""
    clear = compare([900.0, 905, 910], [1000.0], 0.97)
    assert clear.failed and clear.method == "median intervals"
    overlapping = compare([900.0, 905, 1000], [980.0], 0.97)
    assert not overlapping.failed and overlapping.inconclusive


def test_a_gain_claim_uses_the_same_rule():
    assert not compare([2000.0, 2001, 1999, 2000, 2000], BASE, 1.9).failed
    assert compare([1500.0, 1501, 1499, 1500, 1500], BASE, 1.9).failed


def test_no_samples_is_an_error():
    with pytest.raises(ValueError):
        compare([], BASE, 1.0)
