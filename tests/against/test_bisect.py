"""--perf-bisect GOOD..BAD: the halving with verdicts given by the test (skips, two regressions, none), the range read
from git, and end to end in smoke mode on a temporary repository whose step gains a `.item()` in one commit."""

import json
import subprocess

import pytest

from tests.against.test_against import git
from torch_perf_suite.against import bisect_report, bisecting
from torch_perf_suite.against.bisecting import Commit, Outcome

pytestmark = pytest.mark.slow

pytest_plugins = ["pytester"]

GOOD = Commit("0" * 40, "good", "2026-11-01T00:00:00+00:00")


def chain(n: int) -> list[Commit]:
    return [Commit(f"{i + 1:02d}" + "a" * 38, f"commit {i + 1}", "2026-11-02T00:00:00+00:00") for i in range(n)]


def judge_by(verdicts: dict[int, str], asked: list[int], default_bad_from: int, why=lambda i: ["test: 1.00 syncs/step"]):
    """A judge of commit i (1-based): verdicts[i] where given, else good before `default_bad_from` and bad from it."""
    def judge(c: Commit) -> Outcome:
        i = int(c.sha[:2])
        asked.append(i)
        status = verdicts.get(i, "bad" if i >= default_bad_from else "good")
        return Outcome(status, why(i) if status == "bad" else (["an error"] if status == "skip" else []))
    return judge


@pytest.mark.parametrize("planted", range(1, 21))
def test_the_planted_commit_of_twenty_is_found_in_at_most_log2_plus_two_measurements(planted):
    asked = []
    finding = bisecting.search(GOOD, chain(20), judge_by({}, asked, planted))
    assert finding.first_bad.subject == f"commit {planted}"
    assert len(asked) <= bisect_report.most_measured(20) == 7
    assert asked[:2] == [20, 0]  # BAD first (nothing to bisect where it passes), then GOOD against itself
    assert finding.suspects == [] and finding.second == []


def test_a_commit_that_cannot_run_is_skipped_and_the_right_one_still_found():
    asked = []
    finding = bisecting.search(GOOD, chain(20), judge_by({10: "skip", 5: "skip"}, asked, 14))
    assert finding.first_bad.subject == "commit 14" and finding.suspects == []
    assert 10 in asked and len(asked) == len(set(asked))  # each commit judged once


def test_skipped_commits_just_before_the_first_bad_one_are_named_as_suspects():
    finding = bisecting.search(GOOD, chain(8), judge_by({4: "skip", 5: "skip"}, [], 6))
    assert finding.first_bad.subject == "commit 6"
    assert [c.subject for c in finding.suspects] == ["commit 4", "commit 5", "commit 6"]
    assert "the first bad one is one of: " in bisect_report.report(finding, "v1", "main")


@pytest.mark.parametrize("skipped", [{}, {15: "skip"}])
def test_two_regressions_name_the_first_and_go_on_to_the_commit_of_what_only_bad_fails_on(skipped):
    """Commit 6 adds a sync, commit 15 a slower GPU-side step; a commit that cannot run before it makes both suspects."""
    def why(i):
        return ["t: 1.00 syncs/step at loss_log.py:31"] + (["t: gpu -6.0% (allowed -3%)"] if i >= 15 else [])
    asked = []
    finding = bisecting.search(GOOD, chain(30), judge_by(skipped, asked, 6, why))
    assert finding.first_bad.subject == "commit 6"
    assert finding.second == ["t: gpu -6.0% (allowed -3%)"]
    [later] = finding.later
    assert later.first_bad.subject == ("commit 16" if skipped else "commit 15") and later.why == ["t: gpu -6.0% (allowed -3%)"]
    assert [c.subject for c in later.suspects] == (["commit 15", "commit 16"] if skipped else [])
    assert len(asked) == len(set(asked)) <= 2 * bisect_report.most_measured(30)  # each commit judged once
    text = bisect_report.report(finding, "v1", "main")
    assert ("a later regression, which 30aaaaaaaaaa (main) has and the first bad commit does not: "
            f"{later.first_bad.short} '{later.first_bad.subject}'") in text


def test_each_later_regression_is_traced_and_one_commit_explains_every_failure_it_brought():
    def why(i):
        return (["t: 1.00 syncs/step"] + (["t: 20 kernel launches per step, 19 recorded (+1)", "u: peak memory +2%"]
                                          if i >= 9 else []) + (["t: gpu -6.0% (allowed -3%)"] if i >= 17 else []))
    finding = bisecting.search(GOOD, chain(20), judge_by({}, [], 4, why))
    assert [(x.first_bad.subject, len(x.why)) for x in finding.later] == [("commit 9", 2), ("commit 17", 1)]


def test_the_report_draws_each_judged_commits_first_figures_as_a_chart():
    def judge(c: Commit) -> Outcome:
        i = int(c.sha[:2])
        return Outcome("bad" if i >= 3 else "good", ["t: 1.00 syncs/step"] if i >= 3 else [],
                       figures={"t": {"gpu": 1000.0 - i, "pipeline": 500.0}})
    text = bisect_report.report(bisecting.search(GOOD, chain(4), judge), "v1", "main")
    assert "| 000000000000 | good | 2026-11-01 | good against itself | gpu 1,000/s, pipeline 500/s |" in text  # GOOD's A/A
    assert '```mermaid\nxychart-beta\n    title "samples/s of the first test, by commit"' in text
    assert "line 1: pipeline; line 2: gpu" in text or "line 1: gpu; line 2: pipeline" in text


def test_a_regression_that_only_moves_its_numbers_is_not_a_second_one():
    finding = bisecting.search(GOOD, chain(10), judge_by({}, [], 3, lambda i: [f"t: {i}.00 syncs/step"]))
    assert finding.first_bad.subject == "commit 3" and finding.second == []


@pytest.mark.parametrize("bad_status", ["good", "skip"])
def test_bad_that_passes_or_cannot_run_leaves_nothing_to_bisect(bad_status):
    asked = []
    finding = bisecting.search(GOOD, chain(20), judge_by({20: bad_status}, asked, 5))
    assert finding.first_bad is None and asked == [20]
    assert f"20aaaaaaaaaa (main) {bad_status}: nothing to bisect" in bisect_report.report(finding, "v1", "main")


def test_a_good_that_fails_against_itself_leaves_nothing_to_bisect():
    """A test that fails at GOOD against GOOD (an A/A) fails for a reason the range does not hold: a claim over a test
    the run lacks, a strict check the test cannot make. Halving would blame the range's first commit."""
    asked = []
    finding = bisecting.search(GOOD, chain(20), judge_by({0: "bad"}, asked, 1))
    assert finding.first_bad is None and asked == [20, 0] and finding.at_good.status == "bad"
    assert bisecting.nothing_found(finding, "main") == ("--perf-bisect: at 000000000000 the selected tests fail against "
                                                        "000000000000 itself (test: 1.00 syncs/step): bisect from a commit "
                                                        "where they pass")
    assert "000000000000 (v1) fails against itself: nothing to bisect" in bisect_report.report(finding, "v1", "main")


@pytest.mark.parametrize("text", ["main", "..main", "v1..", "v1...main", ""])
def test_a_range_not_good_dot_dot_bad_is_one_line(text):
    with pytest.raises(pytest.UsageError, match=r"--perf-bisect: expected GOOD\.\.BAD, two commits"):
        bisecting.parse_range(text)


def proc(rc, out="", err=""):
    return subprocess.CompletedProcess([], rc, out, err)


@pytest.mark.parametrize("rc, out, status, why", [
    (0, "", "good", []),
    (1, "FAILED t.py::a - t.py::a: measured 1.00 host-device syncs per step\nFAILED t.py::other - x", "bad",
     ["t.py::a: t.py::a: measured 1.00 host-device syncs per step"]),
    (1, "ERROR t.py::a - ImportError: no module named fixtures.gone", "skip",
     ["an error, not a verdict: t.py::a: ImportError: no module named fixtures.gone"]),
    (5, "no tests ran", "skip", ["none of the tests is collected there"]),
    (4, "ERROR: not found: t.py::a", "skip", ["pytest exit 4: ERROR: not found: t.py::a"]),
])
def test_a_commits_run_is_good_bad_or_skipped_by_what_its_pytest_said(tmp_path, rc, out, status, why):
    outcome = bisecting.judged(proc(rc, out), ["t.py::a"], tmp_path / "none.json")
    assert (outcome.status, outcome.why, outcome.figures) == (status, why, {})


def test_a_commit_whose_run_was_killed_is_skipped_now_and_judged_again_by_the_next_run(tmp_path, monkeypatch):
    """Killed (out of memory, a timeout) says nothing of the commit: its skip is not cached; a skip for the commit's own
    reason is."""
    killed = bisecting.judged(proc(-9, ""), ["t.py::a"], tmp_path / "none.json")
    assert (killed.status, killed.why, killed.transient) == ("skip", ["its pytest was killed by signal 9"], True)
    assert not bisecting.judged(proc(5, "no tests ran"), ["t.py::a"], tmp_path / "none.json").transient
    runner = bisecting.Runner(tmp_path, tmp_path, "0" * 40, ["t.py::a"], [], tmp_path / "cache", {}, lambda line: None)
    runs = []

    def run(commit):
        runs.append(commit)
        if len(runs) == 1:
            return bisecting.Outcome("skip", ["killed"], transient=True)
        return bisecting.Outcome("skip", ["none collected"])

    monkeypatch.setattr(runner, "_run", run)
    commit = chain(1)[0]
    assert [runner(commit).why for _ in range(3)] == [["killed"], ["none collected"], ["none collected"]]
    assert len(runs) == 2  # the killed run judged again, the commit's own skip then taken from the cache


def test_a_commit_without_the_test_files_is_skipped_saying_so(tmp_path):
    outcome = bisecting.judged(proc(4, err="ERROR: file or directory not found: t.py"), ["t.py::a"], tmp_path / "r.json")
    assert (outcome.status, outcome.why) == ("skip", ["its test files are not there"])


def test_a_commits_figures_come_from_its_report(tmp_path):
    rows = [{"test": "t.py::a", "parts": {"gpu": {"samples_per_s": 900.0}, "pipeline": None}, "syncs_per_step": 0.0}]
    (tmp_path / "r.json").write_text(json.dumps({"tests": rows}))
    outcome = bisecting.judged(proc(0), ["t.py::a"], tmp_path / "r.json")
    assert outcome.figures == {"t.py::a": {"gpu": 900.0, "syncs_per_step": 0.0}}
    assert bisect_report._figure_text(outcome) == "gpu 900/s, 0 syncs/step"


def test_a_failures_every_line_comes_from_its_report_where_the_summary_line_has_the_first(tmp_path):
    whole = "t.py::a: the loader's settings changed against REF abc (abc):\n  num_workers 16 -> 4\n"
    (tmp_path / "r.json").write_text(json.dumps({"tests": [{"test": "t.py::a", "failure": whole}]}))
    said = "FAILED t.py::a - t.py::a: the loader's settings changed against REF abc (abc):"
    outcome = bisecting.judged(proc(1, said), ["t.py::a"], tmp_path / "r.json")
    assert outcome.why == ["t.py::a: the loader's settings changed against REF abc (abc): num_workers 16 -> 4"]
    both = f"t.py::a: 1.00 host-device syncs per step, expected 0:\n  at step.py:3\n{whole}"  # causes.together's
    (tmp_path / "r.json").write_text(json.dumps({"tests": [{"test": "t.py::a", "failure": both}]}))
    assert bisecting.judged(proc(1, said), ["t.py::a"], tmp_path / "r.json").why == [
        "t.py::a: 1.00 host-device syncs per step, expected 0: at step.py:3",
        "t.py::a: the loader's settings changed against REF abc (abc): num_workers 16 -> 4"]  # a check each
    older = bisecting.judged(proc(1, said), ["t.py::a"], tmp_path / "none.json")  # a commit whose report lacks it
    assert older.why == ["t.py::a: t.py::a: the loader's settings changed against REF abc (abc):"]


# --- end to end: a repository of seven commits, one of which adds a `.item()` to the step -----------------------

STEP = """
import pytest
import torch

class Work:
    batch_size = 10
    def __init__(self):
        self.x = torch.ones(8)
    def step(self):
        y = (self.x * 2).sum()
        {plant}

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
def test_step(perf):
    result = perf.measure(Work())
    perf.assert_syncs(result, per_step=0)
    perf.assert_baseline(result)
"""


@pytest.fixture
def history(pytester, monkeypatch):
    """GOOD, then six commits: the third breaks the test file's import (it cannot run there), the fifth reads the loss
    on the host every step, the others change an unrelated file."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\n")
    pytester.makepyfile(test_step=STEP.format(plant="pass"))
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", ".")
    git(pytester.path, "commit", "-qm", "good")
    for i in range(1, 7):
        (pytester.path / "notes.txt").write_text(f"change {i}\n")
        if i == 3:
            pytester.makepyfile(test_step="import fixtures.gone\n" + STEP.format(plant="pass"))
        if i == 4:
            pytester.makepyfile(test_step=STEP.format(plant="pass"))
        if i == 5:
            pytester.makepyfile(test_step=STEP.format(plant="y.item()"))
        git(pytester.path, "add", ".")
        git(pytester.path, "commit", "-qm", f"change {i}")
    return pytester


def bisect(repo, *args):
    return repo.runpytest("-p", "no:randomly", "--perf-smoke", "--perf-report=out/perf", *args)


def test_the_commit_that_added_a_sync_is_found_past_one_that_cannot_run_and_judged_again_only_where_unreadable(history):
    good = git(history.path, "rev-list", "--max-parents=0", "HEAD")
    planted = git(history.path, "rev-parse", "HEAD~1")
    result = bisect(history, "--perf-bisect", f"{good}..HEAD")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([f"*first bad commit: {planted[:12]} 'change 5'*",
                                 # the failure whole, down to the line that reads the loss (its second line)
                                 "*test_step.py::test_step: *host reads per step*user code: test_step.py:10 in step*"])
    found = json.loads((history.path / "out" / "perf.bisect.json").read_text())
    assert found["first_bad"]["sha"] == planted
    assert len(found["tested"]) <= bisect_report.most_measured(6)
    assert (history.path / "out" / "perf.bisect.md").read_text().startswith(f"perf bisect {good[:12]}..HEAD: 6 commit(s)")
    assert git(history.path, "worktree", "list", "--porcelain").count("worktree ") == 1  # none left behind
    # a range whose BAD is the planted commit, its verdict unreadable, the commit that cannot run in its halving: the
    # other verdicts above reused, the unreadable one judged again
    (corrupt,) = (history.path / ".pytest_cache").rglob(f"{planted[:12]}-*/outcome.json")
    corrupt.write_text("{not json")
    result = bisect(history, "--perf-bisect", f"{good}..HEAD~1", "--perf-report=out/skip")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([f"{corrupt}: not a verdict this suite wrote; the commit is judged again"])
    result.stdout.fnmatch_lines(["*5 commit(s) (first parent), * judged, 1 measured in this run*"])
    tested = {t["subject"]: t["status"] for t in json.loads((history.path / "out" / "skip.bisect.json").read_text())["tested"]}
    assert tested.get("change 3") in (None, "skip") and tested["change 5"] == "bad"
    assert json.loads((history.path / "out" / "skip.bisect.json").read_text())["first_bad"]["subject"] == "change 5"


@pytest.mark.parametrize("args, message", [
    (["--perf-bisect", "nosuch..HEAD"], "--perf-bisect nosuch: no such commit, branch or tag*"),
    (["--perf-bisect", "HEAD..HEAD~3"], "--perf-bisect: * is not an ancestor of *: give GOOD..BAD with GOOD older*"),
    (["--perf-bisect", "HEAD..HEAD"], "--perf-bisect: no commit between * and *: nothing to bisect"),
    (["--perf-bisect", "HEAD~1..HEAD", "--perf-against", "HEAD"], "--perf-bisect runs each commit's tests against GOOD "
                                                                   "in a run of its own: drop --perf-against"),
    (["--perf-bisect", "HEAD~4..HEAD~2"], "--perf-bisect: at HEAD~2 (*) the selected tests pass against *: nothing to "
                                          "bisect"),
    (["--perf-bisect", "HEAD~1..HEAD", "-k", "nosuch"], "--perf-bisect: no test selected; name the test that regressed*"),
])
def test_bad_input_is_one_line_saying_what_to_do(history, args, message):
    result = bisect(history, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_without_a_gpu_or_smoke_it_says_how_to_bisect(history):
    result = history.runpytest("-p", "no:randomly", "--perf-bisect", "HEAD~1..HEAD")
    result.stderr.fnmatch_lines(["ERROR: --perf-bisect measures each commit on this machine's GPU, and it has none*"])


def test_a_shallow_clone_says_how_to_get_the_range(history, tmp_path):
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{history.path}", str(shallow)], check=True)
    with pytest.raises(pytest.UsageError, match=r"--perf-bisect HEAD~3: .*this clone is shallow: fetch it"):
        bisecting.ref.resolve("HEAD~3", shallow, "--perf-bisect")
