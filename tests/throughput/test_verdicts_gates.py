"""gates.py at its edges: how a wider scope's allowance and a second measurement read, and entries without an env."""

from torch_perf_suite.settings import Measure
from torch_perf_suite.throughput import gates
from torch_perf_suite.throughput.parts import Parts
from torch_perf_suite.throughput.stats import Comparison
from torch_perf_suite.throughput.timing import Throughput


def steady(sps, n=5, batch=100):
    return Throughput(samples_per_round=batch, durations_s=(batch / sps,) * n)


def test_a_wider_scope_reads_with_its_allowance_in_whole_percent():
    # factor 0.4: 100 x (0.4 - 1) = -60% allowed; the change, 100 x (0.5 - 1) = -50.0%
    v = gates.Verdict("gpu", 1000.0, Comparison(0.5, 0.4, False, ""), scope="recorded on chip GPU-1, not this one")
    assert v.describe() == "gpu against a baseline recorded on chip GPU-1, not this one: allowed -60%"  # the change: in the table
    # a shortfall beyond the wider allowance that is not significant: its change is said with why it passed
    inconclusive = gates.Verdict("gpu", 1000.0, Comparison(0.35, 0.4, False, "p=0.3"), scope="on chip 1")
    assert inconclusive.describe() == "gpu -65.0% (on chip 1: allowed -60%) (below the allowed -60%, not significant: p=0.3)"


def test_a_second_measurement_a_hair_below_the_baseline_reads_as_no_change():
    # -0.049% rounds to one decimal as 0.0, and reads "+0.0%", never "-0.0%"
    v = gates.Verdict("gpu", 1000.0, Comparison(0.9, 0.97, True, "Mann-Whitney U, p=0.004"),
                      confirmation=Comparison(0.99951, 0.97, False, ""))
    assert not v.failed
    assert v.describe().endswith(", not confirmed by a second measurement (+0.0%)")


def test_a_second_measurement_is_given_to_one_decimal():
    # 100 x (0.9876 - 1) = -1.24%: -1.2 at one decimal
    v = gates.Verdict("gpu", 1000.0, Comparison(0.9, 0.97, True, "Mann-Whitney U, p=0.004"),
                      confirmation=Comparison(0.9876, 0.97, False, ""))
    assert v.describe().endswith("(-1.2%)")


def test_an_entry_without_env_is_from_no_known_chip():
    assert gates.same_chip({}, "GPU-1") is False
    assert gates.same_chip({"env": {}}, None) is False  # neither chip known is not the same chip
    assert gates.chip_scope({}) == "recorded before chips were (an old entry)"
    now = Parts(batch_size=100, pipeline=steady(900.0), gpu=steady(1000.0))
    m = Measure(tolerance=3, chip_tolerance=20, host_tolerance=10)
    assert gates.tolerance_for("gpu", now, {"parts": {}}, m, "GPU-1") == (20, False)


def test_a_verdict_made_without_a_scope_has_none():
    entry = {"parts": {"gpu": {"samples_per_s": 1000.0, "rounds": [1000.0] * 5}}}
    v = gates.verdict("gpu", [1000.0] * 5, entry, 3.0, "")
    assert v.scope == "" and not v.qualified
    assert v.describe() == "gpu +0.0%"
