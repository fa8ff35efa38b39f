"""--perf-bisect GOOD..BAD: the first commit of a range whose selected tests fail against GOOD, measured on this GPU.

Each commit tested is checked out in a worktree of its own, and its selected tests run there in a pytest process of
their own with `--perf-against GOOD` and this run's perf options (with `--perf-strict`, the merge gate's verdicts): GOOD
is REF, measured once into the against cache and read from there by every commit after. A timed verdict near its
tolerance is measured again by that run before it fails (stats.compare); counted verdicts need no repeat.

The commits are BAD's first parents after GOOD, in the order the merge queue landed them. BAD is judged first: where it
passes there is nothing to bisect. Then GOOD against itself, an A/A: a test that fails there fails for a reason the
range does not hold. Then the range is halved as `git bisect` halves it; a commit whose tests cannot run (not
collected there, an error, a usage error) is skipped as `git bisect skip` skips one, and its neighbour nearest the
middle is taken instead. A commit's verdict is kept per commit, GOOD, chip, versions, options and tests, so a second
bisection over an overlapping range from the same GOOD measures nothing twice.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest

from .. import ref_imports, store
from . import ref
from .bisect_report import PARTS


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    date: str  # the author date, ISO 8601

    @property
    def short(self) -> str:
        return self.sha[:12]


@dataclass
class Outcome:
    """A commit's verdict: "good" (its tests passed against GOOD), "bad" (one failed) or "skip" (they could not run);
    `why`: the failures, or why it was skipped; `figures`: test id -> its numbers (samples/s by part, syncs a step)."""

    status: str
    why: list[str] = field(default_factory=list)
    figures: dict[str, dict] = field(default_factory=dict)
    seconds: float = 0.0
    cached: bool = False
    transient: bool = False  # a skip for a reason of this run, not of the commit (killed, not checked out): not cached


@dataclass
class Later:
    """Failures of BAD that the first bad commit does not have, traced to the commit that brought them (`first_bad`;
    BAD where none between could be judged), and, where commits just before it could not be judged, those and it
    (`suspects`)."""
    first_bad: Commit
    why: list[str]
    suspects: list[Commit] = field(default_factory=list)


@dataclass
class Bisection:
    """What a bisection found."""
    good: Commit
    commits: list[Commit]  # the range, oldest first, BAD last
    tested: dict[str, Outcome]  # sha -> its outcome, in the order tested
    first_bad: Commit | None = None
    suspects: list[Commit] = field(default_factory=list)  # skipped commits that may be the first bad one, and it
    second: list[str] = field(default_factory=list)  # BAD's failures that the first bad commit does not have
    later: list[Later] = field(default_factory=list)  # each of those traced to the commit that brought it
    at_good: Outcome | None = None  # GOOD judged against itself, once BAD failed

    @property
    def measured(self) -> int:
        return sum(1 for o in self.tested.values() if not o.cached)

    def as_json(self) -> dict:
        return {"good": asdict(self.good), "at_good": self.at_good and asdict(self.at_good),
                "first_bad": self.first_bad and asdict(self.first_bad),
                "suspects": [asdict(c) for c in self.suspects], "second": self.second,
                "later": [asdict(x) for x in self.later],
                "tested": [{**asdict(c), **asdict(self.tested[c.sha])} for c in self.commits if c.sha in self.tested]}


def parse_range(text: str) -> tuple[str, str]:
    good, sep, bad = text.partition("..")
    if not sep or not good or not bad or bad.startswith("."):
        raise pytest.UsageError(f"--perf-bisect: expected GOOD..BAD, two commits, branches or tags such as "
                                f"v1.2..main, got {text!r}")
    return good, bad


FORMAT = "--format=%H%x00%s%x00%aI"


def commits(top: Path, good: str, bad: str) -> tuple[Commit, list[Commit]]:
    """GOOD, and BAD's first parents after it, oldest first; a usage error where GOOD is not an ancestor of BAD."""
    if ref._git(top, "merge-base", "--is-ancestor", good, bad).returncode:
        raise pytest.UsageError(f"--perf-bisect: {good[:12]} is not an ancestor of {bad[:12]}: give GOOD..BAD with GOOD "
                                "older, on BAD's history (git log --first-parent BAD)")
    listed = ref._git(top, "log", "--first-parent", "--reverse", FORMAT, f"{good}..{bad}")
    found = [Commit(*line.split("\x00")) for line in listed.stdout.splitlines() if line]
    if not found:
        raise pytest.UsageError(f"--perf-bisect: no commit between {good[:12]} and {bad[:12]}: nothing to bisect")
    return Commit(*ref._git(top, "log", "-1", FORMAT, good).stdout.strip().split("\x00")), found


def search(good: Commit, range_: list[Commit], judge: Callable[[Commit], Outcome]) -> Bisection:
    """The first bad commit of `range_`, judging as few commits as halving allows: BAD first, then GOOD against itself
    (a test that fails there, an A/A, tells nothing about the range), then the untested commit nearest the middle of
    what is left, skipped ones passed over."""
    finding = Bisection(good, range_, {})

    def judged(i: int) -> Outcome:
        outcome = finding.tested[range_[i].sha] = judge(range_[i])
        return outcome

    last = judged(len(range_) - 1)
    if last.status != "bad":
        return finding
    finding.at_good = finding.tested[good.sha] = judge(good)  # an A/A: where GOOD fails against itself, nothing is told
    if finding.at_good.status != "good":
        return finding
    lo, hi = _halve(range_, -1, len(range_) - 1, lambda i: judged(i).status)
    finding.first_bad = range_[hi]
    finding.suspects = _suspects(range_, lo, hi)
    first = {_signature(w) for w in finding.tested[range_[hi].sha].why}
    finding.second = left = [w for w in last.why if _signature(w) not in first]
    while left:  # each later regression, from the first bad commit on: the first commit that has its failure
        target = _signature(left[0])

        def brought(i: int) -> str:
            outcome = finding.tested[range_[i].sha] if range_[i].sha in finding.tested else judged(i)
            return "skip" if outcome.status == "skip" else "bad" if target in map(_signature, outcome.why) else "good"

        lo, at = _halve(range_, hi, len(range_) - 1, brought)
        signatures = set(map(_signature, finding.tested[range_[at].sha].why))
        finding.later.append(Later(range_[at], [w for w in left if _signature(w) in signatures], _suspects(range_, lo, at)))
        left = [w for w in left if _signature(w) not in signatures]
    return finding


def _halve(range_: list[Commit], lo: int, hi: int, status: Callable[[int], str]) -> tuple[int, int]:
    """Between `lo` (known good) and `hi` (known bad), the last good and the first bad index, judging the commit nearest
    the middle each time as `git bisect` does; a skipped one passed over."""
    tried: set[int] = set()
    while untested := [i for i in range(lo + 1, hi) if i not in tried]:
        middle = (lo + hi) / 2
        i = min(untested, key=lambda j: (abs(j - middle), j))
        tried.add(i)
        found = status(i)
        if found == "good":
            lo = i
        elif found == "bad":
            hi = i
    return lo, hi


def _suspects(range_: list[Commit], lo: int, hi: int) -> list[Commit]:
    """The skipped commits between the last good and the first bad one, and it: one of them is the first bad one."""
    skipped = [range_[i] for i in range(lo + 1, hi)]  # all judged, none good or bad
    return skipped + [range_[hi]] if skipped else []


def nothing_found(finding: Bisection, bad_name: str) -> str | None:
    """Why a search named no first bad commit, in one line; None where it named one."""
    good, bad = finding.good, finding.commits[-1]
    if finding.first_bad is not None:
        return None
    if finding.at_good is not None:
        how = "fail" if finding.at_good.status == "bad" else "cannot run"
        return (f"--perf-bisect: at {good.short} the selected tests {how} against {good.short} itself "
                f"({'; '.join(finding.at_good.why)}): bisect from a commit where they pass")
    last = finding.tested[bad.sha]
    how = "pass" if last.status == "good" else "cannot run (" + "; ".join(last.why) + ")"
    return f"--perf-bisect: at {bad_name} ({bad.short}) the selected tests {how} against {good.short}: nothing to bisect"


def _signature(failure: str) -> str:
    """A failure with its numbers taken out: the same check failing for the same reason at two commits."""
    return re.sub(r"\d[\d,.]*", "#", failure)


class Runner:
    """Judges a commit: its selected tests run against GOOD in a worktree of its own (`work`/tree), its verdict kept in
    the cache (`cache`/bisect), a skip for the commit's own reason too (remove the folder to judge it again); a skip for
    a reason of its run (`Outcome.transient`) is not kept."""

    def __init__(self, top: Path, rootdir: Path, good_sha: str, test_ids: list[str], args: list[str], cache: Path,
                 env: dict, say: Callable[[str], None], overrides: list[str] = ()):
        self.top, self.rootdir, self.good_sha, self.test_ids, self.args = top, rootdir, good_sha, test_ids, args
        self.cache, self.env, self.say, self.overrides = cache, env, say, list(overrides)

    def folder(self, commit: Commit) -> Path:
        """The commit's verdict's folder, keyed as REF's (ref.cache_folder) by what else changes it: GOOD, the tests
        and the ini values the command line overrides (`overrides`, ref.keyed)."""
        key = [*self.args, *self.overrides, self.good_sha, *self.test_ids]
        return ref.cache_folder(self.cache / "bisect", commit.sha, self.env, key)

    def __call__(self, commit: Commit) -> Outcome:
        kept = self.folder(commit) / "outcome.json"
        outcome = self._kept(kept)
        if outcome is None:
            started = time.perf_counter()
            outcome = self._run(commit)
            outcome.seconds = time.perf_counter() - started
            if not outcome.transient:
                kept.parent.mkdir(parents=True, exist_ok=True)
                store.write_atomic(kept, json.dumps(asdict(outcome), indent=1))
        self.say(f"{commit.short} {commit.subject[:60]}: {outcome.status}"
                 + (" (from the cache)" if outcome.cached else f" ({outcome.seconds:.0f} s)")
                 + (f": {outcome.why[0]}" if outcome.why else ""))
        return outcome

    def _kept(self, kept: Path) -> Outcome | None:
        """The cached verdict, or None where there is none; one that cannot be read is said and judged again."""
        if not kept.exists():
            return None
        try:
            outcome = Outcome(**{**json.loads(kept.read_text()), "cached": True})
            if outcome.status in ("good", "bad", "skip"):
                return outcome
        except (OSError, ValueError, TypeError):
            pass
        self.say(f"{kept}: not a verdict this suite wrote; the commit is judged again")
        return None

    def _run(self, commit: Commit) -> Outcome:
        work = self.folder(commit)
        work.mkdir(parents=True, exist_ok=True)
        tree = work / "tree"
        self._remove(tree)
        added = ref._git(self.top, "worktree", "add", "--detach", "--force", str(tree), commit.sha)
        if added.returncode:
            return Outcome("skip", [f"could not check it out: {added.stderr.strip().splitlines()[-1:]}"], transient=True)
        try:
            cwd = tree / self.rootdir.relative_to(self.top)
            report_path = work / "report"
            # its files, the selected tests kept and the rest of them deselected (ref_select), as -k would: a claim over
            # a test left out is then said, not failed, as in the merge gate. The rootdir named, and no conftest.py
            # above it: the worktree may lie inside the working tree's rootdir
            plugin, wanted, said = work / "plugin", work / "wanted.json", work / ref.SAID
            said.unlink(missing_ok=True)
            plugin.mkdir(exist_ok=True)
            shutil.copyfile(Path(ref.__file__).with_name("ref_select.py"), plugin / "perf_against_select.py")
            wanted.write_text(json.dumps(self.test_ids))
            files = sorted({t.split("::")[0] for t in self.test_ids})
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", *files, "-p", "perf_against_select", "-q", "-rfE", f"--rootdir={cwd}",
                 f"--confcutdir={cwd}", "-o", f"cache_dir={self.cache / 'bisect-pytest-cache'}", "--perf-against",
                 self.good_sha, f"--perf-against-cache={self.cache}", f"--perf-report={report_path}", *self.args],
                cwd=cwd, capture_output=True, text=True,
                env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_") and k != ref.AS_REF},
                     "COLUMNS": "1000", "PYTHONPATH": os.pathsep.join(filter(None, [str(plugin), os.environ.get("PYTHONPATH")])),
                     "PERF_AGAINST_WANTED": str(wanted), "PERF_AGAINST_KEPT": str(work / "kept.json"),
                     "PERF_AGAINST_COLLECTED": str(work / "collected.json"),
                     **ref_imports.child_env(self.top, tree, commit.short, said)})  # its code, not the checkout's
            (work / "pytest.log").write_text(proc.stdout + proc.stderr)  # read where a skip's one line is not enough
            errors = ref_imports.read_said(said)[0]
            return Outcome("skip", errors[:1]) if errors else judged(proc, self.test_ids, report_path.with_suffix(".json"),
                                                                      work / "pytest.log")
        finally:
            self._remove(tree)

    def _remove(self, tree: Path) -> None:
        if tree.exists():
            ref._git(self.top, "worktree", "remove", "--force", str(tree))
            shutil.rmtree(tree, ignore_errors=True)
        ref._git(self.top, "worktree", "prune")


def judged(proc: subprocess.CompletedProcess, test_ids: list[str], report_json: Path, log: Path | None = None) -> Outcome:
    """A commit's outcome from its pytest run: exit 0 good; a selected test FAILED bad; else (not collected, an error
    in a test or in pytest's start) skipped, saying why. A failure's text is its whole message where the commit's
    report keeps it (pytest's summary line holds only its first line: "the loader's settings changed against REF:",
    without "num_workers 16 -> 4"), each failed check of a test one `why`."""
    rows = _rows(report_json)
    failed, errors = [], []
    for line in proc.stdout.splitlines():
        head, _, why = line.partition(" - ")
        kind, _, test = head.partition(" ")
        if kind == "FAILED" and test in test_ids:
            whole = rows.get(test, {}).get("failure")  # each failed check of the test a line of its own (causes.together)
            failed += [f"{test}: {_one_line(check, test)}" for check in _checks(whole, test)] if isinstance(whole, str) \
                else [f"{test}: {why}"]
        elif kind == "ERROR" and test in test_ids:
            errors.append(f"{test}: {why}" if why else test)
    figures = {t: {**{p: r["parts"][p]["samples_per_s"] for p in PARTS if (r.get("parts") or {}).get(p)},
                   "syncs_per_step": r.get("syncs_per_step")} for t, r in rows.items()}
    if proc.returncode == 0:
        return Outcome("good", figures=figures)
    if proc.returncode < 0:  # killed (out of memory, a timeout): this run's, judged again by the next
        return Outcome("skip", [f"its pytest was killed by signal {-proc.returncode}"], figures, transient=True)
    if failed:
        return Outcome("bad", failed, figures)
    if errors:
        return Outcome("skip", ["an error, not a verdict: " + errors[0]], figures)
    if proc.returncode == 5:
        return Outcome("skip", ["none of the tests is collected there"])
    if proc.returncode == 4 and "file or directory not found" in proc.stderr:
        return Outcome("skip", ["its test files are not there"])
    tail = [line for line in (proc.stdout + proc.stderr).strip().splitlines() if line.strip()][-1:]
    return Outcome("skip", [f"pytest exit {proc.returncode}: " + (tail[0] if tail else "no output")
                            + (f" (its output: {log})" if log else "")])


def _checks(whole: str, test: str) -> list[str]:
    """A test's failure as its failed checks: each starts a line with the test's id (causes.together)."""
    found: list[str] = []
    for line in whole.splitlines():
        if line.startswith(f"{test}: ") or not found:
            found.append(line)
        else:
            found[-1] += "\n" + line
    return found


def _one_line(failure: str, test: str) -> str:
    """A failure's lines joined, without the test's id that starts it."""
    return " ".join(line.strip() for line in failure.removeprefix(f"{test}: ").splitlines() if line.strip())


def _rows(report_json: Path) -> dict[str, dict]:
    """The commit's report rows by test; none where its run wrote no report (an error, an older commit's format)."""
    try:
        rows = json.loads(report_json.read_text())["tests"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {r["test"]: r for r in rows if isinstance(r, dict) and "test" in r}


