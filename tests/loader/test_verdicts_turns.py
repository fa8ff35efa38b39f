"""turns.py's figure and verdict at their edges, as plain functions: no process started (test_turns.py times two trees
end to end)."""

from torch_perf_suite.findings import FAILED, PASSED
from torch_perf_suite.loader import turns


def timed(ratio, low=1.25, high=1.75, again=None):
    return turns.ByTurns(40, 1234.5, 1851.7, ratio, low, high, again)


def test_the_figure_is_a_samples_median_cpu_time_on_each_side_and_the_median_ratio_within_the_pairs_range():
    # three pairs of 32 samples: 1.0 µs a sample at REF; the head's turns 1.1, 1.0 and 1.05 times REF's
    found = turns.from_pairs([(32_000, 35_200), (64_000, 64_000), (32_000, 33_600)])
    assert (found.pairs, found.ref_us, found.head_us, found.ratio) == (3, 1.0, 1.1, 1.05)
    assert (found.low, found.high) == (1.0, 1.1)  # fewer than 6 pairs: the interval is their whole range
    assert found.again is None


def test_a_turn_of_no_measurable_cpu_time_at_ref_is_divided_by_one_nanosecond():
    found = turns.from_pairs([(0, 3), (0, 3), (1000, 1100)])
    assert found.ratio == 3.0 and found.high == 3.0


def test_the_line_says_both_sides_the_rise_its_interval_and_the_pairs():
    assert timed(1.5).line("REF") == ("loader CPU time a sample 1,851.7 µs, 1,234.5 at REF, timed by turns on one core: "
                                      "+50.0% (95% interval +25.0% to +75.0%, 40 pairs of 32 samples)")


def test_a_rise_is_past_the_tolerance_and_past_the_pairs_spread_both_strictly():
    assert turns.rose(timed(1.5), 49.9)
    assert not turns.rose(timed(1.5), 50)  # exactly the tolerance
    assert not turns.rose(timed(1.5, low=1.0), 10)  # the interval reaches 1: the spread explains it
    assert turns.rose(timed(1.5, low=1.5), 10)
    assert not turns.rose(timed(1.05, low=1.01), 10)  # past the spread, within the tolerance


def test_a_rise_fails_in_one_line_naming_the_tolerance():
    (found,) = turns.failure(timed(1.5), 10, "REF")
    assert found.outcome == FAILED
    assert found.text == ("loader CPU time a sample 1,851.7 µs, 1,234.5 at REF, timed by turns on one core: +50.0% (95% "
                          "interval +25.0% to +75.0%, 40 pairs of 32 samples); allowed +10%: more CPU work per sample "
                          "in the dataset, its transforms or the collate")
    assert turns.failure(timed(1.5), 50, "REF") == []


def test_measured_again_it_fails_only_past_the_tolerance_again_and_says_the_second_figure():
    (found,) = turns.failure(timed(1.5, again=timed(1.2)), 10, "REF")
    assert found.text.endswith("40 pairs of 32 samples); allowed +10%; measured again: +20.0%: more CPU work per sample "
                               "in the dataset, its transforms or the collate")
    assert turns.failure(timed(1.5, again=timed(1.5)), 50, "REF") == []  # did not rise the first time
    assert turns.failure(timed(1.75, again=timed(1.5)), 50, "REF") == []  # again exactly the tolerance: passes


def test_a_verdict_that_passes_says_the_line_the_second_figure_and_the_tolerance():
    found = turns.verdict(timed(1.5, again=timed(1.05)), 10, "REF")
    assert found.outcome == PASSED
    assert found.text == ("loader CPU time a sample 1,851.7 µs, 1,234.5 at REF, timed by turns on one core: +50.0% (95% "
                          "interval +25.0% to +75.0%, 40 pairs of 32 samples); measured again: +5.0%; allowed +10%")
    assert turns.verdict(timed(1.05), 10, "REF").text.endswith("40 pairs of 32 samples); allowed +10%")
    failed = turns.verdict(timed(1.5), 10, "REF")
    assert failed.outcome == FAILED and failed.text.startswith("loader CPU time a sample 1,851.7 µs, 1,234.5 at REF,")
    assert failed.text.endswith("in the dataset, its transforms or the collate")
