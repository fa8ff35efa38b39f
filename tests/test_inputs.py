"""Every file and option the suite reads, fuzzed with Hypothesis: valid inputs, and valid inputs broken in one
structured way (a wrong type, a missing key, an extra key, a non-finite or absurd number, truncation, another
encoding, a path that is a file or a folder). Each reader returns a value, or raises its usage error in one line that
names the file (or option), the entry and what to do: never a traceback, never a malformed record taken as good.

The examples: tests/conftest.py's Hypothesis profiles (CI: fixed seed, few; here: more). docs/inputs.md lists the
inputs tried and what each gives.
"""

import argparse
import contextlib
import copy
import gzip
import io
import json
import math
import statistics
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torch_perf_suite import settings
from torch_perf_suite.loader.instructions import InstructionsError, InstructionsFile
from torch_perf_suite.nightly import command
from torch_perf_suite.nightly.nights import Night, load_history
from torch_perf_suite.records.baselines import BaselineError, BaselineFile
from torch_perf_suite.report import rows
from torch_perf_suite.session import options
from torch_perf_suite.session.benchmark import STATS, saved_run_problem
from torch_perf_suite.syncs import SyncCount, TraceError, count_syncs, load_trace
from torch_perf_suite.throughput.parts import PARTS

GPU = "NVIDIA H200"
ENV = {"gpu": GPU, "gpu_uuid": "GPU-1", "driver": "580", "torch": "2.11", "host": {"cpu": "Xeon", "cores": 16},
       "date": "2026-11-22"}
ITEM_TRACE = Path(__file__).parent / "traces" / "item.json.gz"

# values of the wrong type for any field, and numbers no field takes
WRONG_TYPE = st.one_of(st.text(max_size=6), st.booleans(), st.lists(st.integers(), max_size=2),
                       st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
NEGATIVE = st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False)
ABSURD = st.sampled_from([1e308, 1e12, 5e9])  # samples/s no GPU reaches, gigabytes no GPU holds
# bytes no GPU holds: over baselines.MAX_MEMORY_GB in bytes (1e12 bytes is 1 TB, within that bound: not absurd)
ABSURD_BYTES = st.sampled_from([1e308, 1e15, 2e13])
NAMES = st.text(min_size=1, max_size=20)


def one_line(message: str, *names: str) -> None:
    assert "\n" not in message and "Traceback" not in message, message
    for name in names:
        assert name in message, (name, message)


@contextlib.contextmanager
def folder():
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


# --- baseline files (baselines.BaselineFile.load) ---------------------------------------------------------------------

ROUNDS = st.lists(st.floats(1.0, 1e6), min_size=1, max_size=7)
PART = ROUNDS.map(lambda r: {"samples_per_s": statistics.median(r), "spread_pct": 1.0, "rounds": r})
COUNTS = st.one_of(st.none(), st.fixed_dictionaries({
    "kernels_per_step": st.dictionaries(NAMES, st.floats(0, 1e4), max_size=3),
    "copies_per_step": st.dictionaries(NAMES, st.integers(0, 10**9), max_size=2),
    "step_peak_bytes": st.integers(0, 10**11)}))
ENTRY = st.fixed_dictionaries(
    {"parts": st.dictionaries(st.sampled_from(PARTS), PART, min_size=1), "env": st.just(ENV),
     "syncs_per_step": st.none() | st.floats(0, 100), "peak_mem_gb": st.none() | st.floats(0, 200), "counts": COUNTS},
    optional={"recorded_by": st.text(max_size=5)})  # a key this version does not know: a newer one's, kept
BASELINE = st.dictionaries(NAMES, ENTRY, min_size=1, max_size=3).map(lambda t: {"schema": 2, "gpu": GPU, "tests": t})


@st.composite
def broken_baseline(draw):
    """A valid file with one entry broken; returns (data, the entry's id)."""
    data = draw(BASELINE)
    test = draw(st.sampled_from(sorted(data["tests"])))
    entry = data["tests"][test]
    name = draw(st.sampled_from(sorted(entry["parts"])))
    part = entry["parts"][name]
    bad_positive = st.one_of(WRONG_TYPE, NON_FINITE, NEGATIVE, st.just(0), ABSURD, st.none())
    how = draw(st.sampled_from(["samples_per_s", "far", "round", "spread", "no samples_per_s", "no env", "env",
                                "env gpu", "env host", "unknown part", "entry", "syncs", "peak memory", "counts",
                                "no parts", "rounds"]))
    if how == "samples_per_s":
        part["samples_per_s"] = draw(bad_positive)
    elif how == "far":  # finite and positive, but not the median of its rounds
        part["samples_per_s"] = max(part["rounds"]) * draw(st.floats(2, 1e3))
    elif how == "round":
        part["rounds"][draw(st.integers(0, len(part["rounds"]) - 1))] = draw(bad_positive.filter(lambda v: v is not None))
    elif how == "rounds":
        part["rounds"] = draw(st.one_of(st.text(max_size=4), st.just([]), st.integers(), st.dictionaries(NAMES, st.integers())))
    elif how == "spread":
        part["spread_pct"] = draw(st.one_of(WRONG_TYPE, NON_FINITE, NEGATIVE))
    elif how == "no samples_per_s":
        del part["samples_per_s"]
    elif how == "no env":
        del entry["env"]
    elif how == "env":
        entry["env"] = draw(st.one_of(WRONG_TYPE, st.none()))
    elif how == "env gpu":
        entry["env"] = {**ENV, "gpu": draw(st.one_of(WRONG_TYPE.filter(lambda v: not isinstance(v, str)), st.just("")))}
    elif how == "env host":
        entry["env"] = {**ENV, "host": draw(WRONG_TYPE.filter(lambda v: not isinstance(v, dict)))}
    elif how == "unknown part":
        entry["parts"][draw(NAMES.filter(lambda n: n not in PARTS))] = part
    elif how == "entry":
        data["tests"][test] = draw(st.one_of(WRONG_TYPE.filter(lambda v: not isinstance(v, dict)), st.none()))
    elif how == "syncs":
        entry["syncs_per_step"] = draw(st.one_of(WRONG_TYPE, NON_FINITE, NEGATIVE))
    elif how == "peak memory":
        entry["peak_mem_gb"] = draw(st.one_of(WRONG_TYPE, NON_FINITE, NEGATIVE, ABSURD))
    elif how == "counts":
        kernels = st.dictionaries(NAMES, WRONG_TYPE | NEGATIVE, min_size=1)
        entry["counts"] = draw(st.one_of(WRONG_TYPE.filter(lambda v: not isinstance(v, dict)),
                                         st.fixed_dictionaries({"kernels_per_step": kernels}),
                                         st.fixed_dictionaries(
                                             {"step_peak_bytes": st.one_of(WRONG_TYPE, NEGATIVE, ABSURD_BYTES)})))
    elif how == "no parts":
        entry["parts"] = draw(st.one_of(st.just({}), WRONG_TYPE.filter(lambda v: not isinstance(v, dict)), st.none()))
    return data, test


def load_baseline(d: Path, data: bytes | str) -> BaselineFile:
    path = d / "nvidia-h200.json"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return BaselineFile.load(path, GPU)


@given(BASELINE)
def test_a_valid_baseline_file_loads_as_written(data):
    with folder() as d:
        assert load_baseline(d, json.dumps(data)).tests == data["tests"]


@given(broken_baseline())
def test_a_broken_baseline_entry_is_refused_naming_the_file_and_the_entry(broken):
    data, test = broken
    with folder() as d, pytest.raises(BaselineError) as e:
        load_baseline(d, json.dumps(data))
    one_line(str(e.value), str(d / "nvidia-h200.json"), f"entry {test!r}", "--perf-update-baselines")


@given(BASELINE, st.data())
def test_a_truncated_baseline_file_is_refused(data, draw):
    text = json.dumps(data)
    with folder() as d, pytest.raises(BaselineError) as e:
        load_baseline(d, text[:draw.draw(st.integers(0, len(text) - 1))])
    one_line(str(e.value), str(d / "nvidia-h200.json"), "not valid JSON", "git checkout")


@given(BASELINE, st.sampled_from(["utf-16", "utf-32", "utf-8-sig"]))
def test_a_baseline_file_in_another_encoding_is_refused(data, encoding):
    with folder() as d, pytest.raises(BaselineError) as e:
        load_baseline(d, json.dumps(data).encode(encoding))
    one_line(str(e.value), str(d / "nvidia-h200.json"), "not valid JSON")


@given(st.sampled_from([[], "x", 3, None, {"schema": 2, "gpu": GPU}, {"schema": "2", "gpu": GPU, "tests": {}},
                        {"schema": 2, "gpu": "NVIDIA H100", "tests": {}}, {"schema": 2, "gpu": GPU, "tests": []}]))
def test_a_baseline_file_of_the_wrong_shape_is_refused(data):
    with folder() as d, pytest.raises(BaselineError) as e:
        load_baseline(d, json.dumps(data))
    one_line(str(e.value), str(d / "nvidia-h200.json"))


def test_a_baseline_path_that_is_a_folder_or_under_a_file(tmp_path):
    (tmp_path / "nvidia-h200.json").mkdir()
    with pytest.raises(BaselineError) as e:
        BaselineFile.load(tmp_path / "nvidia-h200.json", GPU)
    one_line(str(e.value), str(tmp_path / "nvidia-h200.json"), "is a folder")
    (tmp_path / "a_file").write_text("")
    assert BaselineFile.load(tmp_path / "a_file" / "nvidia-h200.json", GPU).tests == {}  # no file: nothing recorded yet


# --- pytest-benchmark saved runs, as the plugin reads them (benchmark.saved_run_problem) ------------------------------

STATS_VALUES = st.fixed_dictionaries({k: st.floats(0, 10) for k in STATS}, optional={"rounds": st.integers(1, 9)})
SAVED_RUN = st.fixed_dictionaries({
    "machine_info": st.fixed_dictionaries({"node": st.text(max_size=5)}, optional={"gpu": st.just(ENV)}),
    "benchmarks": st.lists(st.fixed_dictionaries({"fullname": NAMES, "stats": STATS_VALUES}), max_size=3)})


@given(SAVED_RUN)
def test_a_valid_saved_run_can_be_compared_with(run):
    assert saved_run_problem(run) is None


@st.composite
def broken_saved_run(draw):
    run = draw(SAVED_RUN)
    how = draw(st.sampled_from(["run", "machine_info", "gpu", "benchmarks", "benchmark", "fullname", "stats", "stat"]))
    not_dict = st.one_of(WRONG_TYPE.filter(lambda v: not isinstance(v, dict)), st.none())
    if how == "run":
        return draw(st.one_of(st.lists(st.integers(), max_size=2), st.text(max_size=3), st.none())), None
    if how == "machine_info":
        run["machine_info"] = draw(not_dict)
    elif how == "gpu":
        run["machine_info"]["gpu"] = draw(WRONG_TYPE.filter(lambda v: not isinstance(v, dict)))
    elif how == "benchmarks":
        run["benchmarks"] = draw(st.one_of(st.text(max_size=3), st.dictionaries(NAMES, st.integers()), st.none()))
    else:
        if not run["benchmarks"]:
            run["benchmarks"].append({"fullname": "t", "stats": {k: 1.0 for k in STATS}})
        i = draw(st.integers(0, len(run["benchmarks"]) - 1))
        bench = run["benchmarks"][i]
        if how == "benchmark":
            run["benchmarks"][i] = draw(not_dict)
        elif how == "fullname":
            bench["fullname"] = draw(st.one_of(st.integers(), st.none(), st.lists(st.integers(), max_size=1)))
        elif how == "stats":
            bench["stats"] = draw(not_dict)
        else:
            bench["stats"][draw(st.sampled_from(STATS))] = draw(st.one_of(WRONG_TYPE, NON_FINITE, NEGATIVE, st.none()))
        return run, f"benchmarks[{i}]"
    return run, None


@given(broken_saved_run())
def test_a_broken_saved_run_is_said_in_one_line_naming_the_entry(broken):
    run, entry = broken
    problem = saved_run_problem(run)
    assert problem is not None
    one_line(problem, *filter(None, [entry]))


# --- the nightly report and history (python -m torch_perf_suite.nightly record) --------------------------------------

NUMBER = st.floats(0, 1e6)
ROW = st.fixed_dictionaries({
    "test": NAMES, "notes": st.lists(st.sampled_from(["FAILED", "passed", "a note"]), max_size=2),
    "parts": st.fixed_dictionaries({p: st.none() | st.fixed_dictionaries({"samples_per_s": NUMBER}) for p in PARTS}),
    "syncs_per_step": st.none() | NUMBER, "efficiency": st.none() | st.floats(0, 1), "bottleneck": st.none() | NAMES,
    "baseline": st.dictionaries(st.sampled_from(PARTS), st.one_of(
        st.just({"compared": False}),
        st.fixed_dictionaries({"compared": st.just(True), "change_pct": st.floats(-50, 50), "allowed_pct": st.floats(-20, 0)})))})
REPORT = st.fixed_dictionaries({
    "env": st.fixed_dictionaries({"gpu": st.sampled_from([GPU, "NVIDIA H100 80GB HBM3", "Tesla T4"]),
                                  "date": st.dates().map(lambda d: d.isoformat())}),
    "smoke": st.just(False), "tests": st.lists(ROW, max_size=3)})


@st.composite
def broken_report(draw):
    report = copy.deepcopy(draw(REPORT))
    not_number = st.one_of(WRONG_TYPE, NON_FINITE)
    how = draw(st.sampled_from(["report", "env", "gpu", "date", "tests", "row", "test", "notes", "parts", "part",
                                "samples_per_s", "syncs", "efficiency", "baseline", "change"]))
    if how == "report":
        return draw(st.one_of(st.lists(st.integers(), max_size=2), st.text(max_size=3), st.integers(), st.none(),
                              st.just({}), st.just({"tests": "x"}))), ""
    if how in ("env", "gpu", "date"):
        env = report["env"]
        if how == "env":
            report["env"] = draw(st.one_of(WRONG_TYPE.filter(lambda v: not isinstance(v, dict)), st.none()))
        elif how == "gpu":
            env["gpu"] = draw(st.one_of(WRONG_TYPE.filter(lambda v: not isinstance(v, str)), st.just(""), st.just(" ")))
        else:
            env["date"] = draw(st.one_of(WRONG_TYPE.filter(lambda v: v not in ("",) and not _is_date(v)),
                                         st.just("2026-13-01"), st.just("../../x"), st.none()))
        return report, "env"
    if how == "tests":
        report["tests"] = draw(st.one_of(st.text(max_size=3), st.dictionaries(NAMES, st.integers()), st.none()))
        return report, "'tests'"
    if not report["tests"]:
        report["tests"].append(draw(ROW))
    i = draw(st.integers(0, len(report["tests"]) - 1))
    row = report["tests"][i]
    if how == "row":
        report["tests"][i] = draw(st.one_of(WRONG_TYPE.filter(lambda v: not isinstance(v, dict)), st.none()))
    elif how == "test":
        row["test"] = draw(st.one_of(st.integers(), st.none(), st.just("")))
    elif how == "notes":
        row["notes"] = draw(st.one_of(st.text(min_size=1, max_size=3), st.lists(st.integers(), min_size=1, max_size=2)))
    elif how == "parts":
        row["parts"] = draw(st.one_of(st.lists(st.integers(), max_size=2), st.text(max_size=3), st.none()))
    elif how == "part":
        row["parts"][draw(st.sampled_from(PARTS))] = draw(st.one_of(st.lists(st.integers(), max_size=2), st.text(max_size=3)))
    elif how == "samples_per_s":
        row["parts"][draw(st.sampled_from(PARTS))] = {"samples_per_s": draw(st.one_of(not_number, st.none()))}
    elif how in ("syncs", "efficiency"):
        row["syncs_per_step" if how == "syncs" else "efficiency"] = draw(not_number)
    elif how == "baseline":
        row["baseline"] = draw(st.one_of(st.lists(st.integers(), max_size=2), st.text(max_size=3)))
    else:
        row["baseline"][draw(st.sampled_from(PARTS))] = {"compared": True, "change_pct": draw(not_number), "allowed_pct": -3.0}
    return report, f"tests[{i}]"


def _is_date(text) -> bool:
    return isinstance(text, str) and rows.is_date(text)


def record(d: Path, report_text: str | bytes, commit: str = "c" * 40, **paths) -> tuple[int | str, str, str]:
    """`nightly record` in `d`: (exit code, stdout, stderr)."""
    report = d / "perf.json"
    report.write_bytes(report_text if isinstance(report_text, bytes) else report_text.encode())
    where = {"history": d / "history", "out": d / "out" / "alerts.json", "summary": d / "trend.md", **paths}
    args = ["record", "--report", str(report), "--commit", commit] + [
        a for k, v in where.items() for a in (f"--{k}", str(v))]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = command.main(args)
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def usage_error(err: str, *names: str) -> None:
    """parser.error's output: the usage, then one line naming what was wrong."""
    assert err.startswith("usage: python -m torch_perf_suite.nightly record"), err
    error = err.rstrip("\n").split("\n")[-1]
    one_line(error, "python -m torch_perf_suite.nightly record: error: ", *names)


@given(REPORT)
def test_a_valid_report_is_recorded_once_however_often_it_is_recorded(report):
    with folder() as d:
        first = record(d, json.dumps(report))
        again = record(d, json.dumps(report))
        assert first[0] == again[0] == 0 and first[1] == again[1]
        assert first[1].startswith("first night: ")
        [night] = (d / "history").iterdir()
        assert json.loads(night.read_text())["failed"] == {r["test"]: command._numbers(r) for r in report["tests"]
                                                          if (r["notes"] or [""])[0] == "FAILED"}
        assert set(json.loads((d / "out" / "alerts.json").read_text())) == {"status", "alerts", "charts"}


@given(broken_report())
def test_a_broken_report_is_a_usage_error_and_nothing_is_recorded(broken):
    report, entry = broken
    with folder() as d:
        code, out, err = record(d, json.dumps(report))
        assert (code, out) == (2, "")
        usage_error(err, f"--report {d / 'perf.json'}: ", entry, "give the JSON that --perf-report wrote")
        assert sorted(p.name for p in d.iterdir()) == ["perf.json"]  # no history, no decision, no summary


@given(REPORT, st.data())
def test_a_truncated_or_re_encoded_report_is_a_usage_error(report, data):
    text = json.dumps(report)
    cut = data.draw(st.one_of(st.integers(0, len(text) - 1).map(lambda n: text[:n].encode()),
                              st.sampled_from(["utf-16", "utf-32"]).map(text.encode),
                              st.just(gzip.compress(text.encode()))))
    with folder() as d:
        code, _, err = record(d, cut)
        assert code == 2
        usage_error(err, f"--report {d / 'perf.json'}: not a readable perf report")
        assert not (d / "history").exists()


@given(st.sampled_from(["", "../x", "a/b", "-x", " ", "c c"]))
def test_a_commit_that_is_no_commit_is_a_usage_error(commit):
    with folder() as d:
        code, _, err = record(d, json.dumps({"env": ENV, "tests": []}), commit=commit)
        assert code == 2
        usage_error(err, "--commit")
        assert not (d / "history").exists()


PATH_KINDS = ["new", "in a new folder", "a file", "a folder", "under a file"]


@given(st.sampled_from(PATH_KINDS), st.sampled_from(PATH_KINDS), st.sampled_from(PATH_KINDS))
def test_output_paths_are_checked_before_anything_is_written(history, out, summary):
    """--history is a folder; --out and --summary are files: anything else is said at start, and nothing is written
    (a bad --out crashed after the night was saved; the next run alerted on that one night)."""
    with folder() as d:
        (d / "f").write_text("")
        (d / "existing").mkdir()
        (d / "perf.json").write_text(json.dumps({"env": ENV, "tests": []}))

        def path(kind: str, name: str) -> Path:
            return {"new": d / name, "in a new folder": d / "new" / name, "a file": d / "f", "a folder": d / "existing",
                    "under a file": d / "f" / name}[kind]

        paths = {"history": path(history, "h"), "out": path(out, "alerts.json"), "summary": path(summary, "trend.md")}
        bad = {"history": {"a file", "under a file"}, "out": {"a folder", "under a file"},
               "summary": {"a folder", "under a file"}}
        wrong = [k for k, kind in (("history", history), ("out", out), ("summary", summary)) if kind in bad[k]]
        before = sorted(p.relative_to(d) for p in d.rglob("*"))
        code, _, err = record(d, json.dumps({"env": ENV, "tests": []}), **paths)
        if wrong:
            assert code == 2
            usage_error(err, f"--{wrong[0]} {paths[wrong[0]]}: ")
            assert sorted(p.relative_to(d) for p in d.rglob("*")) == before
        else:
            assert code == 0 and len(list(paths["history"].glob("*.json"))) == 1


NIGHT = st.fixed_dictionaries({
    "date": st.dates().map(lambda d: d.isoformat()), "commit": st.text("0123456789abcdef", min_size=7, max_size=40),
    "gpu": st.just(GPU), "failed": st.dictionaries(NAMES, st.text(max_size=10), max_size=2), "run_url": st.just(""),
    "samples": st.dictionaries(NAMES, st.dictionaries(st.sampled_from(PARTS), NUMBER, max_size=2), max_size=2)})


@given(NIGHT, st.data())
def test_a_history_night_is_read_back_or_named(night, data):
    with folder() as d:
        how = data.draw(st.sampled_from(["valid", "field", "missing", "extra", "truncated", "samples", "failed"]))
        broken = dict(night)
        if how == "field":
            broken[data.draw(st.sampled_from(["date", "commit", "gpu", "run_url"]))] = data.draw(
                st.one_of(st.integers(), st.none(), st.lists(st.integers(), max_size=1)))
        elif how == "missing":
            del broken[data.draw(st.sampled_from(["date", "commit", "gpu"]))]
        elif how == "extra":
            broken[data.draw(NAMES.filter(lambda k: k not in night))] = 1
        elif how == "samples":
            broken["samples"] = data.draw(st.one_of(st.text(max_size=3), st.just({"t": {"gpu": "fast"}}), st.just({"t": 3})))
        elif how == "failed":
            broken["failed"] = data.draw(st.one_of(st.text(max_size=3), st.just({"t": 3}), st.lists(st.integers(), max_size=1)))
        text = json.dumps(broken)
        if how == "truncated":
            text = text[:data.draw(st.integers(0, len(text) - 1))]
        (d / "2026-11-22-abc.json").write_text(text)
        if how == "valid":
            assert load_history(d) == [Night(**night)]
            return
        with pytest.raises(SystemExit) as e:
            load_history(d)
        one_line(str(e.value.code), f"error: {d / '2026-11-22-abc.json'}: not a night recorded by this tool",
                 f"move it out of {d}")


@given(st.one_of(st.just("[]"), st.just('{"status": 3, "alerts": []}'),
                 st.just('{"status": "s", "alerts": [{"test": 1, "title": "t", "body": "b"}]}'),
                 st.just('{"status": "s", "alerts": ["x"]}'), st.just('{"status": "s"}'), st.text(max_size=20)))
def test_a_decision_that_record_did_not_write_is_a_usage_error(text):
    with folder() as d:
        (d / "alerts.json").write_text(text)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
            command.main(["alert", str(d / "alerts.json")])
        assert e.value.code == 2
        one_line(err.getvalue().rstrip("\n").split("\n")[-1], str(d / "alerts.json"), "not a decision written by `record`")


# --- Chrome traces (syncs.load_trace, count_syncs) -----------------------------------------------------------------

TRACE_TEXT = gzip.decompress(ITEM_TRACE.read_bytes())  # read once; not an argument, which Hypothesis would print


@given(st.data())
def test_a_trace_is_counted_or_named(data):
    """An event of a flow (ph "s"/"f") with a list for its pid, tid, ph or id was a TypeError (found here)."""
    trace = json.loads(TRACE_TEXT)
    events = trace["traceEvents"]
    how = data.draw(st.sampled_from(["valid", "event", "field", "no events", "truncated", "gzip truncated", "encoding"]))
    if how == "event":
        events[data.draw(st.integers(0, len(events) - 1))] = data.draw(st.one_of(WRONG_TYPE, st.none()))
    elif how == "field":
        e = events[data.draw(st.integers(0, len(events) - 1))]
        if isinstance(e, dict) and e:
            e[data.draw(st.sampled_from(sorted(e)))] = data.draw(st.one_of(WRONG_TYPE, NON_FINITE, NEGATIVE, st.none(),
                                                                           st.just(1e308)))
    elif how == "no events":
        trace["traceEvents"] = data.draw(st.one_of(st.none(), st.text(max_size=3), st.dictionaries(NAMES, st.integers())))
    raw = json.dumps(trace).encode()
    if how == "truncated":
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    elif how == "gzip truncated":
        packed = gzip.compress(raw)
        raw = packed[:data.draw(st.integers(0, len(packed) - 1))]
    elif how == "encoding":
        raw = json.dumps(trace, ensure_ascii=False).encode(data.draw(st.sampled_from(["utf-16", "utf-32"])))
    with folder() as d:
        path = d / "trace.json"
        path.write_bytes(raw)
        try:
            counted = count_syncs(load_trace(path), source=str(path))
        except TraceError as e:
            one_line(str(e), str(path))
            assert how != "valid"
            return
        assert isinstance(counted, SyncCount) and how in ("valid", "event", "field")


# --- options and ini values (settings.py) ---------------------------------------------------------------------------

@given(st.text(max_size=12), st.sampled_from([settings.positive_int, settings.percent, settings.seconds,
                                              settings.report_path, settings.folder]))
def test_an_option_value_is_taken_or_refused_in_one_line(text, check):
    try:
        value = check(text)
    except argparse.ArgumentTypeError as e:
        one_line(str(e), "expected")
        return
    if check is settings.positive_int:
        assert isinstance(value, int) and value >= 1
    elif check is settings.percent:
        assert 0 <= value < 100
    elif check is settings.seconds:
        assert 0 <= value <= 60


class IniConfig:
    """What _measure_from reads of a config: no options given, these ini values."""

    def __init__(self, ini: dict):
        self.ini = ini

    def getoption(self, name):
        return None

    def getini(self, name):
        return self.ini.get(name, "")


INI_VALUE = st.one_of(st.text(max_size=8), st.integers(-5, 20).map(str), st.sampled_from(["nan", "inf", "1e400", "5%"]))


@given(st.dictionaries(st.sampled_from([f"perf_{n}" for n in settings.MEASURE_TYPES]), INI_VALUE, max_size=4))
def test_ini_measurement_settings_are_taken_or_named(ini):
    try:
        measure = options._measure_from(IniConfig(ini))
    except pytest.UsageError as e:
        one_line(str(e))
        assert any(f"ini option {k} = {v!r}" in str(e) for k, v in ini.items()) or "max_rounds" in str(e)
        return
    assert measure.max_rounds >= measure.rounds
    for name, raw in ini.items():
        if raw.strip():
            assert getattr(measure, name[len("perf_"):]) == settings.MEASURE_TYPES[name[len("perf_"):]](raw)


# --- the loader's instruction counts (baselines/instructions.json) ----------------------------------------------------

INSTRUCTIONS = st.fixed_dictionaries({"schema": st.just(1), "environments": st.dictionaries(NAMES, st.dictionaries(
    NAMES, st.fixed_dictionaries({"per_sample": st.floats(1, 1e9), "samples": st.integers(1, 64), "source": NAMES,
                                  "date": st.just("2026-11-22")}), max_size=2), max_size=2)})


@given(INSTRUCTIONS, st.data())
def test_an_instructions_file_loads_or_is_named(data, draw):
    how = draw.draw(st.sampled_from(["valid", "per_sample", "source", "entry", "environment", "top", "truncated",
                                     "nested"]))
    envs = data["environments"]
    entries = [(k, t) for k, tests in envs.items() for t in tests]
    if how in ("per_sample", "source", "entry") and entries:
        k, t = draw.draw(st.sampled_from(entries))
        if how == "entry":
            envs[k][t] = draw.draw(st.one_of(WRONG_TYPE.filter(lambda v: not isinstance(v, dict)), st.none()))
        else:
            envs[k][t][how] = draw.draw(st.one_of(WRONG_TYPE.filter(lambda v: not isinstance(v, str) or how == "per_sample"),
                                                  NON_FINITE, NEGATIVE, st.none(), st.just(0)))
    elif how == "environment" and envs:
        envs[draw.draw(st.sampled_from(sorted(envs)))] = draw.draw(st.one_of(st.lists(st.integers(), max_size=1),
                                                                            st.text(max_size=3)))
    elif how == "top":
        data = draw.draw(st.one_of(st.just({"schema": 2, "environments": {}}), st.just([]), st.just({"schema": 1})))
    elif how in ("per_sample", "source", "entry", "environment"):
        how = "valid"  # nothing to break in a file without entries
    text = json.dumps(data)
    if how == "truncated":
        text = text[:draw.draw(st.integers(0, len(text) - 1))]
    elif how == "nested":
        text = "[" * 100_000 + "]" * 100_000  # deeper than the JSON reader recurses
    with folder() as d:
        (d / "instructions.json").write_text(text)
        try:
            loaded = InstructionsFile.load(d / "instructions.json")
        except InstructionsError as e:
            one_line(str(e), str(d / "instructions.json"), "git checkout")
            assert how != "valid"
            return
        assert how == "valid" and loaded.environments == data["environments"]


NESTED = "[" * 100_000 + "]" * 100_000  # valid JSON, deeper than Python's JSON reader recurses


def test_json_nested_too_deep_is_named_by_every_reader(tmp_path):
    (tmp_path / "deep.json").write_text(NESTED)
    with pytest.raises(BaselineError) as e:
        BaselineFile.load(tmp_path / "deep.json", GPU)
    one_line(str(e.value), str(tmp_path / "deep.json"), "not valid JSON")
    code, _, err = record(tmp_path, NESTED)
    assert code == 2
    usage_error(err, f"--report {tmp_path / 'perf.json'}: not a readable perf report")
    with pytest.raises(TraceError) as e:
        load_trace(tmp_path / "deep.json")
    one_line(str(e.value), str(tmp_path / "deep.json"))
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "2026-11-22-abc.json").write_text(NESTED)
    with pytest.raises(SystemExit) as e:
        load_history(tmp_path / "history")
    one_line(str(e.value.code), "not a night recorded by this tool")
