"""The comparison of two sets of rounds: a claim holds, fails, or is inconclusive, by the method named."""

import pytest

from torch_perf_suite.throughput.stats import ALPHA, ci_halfwidth_pct, compare, median_ci

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


@pytest.mark.parametrize("new, ref", [([], BASE), (BASE, []), ([], [])])
def test_either_side_empty_is_an_error_naming_it(new, ref):
    # statistics.median([]) raises a ValueError too: the message tells the two apart
    with pytest.raises(ValueError, match="^compare needs samples on both sides$"):
        compare(new, ref, 1.0)


def test_a_ratio_exactly_at_the_factor_holds_without_a_test():
    c = compare([970.0, 960, 980], [1000.0, 990, 1010], 0.97)  # medians 970 / 1000 = 0.97 exactly
    assert c.ratio == 0.97
    assert c.significant is False and c.method == "" and not c.failed and not c.inconclusive


def test_four_against_five_rounds_can_reach_alpha():
    """C(9, 4) = 126 orderings: all four below all five has exact one-sided p = 1/126 = 0.0079 < ALPHA.
    (Two-sided, or a least p of 2/C, would be 0.016 and not significant.)"""
    c = compare([900.0, 901, 902, 903], [1000.0, 1001, 1002, 1003, 1004], 0.97)
    assert c.method == "Mann-Whitney U, p=0.008" and c.significant and c.failed


def test_the_p_value_is_the_exact_one():
    """5 + 5 rounds, all below: exact p = 1/C(10, 5) = 1/252 = 0.004 (the normal approximation says 0.006)."""
    c = compare([900.0, 901, 902, 903, 904], [1000.0, 1001, 1002, 1003, 1004], 0.97)
    assert c.method == "Mann-Whitney U, p=0.004"


def test_a_p_value_of_exactly_alpha_is_not_significant():
    """One new round against 99: its rank among the 100 is uniform under the null hypothesis, so
    ranking fifth gives p = P(rank <= 5) = 5/100 = 0.05, which is not below ALPHA."""
    assert ALPHA == 0.05
    ref = [1.0, 2, 3, 4] + [float(x) for x in range(6, 101)]  # 99 rounds: 1-4, 6-100
    c = compare([5.0], ref, 1.0)
    assert c.method == "Mann-Whitney U, p=0.050"
    assert not c.significant and c.inconclusive
    assert compare([3.5], ref, 1.0).significant  # fourth: p = 0.04


def test_sizes_whose_least_p_equals_alpha_use_the_intervals():
    """1 + 19 rounds: the least possible p is 1/C(20, 1) = 0.05 = ALPHA, so no outcome could be
    significant by the U test; the intervals decide (a single number is its own interval)."""
    c = compare([900.0], [1000.0] * 19, 0.97)
    assert c.method == "median intervals"
    assert c.failed  # 900 < 0.97 * 1000
    assert compare([900.0], [1000.0] * 20, 0.97).method.startswith("Mann-Whitney U")


def test_intervals_compare_new_high_end_with_ref_low_end():
    """3 + 3 rounds (too few for the U test): whole ranges. new [850, 950] vs 0.97 x ref [900, 1100] =
    [873, 1067]: they overlap, so the -10% is not significant."""
    c = compare([850.0, 900, 950], [900.0, 1000, 1100], 0.97)
    assert c.method == "median intervals" and c.inconclusive and not c.failed


def test_intervals_that_only_touch_are_not_a_significant_shortfall():
    c = compare([400.0, 450, 500], [1000.0, 1000, 1000], 0.5)  # new's top 500 == 0.5 x ref's bottom 1000
    assert c.method == "median intervals" and not c.significant
    assert compare([400.0, 450, 499], [1000.0, 1000, 1000], 0.5).significant


def binomial_interval(n, confidence):
    """The interval by its definition, with scipy's binomial CDF: the largest k (with x(k) below x(n-1-k)) whose
    order statistics [x(k), x(n-1-k)] cover the median with probability 1 - 2 P(Bin(n, 1/2) <= k) >= confidence."""
    from scipy.stats import binom

    k = 0
    while 2 * (k + 1) < n - 1 and 1 - 2 * binom.cdf(k + 1, n, 0.5) >= confidence:
        k += 1
    return k, n - 1 - k


@pytest.mark.parametrize("confidence", [0.3, 0.375, 0.5, 0.8, 0.9, 0.95, 0.978, 0.99])
def test_median_interval_matches_the_binomial_definition(confidence):
    for n in range(1, 60):
        assert median_ci(list(range(n)), confidence) == binomial_interval(n, confidence), n


def test_median_interval_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="^median_ci of no samples$"):
        median_ci([])


def test_tied_rounds_still_get_the_exact_p_value():
    """Steady rounds (a fake clock, a quiet GPU) tie within each side: all five below all five is still p = 1/252
    exactly; the tie-corrected normal approximation would say 0.002."""
    assert compare([900.0] * 5, [1000.0] * 5, 0.97).method == "Mann-Whitney U, p=0.004"


def test_an_interval_whose_coverage_is_exactly_the_confidence_is_taken():
    """n = 4: [x(1), x(2)] covers the median with 1 - 2 P(Bin(4, 1/2) <= 1) = 1 - 2 x 5/16 = 0.375 exactly."""
    assert median_ci([10.0, 20.0, 30.0, 40.0], 0.375) == (20.0, 30.0)
    assert median_ci([10.0, 20.0, 30.0, 40.0], 0.376) == (10.0, 40.0)


# --- at its edges: the median's interval keeps two order statistics, and its half-width in percent -------


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
