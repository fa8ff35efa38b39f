"""--perf-strict against REF (the merge gate): what a test leaves uncompared fails it, unless what covers it was judged:
a host-bound reading by the step's host side or the loader's verdicts, a claim over a deselected test by the test's own
part compared with REF. Against baselines nothing is a hole: what another host's entry cannot compare is said."""

from types import SimpleNamespace

import pytest

from torch_perf_suite.against import checks as ref_checks
from torch_perf_suite.findings import failures
from torch_perf_suite.fixture.judging import Judge, gain
from torch_perf_suite.fixture.result import Result
from torch_perf_suite.session.settings import Measure
from torch_perf_suite.throughput import gates
from torch_perf_suite.throughput.parts import BRIEF, Parts
from torch_perf_suite.throughput.timing import Throughput

READING = "+47.0% (host-bound, a reading)"


def judge(against: bool, strict: bool = True) -> Judge:
    session = SimpleNamespace(ref=SimpleNamespace(label="HEAD (abc)") if against else None,
                              settings=SimpleNamespace(strict=strict), deselected={"t.py::test[over]"})
    return Judge(session, "t.py::test[mine]", Measure(), confirm=None)


def result(loader_fed: bool = False) -> Result:
    loader = Throughput(100, (0.2,)) if loader_fed else None
    parts = Parts(batch_size=100, pipeline=Throughput(100, (0.3,)), gpu=Throughput(100, (0.1,)), loader=loader)
    return Result("t.py::test[mine]", parts, None, None, None, compared=True)  # perf.assert_baseline was called


def test_a_gpu_reading_is_a_hole_until_the_host_side_is_judged():
    r = result()
    r.verdicts["gpu"] = gates.Verdict("gpu", 1000.0, reported=READING)
    judge(against=True).timed_notes(r)
    assert r.holes() == [f"gpu {READING}"]
    r.judged.add("host")
    assert r.holes() == []


def test_a_loader_fed_pipelines_reading_is_covered_by_the_loaders_verdicts_not_by_the_host_side():
    r = result(loader_fed=True)
    r.verdicts["pipeline"] = gates.Verdict("pipeline", 1000.0, reported=READING)
    judge(against=True).timed_notes(r)
    r.judged.add("host")
    assert r.holes() == [f"pipeline {READING}"]
    r.judged.add("loader")
    assert r.holes() == []


def test_a_claim_over_a_deselected_test_is_covered_by_this_tests_part_compared_with_ref():
    r = result()
    with pytest.warns(UserWarning, match="deselected"):
        gain(judge(against=True), r, None, "over", "gpu", "gpu", at_least=0.99)
    assert r.holes() == ["not compared with over (deselected)"]
    r.judged.add("gpu")
    assert r.holes() == []


def test_a_claim_on_a_part_read_not_compared_against_ref_is_covered_where_that_reading_is():
    """pin_memory's pipeline claim over the deselected workers step: REF only warmed the loader-fed pipeline, so the
    claim is covered where the loader's CPU work was judged (by turns)."""
    r = result(loader_fed=True)
    with pytest.warns(UserWarning, match="deselected"):
        gain(judge(against=True), r, None, "over", "pipeline", "pipeline", at_least=0.9)
    r.judged.add("host")
    assert r.holes() == ["not compared with over (deselected)"]
    r.judged.add("loader")
    assert r.holes() == []


@pytest.mark.parametrize("part", ["pipeline", "loader"])
def test_a_claim_over_a_part_timed_briefly_against_ref_is_a_hole_until_the_loader_is_judged(part):
    """Against REF the head's loader-bound pipeline and its loader are timed briefly (parts.BRIEF): a claim over either
    is not made, and the loader's verdicts cover it; against baselines (the nightly) nothing is timed briefly."""
    r, other = result(loader_fed=True), result(loader_fed=True)
    setattr(r.parts, part, Throughput(100, (0.3,), brief=True))
    gain(judge(against=True), r, other, "over", part, part, at_least=1.5)
    assert r.holes() == [f"{part} vs over not checked: {BRIEF[part]}"] and f"{part} vs over" not in r.extra
    r.judged.add("loader")
    assert r.holes() == []


def test_against_baselines_nothing_is_a_hole():
    r = result()
    r.verdicts["gpu"] = gates.Verdict("gpu", 1000.0, reported=READING)
    judge(against=False).timed_notes(r)
    assert r.notes == [f"gpu {READING}"] and r.holes() == []


def test_a_part_not_comparable_because_the_host_changed_is_no_failure_under_strict_but_a_missing_number_is():
    r = result()
    r.verdicts["loader"] = gates.Verdict("loader", None, why_not="not comparable: recorded on machine m1", host_changed=True)
    judge(against=False).timed_notes(r)
    assert r.notes == ["loader: not comparable: recorded on machine m1"]
    r.verdicts["gpu"] = gates.Verdict("gpu", None, why_not="no baseline number for this part")
    with pytest.raises(pytest.fail.Exception, match="no comparable baseline: gpu: no baseline number"):
        judge(against=False).timed_notes(r)


def test_the_failure_names_each_hole_and_ref():
    assert failures(ref_checks.holes([], "HEAD")) is None
    text = failures(ref_checks.holes(["gpu +47.0% (a reading)", "not compared with over (deselected)"], "HEAD (abc)"))
    assert text.splitlines() == ["--perf-strict: 2 check(s) not made against REF HEAD (abc), and nothing else judged "
                                 "what they cover:", "  gpu +47.0% (a reading)", "  not compared with over (deselected)"]


def test_the_session_fails_a_test_with_holes_only_under_strict_against_ref():
    from torch_perf_suite.session.core import PerfSession

    r = result()
    r.unjudged.append(("gpu +47.0% (a reading)", "host"))
    item = SimpleNamespace(nodeid=r.test_id)

    def session(against: bool, strict: bool):
        return SimpleNamespace(results={r.test_id: r}, settings=SimpleNamespace(strict=strict),
                               ref=SimpleNamespace(label="HEAD (abc)") if against else None)

    with pytest.raises(pytest.fail.Exception, match=r"t.py::test\[mine\]: --perf-strict: 1 check\(s\) not made"):
        PerfSession.call_passed(session(against=True, strict=True), item)
    PerfSession.call_passed(session(against=True, strict=False), item)  # a note, not a failure
    PerfSession.call_passed(session(against=False, strict=True), item)
    r.judged.add("host")
    PerfSession.call_passed(session(against=True, strict=True), item)
    PerfSession.call_passed(session(against=True, strict=True), SimpleNamespace(nodeid="not a perf test"))


def test_a_result_never_compared_is_a_hole():
    r = result()
    r.compared = False
    assert r.holes() == ["perf.assert_baseline(result) was never called: nothing of it was compared"]
    r.compared = True
    assert r.holes() == []


def test_blocks_and_waiting_alone_do_not_judge_the_loaders_cpu_work():
    """A loader with no loader_source: no instruction count, no timing by turns. Its waits are judged; a reading of
    the loader or its pipeline stays a hole under the merge gate."""
    from torch_perf_suite import loader

    r = result(loader_fed=True)
    unit = loader.UnitCost(64, 1000.0, 900.0, 100.0, 0.9, 5, 0.0, 1200.0)
    r.parts = Parts(batch_size=100, pipeline=Throughput(100, (0.3,)), loader=Throughput(100, (0.2,), unit=unit))
    j = judge(against=True)
    j.session.against_label = "REF HEAD (abc)"
    assert failures(j._unit(r, {"loader_unit": unit.entry(), "env": {}})) is None
    r.verdicts["loader"] = gates.Verdict("loader", 1000.0, reported=READING)
    j.timed_notes(r)
    assert "loader" not in r.judged and f"loader {READING}" in r.holes()


def test_against_ref_a_part_ref_timed_on_another_host_is_a_hole_unless_covered():
    r = result(loader_fed=True)
    r.verdicts["loader"] = gates.Verdict("loader", None, why_not="not comparable: recorded on 8 cores", host_changed=True)
    judge(against=True).timed_notes(r)
    assert r.holes() == ["loader: not comparable: recorded on 8 cores"]
    r.judged.add("loader")
    assert r.holes() == []
