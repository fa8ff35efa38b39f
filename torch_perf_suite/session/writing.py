"""What a session writes and says: its report (after each test, and at the end with the charts), a sharded run's
workers' reports merged into one, a failed test's trace kept, what an xdist worker hands its controller, and the
terminal's last lines. Functions of the PerfSession (core.py).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from pathlib import Path

from .. import store
from ..machine import host
from ..report import plain, saved
from ..throughput.timing import session_line
from . import runners

SLOW_S = 20.0  # a session of perf tests that measured none and took this long says where its seconds went


def session_document(session) -> dict:
    """This process's report as its JSON holds it; an xdist worker's says which worker and GPU it was."""
    cores = host.cpu_list(session.cores) if session.cores else None
    worker = {"id": session.worker, "cuda_visible_devices": session.gpu, "cores": cores} if session.worker else None
    ref = session.ref_state.ref
    return saved.document(session.results.values(), session.device.env, session.sections, session.settings.smoke,
                          session.charts, worker, ref_description=ref.describe() if ref else None, seconds=spent(session))


def spent(session) -> dict:
    """The session's seconds, every one in a part: in all since the process started; the imports before the
    session; collecting and selecting the tests; measuring REF; the perf tests' calls; the rest of the tests'
    time (their setup and teardown, the user's code around `perf.measure`, other tests); the end (stopping the
    counting and the turns' processes, the report). Where a loader was counted again, what the tests and the end
    spent on the count (valgrind's start and the count: their "instructions" laps; its stop), as a part of them."""
    now = time.perf_counter()
    first, last = (session.tests_span + [now])[:2] if session.tests_span else (session.collected, session.collected)
    last = now if session.in_test else last  # a report written inside a test: its call is in the tests' span
    tests = sum(sum(laps.seconds.values()) for laps in session.laps.values())
    ref_in_tests = session.ref_state.in_tests  # a sharded worker measures REF before each file, in the tests' span
    imports = {} if session.imports_s is None else {"imports": round(session.imports_s, 1)}
    counting = sum(laps.seconds.get("instructions", 0.0) for laps in session.laps.values()) + session.recount_s
    recount = {"of them loader counted again": round(counting, 1)} if session.recount else {}
    return {"total": round(now - session.started, 1), **imports,
            "collection": round(max(first - session.configured - session.ref_state.seconds + ref_in_tests, 0.0), 1),
            "REF": round(session.ref_state.seconds, 1), "tests": round(tests, 1),
            "setup and other tests": round(max(last - first - tests - ref_in_tests, 0.0), 1),
            "end": round(now - last, 1), **recount}


def write_report(session, final: bool = False) -> list:
    """After each test (the tables), and at the end (`final`: the charts' images too, drawn once). An xdist worker
    writes PATH.<worker id>.md and .json, which its controller merges at the end (and draws the charts of)."""
    if not session.settings.report or session.report_error:
        return []
    path = session.settings.report
    if session.worker:
        path = path.with_name(f"{path.name}.{session.worker}")
    try:
        return saved.write(path, session_document(session), images=final and not session.worker)
    except OSError as e:
        session.report_error = f"perf report NOT written to {path}: {e}"
        return []


def merge_reports(session) -> list[Path]:
    """The controller of a sharded run, at the end: the workers' reports as one (runners.merge), kept for the
    terminal and, under --perf-report, written to PATH.md and PATH.json with the charts. A worker's report comes
    with its end (workeroutput), or, from a worker that crashed, from its partial file. The partial files
    (PATH.<worker id>.md and .json) are removed once merged; kept, and said so, where one cannot be read (the
    others are merged) or the merge failed."""
    docs = {wid: out["report"] for wid, out in session.worker_outputs.items() if out.get("report")}
    partial = runners.partial_reports(session.settings.report) if session.settings.report else {}
    unread: dict[str, str] = {}  # worker id -> why its partial report could not be read
    for wid, files in partial.items():
        js = next((f for f in files if f.suffix == ".json"), None)
        if wid not in docs and js:
            try:
                docs[wid] = json.loads(js.read_text())
            except (OSError, ValueError) as e:  # a worker killed while writing it: the others' still merge
                unread[wid] = f"{js}: {e}"
    try:
        session.merged = runners.merge(docs)
        written = saved.write(session.settings.report, session.merged) if session.settings.report else []
    except (OSError, ValueError) as e:
        kept = ", ".join(str(f) for files in partial.values() for f in files) or "none"
        session.report_error = f"perf report NOT merged into {session.settings.report}: {e}; the workers' reports: {kept}"
        return []
    if unread:
        session.report_error = f"perf report merged into {session.settings.report} without these workers' reports, kept: " + \
            "; ".join(unread.values())
    for f in (f for wid, files in partial.items() if wid not in unread for f in files):
        f.unlink(missing_ok=True)
    return written


def keep_trace(trace_dir: Path, trace: Path) -> str:
    """A failed test's trace, gzipped into --perf-trace-dir; the note that says where it is."""
    kept = trace_dir / (trace.name + ".gz")
    try:
        trace_dir.mkdir(parents=True, exist_ok=True)
        with open(trace, "rb") as src, store.atomic(kept, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb") as dst:
            shutil.copyfileobj(src, dst)
        return f"trace kept: {kept}"
    except OSError as e:
        return f"trace not kept ({e}); it is still at {trace}"


def worker_output(session) -> dict:
    """What an xdist worker hands its controller at its end: its report, lines and records, through JSON (execnet
    sends plain types only: torch.__version__ is a str subclass, a column a numpy int)."""
    records = session.records
    return {
        "report": json.loads(json.dumps(session_document(session), default=str)) if session.results or session.sections else None,
        "lines": [line for line in (records.baseline_note, records.save_error, session.report_error) if line],
        "recorded": records.recorded(),
        "failed": bool(records.save_error or session.report_error),
    }


def summary(session) -> tuple[str | None, list[tuple[str, dict]]]:
    """The end of the terminal output: the report in plain text (report/plain.py; None where nothing was measured) and lines
    as (line, markup): what went wrong writing, what was recorded, where the report was written. An xdist worker's
    controller reports for it: a worker says nothing."""
    if session.worker:
        return None, []
    doc = session.merged if session.shards else session_document(session)
    measured = bool(doc and (doc["tests"] or doc["sections"]))
    outputs = session.worker_outputs.values()
    own = (session.records.baseline_note, session.records.save_error, session.report_error)
    lines = [*own, *(line for o in outputs for line in o.get("lines", []))]
    out = [(line, {"red": True, "bold": True}) for line in dict.fromkeys(filter(None, lines))]  # workers say the same
    out += _recorded_lines(session, outputs)
    if session.settings.report:
        written = session.written if session.shards else write_report(session, final=True)
        if not session.report_error:
            why = "none of the tests run measured a training step" if session.device.is_gpu or session.settings.smoke \
                else "no CUDA GPU and no --perf-smoke"
            empty = "" if measured else f" (no test was measured: {why})"
            out.append(("perf report written to " + ", ".join(map(str, written)) + empty, {}))
    if session.perf_tests and not measured and not session.shards and (spent_s := spent(session))["total"] >= SLOW_S:
        out.append((f"{session_line(spent_s)}: where a session that measured no test spent its time", {}))
    return (plain.text(saved.render(doc)) if measured else None), out


def _recorded_lines(session, outputs) -> list[tuple[str, dict]]:
    """What this process and a sharded run's workers recorded, each into the file of its GPU model; or that
    --perf-update-baselines recorded nothing, and why."""
    recorded = session.records.recorded()
    for o in outputs:
        for path, n in o.get("recorded", {}).items():
            recorded[path] = recorded.get(path, 0) + n
    out = [(f"recorded {n} baseline(s) into {path}", {}) for path, n in recorded.items()]
    if session.settings.update_baselines and session.records.baseline_file is None and not recorded:  # workers' too
        out.append(("--perf-update-baselines recorded nothing: baselines are recorded only on a CUDA GPU outside "
                    "--perf-smoke (loader instruction counts and settings on any machine, where counted and described; "
                    "a smoke run's counts on a machine without a GPU)",
                    {"yellow": True}))
    return out


CAUSE = "perf cause"  # a measured test's failure line, among its report's user properties (xdist hands them over)


def summary_message(rep) -> str:
    """What pytest's short summary says of a failed report after its test's id: its crash message's first line."""
    message = rep.longrepr if isinstance(rep.longrepr, str) else getattr(rep.longrepr.reprcrash, "message", "")
    return message.partition("\n")[0]


def cut_causes(reports, width: int) -> list[str]:
    """pytest's short summary ("FAILED test - cause") cuts a failure's first line to the terminal's width, outside CI
    and below -vv: the measured tests' lines it cut, whole, to be said below it."""
    lines = (f"FAILED {rep.nodeid} - {cause}" for rep in reports if (cause := dict(rep.user_properties).get(CAUSE)))
    cut = [line for line in lines if len(line) > width]
    return ["the lines above that were cut, whole:", *cut] if cut else []


def on_ci() -> bool:
    """Where pytest cuts no short summary line: CI or BUILD_NUMBER set, as pytest's own test reads them."""
    return bool({"CI", "BUILD_NUMBER"} & set(os.environ))
