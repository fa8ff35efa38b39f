"""Nightly trend: what regressed tonight, and whether to tell anyone.

A night is the summary of one nightly run's perf report (`--perf-report`): its date, commit, GPU model
and the tests that failed, with their numbers. As PyTorch's own dashboard treats them, one bad night
is "suspicious" and alerts nobody; the same test failing on two consecutive nights (on the same GPU
model) is a regression: one GitHub issue per test, opened the first time and commented on after, never
duplicated. A first night, or the first night on a GPU model, says so and alerts nobody.

    python -m torch_perf_suite.nightly record --report reports/perf.json --history DIR \
        --commit SHA --run-url URL --out reports/alerts.json        # on the GPU runner, no token
    python -m torch_perf_suite.nightly bisect reports/alerts.json --out reports/bisect [-- PYTEST_ARGS]
                                                                  # on the GPU runner: each regression's first bad commit
    python -m torch_perf_suite.nightly alert reports/alerts.json  # elsewhere, GITHUB_TOKEN with issues: write
    python -m torch_perf_suite.nightly publish --history DIR --out SITE   # the history as a static site (site.py)

The two halves are apart so that the job that runs the suite holds no write token, and the job that
holds one runs no code under test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..report.charts import Chart, mermaid
from ..report.rows import outcome, own_notes, report_problem
from ..store import write_atomic
from .github import GitHub, apply
from .nights import Night, load_history, read_history, same_night, save_night

LABEL = "perf-regression"
TITLE = "perf regression: {test}"
CREEP = "perf creep: {test}: {number}"
NO_RESULT = "perf test without a result: {test}"


@dataclass
class Alert:
    test: str
    title: str
    body: str
    good: str = ""  # the commit of the last night on this GPU model that ran the test and passed it: where to bisect from
    bad: str = ""  # tonight's commit
    bisect: bool = True  # False for a test without a result, which no commit's run can judge
    args: list[str] = field(default_factory=list)  # more pytest options for its bisection (a creep's tolerance)


@dataclass
class Decision:
    status: str  # one line for the job summary
    alerts: list[Alert] = field(default_factory=list)
    charts: str = ""  # Markdown: each failed test's numbers over the last nights


def summarize(report: dict, commit: str, run_url: str = "") -> Night:
    """The night of one perf report (the JSON that --perf-report writes; `report_problem` says whether it is one)."""
    env = report.get("env") or {}
    tests = report.get("tests", [])
    failed = {row["test"]: _numbers(row) for row in tests if outcome(row) == "FAILED"}
    samples = {row["test"]: {name: p["samples_per_s"] for name, p in row["parts"].items() if p} for row in tests}
    from .creep import numbers  # numpy: the record half's, not the alert job's

    return Night(date=str(env.get("date")), commit=commit, gpu=str(env.get("gpu")), failed=failed, run_url=run_url,
                 samples=samples, numbers={row["test"]: numbers(row) for row in tests})


def trend(nights: list[Night], test: str, last: int = 14) -> str:
    """A Mermaid chart of one test's parts over the last nights (those that measured it)."""
    table = [{"night": f"{n.date} {n.commit[:7]}", **n.samples[test]} for n in nights if test in n.samples][-last:]
    parts = tuple(dict.fromkeys(p for row in table for p in row if p != "night"))
    return mermaid(f"{test} over the last {len(table)} night(s)", table, Chart(x="night", lines=parts)) if table else ""


def _numbers(row: dict) -> str:
    parts = ", ".join(f"{name} {p['samples_per_s']:,.0f}" for name, p in row["parts"].items() if p)
    changes = ", ".join(f"{name} {v['change_pct']:+.1f}% (allowed {v['allowed_pct']:+.1f}%)"
                        for name, v in row.get("baseline", {}).items() if v.get("compared"))
    syncs, efficiency = row.get("syncs_per_step"), row.get("efficiency")
    return "; ".join(filter(None, [
        f"samples/s: {parts}" if parts else "",
        f"efficiency {efficiency:.2f} (bottleneck: {row.get('bottleneck')})" if efficiency is not None else "",
        f"vs baseline: {changes}" if changes else "",
        f"syncs/step {syncs:g}" if syncs is not None else "",
        *own_notes(row),
    ]))


def decide(history: list[Night], tonight: Night, repo_url: str = "") -> Decision:
    """Compare tonight with the last night on the same GPU model: a test failed on both is a regression; a test with a
    result then and none tonight (it errored before its result, or crashed) is alerted at once."""
    previous = next((n for n in reversed(history) if n.gpu == tonight.gpu), None)
    if previous is None:
        first = "first night" if not history else f"first night on {tonight.gpu}"
        return Decision(f"{first}: {len(tonight.failed)} failed test(s), nothing to compare with, no alert")
    repeated = [t for t in tonight.failed if t in previous.failed]
    new = [t for t in tonight.failed if t not in previous.failed]
    commits = _commits(previous.commit, tonight.commit, repo_url)
    same_gpu = [n for n in history if n.gpu == tonight.gpu] + [tonight]
    alerts = [
        Alert(t, TITLE.format(test=t), good=last_good(same_gpu, t), bad=tonight.commit, body="\n".join([
            f"`{t}` failed on two consecutive nights on {tonight.gpu}.",
            "",
            f"- {previous.date} ({previous.commit[:12]}): {previous.failed[t]}",
            f"- {tonight.date} ({tonight.commit[:12]}): {tonight.failed[t]}",
            "",
            f"Commits: {commits}. Run and traces: {tonight.run_url or '(no run URL)'}",
            f"Reproduce: `pytest '{t}' --perf-trace-dir traces` on a {tonight.gpu}.",
            "",
            trend(same_gpu, t),
        ]))
        for t in repeated
    ]
    gone = [t for t in previous.samples if t not in tonight.samples]  # errored before its result, or crashed
    alerts += [Alert(t, NO_RESULT.format(test=t), bad=tonight.commit, bisect=False, body="\n".join([
        f"`{t}` has a result on {previous.date} ({previous.commit[:12]}) on {tonight.gpu} and none tonight, "
        f"{tonight.date} ({tonight.commit[:12]}): it errored before its result (a fixture, the recipe's build, out of "
        "memory), its process or its part of the run crashed, or it was removed, renamed or deselected.",
        "",
        f"Commits: {commits}. Run and logs: {tonight.run_url or '(no run URL)'}",
        f"Reproduce: `pytest '{t}' -rfE` on a {tonight.gpu}."])) for t in gone]
    status = f"{len(repeated)} regression(s) (failed two nights in a row), {len(new)} suspicious (failed tonight only)"
    status += f", {len(gone)} without a result (errored or crashed)" if gone else ""
    status += ": " + ", ".join(repeated + new + gone) if tonight.failed or gone else ""
    charts = "\n".join(trend(same_gpu, t) for t in repeated + new)
    creeps = _creeps(same_gpu, repo_url)
    return Decision(status + creeps.status, alerts + creeps.alerts, charts + creeps.charts)


def _creeps(nights: list[Night], repo_url: str) -> Decision:
    """The change points found with tonight (the last of `nights`, one GPU model's), kept with it: a creep or a drift
    alerted, an improvement said."""
    from . import creep  # numpy and ruptures: the record half's, not the alert job's

    found = creep.found(nights)
    nights[-1].said = [c.said(nights) for c in found]  # kept with tonight: each is said once
    found = [c for c in found if c.alerted]
    status = "".join(f"; {'creep' if c.worse else 'improvement'}: {c.test} {c.number} {c.change.shown} "
                     f"from {nights[c.at].date}" if c.drift_from is None else
                     f"; {'drift' if c.worse else 'improving drift'}: {c.test} {c.number} {c.slope_pct:+.3f}% a night "
                     f"since {nights[c.drift_from].date}" for c in found)
    return Decision(status, [_creep_alert(c, nights, repo_url) for c in found if c.worse],
                    "".join("\n" + creep.chart(c, nights) for c in found))


def _creep_alert(c, nights: list[Night], repo_url: str) -> Alert:
    """A creep's alert, bisected from its last night on the old level to its first on the new; a drift's, not
    bisected: its commits from its start to tonight."""
    from .creep import alert_body

    title = CREEP.format(test=c.test, number=c.number)
    if c.drift_from is not None:
        start = nights[max(c.drift_from - 1, 0)].commit
        return Alert(c.test, title, bisect=False, body=alert_body(c, nights, _commits(start, nights[-1].commit,
                                                                                         repo_url)))
    good, bad = nights[c.before].commit, nights[c.at].commit
    return Alert(c.test, title, good=good, bad=bad, args=c.args(),
                 body=alert_body(c, nights, _commits(good, bad, repo_url)))


def _commits(good: str, bad: str, repo_url: str) -> str:
    text = f"{good[:12]}..{bad[:12]}"
    return f"[{text}]({repo_url}/compare/{good}...{bad})" if repo_url else text


def last_good(nights: list[Night], test: str) -> str:
    """The commit of the last of `nights` that measured `test` and did not fail it; "" where none did."""
    return next((n.commit for n in reversed(nights) if test in n.samples and test not in n.failed), "")


def _output_problem(path: Path, folder: bool = False) -> str | None:
    """Why `path` (a file to write, or with `folder` a folder to write in) cannot be written; None where it can."""
    if path.exists() and path.is_dir() != folder:
        return "is a folder; give a file" if not folder else "is a file; give a folder"
    existing = next(p for p in (path if folder else path.parent, *path.parents) if p.exists())
    if not existing.is_dir():
        return f"{existing} is a file; give a path under a folder"
    if not os.access(existing, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"{path if path.exists() else existing} cannot be written by this user"
    return None


def record(parser, args) -> int:
    """The record half: every input and output checked before anything is written; tonight is added to the history
    last, once its decision is written, so that a failure leaves no half-recorded night (a re-run then would see it
    as the night before, and alert on one night)."""
    try:
        report = json.loads(args.report.read_text(encoding="utf-8"))
        problem = report_problem(report)
    except (OSError, ValueError, RecursionError) as e:
        problem = f"not a readable perf report ({e})"
    if problem:
        parser.error(f"--report {args.report}: {problem}; give the JSON that --perf-report wrote")
    if not re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z._-]*", args.commit):
        parser.error(f"--commit {args.commit!r}: expected a commit such as 3f2a9c1 (letters, digits, '.', '_', '-')")
    outputs = [("--history", args.history, True), ("--out", args.out, False), ("--summary", args.summary, False)]
    for option, path, folder in outputs:
        problem = path and _output_problem(path, folder)
        if problem:
            parser.error(f"{option} {path}: {problem}")
    tonight = summarize(report, args.commit, args.run_url)
    history = [n for n in load_history(args.history) if not same_night(n, tonight)] if args.history.exists() else []
    decision = decide(history, tonight, args.repo_url)
    if args.site_url:  # the test's page of the history site (docs/site.md), which publish writes after this
        from .site import page_name

        for a in decision.alerts:
            a.body += f"\n\nThe test's history: {args.site_url.rstrip('/')}/{page_name(a.test)}"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out, json.dumps(asdict(decision), indent=1) + "\n")
    if args.summary:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(args.summary, f"Nightly trend: {decision.status}\n\n{decision.charts}")
    save_night(args.history, tonight)
    print(decision.status)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_perf_suite.nightly", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="add tonight's report to the history and decide the alerts (no token needed)")
    rec.add_argument("--report", type=Path, required=True, help="the JSON written by --perf-report")
    rec.add_argument("--history", type=Path, required=True, help="the folder of past nights (kept on the runner)")
    rec.add_argument("--commit", required=True)
    rec.add_argument("--run-url", default="")
    rec.add_argument("--repo-url", default="", help="https://github.com/OWNER/REPO, for the commit range's link")
    rec.add_argument("--out", type=Path, required=True, help="where to write the decision (alerts.json)")
    rec.add_argument("--summary", type=Path, help="where to write the status and the failed tests' trends (Markdown)")
    rec.add_argument("--site-url", default="", help="where `publish` puts the site: each alert links its test's page")
    bis = sub.add_parser("bisect", help="add each regression's first bad commit since its last good night to its "
                         "alert (pytest --perf-bisect, on this runner's GPU)")
    bis.add_argument("decision", type=Path, help="the alerts.json that `record` wrote")
    bis.add_argument("--out", type=Path, required=True, help="the folder of the bisections' reports")
    bis.epilog = "after --: more pytest options for each bisection (--perf-strict)"
    filing = sub.add_parser("alert", help="open or update one issue per regression (GITHUB_TOKEN, GITHUB_REPOSITORY)")
    filing.add_argument("decision", type=Path, help="the alerts.json that `record` wrote")
    pub = sub.add_parser("publish", help="write the history as a static site that opens from disk (docs/site.md)")
    pub.add_argument("--history", type=Path, required=True, help="the folder of past nights")
    pub.add_argument("--out", type=Path, required=True, help="the folder to write the site in")
    pub.add_argument("--repo-url", default="", help="https://github.com/OWNER/REPO, for each night's commit link")
    argv = sys.argv[1:] if argv is None else argv
    # what follows "--" is pytest's, taken here: argparse's handling of "--" before a positional list changed in
    # Python 3.12, which then refused it ("unrecognized arguments: -- --perf-strict")
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    args.pytest_args = argv[cut + 1:]

    if args.command in ("record", "publish"):
        return record(rec, args) if args.command == "record" else publish(pub, args)
    return bisect(parser, args) if args.command == "bisect" else alert(parser, args)


def publish(parser, args) -> int:
    """The history as a static site (site.py); a file of the folder that is not a night is named and skipped."""
    if not args.history.is_dir():
        parser.error(f"--history {args.history}: no such folder; give the folder that `record` keeps the nights in")
    if problem := _output_problem(args.out, folder=True):
        parser.error(f"--out {args.out}: {problem}")
    from .site import write_site  # numpy, ruptures and plotly: not the alert job's
    print(write_site(*read_history(args.history), args.out, args.repo_url))
    return 0


def bisect(parser, args) -> int:
    """The bisect half, on the GPU runner: each regression's first bad commit added to its alert."""
    if problem := _output_problem(args.out, folder=True) or _output_problem(args.decision):
        parser.error(f"{args.decision} or --out {args.out}: {problem}")
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        from .bisect_alerts import bisect_alerts  # the GPU runner's half: pytest and git, not the alert job's

        print("\n".join(bisect_alerts(args.decision, args.out, args.pytest_args)))
    except (OSError, ValueError, KeyError, TypeError) as e:
        parser.error(f"{args.decision}: not a decision written by `record` ({e!r}); run `record` again")
    return 0


def alert(parser, args) -> int:
    """The alert half, on a hosted runner with the token: one issue per alert, opened or commented on."""
    try:
        decision = json.loads(args.decision.read_text(encoding="utf-8"))
        status, alerts = decision["status"], [Alert(**a) for a in decision["alerts"]]
        kinds = {"bisect": bool, "args": list}
        if not isinstance(status, str) or not all(isinstance(v, kinds.get(k, str)) for a in alerts for k, v in asdict(a).items()):
            raise TypeError("'status' and each alert's 'test', 'title' and 'body' must be strings, 'bisect' true or false, "
                            "'args' a list")
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
        parser.error(f"{args.decision}: not a decision written by `record` ({e!r}); run `record` again")
    print(status)
    if alerts:
        repo, token = os.environ.get("GITHUB_REPOSITORY"), os.environ.get("GITHUB_TOKEN")
        if not repo or not token:
            parser.error("alerts to file, but GITHUB_REPOSITORY or GITHUB_TOKEN is not set")
        print("\n".join(apply(alerts, GitHub(repo, token), LABEL)))
    return 0
