"""Nightly trend: what regressed tonight, and whether to tell anyone.

A night is the summary of one nightly run's perf report (`--perf-report`): its date, commit, GPU model
and the tests that failed, with their numbers. As PyTorch's own dashboard treats them, one bad night
is "suspicious" and alerts nobody; the same test failing on two consecutive nights (on the same GPU
model) is a regression: one GitHub issue per test, opened the first time and commented on after, never
duplicated. A first night, or the first night on a GPU model, says so and alerts nobody.

    python -m torch_perf_suite.nightly record --report reports/perf.json --history DIR \
        --commit SHA --run-url URL --out reports/alerts.json        # on the GPU runner, no token
    python -m torch_perf_suite.nightly alert reports/alerts.json  # elsewhere, GITHUB_TOKEN with issues: write

The two halves are apart so that the job that runs the suite holds no write token, and the job that
holds one runs no code under test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .report import Chart, mermaid

LABEL = "perf-regression"
TITLE = "perf regression: {test}"


@dataclass
class Night:
    date: str
    commit: str
    gpu: str
    failed: dict[str, str] = field(default_factory=dict)  # test id -> its numbers, one line
    run_url: str = ""
    samples: dict[str, dict[str, float]] = field(default_factory=dict)  # test id -> part -> samples/s (median)


@dataclass
class Alert:
    test: str
    title: str
    body: str


@dataclass
class Decision:
    status: str  # one line for the job summary
    alerts: list[Alert] = field(default_factory=list)
    charts: str = ""  # Markdown: each failed test's numbers over the last nights


def summarize(report: dict, commit: str, run_url: str = "") -> Night:
    """The night of one perf report (the JSON that --perf-report writes)."""
    env = report.get("env") or {}
    tests = report.get("tests", [])
    failed = {row["test"]: _numbers(row) for row in tests if (row.get("notes") or [""])[0] == "FAILED"}
    samples = {row["test"]: {name: p["samples_per_s"] for name, p in row["parts"].items() if p} for row in tests}
    return Night(date=str(env.get("date")), commit=commit, gpu=str(env.get("gpu")), failed=failed, run_url=run_url,
                 samples=samples)


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
        *row.get("notes", [])[1:],
    ]))


def decide(history: list[Night], tonight: Night, repo_url: str = "") -> Decision:
    """Compare tonight with the last night on the same GPU model."""
    previous = next((n for n in reversed(history) if n.gpu == tonight.gpu), None)
    if previous is None:
        first = "first night" if not history else f"first night on {tonight.gpu}"
        return Decision(f"{first}: {len(tonight.failed)} failed test(s), nothing to compare with, no alert")
    repeated = [t for t in tonight.failed if t in previous.failed]
    new = [t for t in tonight.failed if t not in previous.failed]
    commits = f"{previous.commit[:12]}..{tonight.commit[:12]}"
    if repo_url:
        commits = f"[{commits}]({repo_url}/compare/{previous.commit}...{tonight.commit})"
    same_gpu = [n for n in history if n.gpu == tonight.gpu] + [tonight]
    alerts = [
        Alert(t, TITLE.format(test=t), "\n".join([
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
    status = f"{len(repeated)} regression(s) (failed two nights in a row), {len(new)} suspicious (failed tonight only)"
    charts = "\n".join(trend(same_gpu, t) for t in repeated + new)
    return Decision(status + (": " + ", ".join(repeated + new) if tonight.failed else ""), alerts, charts)


def load_history(folder: Path) -> list[Night]:
    """The nights recorded in `folder`, oldest first (their names start with the date)."""
    nights = []
    for path in sorted(folder.glob("*.json")):
        try:
            nights.append(Night(**json.loads(path.read_text())))
        except (ValueError, TypeError) as e:
            raise SystemExit(f"error: {path}: not a night recorded by this tool ({e}); move it out of {folder}") from None
    return nights


def save_night(folder: Path, night: Night) -> Path:
    """Add tonight to the history without overwriting any night (a re-run of the same commit gets a suffix)."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{night.date}-{night.commit[:12]}"
    for n in range(1000):
        path = folder / (f"{stem}.json" if n == 0 else f"{stem}-{n}.json")
        try:
            with open(path, "x") as f:
                json.dump(asdict(night), f, indent=1)
            return path
        except FileExistsError:
            continue
    raise SystemExit(f"error: {folder} already holds 1000 nights named {stem}*")


# --- GitHub: one issue per regressed test ---------------------------------------------------------


class GitHub:
    """The three REST calls the alerts need (urllib: nothing to install on the runner)."""

    def __init__(self, repo: str, token: str, api: str = "https://api.github.com"):
        self.repo, self.token, self.api = repo, token, api

    def _call(self, method: str, path: str, payload: dict | None = None):
        request = urllib.request.Request(
            f"{self.api}/repos/{self.repo}/{path}", method=method,
            data=None if payload is None else json.dumps(payload).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Accept": "application/vnd.github+json",
                     "X-GitHub-Api-Version": "2022-11-28"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def open_issues(self, label: str) -> dict[str, int]:
        return {i["title"]: i["number"] for i in self._call("GET", f"issues?state=open&labels={label}&per_page=100")}

    def create_issue(self, title: str, body: str, label: str) -> None:
        self._call("POST", "issues", {"title": title, "body": body, "labels": [label]})

    def comment(self, number: int, body: str) -> None:
        self._call("POST", f"issues/{number}/comments", {"body": body})


def apply(alerts: list[Alert], github) -> list[str]:
    """Open an issue per alert, or comment on the open one with the same title. Returns what was done."""
    existing = github.open_issues(LABEL)
    done = []
    for a in alerts:
        if a.title in existing:
            github.comment(existing[a.title], a.body)
            done.append(f"commented on #{existing[a.title]}: {a.title}")
        else:
            github.create_issue(a.title, a.body, LABEL)
            done.append(f"opened: {a.title}")
    return done


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
    alert = sub.add_parser("alert", help="open or update one issue per regression (GITHUB_TOKEN, GITHUB_REPOSITORY)")
    alert.add_argument("decision", type=Path, help="the alerts.json that `record` wrote")
    args = parser.parse_args(argv)

    if args.command == "record":
        try:
            report = json.loads(args.report.read_text())
        except (OSError, ValueError) as e:
            parser.error(f"--report {args.report}: not a readable perf report ({e})")
        tonight = summarize(report, args.commit, args.run_url)
        decision = decide(load_history(args.history), tonight, args.repo_url)
        save_night(args.history, tonight)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(asdict(decision), indent=1) + "\n")
        if args.summary:
            args.summary.write_text(f"Nightly trend: {decision.status}\n\n{decision.charts}")
        print(decision.status)
        return 0
    try:
        decision = json.loads(args.decision.read_text())
        status, alerts = decision["status"], [Alert(**a) for a in decision["alerts"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        parser.error(f"{args.decision}: not a decision written by `record` ({e!r})")
    print(status)
    if alerts:
        repo, token = os.environ.get("GITHUB_REPOSITORY"), os.environ.get("GITHUB_TOKEN")
        if not repo or not token:
            parser.error("alerts to file, but GITHUB_REPOSITORY or GITHUB_TOKEN is not set")
        print("\n".join(apply(alerts, GitHub(repo, token))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
