"""The baseline gates: which tolerance a part gets, when it may be compared, the verdict and how it reads."""

import pytest

from torch_perf_suite.findings import FAILED
from torch_perf_suite.settings import Measure
from torch_perf_suite.throughput import gates
from torch_perf_suite.throughput.parts import Parts
from torch_perf_suite.throughput.stats import Comparison
from torch_perf_suite.throughput.timing import Throughput

HOST = {"cpu": "Xeon 8480+", "cores": 16, "machine": "m1"}
NO_HOST_INFO = ("not comparable: the baseline was recorded without host information (an old file); "
                "re-record it on this host with --perf-update-baselines")
NO_PART = "no baseline number for this part (recorded before it was measured); re-record to add it"


def steady(sps, n=5, batch=100):
    return Throughput(samples_per_round=batch, durations_s=(batch / sps,) * n)


def base(rounds=(999.0, 1000.0, 1001.0, 1000.0, 1000.0), sps=1000.0):
    return {"samples_per_s": sps, "spread_pct": 0.1, "rounds": None if rounds is None else list(rounds)}


# --- describe -----------------------------------------------------------------------------------


def test_an_inconclusive_shortfall_reads_with_the_allowance_and_the_method():
    # -80% against an allowed -75% (tolerance 75: factor 0.25), but not significant
    v = gates.Verdict("loader", 1000.0, Comparison(0.2, 0.25, False, "median intervals"))
    assert v.describe() == "loader -80.0% (below the allowed -75%, not significant: median intervals)"


def test_a_confirmed_failure_reads_with_both_measurements():
    v = gates.Verdict("gpu", 1000.0, Comparison(0.9, 0.97, True, "Mann-Whitney U, p=0.004"),
                      confirmation=Comparison(0.8, 0.97, True, "Mann-Whitney U, p=0.004"))
    assert v.failed
    assert v.describe() == "gpu -10.0%, confirmed by a second measurement (-20.0%)"


def test_an_unconfirmed_failure_reads_with_the_second_measurement():
    v = gates.Verdict("gpu", 1000.0, Comparison(0.9, 0.97, True, "Mann-Whitney U, p=0.004"),
                      confirmation=Comparison(1.02, 0.97, False, ""))
    assert not v.failed
    assert v.describe() == "gpu -10.0%, not confirmed by a second measurement (+2.0%)"


def test_a_pass_reads_as_the_change_alone():
    v = gates.Verdict("pipeline", 1000.0, Comparison(1.05, 0.9, False, ""))
    assert v.describe() == "pipeline +5.0%" and v.change_pct == pytest.approx(5.0)


@pytest.mark.parametrize("verdict, qualified", [
    (gates.Verdict("gpu", 1000.0, Comparison(0.934, 0.97, False, "Mann-Whitney U, p=0.402")), True),
    (gates.Verdict("gpu", 1000.0, Comparison(0.95, 0.97, True, "Mann-Whitney U, p=0.004"),
                   confirmation=Comparison(0.99, 0.97, False, "")), True),
    (gates.Verdict("gpu", 1000.0, Comparison(0.85, 0.8, False, ""), scope="recorded on chip GPU-1, not this one"), True),
    (gates.Verdict("gpu", 1000.0, Comparison(0.975, 0.97, False, "")), False),
    (gates.Verdict("gpu", None, why_not="no baseline"), False),
])
def test_a_verdict_is_noted_when_its_description_says_more_than_the_change(verdict, qualified):
    # a shortfall that passed says why in the report's notes (not significant, not confirmed), as a wider scope does
    assert verdict.qualified is qualified


# --- tolerance_for: launch-bound when recorded ----------------------------------------------------


@pytest.mark.parametrize("busy, expected", [
    (80.0, (3.0, False)),  # exactly LAUNCH_BOUND (80%) busy is not launch-bound: below it is
    (80.5, (3.0, False)),
    (79.9, (10.0, True)),
    (None, (3.0, False)),  # recorded without a profile
])
def test_a_gpu_number_recorded_below_80_percent_busy_is_host_bound(busy, expected):
    now = Parts(batch_size=100, pipeline=steady(900.0), gpu=steady(1000.0))  # no profile now: not launch-bound
    m = Measure(tolerance=3, host_tolerance=10)
    entry = {"gpu_busy_pct": busy, "env": {"gpu_uuid": "GPU-1"}}
    assert gates.tolerance_for("gpu", now, entry, m, "GPU-1") == expected


# --- part_not_comparable and verdict on sparse entries ------------------------------------------------


def test_an_entry_without_parts_is_not_compared():
    entry = {"env": {"gpu": "NVIDIA H200", "host": HOST}}
    assert gates.part_not_comparable("gpu", entry, HOST, False) == NO_PART
    v = gates.verdict("gpu", [1000.0] * 5, entry, 3.0, NO_PART)
    assert (v.part, v.baseline_sps, v.comparison, v.why_not) == ("gpu", None, None, NO_PART)


def test_an_entry_without_env_has_no_host_to_compare_with():
    entry = {"parts": {"loader": base()}}
    assert gates.part_not_comparable("loader", entry, HOST, True) == NO_HOST_INFO
    assert gates.part_not_comparable("gpu", {"parts": {"gpu": base()}}, HOST, False) == ""


def test_a_baseline_without_rounds_compares_with_its_median():
    """Schema-1 entries keep one number: 5 rounds at 950 against a single 1000 cannot reach ALPHA
    (1/C(6, 1) = 0.17); the intervals decide: 950 is below 0.97 x 1000 = 970."""
    v = gates.verdict("pipeline", [950.0] * 5, {"parts": {"pipeline": base(rounds=None)}}, 3.0, "")
    assert v.baseline_sps == 1000.0
    assert v.comparison.method == "median intervals" and v.failed


def test_a_baseline_with_rounds_compares_with_its_rounds_not_its_median():
    """Rounds 900, 1000, 1100 (median 1000): 5 rounds at 950 against them cannot reach ALPHA either
    (1/C(8, 3) = 0.018); 950 is not below 0.97 x 900 = 873, so the -5% is not significant.
    Against the median alone (970) it would have failed."""
    v = gates.verdict("pipeline", [950.0] * 5, {"parts": {"pipeline": base(rounds=(900.0, 1000.0, 1100.0))}}, 3.0, "")
    assert v.compared and not v.failed and v.comparison.inconclusive


def test_the_tolerance_is_a_percentage_below_the_baseline():
    v = gates.verdict("gpu", [1000.0] * 5, {"parts": {"gpu": base()}}, 3.0, "")
    assert v.comparison.factor == 0.97


def test_a_verdict_names_its_part():
    assert gates.verdict("loader", [1000.0] * 5, {"parts": {"loader": base()}}, 10.0, "").part == "loader"


# --- part_verdict: one part against its entry, as the fixture asks ------------------------------------------------------


def entry_of(gpu_uuid, host=HOST):
    return {"parts": {"gpu": base(), "pipeline": base()}, "env": {"gpu": "NVIDIA H200", "gpu_uuid": gpu_uuid, "host": host}}


NOW = Parts(batch_size=100, pipeline=steady(950.0), gpu=steady(950.0))  # both 5% below the entry's 1,000
M = Measure(tolerance=3, chip_tolerance=20, host_tolerance=10)


def test_the_gpu_number_on_the_recording_chip_is_held_to_the_tolerance_with_no_scope():
    v = gates.part_verdict("gpu", NOW, entry_of("GPU-1"), M, {"gpu_uuid": "GPU-1", "host": HOST})
    assert v.failed and v.scope == "" and v.comparison.factor == pytest.approx(0.97)


def test_the_gpu_number_on_another_chip_says_where_its_baseline_was_recorded():
    v = gates.part_verdict("gpu", NOW, entry_of("GPU-123456789abcdef"), M, {"gpu_uuid": "GPU-2", "host": HOST})
    assert not v.failed and v.scope == "recorded on chip GPU-12345678, not this one"
    assert v.comparison.factor == pytest.approx(0.80)


def test_a_host_bound_number_against_ref_is_reported_not_gated():
    env = {"gpu_uuid": "GPU-1", "host": HOST}
    gated = gates.part_verdict("pipeline", NOW, entry_of("GPU-2"), M, env)
    assert gated.compared and gated.scope == "" and gated.comparison.factor == pytest.approx(0.90)
    v = gates.part_verdict("pipeline", NOW, entry_of("GPU-2"), M, env, host_gated=False)
    assert (v.part, v.baseline_sps, v.comparison, v.reported) == (
        "pipeline", 1000.0, None,
        "-5.0% (host-bound, a reading: the step's host side is judged by its Python lines and blocks a step, the loader by "
        "its settings, blocks and waiting, and its CPU work by its instructions per sample or, against REF, its CPU time "
        "by turns)")
    assert not v.failed


def test_a_host_bound_number_refs_run_did_not_time_is_said_so_not_missing():
    """REF's run only warms a loader-fed pipeline (parts.Windows): its entry has no pipeline, which against REF is said
    as such, even under --perf-strict; a committed baseline without the part still asks to re-record."""
    env, ref = {"gpu_uuid": "GPU-1", "host": HOST}, entry_of("GPU-1")
    del ref["parts"]["pipeline"]
    v = gates.part_verdict("pipeline", NOW, ref, M, env, host_gated=False)
    assert (v.compared, v.failed) == (False, False)
    assert v.reported == "not timed at REF (host-bound: a reading, never gated against REF)"
    committed = gates.part_verdict("pipeline", NOW, ref, M, env)
    assert not committed.reported and committed.why_not.startswith("no baseline number for this part")


def test_a_pipeline_not_comparable_for_a_host_change_says_so_but_one_with_no_host_recorded_does_not():
    elsewhere = {"gpu_uuid": "GPU-1", "host": {**HOST, "machine": "elsewhere"}}
    moved = gates.part_verdict("pipeline", NOW, entry_of("GPU-1"), M, elsewhere)
    assert not moved.compared and moved.host_changed  # a new runner: said, not a failure under --perf-strict
    old = gates.part_verdict("pipeline", NOW, entry_of("GPU-1", host=None), M, elsewhere)
    assert not old.compared and not old.host_changed  # an old entry: re-record it


# --- at its edges: how a wider scope's allowance and a second measurement read, and entries without an env ---


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


def test_a_throughput_regression_names_each_failed_part_its_figures_rounds_and_the_baseline_it_fell_from():
    """The timed parts that fell short twice, as one failure: each part's figures and rounds, the baseline's."""
    parts = Parts(batch_size=100, pipeline=Throughput(100, (0.5, 0.4, 0.5)), gpu=Throughput(2000, (1.0,) * 3))
    failed = [gates.Verdict("pipeline", 250.0, Comparison(0.8, 0.95, True, "Mann-Whitney U, p=0.004"),
                      confirmation=Comparison(0.82, 0.95, True, "median intervals"), scope="a baseline of another host"),
              gates.Verdict("gpu", 2500.0, Comparison(0.8, 0.9, True, "median intervals"),
                      confirmation=Comparison(0.75, 0.9, True, "median intervals"))]
    entry = {"env": {"date": "2026-12-01", "torch": "2.15.0",
                     "host": {"cpu": "Xeon 8480", "cores": 16, "machine": "0123456789abcdef"}},
             "parts": {"pipeline": {"samples_per_s": 250.0, "rounds": [240.0, 250.0, 260.0]},
                       "gpu": {"samples_per_s": 2500.0, "rounds": []}}}  # an entry recorded before rounds were kept
    found = gates.regression(failed, parts, entry, "baselines/x.json")
    assert found.outcome == FAILED
    assert found.text.split("\n") == [
        "throughput regression in pipeline, gpu:",
        "  pipeline: 200.0 samples/s against a baseline of 250.0 (-20.0%; allowed -5%, a baseline of another host, "
        "Mann-Whitney U, p=0.004); measured again: -18.0%",
        "    this run's rounds: 200, 250, 200; baseline's: 240, 250, 260",
        "  gpu: 2,000.0 samples/s against a baseline of 2,500.0 (-20.0%; allowed -10%, median intervals); measured "
        "again: -25.0%",
        "    this run's rounds: 2,000, 2,000, 2,000; baseline's: 2,500 (median only)",
        "  baseline: baselines/x.json, recorded 2026-12-01 with torch 2.15.0 on Xeon 8480 x 16 cores, machine "
        "0123456789abc",
        "  parts (samples/s): pipeline 200, GPU-side 2,000; bottleneck: GPU",
    ]
    assert found.brief == ("throughput regression: pipeline 200.0 samples/s against a baseline of 250.0 (-20.0%); gpu "
                           "2,000.0 samples/s against a baseline of 2,500.0 (-20.0%)")
