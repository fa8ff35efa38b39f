"""The nightly's alert logic on two recorded runs of the suite (H200, 2026-11-22, `pytest perf_tests --perf-report`):
`clean.json.gz` (29 passed) and `one_failed.json.gz` (test_metrics[naive] failed its efficiency floor)."""

import dataclasses
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torch_perf_suite.nightly import bisect_alerts, command
from torch_perf_suite.nightly import github as github_api
from torch_perf_suite.nightly.nights import Night, load_history, save_night
from torch_perf_suite.nightly.site import page_name

RUNS = Path(__file__).parent
ROOT = Path(__file__).resolve().parents[2]
NAIVE = "perf_tests/test_metrics.py::test_metrics[naive]"


def night(run: str, commit: str, gpu: str | None = None) -> Night:
    report = json.loads(gzip.open(RUNS / f"{run}.json.gz").read())
    if gpu:
        report["env"]["gpu"] = gpu
    return command.summarize(report, commit * 40, f"https://ci/runs/{commit}")


class FakeGitHub:
    """What GitHub would hold: the open issues and their comments."""

    def __init__(self):
        self.issues: dict[int, dict] = {}

    def open_issues(self, label):
        return {i["title"]: n for n, i in self.issues.items() if label in i["labels"]}

    def create_issue(self, title, body, label):
        self.issues[len(self.issues) + 1] = {"title": title, "body": body, "labels": [label], "comments": []}
        return len(self.issues)

    def comment(self, number, body):
        self.issues[number]["comments"].append(body)


def test_a_recorded_run_becomes_a_night_with_its_failed_tests_and_their_numbers():
    bad, good = night("one_failed", "b"), night("clean", "a")
    assert (good.date, good.gpu, good.failed) == ("2026-11-22", "NVIDIA H200", {})
    assert list(bad.failed) == [NAIVE]
    assert bad.failed[NAIVE].startswith("samples/s: pipeline 3,119, gpu 4,826, loader 4,928; efficiency 0.65 (bottleneck: ")
    assert "syncs/step 2" in bad.failed[NAIVE]


def test_one_bad_night_is_suspicious_two_open_one_issue_and_a_third_updates_it():
    github, history = FakeGitHub(), []
    for n, (run, commit) in enumerate([("clean", "a"), ("one_failed", "b"), ("one_failed", "c"), ("one_failed", "d")]):
        tonight = night(run, commit)
        decision = command.decide(history, tonight, "https://github.com/o/r")
        github_api.apply(decision.alerts, github, command.LABEL)
        history.append(tonight)
        if n == 0:
            assert decision.status.startswith("first night: 0 failed test(s)") and not decision.alerts
        if n == 1:
            assert decision.status == f"0 regression(s) (failed two nights in a row), 1 suspicious (failed tonight only): {NAIVE}"
            assert not github.issues
        if n == 2:
            [alert] = decision.alerts
            assert alert.title == f"perf regression: {NAIVE}"
            assert f"[bbbbbbbbbbbb..cccccccccccc](https://github.com/o/r/compare/{'b' * 40}...{'c' * 40})" in alert.body
            assert "Run and traces: https://ci/runs/c" in alert.body
            assert [i["comments"] for i in github.issues.values()] == [[]]
    [issue] = github.issues.values()  # not duplicated on the third bad night: commented on
    assert issue["title"] == f"perf regression: {NAIVE}" and len(issue["comments"]) == 1
    assert "dddddddddddd" in issue["comments"][0]


def test_two_alerts_of_one_title_in_one_night_open_one_issue_and_comment_on_it():
    """The open issues are read once a night: the second alert of a title (two creeps of one test and number, a creep
    then its drift) found none and opened a second issue."""
    github = FakeGitHub()
    alerts = [command.Alert("t", "perf creep: t: gpu samples/s", body) for body in ("first", "second")]
    assert github_api.apply(alerts, github, command.LABEL) == ["opened #1: perf creep: t: gpu samples/s",
                                             "commented on #1: perf creep: t: gpu samples/s"]
    assert [(i["body"], i["comments"]) for i in github.issues.values()] == [("first", ["second"])]


def test_the_alert_and_the_summary_chart_the_tests_numbers_night_by_night(tmp_path):
    history = [night("clean", "a"), night("one_failed", "b")]
    decision = command.decide(history, night("one_failed", "c"))
    [alert] = decision.alerts
    chart = alert.body.split("```mermaid\n", 1)[1]
    assert chart.startswith(f'xychart-beta\n    title "{NAIVE} over the last 3 night(s)"\n'
                            '    x-axis ["2026-11-22 aaaaaaa", "2026-11-22 bbbbbbb", "2026-11-22 ccccccc"]\n')
    assert chart.count("    line [") == 3 and "line 1: pipeline; line 2: gpu; line 3: loader" in chart  # one per part
    assert decision.charts == command.trend(history + [night("one_failed", "c")], NAIVE)


def test_the_alert_half_needs_only_the_standard_library():
    """It runs on a hosted runner with nothing installed: without site-packages (python -S), only the standard library
    and the package itself, from the checkout, are imported."""
    code = ("import sys\nfrom torch_perf_suite.nightly import command\ntry:\n    command.main(['alert', '--help'])\n"
            "except SystemExit:\n    pass\nprint(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names)))")
    run = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "the alerts.json that `record` wrote" in run.stdout
    assert run.stdout.splitlines()[-1] == "['__main__', 'torch_perf_suite']"


def test_the_package_runs_as_the_workflows_call_it(capsys, monkeypatch):
    """`python -m torch_perf_suite.nightly ...` (the workflows' and the docs' command) runs command.main: its exit code
    and its words are the same."""
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps its help to the terminal's width
    for argv in (["--help"], ["alert", "--help"], ["bisect"]):
        with pytest.raises(SystemExit) as exited:
            command.main(argv)
        said = capsys.readouterr()
        run = subprocess.run([sys.executable, "-m", "torch_perf_suite.nightly", *argv], capture_output=True, text=True,
                             cwd=ROOT, env=dict(os.environ))
        assert (run.returncode, run.stdout, run.stderr) == (exited.value.code, said.out, said.err), argv


def test_a_night_on_a_new_gpu_model_alerts_nobody_and_the_old_models_nights_still_count():
    history = [night("one_failed", "a"), night("one_failed", "b", gpu="NVIDIA H100 80GB HBM3")]
    first = command.decide(history[:1], history[1])
    assert first.status.startswith("first night on NVIDIA H100 80GB HBM3: 1 failed test(s)") and not first.alerts
    again = command.decide(history, night("one_failed", "c"))  # the H200's last night was "a", two nights back
    assert [a.test for a in again.alerts] == [NAIVE]


def test_a_recovered_test_is_not_alerted():
    decision = command.decide([night("one_failed", "a")], night("clean", "b"))
    assert decision.alerts == []
    assert decision.status == "0 regression(s) (failed two nights in a row), 0 suspicious (failed tonight only)"


def test_a_re_run_of_a_night_replaces_it_and_alert_needs_a_token(tmp_path, capsys, monkeypatch):
    """A re-run of the same night (date, commit, GPU model) replaces it: it was added as a second night, which made
    one bad night "1 regression(s) (failed two nights in a row)"."""
    report = tmp_path / "perf.json"
    report.write_bytes(gzip.open(RUNS / "one_failed.json.gz").read())
    args = ["record", "--report", str(report), "--history", str(tmp_path / "h"), "--commit", "c" * 40,
            "--out", str(tmp_path / "alerts.json")]
    assert command.main(args) == 0 and command.main(args) == 0  # the same commit twice: a re-run
    assert [p.name for p in (tmp_path / "h").iterdir()] == ["2026-11-22-cccccccccccc-nvidia-h200.json"]
    assert capsys.readouterr().out.splitlines() == ["first night: 1 failed test(s), nothing to compare with, no alert"] * 2
    save_night(tmp_path / "h", Night("2026-11-21", "b" * 40, "NVIDIA H200", {NAIVE: "slow"}))
    assert command.main(args) == 0 and command.main(args) == 0  # with a night before it: the same decision twice
    assert len(list((tmp_path / "h").iterdir())) == 2
    assert capsys.readouterr().out.splitlines() == [
        f"1 regression(s) (failed two nights in a row), 0 suspicious (failed tonight only): {NAIVE}"] * 2
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    with pytest.raises(SystemExit) as exit:
        command.main(["alert", str(tmp_path / "alerts.json")])
    assert exit.value.code == 2
    assert "alerts to file, but GITHUB_REPOSITORY or GITHUB_TOKEN is not set" in capsys.readouterr().err


def test_a_night_kept_under_the_old_name_is_replaced_too(tmp_path):
    """Before the GPU model was in a night's name, a re-run was kept as a second night, <date>-<commit>-1.json."""
    tonight = night("one_failed", "c")
    for name in ("2026-11-22-cccccccccccc.json", "2026-11-22-cccccccccccc-1.json"):
        (tmp_path / name).write_text(json.dumps(vars(tonight)))
    (tmp_path / "2026-11-22-cccccccccccc-2.json").write_text(json.dumps({**vars(tonight), "gpu": "Tesla T4"}))
    save_night(tmp_path, tonight)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2026-11-22-cccccccccccc-2.json",
                                                          "2026-11-22-cccccccccccc-nvidia-h200.json"]


def test_outputs_this_user_cannot_write_are_said_at_start(tmp_path, capsys, monkeypatch):
    report = tmp_path / "perf.json"
    report.write_bytes(gzip.open(RUNS / "one_failed.json.gz").read())
    (tmp_path / "locked").mkdir()
    real = command.os.access
    monkeypatch.setattr(command.os, "access", lambda p, mode: "locked" not in str(p) and real(p, mode))
    with pytest.raises(SystemExit):
        command.main(["record", "--report", str(report), "--history", str(tmp_path / "h"), "--commit", "c" * 7,
                      "--out", str(tmp_path / "locked" / "alerts.json")])
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.endswith(f"error: --out {tmp_path / 'locked' / 'alerts.json'}: {tmp_path / 'locked'} cannot be written "
                        "by this user")
    assert not (tmp_path / "h").exists()


@pytest.mark.parametrize("content, problem", [
    # a key with a line break: the message was two lines (TypeError's, from Night(**...))
    ('{"date": "2026-11-22", "commit": "c", "gpu": "g", "\\n": 1}', "unknown key(s) ['\\n']"),
    # taken before, and `test in failed` then matched any part of the string
    ('{"date": "2026-11-22", "commit": "c", "gpu": "g", "failed": "abc"}',
     "'failed' is 'abc', expected an object of test ids and lines"),
])
def test_a_history_night_of_the_wrong_shape_is_named_in_one_line(tmp_path, content, problem):
    (tmp_path / "2026-01-01-x.json").write_text(content)
    with pytest.raises(SystemExit) as e:
        load_history(tmp_path)
    assert e.value.code == (f"error: {tmp_path / '2026-01-01-x.json'}: not a night recorded by this tool ({problem}); "
                            f"move it out of {tmp_path}")


@pytest.mark.parametrize("content, message", [
    ("{not json", "not a night recorded by this tool"),
    ('{"date": "x"}', "not a night recorded by this tool"),
])
def test_a_corrupt_history_file_is_named(tmp_path, content, message):
    (tmp_path / "2026-01-01-x.json").write_text(content)
    with pytest.raises(SystemExit, match=f"2026-01-01-x.json: {message}"):
        load_history(tmp_path)


def test_an_unreadable_report_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        command.main(["record", "--report", str(tmp_path / "none.json"), "--history", str(tmp_path), "--commit", "c",
                      "--out", str(tmp_path / "a.json")])
    assert "--report" in capsys.readouterr().err and not (tmp_path / "a.json").exists()


def test_the_record_half_writes_the_decision_and_the_summary(tmp_path, capsys):
    report = tmp_path / "perf.json"
    report.write_bytes(gzip.open(RUNS / "one_failed.json.gz").read())
    history = tmp_path / "h"
    save_night(history, night("one_failed", "b"))
    out, summary = tmp_path / "out" / "alerts.json", tmp_path / "trend.md"
    assert command.main(["record", "--report", str(report), "--history", str(history), "--commit", "c" * 40,
                         "--run-url", "https://ci/runs/9", "--repo-url", "https://github.com/o/r",
                         "--out", str(out), "--summary", str(summary), "--site-url", "https://o.github.io/r/"]) == 0
    decision = json.loads(out.read_text())
    [alert] = decision["alerts"]
    assert alert["test"] == NAIVE and "Run and traces: https://ci/runs/9" in alert["body"]
    assert alert["body"].endswith(f"\n\nThe test's history: https://o.github.io/r/{page_name(NAIVE)}")
    assert "(https://github.com/o/r/compare/" in alert["body"]
    assert summary.read_text() == f"Nightly trend: {decision['status']}\n\n{decision['charts']}"
    assert decision["charts"].startswith("```mermaid\nxychart-beta\n")
    saved = json.loads((history / "2026-11-22-cccccccccccc-nvidia-h200.json").read_text())
    assert saved["run_url"] == "https://ci/runs/9" and saved["samples"][NAIVE]["gpu"] == 4826.5
    assert capsys.readouterr().out == decision["status"] + "\n"


def test_the_alert_half_files_what_record_decided(tmp_path, capsys, monkeypatch):
    decision = command.decide([night("one_failed", "a")], night("one_failed", "b"))
    path = tmp_path / "alerts.json"
    path.write_text(json.dumps({"status": decision.status, "alerts": [vars(a) for a in decision.alerts]}))
    made = []
    monkeypatch.setattr(command, "GitHub", lambda repo, token: made.append((repo, token)) or FakeGitHub())
    monkeypatch.setenv("GITHUB_REPOSITORY", "o/r")
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    assert command.main(["alert", str(path)]) == 0
    assert made == [("o/r", "t0ken")]
    assert capsys.readouterr().out == f"{decision.status}\nopened #1: perf regression: {NAIVE}\n"
    path.write_text('{"alerts": []}')
    with pytest.raises(SystemExit):
        command.main(["alert", str(path)])
    assert "not a decision written by `record`" in capsys.readouterr().err


def test_the_command_line_says_what_each_half_needs(capsys):
    with pytest.raises(SystemExit):
        command.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("usage: python -m torch_perf_suite.nightly [-h] {record,bisect,alert,publish}")
    assert "Nightly trend: what regressed tonight, and whether to tell anyone." in out
    assert "add tonight's report to the history and decide the alerts (no token needed)" in out
    with pytest.raises(SystemExit):
        command.main(["record", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for text in ("--report REPORT the JSON written by --perf-report", "--history HISTORY the folder of past nights",
                 "--commit COMMIT", "--run-url RUN_URL", "--repo-url REPO_URL https://github.com/OWNER/REPO",
                 "--out OUT where to write the decision", "--summary SUMMARY where to write the status"):
        assert text in out
    with pytest.raises(SystemExit):
        command.main(["record", "--report", "r.json"])  # the rest is required
    assert "the following arguments are required: --history, --commit, --out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        command.main(["record", "--history", "h", "--commit", "c", "--out", "o.json"])
    assert "the following arguments are required: --report" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        command.main(["bisect", "alerts.json"])
    assert "the following arguments are required: --out" in capsys.readouterr().err


@pytest.mark.parametrize("env", [{"GITHUB_TOKEN": "t0ken"}, {"GITHUB_REPOSITORY": "o/r"}])
def test_the_alert_half_with_alerts_needs_both_the_repository_and_the_token(tmp_path, capsys, monkeypatch, env):
    decision = command.decide([night("one_failed", "a")], night("one_failed", "b"))
    path = tmp_path / "alerts.json"
    path.write_text(json.dumps({"status": decision.status, "alerts": [vars(a) for a in decision.alerts]}))
    for name in ("GITHUB_REPOSITORY", "GITHUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(command, "GitHub", lambda repo, token: pytest.fail("no issue is filed without both"))
    with pytest.raises(SystemExit):
        command.main(["alert", str(path)])
    assert "alerts to file, but GITHUB_REPOSITORY or GITHUB_TOKEN is not set" in capsys.readouterr().err


def test_a_failed_rows_numbers_in_one_line():
    row = {"parts": {"pipeline": {"samples_per_s": 900.0}, "gpu": {"samples_per_s": 10500.4}, "loader": None},
           "efficiency": 0.0857, "bottleneck": "GPU", "syncs_per_step": 0.5,
           "baseline": {"gpu": {"compared": True, "change_pct": -4.96, "allowed_pct": -3.0},
                        "pipeline": {"compared": False}},
           "notes": ["FAILED", "gpu measured again to confirm: 10,480 samples/s"]}
    assert command._numbers(row) == ("samples/s: pipeline 900, gpu 10,500; efficiency 0.09 (bottleneck: GPU); "
                                     "vs baseline: gpu -5.0% (allowed -3.0%); syncs/step 0.5; "
                                     "gpu measured again to confirm: 10,480 samples/s")


class Response:
    def __init__(self, body):
        self.body = body

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def read(self):
        return json.dumps(self.body).encode()


def test_the_github_client_makes_the_three_rest_calls(monkeypatch):
    sent = []

    def urlopen(request, timeout):
        sent.append((request.get_method(), request.full_url, dict(request.header_items()), request.data, timeout))
        return Response([{"title": "perf regression: t", "number": 7}] if request.get_method() == "GET" else {"number": 8})

    monkeypatch.setattr(github_api.urllib.request, "urlopen", urlopen)
    github = github_api.GitHub("o/r", "t0ken")
    assert github.open_issues("perf-regression") == {"perf regression: t": 7}
    assert github.create_issue("perf regression: u", "body", "perf-regression") == 8
    github.comment(7, "again")
    api = "https://api.github.com/repos/o/r"
    assert [(m, url, data and json.loads(data)) for m, url, _, data, _ in sent] == [
        ("GET", f"{api}/issues?state=open&labels=perf-regression&per_page=100", None),
        ("POST", f"{api}/issues", {"title": "perf regression: u", "body": "body", "labels": ["perf-regression"]}),
        ("POST", f"{api}/issues/7/comments", {"body": "again"})]
    headers = sent[0][2]
    assert headers["Authorization"] == "Bearer t0ken" and headers["Accept"] == "application/vnd.github+json"
    assert headers["X-github-api-version"] == "2022-11-28" and {s[4] for s in sent} == {30}


def test_a_regression_names_the_last_good_nights_commit_to_bisect_from():
    history = [night("clean", "a"), night("one_failed", "b")]
    [alert] = command.decide(history, night("one_failed", "c")).alerts
    assert (alert.good, alert.bad) == ("a" * 40, "c" * 40)
    [never] = command.decide([night("one_failed", "b")], night("one_failed", "c")).alerts
    assert never.good == ""  # no night passed it: nothing to bisect from


def test_the_bisect_half_adds_each_regressions_first_bad_commit_to_its_alert(tmp_path):
    decision = tmp_path / "alerts.json"
    alerts = [command.Alert(NAIVE, "t1", "body 1", good="a" * 40, bad="c" * 40),
              command.Alert("perf_tests/x.py::y", "t2", "body 2", good="a" * 40, bad="c" * 40),
              command.Alert("perf_tests/z.py::w", "t3", "body 3")]
    decision.write_text(json.dumps({"status": "s", "alerts": [vars(a) for a in alerts], "charts": ""}))
    calls = []

    def run(cmd, **kwargs):
        calls.append(cmd)
        report = Path(next(a for a in cmd if a.startswith("--perf-report=")).split("=", 1)[1])
        if cmd[3] == NAIVE:
            report.with_suffix(".bisect.md").write_text("**first bad commit: bbbbbbbbbbbb 'metrics'**\n")
            return subprocess.CompletedProcess(cmd, 0, "", "")
        return subprocess.CompletedProcess(cmd, 4, "", "ERROR: --perf-bisect: aaaaaaaaaaaa is not an ancestor of cccc")

    done = bisect_alerts.bisect_alerts(decision, tmp_path, ["--perf-strict"], run=run)
    assert [c[3:6] for c in calls] == [[NAIVE, "--perf-bisect", f"{'a' * 40}..{'c' * 40}"],
                                       ["perf_tests/x.py::y", "--perf-bisect", f"{'a' * 40}..{'c' * 40}"]]
    assert all(c[-1] == "--perf-strict" for c in calls)
    bodies = [a["body"] for a in json.loads(decision.read_text())["alerts"]]
    assert bodies[0].endswith("on this runner's GPU)\n\n**first bad commit: bbbbbbbbbbbb 'metrics'**\n")
    assert bodies[1].endswith("said: ERROR: --perf-bisect: aaaaaaaaaaaa is not an ancestor of cccc")
    assert bodies[2].endswith("Not bisected: no earlier night on this GPU model passed this test.")
    assert len(done) == 3


def test_the_bisect_half_names_a_decision_it_cannot_read(tmp_path, capsys):
    (tmp_path / "alerts.json").write_text("{}")
    with pytest.raises(SystemExit):
        command.main(["bisect", str(tmp_path / "alerts.json"), "--out", str(tmp_path / "b")])
    assert "not a decision written by `record` (KeyError('alerts'))" in capsys.readouterr().err


def test_the_bisect_half_hands_what_follows_the_double_dash_to_pytest_and_says_why_a_bisection_did_not_run(
        tmp_path, monkeypatch, capsys):
    """The workflow's `nightly bisect alerts.json --out DIR -- --perf-strict ...`: Python 3.12's argparse refused the
    "--" before a positional list ("unrecognized arguments: -- --perf-strict") on the GPU image."""
    decision = tmp_path / "alerts.json"
    alert = command.Alert(NAIVE, "t", "body", good="a" * 40, bad="c" * 40)
    decision.write_text(json.dumps({"status": "s", "alerts": [vars(alert)], "charts": ""}))
    calls = []

    def run(cmd, **kwargs):  # pytest's last line on stdout, --perf-bisect's error after it on stderr
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 4, "=== no tests ran in 9.1s ===\n", "ERROR: --perf-bisect: at aaaa the "
                                           "selected tests cannot run against aaaa itself\n")

    monkeypatch.setattr(bisect_alerts.subprocess, "run", run)
    assert command.main(["bisect", str(decision), "--out", str(tmp_path / "b"), "--", "--perf-strict", "-o", "x=1"]) == 0
    assert calls[0][-3:] == ["--perf-strict", "-o", "x=1"] and "--" not in calls[0]  # what follows it, not it
    assert "not bisected: ERROR: --perf-bisect: at aaaa the selected tests cannot run" in capsys.readouterr().out


def test_the_nightly_bisects_each_regression_on_the_gpu_runner_before_the_alert_job():
    import yaml

    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly-gpu.yml").read_text())["jobs"]
    checkout = next(s for s in jobs["merge"]["steps"] if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0  # the nights' commits, for --perf-bisect
    assert "self-hosted" in jobs["merge"]["runs-on"] and "gpu" in jobs["merge"]["runs-on"]
    names = [s.get("name") for s in jobs["merge"]["steps"]]
    assert names.index("bisect each regression") == names.index("trend") + 1
    step = jobs["merge"]["steps"][names.index("bisect each regression")]
    assert "torch_perf_suite.nightly bisect reports/alerts.json" in step["run"] and "--perf-strict" in step["run"]


def test_the_nightly_runs_the_suite_in_parts_and_one_job_merges_them_into_the_night():
    """A matrix of runners, each with its part (--perf-split I/N for every I of N), then one merge of every part's
    report before the trend reads it; the alert job waits for the merge."""
    import yaml

    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly-gpu.yml").read_text())["jobs"]
    parts = jobs["perf"]["strategy"]["matrix"]["part"]
    suite = next(s for s in jobs["perf"]["steps"] if s.get("name", "").startswith("perf suite"))
    assert jobs["perf"]["env"]["PART"] == "${{ matrix.part }}"
    assert f'--perf-split "$PART/{len(parts)}"' in suite["run"] and parts == list(range(1, len(parts) + 1))
    upload = next(s for s in jobs["perf"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    download = next(s for s in jobs["merge"]["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    assert upload["with"]["name"] == "perf-${{ github.run_id }}-part${{ matrix.part }}"
    assert download["with"]["pattern"] == "perf-${{ github.run_id }}-part*"
    names = [s.get("name") for s in jobs["merge"]["steps"]]
    merge = jobs["merge"]["steps"][names.index("merge the parts")]
    assert "torch_perf_suite.session.runners merge parts/*/perf.json --out reports/perf" in merge["run"]
    assert names.index("merge the parts") < names.index("trend")
    assert jobs["merge"]["needs"] == "perf" and jobs["alert"]["needs"] == "merge"


def test_a_test_without_a_result_tonight_is_alerted_at_once_and_not_bisected(tmp_path):
    """A test that errored before its result or whose process crashed has no row in tonight's report: the night after
    a night that measured it alerts at once, naming it, and the bisect half leaves it alone, saying why."""
    github, history = FakeGitHub(), [night("clean", "a")]
    tonight = night("clean", "b")
    del tonight.samples[NAIVE]
    decision = command.decide(history, tonight)
    assert decision.status == ("0 regression(s) (failed two nights in a row), 0 suspicious (failed tonight only), 1 without "
                               f"a result (errored or crashed): {NAIVE}")
    [alert] = decision.alerts
    assert alert.title == f"perf test without a result: {NAIVE}" and not alert.bisect
    assert alert.body.startswith(f"`{NAIVE}` has a result on 2026-11-22 (aaaaaaaaaaaa) on NVIDIA H200 and none tonight")
    assert github_api.apply(decision.alerts, github, command.LABEL) == [f"opened #1: perf test without a result: {NAIVE}"]
    path = tmp_path / "alerts.json"
    path.write_text(json.dumps({"alerts": [dataclasses.asdict(alert)]}))
    assert bisect_alerts.bisect_alerts(path, tmp_path, [], run=None) == [f"{NAIVE}: no result to bisect"]
    assert command.decide(history, night("clean", "c")).alerts == []  # every test reported: nothing to say


@pytest.mark.parametrize("out_is, decision_is, problem", [
    ("file", "file", "is a file; give a folder"),  # --out names a file
    ("new/deep", "folder", "is a folder; give a file"),  # the decision is a folder
])
def test_the_bisect_half_refuses_outputs_it_cannot_use_before_it_writes_anything(tmp_path, capsys, out_is, decision_is,
                                                                                problem):
    out, decision = tmp_path / out_is, tmp_path / "alerts.json"
    if out_is == "file":
        out.write_text("")
    decision.mkdir() if decision_is == "folder" else decision.write_text("{}")
    with pytest.raises(SystemExit):
        command.main(["bisect", str(decision), "--out", str(out)])
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: {decision} or --out {out}: {problem}")
    assert out_is == "file" or not out.exists()  # refused before the folder was made


def test_the_bisect_half_makes_its_folder_with_its_parents_and_takes_one_that_exists(tmp_path, capsys):
    (tmp_path / "alerts.json").write_text(json.dumps({"status": "s", "alerts": [], "charts": ""}))
    for out in (tmp_path / "a" / "b", tmp_path / "a" / "b"):  # made, then there already
        assert command.main(["bisect", str(tmp_path / "alerts.json"), "--out", str(out)]) == 0
        assert out.is_dir()
