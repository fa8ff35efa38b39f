"""`python -m torch_perf_suite.syncs TRACE...` and the trace reader on files and events it cannot use.

Exit codes: 0 every trace read and clean, 1 syncs found, 2 a trace unreadable; never a traceback.
"""

import copy
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.syncs.hand_made import SYNC, ev
from torch_perf_suite import syncs
from torch_perf_suite.syncs import TraceError, count_syncs, load_trace

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "tests" / "traces"
CLEAN, ITEM = TRACES / "clean.json.gz", TRACES / "item.json.gz"


def cli(*args) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "torch_perf_suite.syncs", *map(str, args)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


# --- bad files, made in tmp_path; each must be one TraceError / one stderr line naming the file ----------------------


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


BAD_FILES = {
    "missing": lambda d: d / "missing.json.gz",
    "directory": lambda d: d,
    "not_gzip_named_gz": lambda d: _write(d / "garbage.json.gz", b"this is not gzip, nor JSON"),
    "not_utf8": lambda d: _write(d / "latin1.json", b'{"traceEvents": [], "name": "caf\xe9"}'),
    "gzipped_not_utf8": lambda d: _write(d / "latin1.trace", gzip.compress(b'{"traceEvents": [], "x": "\xff"}')),
    "truncated_gzip": lambda d: _write(d / "cut.json.gz", CLEAN.read_bytes()[:1000]),
    "empty": lambda d: _write(d / "empty.json", b""),
    "not_json": lambda d: _write(d / "notes.json", b"{'traceEvents': oops"),
    "no_trace_events": lambda d: _write(d / "other.json", b'{"events": []}'),
    "a_list": lambda d: _write(d / "list.json", b"[1, 2, 3]"),
    "no_steps": lambda d: _write(d / "nosteps.json", json.dumps({"traceEvents": [{"ph": "X", "name": "x", "ts": 1}]}).encode()),
}


@pytest.fixture(params=sorted(BAD_FILES))
def bad_file(request, tmp_path) -> Path:
    return BAD_FILES[request.param](tmp_path)


# --- the CLI -------------------------------------------------------------------------------------------------------


def test_clean_trace_exits_0():
    done = cli(CLEAN)
    assert done.returncode == 0
    assert done.stdout.startswith(f"{CLEAN}: 0.00 syncs/step over 3 steps\n")
    assert "no host-device syncs in the steps" in done.stdout
    assert done.stderr == ""


def test_item_trace_exits_1_and_names_the_sync():
    done = cli(ITEM)
    assert done.returncode == 1
    assert done.stdout.startswith(f"{ITEM}: 1.00 syncs/step over 3 steps\n")
    assert "cudaStreamSynchronize" in done.stdout
    assert done.stderr == ""


def test_several_traces_are_all_printed():
    done = cli(CLEAN, ITEM)
    assert done.returncode == 1
    assert f"{CLEAN}: 0.00 syncs/step" in done.stdout and f"{ITEM}: 1.00 syncs/step" in done.stdout
    assert done.stdout.index(str(CLEAN)) < done.stdout.index(str(ITEM))


def test_help_is_help_not_a_file_name():
    done = cli("--help")
    assert done.returncode == 0
    assert done.stdout.startswith("usage:") and "TRACE" in done.stdout
    assert done.stderr == ""


def test_no_argument_is_a_usage_error():
    done = cli()
    assert done.returncode == 2
    assert done.stdout == ""
    assert "usage:" in done.stderr and "TRACE" in done.stderr


def test_an_unknown_option_is_named():
    """--bogus was answered "the following arguments are required: TRACE"."""
    done = cli("--bogus")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1] == "python -m torch_perf_suite.syncs: error: unrecognized arguments: --bogus"
    assert cli("--bogus", str(CLEAN)).stderr.splitlines()[-1].endswith("error: unrecognized arguments: --bogus")


def test_gzip_without_gz_suffix_is_read(tmp_path):
    renamed = _write(tmp_path / "item.trace", ITEM.read_bytes())
    done = cli(renamed)
    assert done.returncode == 1
    assert "cudaStreamSynchronize" in done.stdout


def test_bad_file_is_one_line_on_stderr(bad_file):
    done = cli(bad_file)
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert str(bad_file) in line


def test_a_bad_file_does_not_stop_the_good_ones(tmp_path):
    bad = _write(tmp_path / "bad.json.gz", b"\x1f\x8b but not really gzip")
    done = cli(ITEM, bad, tmp_path / "missing.json", CLEAN)
    assert done.returncode == 2  # unreadable wins over syncs found
    assert f"{ITEM}: 1.00 syncs/step" in done.stdout and "cudaStreamSynchronize" in done.stdout
    assert f"{CLEAN}: 0.00 syncs/step" in done.stdout
    errors = done.stderr.splitlines()
    assert len(errors) == 2
    assert str(bad) in errors[0] and str(tmp_path / "missing.json") in errors[1]


def test_clean_and_bad_exits_2(tmp_path):
    done = cli(CLEAN, tmp_path / "missing.json")
    assert done.returncode == 2
    assert f"{CLEAN}: 0.00 syncs/step" in done.stdout


# --- load_trace ----------------------------------------------------------------------------------------------------


def test_load_trace_tells_gzip_by_its_bytes_not_its_name(tmp_path):
    expected = load_trace(ITEM)
    assert load_trace(_write(tmp_path / "item.json", ITEM.read_bytes())) == expected
    plain_named_gz = _write(tmp_path / "plain.json.gz", json.dumps(expected).encode())
    assert load_trace(plain_named_gz) == expected


@pytest.mark.parametrize("kind", sorted(set(BAD_FILES) - {"no_steps"}))  # no_steps reads; count_syncs rejects it
def test_load_trace_raises_trace_error_naming_the_file(tmp_path, kind):
    bad_file = BAD_FILES[kind](tmp_path)
    with pytest.raises(TraceError) as raised:
        load_trace(bad_file)
    assert str(bad_file) in str(raised.value)


# --- count_syncs on events it cannot use ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def item_trace() -> dict:
    return load_trace(ITEM)


def _in_first_step(trace: dict) -> float:
    return min(e["ts"] for e in trace["traceEvents"] if e.get("name", "").startswith("perf_step_")) + 1


ODD_EVENTS = {
    "no_name": {"ph": "X", "cat": "cuda_runtime", "ts": 0, "dur": 1},
    "name_not_a_string": {"ph": "X", "cat": "user_annotation", "name": 7, "ts": 0, "dur": 1},
    "args_null": {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": 1, "args": None},
    "args_a_list": {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": 1, "args": [1]},
    "correlation_a_list": {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "args": {"correlation": [1]}},
    "pageable_copy_args_null": {
        "ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "ts": 0, "args": None,
    },
    "flow_pid_a_list": {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": [446], "tid": 471, "ts": 0},
    "flow_id_a_list": {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": [1], "pid": 446, "tid": 1, "ts": 0},
    "flow_ph_a_list": {"ph": ["f"], "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 446, "tid": 471, "ts": 0},
    "ts_a_string": {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": "12", "dur": 1},
    "ts_null": {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": None},
    "ts_true": {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": True},
    "ts_nan": {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": float("nan")},
    "ts_huge_int": {"ph": "X", "cat": "kernel", "name": "k", "ts": 10**400},
    "dur_a_string": {"ph": "X", "cat": "user_annotation", "name": "perf_step_9", "ts": 0, "dur": "long"},
    "cat_a_list": {"ph": "X", "cat": ["cuda_runtime"], "name": "cudaStreamSynchronize", "ts": 0},
    "tid_a_dict": {"ph": "X", "cat": "cpu_op", "name": "aten::item", "ts": 0, "tid": {}},
    "not_a_dict_int": 3,
    "not_a_dict_str": "cudaStreamSynchronize",
    "not_a_dict_null": None,
    "not_a_dict_list": ["X", "cudaStreamSynchronize"],
}


@pytest.mark.parametrize("kind", sorted(ODD_EVENTS))
def test_count_syncs_skips_events_it_cannot_use(item_trace, kind):
    odd = copy.deepcopy(ODD_EVENTS[kind])
    if isinstance(odd, dict) and odd.get("ts") == 0:
        odd["ts"] = _in_first_step(item_trace)  # inside a step, where a usable event would count
    trace = {**item_trace, "traceEvents": [odd, *item_trace["traceEvents"], odd]}
    expected = count_syncs(item_trace)
    c = count_syncs(trace)
    assert (c.steps, c.sources, c.periodic) == (expected.steps, expected.sources, expected.periodic)


def test_count_syncs_on_only_junk_is_a_trace_error():
    junk = [e for e in ODD_EVENTS.values() if not isinstance(e, dict) or e.get("ts") != 0]
    with pytest.raises(TraceError, match="junk.json: no 'perf_step_<i>' ranges"):
        count_syncs({"traceEvents": junk}, source="junk.json")


@pytest.mark.parametrize("trace", [{}, {"traceEvents": None}, {"traceEvents": {}}, [], None])
def test_count_syncs_without_an_event_list_is_a_trace_error(trace):
    with pytest.raises(TraceError, match="x.json: no 'traceEvents' list"):
        count_syncs(trace, source="x.json")


def test_odd_events_in_a_file_do_not_crash_the_cli(tmp_path, item_trace):
    trace = {**item_trace, "traceEvents": [*ODD_EVENTS.values(), *item_trace["traceEvents"]]}
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(trace))  # NaN and 10**400 go through json as they are
    done = cli(path)
    assert done.returncode == 1
    assert "1.00 syncs/step over 3 steps" in done.stdout and "cudaStreamSynchronize" in done.stdout


# --- the command line, in-process ----------------------------------------------------------------------------------


def test_main_exit_codes_and_output(capsys, tmp_path):
    clean, item = TRACES / "clean.json.gz", TRACES / "item.json.gz"
    assert syncs.main([str(clean)]) == 0
    out = capsys.readouterr().out
    assert out == f"{clean}: 0.00 syncs/step over 3 steps\nno host-device syncs in the steps\n"
    assert syncs.main([str(item), str(clean)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{item}: 1.00 syncs/step over 3 steps\n  1.00/step  cudaStreamSynchronize in aten::item")
    assert "\n               fix:       .item(), float(t)" in out  # the advice, as the failure message gives it
    assert f"\n{clean}: 0.00 syncs/step over 3 steps\n" in out
    missing = tmp_path / "missing.json"
    assert syncs.main([str(missing), str(clean)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {missing}: no such file\n" and captured.out.startswith(f"{clean}: 0.00")


def test_main_a_sync_in_a_periodic_phase_only_exits_1(capsys, tmp_path):
    import json

    path = tmp_path / "periodic.json"
    phase = ev("perf_periodic:metrics", "user_annotation", 90, 30)
    path.write_text(json.dumps({"traceEvents": [ev("perf_step_0", "user_annotation", 0, 999), phase, SYNC]}))
    assert syncs.main([str(path)]) == 1
    assert "plus 1 sync(s) in perf_periodic:metrics, which ran 1x in 1 steps:" in capsys.readouterr().out


def test_main_help(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    with pytest.raises(SystemExit) as done:
        syncs.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m torch_perf_suite.syncs [-h] TRACE [TRACE ...]\n")
    assert "Count the host-device syncs per step in torch.profiler Chrome traces (with perf_step_<i> ranges)." in out
    assert "TRACE       a Chrome trace, .json or gzipped" in out
    assert ("exit status: 0 every trace read and clean, 1 syncs in some trace's steps, 2 some trace could not be read"
            in out)


# --- more of the command line ------------------------------------------------------------------------------------------


def test_main_help_lines_in_full(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    with pytest.raises(SystemExit):
        syncs.main(["--help"])
    lines = capsys.readouterr().out.splitlines()
    assert "Count the host-device syncs per step in torch.profiler Chrome traces (with perf_step_<i> ranges)." in lines
    assert "exit status: 0 every trace read and clean, 1 syncs in some trace's steps, 2 some trace could not be read" in lines


def test_main_names_a_trace_without_steps(capsys, tmp_path):
    import json

    path = tmp_path / "nosteps.json"
    path.write_text(json.dumps({"traceEvents": [SYNC]}))
    assert syncs.main([str(path)]) == 2
    assert capsys.readouterr().err == (f"error: {path}: no 'perf_step_<i>' ranges; the steps were not marked, "
                                       "so nothing can be counted\n")
