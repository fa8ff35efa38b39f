"""The nightly's GPU runner, after its alert job decided: each regression bisected on this runner's GPU
(`--perf-bisect` from its last good night), and what was found added to its alert."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .. import store


def bisect_alerts(decision_path: Path, out: Path, pytest_args: list[str], run=None) -> list[str]:
    """Each regression's first bad commit since its last good night (--perf-bisect on this runner's GPU), a creep's
    between the nights around its change point with the tolerance its size asks (the alert's `args`), added to its
    alert's body in `decision_path`; what was done, a line each. A bisection that cannot run says why in the alert and
    fails nothing: the regression is filed either way."""
    run = run or subprocess.run
    decision = json.loads(decision_path.read_text(encoding="utf-8"))
    done = []
    for i, a in enumerate(decision["alerts"]):
        if not a.get("bisect", True):
            a["body"] += "\n\nNot bisected: a test without a result cannot be judged commit by commit; its log says why."
            done.append(f"{a['test']}: no result to bisect")
            continue
        if not a.get("good"):
            a["body"] += "\n\nNot bisected: no earlier night on this GPU model passed this test."
            done.append(f"{a['test']}: no good night to bisect from")
            continue
        path = out / f"bisect-{i}"
        proc = run([sys.executable, "-m", "pytest", a["test"], "--perf-bisect", f"{a['good']}..{a['bad']}",
                    f"--perf-report={path}", *pytest_args, *a.get("args", [])], capture_output=True, text=True)
        found = path.with_suffix(".bisect.md")
        if found.exists():
            a["body"] += f"\n\n## The first bad commit (`--perf-bisect`, on this runner's GPU)\n\n{found.read_text()}"
            done.append(f"{a['test']}: bisected, {found}")
        else:
            why = [line for line in (proc.stdout + proc.stderr).strip().splitlines() if line.strip()][-1:] or ["no output"]
            a["body"] += f"\n\nNot bisected: `--perf-bisect {a['good'][:12]}..{a['bad'][:12]}` said: {why[0]}"
            done.append(f"{a['test']}: not bisected: {why[0]}")
    store.write_atomic(decision_path, json.dumps(decision, indent=1) + "\n")
    return done
