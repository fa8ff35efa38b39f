"""The GitHub REST calls the nightly's alerts need: open issues by label, a new issue, a comment. urllib only: the alert
job runs on a hosted runner with nothing installed."""

from __future__ import annotations

import json
import urllib.request


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

    def create_issue(self, title: str, body: str, label: str) -> int:
        """The new issue's number."""
        return self._call("POST", "issues", {"title": title, "body": body, "labels": [label]})["number"]

    def comment(self, number: int, body: str) -> None:
        self._call("POST", f"issues/{number}/comments", {"body": body})


def apply(alerts: list, github, label: str) -> list[str]:
    """Open an issue per alert (its `title`, `body`), or comment on the open one with the same title (one opened for
    an earlier alert of the same night too). Returns what was done."""
    existing = github.open_issues(label)
    done = []
    for a in alerts:
        if a.title in existing:
            github.comment(existing[a.title], a.body)
            done.append(f"commented on #{existing[a.title]}: {a.title}")
        else:
            existing[a.title] = github.create_issue(a.title, a.body, label)
            done.append(f"opened #{existing[a.title]}: {a.title}")
    return done
