"""A count added end to end by its line in the registry alone (counts/registry.py's COUNTS): a toy count, written in the
project's conftest.py as a count's own module would be, is measured, recorded in the baseline entry, compared with the
baseline and with REF, a hole under --perf-strict where its record lacks it, in the report's row and in the nightly's
series, and a malformed recorded value of it is refused naming it."""

import json

import pytest

from tests.against.test_against import TOY, git, repo  # noqa: F401 (the fixture)
from tests.plugin_suite import TEST_FILE
from torch_perf_suite.counts import registry
from torch_perf_suite.nightly import creep

pytest_plugins = ["pytester"]

# the whole of a new count: what it measures (here, what the test put in result.extra["toy"]), its verdict, its line
TOY_COUNT = '''
from torch_perf_suite.counts import registry
from torch_perf_suite.findings import FAILED, NOT_COMPARED, Finding, briefly


def judge(now, recorded, judging):
    if recorded is None:
        return [Finding(NOT_COMPARED, f"toy count not compared: {judging.compared_with} recorded none for this test")]
    if now == recorded:
        return []
    said = f"toy count {now:g}, {recorded:g} at {{}}"
    return [Finding(FAILED, said.format(judging.compared_with) + ": the test counted another number",
                    said.format(briefly(judging.compared_with)))]


if all(c.key != "toy" for c in registry.COUNTS):
    registry.COUNTS.append(registry.Count("toy", lambda result: result.extra.get("toy"), judge, "toy count",
                                          lambda value: None if isinstance(value, (int, float)) else " is not a number",
                                          series=("toy count", ("counts", "toy"), None)))
'''
def counting(toy: int, test: str = TEST_FILE, measured: str = "    result = perf.measure(Work(perf_session.device))\n") -> str:
    """A measured test (the suite's, or the toy scenario of the runs against REF) that counts `toy`."""
    assert measured in test
    return test.replace(measured, f"{measured}    result.extra['toy'] = {toy}\n")


def toy_counting(toy: int) -> str:
    return counting(toy, TOY.format(body="pass"), "    result = perf.measure(Work())\n")


@pytest.fixture(autouse=True)
def counts(monkeypatch):
    """The registry as it was once the test ends: the toy's line goes into a copy of it."""
    monkeypatch.setattr(registry, "COUNTS", list(registry.COUNTS))


def test_a_toy_count_is_recorded_compared_with_the_baseline_reported_kept_by_the_nightly_and_a_hole_where_unrecorded(
        suite, pytester):
    pytester.makeconftest(pytester.path.joinpath("conftest.py").read_text() + TOY_COUNT)
    pytester.makepyfile(test_copy=counting(3))
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    assert suite.entry()["counts"]["toy"] == 3  # recorded beside the kernels and the host side
    suite.run("--perf-strict", "--perf-report=out/perf").assert_outcomes(passed=1)
    [row] = json.loads((suite.path / "out" / "perf.json").read_text())["tests"]
    assert row["counts"]["toy"] == 3 and creep.numbers(row)["toy count"] == 3.0  # in the report, in the nightly's series

    pytester.makepyfile(test_copy=counting(4))
    failed = suite.run()
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*test_copy: counted at this GPU model's baseline (*):",
                                 "toy count 4, 3 at the baseline: the test counted another number",
                                 "FAILED test_copy.py::test_copy - *toy count 4, 3 at the baseline"])

    suite.edit(lambda entry: entry["counts"].pop("toy"))  # an entry recorded before the count
    suite.run().assert_outcomes(passed=1)
    strict = suite.run("--perf-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*--perf-strict: 1 check(s) not made against the baseline*",
                                 "  toy count not compared: the baseline recorded none for this test"])

    suite.edit(lambda entry: entry["counts"].update(toy="three"))
    refused = suite.run()
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*entry 'test_copy.py::test_copy': 'counts' 'toy' is not a number*"])


@pytest.mark.slow
@pytest.mark.parametrize("at_ref", ["counted", "not counted"])
def test_a_toy_count_is_compared_with_refs_smoke_run_and_a_hole_under_strict_where_ref_did_not_count_it(
        repo, at_ref):  # noqa: F811 (the fixture)
    conftest = repo.path / "conftest.py"
    conftest.write_text(TOY_COUNT if at_ref == "counted" else "")
    repo.makepyfile(test_toy=toy_counting(3))
    git(repo.path, "add", ".")
    git(repo.path, "commit", "-qm", "the toy count at REF" if at_ref == "counted" else "no toy count at REF")
    conftest.write_text(TOY_COUNT)
    repo.makepyfile(test_toy=toy_counting(4 if at_ref == "counted" else 3))
    result = repo.runpytest("-p", "no:randomly", "--perf-smoke", "--perf-against", "HEAD", "--perf-strict")
    result.assert_outcomes(failed=1)
    if at_ref == "counted":
        result.stdout.fnmatch_lines(["*toy count 4, 3 at REF HEAD (*): the test counted another number",
                                     "FAILED test_toy.py::test_toy - *toy count 4, 3 at REF HEAD"])
    else:
        result.stdout.fnmatch_lines(["*--perf-strict: 1 check(s) not made against REF HEAD (*)*",
                                     "  toy count not compared: REF HEAD (*) recorded none for this test"])
