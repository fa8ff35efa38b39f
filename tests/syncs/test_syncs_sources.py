"""Where a sync comes from, on small hand-made traces: the ops around it, the user line and the library line,
the pageable-copy rule at its edges; the file classification; the site markers; the command line in-process.
"""

import os
import sysconfig
import traceback
import warnings
from collections import Counter
from pathlib import Path

import pytest

from torch_perf_suite import syncs
from torch_perf_suite.counts import files
from torch_perf_suite.syncs import SITE_PREFIX, SyncCount, SyncSource, count_syncs, load_trace

TRACES = Path(__file__).parents[1] / "traces"
STDLIB = sysconfig.get_paths()["stdlib"]
SITE = "/opt/conda/lib/python3.11/site-packages"  # a site-packages folder outside this interpreter's own roots
NO_STACK = "(no Python stack: the op ran on a C++ thread, e.g. autograd's backward)"
STARTS = " (line where the function starts)"


def ev(name, cat, ts, dur=0, tid=1, **args):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}


def nested(names, cat="python_function", start=1, tid=1):
    """Events nested one inside the other, outermost first."""
    return [ev(n, cat, start + i, 900 - 2 * i, tid) for i, n in enumerate(names)]


def sources_of(*events, steps=1):
    trace = {"traceEvents": [ev(f"perf_step_{i}", "user_annotation", 1000 * i, 999) for i in range(steps)] + list(events)}
    return count_syncs(trace).sources


SYNC = ev("cudaStreamSynchronize", "cuda_runtime", 100, 5)
ITEM_OPS = nested(["aten::item", "aten::_local_scalar_dense"], "cpu_op", start=50)


# --- the Python stack around a sync without a site marker --------------------------------------------


def test_library_line_is_the_innermost_library_frame_below_the_user_line():
    stack = nested([
        f"{STDLIB}/runpy.py(86): _run_code",
        f"{SITE}/_pytest/python.py(159): pytest_pyfunc_call",
        "tests/test_train.py(12): test_train",
        "fixtures/recipes.py(80): train_step",
        f"{SITE}/torch/amp/grad_scaler.py(371): unscale_",
        "<built-in method item of Tensor object at 0x7f00>",  # torch's C entry: neither user nor library line
    ])
    assert sources_of(*stack, *ITEM_OPS, SYNC) == Counter({SyncSource(
        "cudaStreamSynchronize", "aten::item > aten::_local_scalar_dense",
        "fixtures/recipes.py(80): train_step" + STARTS, "torch/amp/grad_scaler.py(371): unscale_"): 1})


def test_user_code_called_back_by_a_library_has_no_library_line():
    """A module's forward (user code) called by torch's _call_impl: the innermost user frame is the culprit,
    and the library frame above it is not where the sync happens."""
    stack = nested([
        "tests/test_train.py(12): test_train",
        "fixtures/recipes.py(80): train_step",
        f"{SITE}/torch/nn/modules/module.py(1750): _call_impl",
        "fixtures/metrics.py(20): forward",
        "<built-in method item of Tensor object at 0x7f00>",
    ])
    assert sources_of(*stack, *ITEM_OPS, SYNC) == Counter({SyncSource(
        "cudaStreamSynchronize", "aten::item > aten::_local_scalar_dense", "fixtures/metrics.py(20): forward" + STARTS, ""): 1})


LIBRARY_LOOP = "(none: the sync is in a library's own loop)"


def test_a_stack_of_library_frames_only_names_the_innermost_library_line():
    stack = nested([f"{STDLIB}/threading.py(1002): _bootstrap", f"{SITE}/torch/utils/data/_utils/pin_memory.py(50): _pin_loop"])
    assert sources_of(*stack, SYNC) == Counter({SyncSource(
        "cudaStreamSynchronize", "", LIBRARY_LOOP, "torch/utils/data/_utils/pin_memory.py(50): _pin_loop"): 1})


@pytest.mark.parametrize("harness", ["torch_perf_suite/frameworks.py(77): _target",  # as the profiler names it
                                     f"{files._HARNESS_DIR}/frameworks.py(77): _target"])
def test_the_harness_thread_that_runs_a_frameworks_loop_is_not_the_user_line(harness):
    """Hugging Face's Trainer runs on the harness's thread: its own sync is named at its library line, not at the
    harness's frame that started the loop; a user's callback inside it is still the user line."""
    stack = [f"{STDLIB}/threading.py(1012): run", harness, f"{SITE}/transformers/trainer.py(1882): _run_epoch"]
    assert sources_of(*nested(stack), *ITEM_OPS, SYNC) == Counter({SyncSource(
        "cudaStreamSynchronize", "aten::item > aten::_local_scalar_dense", LIBRARY_LOOP,
        "transformers/trainer.py(1882): _run_epoch"): 1})
    callback = [*stack, "tests/test_speed.py(12): on_step_end"]
    [source] = sources_of(*nested(callback), *ITEM_OPS, SYNC)
    assert (source.user_line, source.library_line) == ("tests/test_speed.py(12): on_step_end" + STARTS, "")


@pytest.mark.parametrize("ops, library, kind", [
    ("aten::is_nonzero > aten::item > aten::_local_scalar_dense", "transformers/trainer.py(1882): _run_epoch",
     "Hugging Face loss check"),
    ("aten::item > aten::_local_scalar_dense", "transformers/trainer.py(2156): _maybe_log_save_evaluate",
     "Hugging Face logging"),  # logging_steps=1: the logged loss read each step (the profiler's name of the line)
    ("aten::_local_scalar_dense", "transformers/trainer.py:2294 in _maybe_log_save_evaluate", "Hugging Face logging"),
    ("aten::item > aten::_local_scalar_dense", "transformers/trainer.py(2000): _inner_training_loop",
     "tensor read on the host"),  # elsewhere in the Trainer's loop: no setting known
    ("aten::_local_scalar_dense", "lightning/fabric/utilities/apply_func.py:134 in to_item",
     "Lightning logged value read"),  # the progress bar's or the logger's read of a self.log value
    ("aten::to > aten::_to_copy > aten::copy_", "accelerate/utils/operations.py(136): send_to_device",
     "Accelerate blocking batch copy"),
    ("aten::to > aten::_to_copy > aten::copy_", "lightning/pytorch/core/module.py:662 in __to_tensor", "blocking copy"),
])
def test_the_frameworks_own_syncs_get_their_own_fix(ops, library, kind):
    assert SyncSource("cudaStreamSynchronize", ops, LIBRARY_LOOP, library).advice.kind == kind


def test_a_fix_shared_by_several_sources_is_said_once():
    """Anomaly mode's checks, or two logged values: each source named at its line, the fix once, then "as above"."""
    counted = SyncCount(steps=1, sources=Counter({
        SyncSource("host read", "aten::_local_scalar_dense", "", f"transformers/trainer.py:{line} in _maybe_log_save_evaluate"): 1
        for line in (2294, 2301)}))
    text = counted.describe()
    assert text.count("TrainingArguments(logging_steps=...)") == 1
    assert text.count("fix:       as above (Hugging Face logging)") == 1


def test_no_python_stack_says_so():
    assert sources_of(*ITEM_OPS, SYNC) == Counter({SyncSource(
        "cudaStreamSynchronize", "aten::item > aten::_local_scalar_dense", NO_STACK, ""): 1})


def test_a_recorded_trace_without_site_markers_still_blames_the_user_line():
    """The profiler names frames relative to their sys.path entry ('torch/amp/grad_scaler.py(371): ...'): without
    the debug-mode marker, the stack fallback must still see torch's frames as library ones, not as user code."""
    trace = load_trace(TRACES / "grad_scaler.json.gz")
    trace["traceEvents"] = [e for e in trace["traceEvents"] if not str(e.get("name", "")).startswith(SITE_PREFIX)]
    [source] = count_syncs(trace).sources
    assert source.user_line.startswith("record_traces.py(") and source.library_line.startswith("torch/amp/grad_scaler.py(")


# --- ops around a sync: an op that starts or ends with it still contains it ----------------------------


@pytest.mark.parametrize("ts, dur", [(50, 5), (140, 10)])  # the op is [50, 150]
def test_an_op_sharing_an_edge_with_the_sync_encloses_it(ts, dur):
    op = ev("aten::item", "cpu_op", 50, 100)
    assert sources_of(op, ev("cudaStreamSynchronize", "cuda_runtime", ts, dur)) == Counter(
        {SyncSource("cudaStreamSynchronize", "aten::item", NO_STACK, ""): 1})


# --- site markers ----------------------------------------------------------------------------------------


def marked(site):
    return sources_of(*ITEM_OPS, SYNC, ev(site, "user_annotation", 120))


def test_a_site_marker_names_the_lines_even_with_an_equals_sign_in_a_path():
    [source] = marked(f"{SITE_PREFIX}user=outputs/lr=0.1/train.py:3 in step|lib=torchmetrics/aggregation.py:93 in update")
    assert source.user_line == "outputs/lr=0.1/train.py:3 in step"
    assert source.library_line == "torchmetrics/aggregation.py:93 in update"


def test_a_site_marker_without_a_user_line_leaves_it_empty():
    assert marked(f"{SITE_PREFIX}lib=torchmetrics/aggregation.py:93 in update") == Counter({SyncSource(
        "cudaStreamSynchronize", "aten::item > aten::_local_scalar_dense", "", "torchmetrics/aggregation.py:93 in update"): 1})


# --- pageable copies: a sync of their own unless a blocking call in the same (innermost) op already was ---


def copy_events(launch_ts, correlation, tid=1):
    return [ev("cudaMemcpyAsync", "cuda_runtime", launch_ts, 4, tid, correlation=correlation),
            ev("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", launch_ts + 20, 2, 7, correlation=correlation)]


PAGEABLE = "Memcpy HtoD (Pageable -> Device)"


def test_a_pageable_copy_launched_outside_any_op_is_a_sync():
    assert sources_of(*copy_events(300, 77)) == Counter({SyncSource(PAGEABLE, "", NO_STACK, ""): 1})


def test_only_a_blocking_call_inside_the_innermost_op_covers_a_pageable_copy():
    """aten::to > aten::_to_copy > aten::copy_: the synchronize after copy_ ended, in _to_copy, is a sync
    of its own; the pageable copy in copy_ did not block there, so it is one too."""
    ops = [ev("aten::to", "cpu_op", 300, 100), ev("aten::_to_copy", "cpu_op", 301, 98), ev("aten::copy_", "cpu_op", 302, 48)]
    sync = ev("cudaStreamSynchronize", "cuda_runtime", 360, 5)
    assert sources_of(*ops, *copy_events(310, 78), sync) == Counter({
        SyncSource("cudaStreamSynchronize", "aten::to > aten::_to_copy", NO_STACK, ""): 1,
        SyncSource(PAGEABLE, "aten::to > aten::_to_copy > aten::copy_", NO_STACK, ""): 1})


@pytest.mark.parametrize("sync_ts", [500, 600])  # at the op's first or last microsecond
def test_a_blocking_call_at_the_edge_of_the_op_covers_its_pageable_copy(sync_ts):
    op = ev("aten::copy_", "cpu_op", 500, 100)
    sync = ev("cudaStreamSynchronize", "cuda_runtime", sync_ts, 0)
    expected = SyncSource("cudaStreamSynchronize", "aten::copy_", NO_STACK, "")
    assert sources_of(op, *copy_events(520, 79), sync) == Counter({expected: 1})


# --- describing sources -------------------------------------------------------------------------------------


def test_a_source_outside_any_op_and_without_lines():
    assert SyncSource("cudaStreamSynchronize", "", "", "").describe() == (
        f"cudaStreamSynchronize\n    user code: (not seen)\n    fix:       {syncs.UNKNOWN_FIX}")


def test_a_source_with_every_line():
    s = SyncSource("cudaStreamSynchronize", "aten::item", "fixtures/recipes.py:88 in train_step", "torch/x.py:1 in f")
    assert s.describe() == ("cudaStreamSynchronize in aten::item\n    user code: fixtures/recipes.py:88 in train_step\n"
                            f"    library:   torch/x.py:1 in f\n    fix:       {syncs.UNKNOWN_FIX}")


def test_a_count_of_no_steps_is_zero_per_step():
    assert SyncCount(steps=0).per_step == 0.0


# --- classifying files and shortening them --------------------------------------------------------------------


@pytest.mark.parametrize("filename, library", [
    (f"{SITE}/torch/nn/modules/module.py", True),
    ("/usr/lib/python3/dist-packages/numpy/core/numeric.py", True),
    ("C:\\Python311\\Lib\\site-packages\\torch\\_tensor.py", True),
    ("<frozen importlib._bootstrap>", True),
    (f"{STDLIB}/contextlib.py", True),
    (os.path.join(files._HARNESS_DIR, "fixture", "perf.py"), True),  # the harness's own frames are not the user's
    ("/work/project/fixtures/recipes.py", False),
    ("fixtures/recipes.py", False),
    ("threading.py", True),  # the standard library's, as the profiler names a frame of a thread's start
    ("train.py", False),  # a script of the project's own, named the same way
])
def test_is_library(filename, library):
    assert files._is_library(filename) is library


def test_a_path_through_a_symlink_into_the_standard_library_is_library(tmp_path):
    (tmp_path / "lib").symlink_to(STDLIB)
    assert files._is_library(str(tmp_path / "lib" / "contextlib.py"))


@pytest.mark.parametrize("where, short", [
    (f"{SITE}/torch/amp/grad_scaler.py:400 in _unscale", "torch/amp/grad_scaler.py:400 in _unscale"),
    ("/usr/lib/python3/dist-packages/numpy/x.py:3 in f", "numpy/x.py:3 in f"),
    ("/venv/lib/site-packages/pkg/_vendor/site-packages/inner.py:1 in g", "pkg/_vendor/site-packages/inner.py:1 in g"),
    ("/elsewhere/train.py:3 in step", "/elsewhere/train.py:3 in step"),
])
def test_short(where, short):
    assert files._short(where) == short


def test_short_makes_project_paths_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert files._short(f"{os.getcwd()}/fixtures/recipes.py:88 in train_step") == "fixtures/recipes.py:88 in train_step"


# --- site markers from a live stack -------------------------------------------------------------------------------


def frame(filename, lineno, name):
    return traceback.FrameSummary(filename, lineno, name)


def test_site_of_names_the_innermost_user_frame_and_the_library_frame_below_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stack = [
        frame(f"{STDLIB}/runpy.py", 86, "_run_code"),
        frame(f"{tmp_path}/tests/test_train.py", 12, "test_train"),
        frame(f"{tmp_path}/fixtures/recipes.py", 80, "train_step"),
        frame(f"{SITE}/torch/amp/grad_scaler.py", 371, "unscale_"),
        frame(f"{SITE}/torch/_tensor.py", 40, "item"),
        frame(f"{STDLIB}/warnings.py", 97, "_showwarnmsg"),
        frame(os.path.join(files._HARNESS_DIR, "syncs", "recording.py"), 300, "mark"),
    ]
    assert syncs.recording._site_of(stack) == (f"{SITE_PREFIX}user=fixtures/recipes.py:80 in train_step"
                                               "|lib=torch/_tensor.py:40 in item")


def test_site_of_without_a_library_frame_below_has_no_lib_part():
    stack = [frame("/work/p/train.py", 3, "main"), frame("/work/p/train.py", 9, "step"), frame(f"{STDLIB}/warnings.py", 97, "w")]
    assert syncs.recording._site_of(stack) == f"{SITE_PREFIX}user=/work/p/train.py:9 in step"


def test_site_of_a_stack_without_user_code_is_empty():
    stack = [frame(f"{SITE}/torch/_tensor.py", 40, "item"), frame(os.path.join(files._HARNESS_DIR, "x.py"), 1, "f")]
    assert syncs.recording._site_of(stack) == ""


@pytest.fixture
def debug_mode(monkeypatch):
    """torch.cuda's sync debug mode without a GPU: the modes set, in order; 'default' before."""
    import torch

    modes = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: "default")
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)
    return modes


def test_sync_sites_without_cuda_leaves_the_debug_mode_alone_and_still_marks(monkeypatch, marks):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", lambda mode: pytest.fail(f"set to {mode} without CUDA"))
    with syncs.sync_sites():
        warnings.warn("called a synchronizing CUDA operation")
    assert len(marks) == 1


@pytest.fixture
def marks(monkeypatch):
    """The names of the profiler ranges opened, in order (torch.profiler.record_function recorded, not run)."""
    import torch

    opened = []

    class Record:
        def __init__(self, name):
            opened.append(name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(torch.profiler, "record_function", Record)
    return opened


def test_sync_sites_marks_each_warned_sync_and_passes_other_warnings_through(debug_mode, marks, monkeypatch):
    shown = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *args, **kwargs: shown.append(str(message)))
    with syncs.sync_sites():
        assert debug_mode == ["warn"]
        warnings.warn("called a synchronizing CUDA operation")  # sync:marker
        warnings.warn("something else")
        warnings.warn("something else")  # shown again: "always"
        warnings.warn("Synchronization debug mode is a prototype feature and does not yet detect all ...")  # known
    assert debug_mode == ["warn", "default"]
    line = next(n for n, text in enumerate(Path(__file__).read_text().splitlines(), 1) if text.endswith("# sync:marker"))
    function = "test_sync_sites_marks_each_warned_sync_and_passes_other_warnings_through"
    assert marks == [f"{SITE_PREFIX}user=tests/syncs/{Path(__file__).name}:{line} in {function}"]
    assert shown == ["something else", "something else"]


def test_sync_sites_restores_the_debug_mode_after_an_error(debug_mode):
    with pytest.raises(RuntimeError, match="step failed"):
        with syncs.sync_sites():
            raise RuntimeError("step failed")
    assert debug_mode == ["warn", "default"]


def test_profile_steps_marks_the_steps_and_counts_them(debug_mode, monkeypatch, tmp_path):
    """On the CPU (torch's profiler still runs): 3 marked steps, each with its warned sync's site marker."""
    import torch

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    calls = []

    def step():
        calls.append(1)
        warnings.warn("called a synchronizing CUDA operation")

    counted = syncs.profile_steps(step, 3, tmp_path / "trace.json")
    assert len(calls) == 3 and counted.steps == 3 and counted.total == 0  # no CUDA call was made
    names = [e["name"] for e in load_trace(tmp_path / "trace.json")["traceEvents"] if e.get("cat") == "user_annotation"]
    assert [n for n in names if n.startswith("perf_step_")] == ["perf_step_0", "perf_step_1", "perf_step_2"]
    assert sum(n.startswith(SITE_PREFIX) and " in step" in n for n in names) == 3
    stack = [e["name"] for e in load_trace(tmp_path / "trace.json")["traceEvents"] if e.get("cat") == "python_function"]
    assert any(name.endswith(": step") for name in stack)  # recorded with the Python stack


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


# --- more of count_syncs: kernel time, edges, odd events -----------------------------------------------------------


def counted(*events, steps=1):
    trace = {"traceEvents": [ev(f"perf_step_{i}", "user_annotation", 1000 * i, 999) for i in range(steps)] + list(events)}
    return count_syncs(trace)


def test_gpu_busy_time_is_the_union_of_kernel_intervals_per_step():
    """Kernels (us) [0, 10] and [5, 15] overlap: 15; [20, 30]; [30, 35] touches it: 5; [22, 28] lies inside: 0.
    30 us over 2 steps: 15 us a step. Other GPU events (a memcpy) are not kernels."""
    kernels = [ev("k", "kernel", 0, 10, 7), ev("k", "kernel", 5, 10, 7), ev("k", "kernel", 20, 10, 8),
               ev("k", "kernel", 30, 5, 7), ev("k", "kernel", 22, 6, 7),
               ev("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", 40, 50, 7)]
    assert counted(*kernels, steps=2).gpu_busy_s == 1.5e-05
    assert counted(steps=2).gpu_busy_s == 0.0


def test_ops_that_start_together_are_listed_outermost_first():
    inner, outer = ev("aten::_local_scalar_dense", "cpu_op", 50, 60), ev("aten::item", "cpu_op", 50, 100)
    assert counted(inner, outer, SYNC).sources == Counter(
        {SyncSource("cudaStreamSynchronize", "aten::item > aten::_local_scalar_dense", NO_STACK, ""): 1})


@pytest.mark.parametrize("ts", [1000, 1999])  # the second step's first and last microsecond
def test_a_sync_at_the_edge_of_a_step_is_in_it(ts):
    assert counted(ev("cudaStreamSynchronize", "cuda_runtime", ts), steps=2).total == 1


def test_a_sync_between_steps_is_not_counted():
    assert counted(ev("cudaStreamSynchronize", "cuda_runtime", 999.5), steps=2).total == 0


def test_a_pageable_copy_without_its_launch_does_not_hide_the_next_one():
    lost = ev(PAGEABLE, "gpu_memcpy", 10, 2, 7, correlation=999)  # its launch is not in the trace
    assert counted(lost, *copy_events(300, 77)).sources == Counter({SyncSource(PAGEABLE, "", NO_STACK, ""): 1})


def test_a_periodic_phase_counts_its_runs_and_its_syncs():
    phases = [ev("perf_periodic:metrics", "user_annotation", 90, 30), ev("perf_periodic:metrics", "user_annotation", 1090, 30)]
    syncs_ = [ev("cudaStreamSynchronize", "cuda_runtime", 100, 1), ev("cudaStreamSynchronize", "cuda_runtime", 1100, 1)]
    c = counted(*phases, *syncs_, steps=2)
    assert c.total == 0 and c.periodic_runs == {"perf_periodic:metrics": 2}
    assert c.periodic == {("perf_periodic:metrics", SyncSource("cudaStreamSynchronize", "", NO_STACK, "")): 2}


def test_events_without_a_duration_are_instants():
    op = ev("aten::item", "cpu_op", 50, 100)
    sync = {k: v for k, v in ev("cudaStreamSynchronize", "cuda_runtime", 150).items() if k != "dur"}  # at the op's end
    assert counted(op, sync).sources == Counter({SyncSource("cudaStreamSynchronize", "aten::item", NO_STACK, ""): 1})


def test_an_event_with_an_unusable_process_id_is_skipped():
    odd = {**SYNC, "pid": [1]}
    assert counted(SYNC, odd).total == 1


@pytest.mark.parametrize("name", ["cudaStreamSynchronize_ptsz", "cuCtxSynchronize_v2", "cuStreamSynchronize_v2_ptsz",
                                  "cudaMemcpy_ptsz"])
def test_per_thread_and_versioned_variants_are_the_same_blocking_call(name):
    assert counted(ev(name, "cuda_driver", 100, 5)).total == 1


def test_a_sync_without_a_marker_is_not_matched_to_other_annotations():
    """The second step's range (an annotation after the sync) is no site marker."""
    assert counted(*ITEM_OPS, SYNC, steps=2).sources == Counter({SyncSource(
        "cudaStreamSynchronize", "aten::item > aten::_local_scalar_dense", NO_STACK, ""): 1})


def test_count_syncs_names_its_source_as_trace_by_default():
    with pytest.raises(syncs.TraceError, match="^trace: no 'traceEvents' list"):
        count_syncs({})


def test_describe_indents_every_line_of_a_source():
    in_step = SyncSource("cudaStreamSynchronize", "aten::item", "a.py:1 in f", "torch/x.py:2 in g")
    in_phase = SyncSource("cudaStreamSynchronize", "", "b.py:3 in h", "tm/y.py:4 in k")
    c = SyncCount(steps=2, sources=Counter({in_step: 1}), periodic=Counter({("perf_periodic:m", in_phase): 2}),
                  periodic_runs=Counter({"perf_periodic:m": 1}))
    assert c.describe() == (
        "  0.50/step  cudaStreamSynchronize in aten::item\n"
        "               user code: a.py:1 in f\n"
        "               library:   torch/x.py:2 in g\n"
        f"               fix:       {syncs.UNKNOWN_FIX}\n"
        "plus 2 sync(s) in perf_periodic:m, which ran 1x in 2 steps:\n"
        "  2x  cudaStreamSynchronize\n"
        "          user code: b.py:3 in h\n"
        "          library:   tm/y.py:4 in k\n"
        f"          fix:       {syncs.UNKNOWN_FIX}")


# --- more of _site_of ------------------------------------------------------------------------------------------------


def test_site_of_with_one_library_frame_right_below_the_user_frame():
    stack = [frame("/work/p/train.py", 9, "step"), frame("/usr/lib/python3/dist-packages/torch/_tensor.py", 40, "item")]
    assert syncs.recording._site_of(stack) == f"{SITE_PREFIX}user=/work/p/train.py:9 in step|lib=torch/_tensor.py:40 in item"


def test_site_of_names_the_innermost_of_several_library_frames():
    stack = [frame("/work/p/train.py", 9, "step"), frame(f"{SITE}/tm/a.py", 1, "update"), frame(f"{SITE}/tm/b.py", 2, "_check"),
             frame(f"{SITE}/tm/c.py", 3, "_cast")]
    assert syncs.recording._site_of(stack) == f"{SITE_PREFIX}user=/work/p/train.py:9 in step|lib=tm/c.py:3 in _cast"


# --- more of the command line and profile_steps -----------------------------------------------------------------------


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


def test_profile_steps_of_no_steps_names_the_trace(debug_mode, monkeypatch, tmp_path):
    import torch

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    with pytest.raises(syncs.TraceError, match=f"^{tmp_path / 'empty.json'}: no 'perf_step_<i>' ranges"):
        syncs.profile_steps(lambda: None, 0, tmp_path / "empty.json")


def test_profile_steps_keeps_the_profilers_one_cycle_warning_quiet(debug_mode, monkeypatch, tmp_path):
    """torch warns that its profiler 'clears events at the end of each cycle': a window has one cycle,
    so the warning says nothing to the user and is not shown; other warnings are."""
    import torch

    class Profile:
        def __init__(self, **kwargs):
            pass

        def start(self):
            warnings.warn("Warning: Profiler clears events at the end of each cycle. Only events from ...", UserWarning)
            warnings.warn("another profiler warning", UserWarning)

        def stop(self):
            pass

        def export_chrome_trace(self, path):
            Path(path).write_text("{}")

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.profiler, "profile", Profile)
    monkeypatch.setattr(syncs.recording, "load_trace", lambda path: {})
    monkeypatch.setattr(syncs.recording, "count_syncs", lambda trace, source: "counted")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert syncs.profile_steps(lambda: None, 2, tmp_path / "t.json") == "counted"
    assert [str(w.message) for w in seen] == ["another profiler warning"]


# --- fix advice ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source, kind", [
    (SyncSource("cudaStreamSynchronize", "aten::index > aten::nonzero", "a.py:1 in loss", ""), "boolean mask"),
    (SyncSource("cudaStreamSynchronize", "aten::is_nonzero > aten::item > aten::_local_scalar_dense", "a.py:1 in f", ""),
     "tensor read on the host"),
    (SyncSource(PAGEABLE, "", NO_STACK, ""), "pageable copy"),
    (SyncSource("cudaStreamSynchronize", "aten::_to_copy > aten::copy_", "a.py:1 in f", ""), "blocking copy"),
    (SyncSource("cudaStreamSynchronize", "aten::item > aten::_local_scalar_dense", "a.py:1 in f",
                "torchmetrics/aggregation.py:93 in _cast_and_nan_check_input"), "torchmetrics input check"),
])
def test_known_sources_get_their_advice(source, kind):
    assert source.advice.kind == kind


@pytest.mark.parametrize("source", [
    SyncSource("cudaDeviceSynchronize", "", "a.py:1 in f", ""),  # torch.cuda.synchronize() by hand
    SyncSource("cudaStreamSynchronize", "aten::nonzerox", "a.py:1 in f", ""),  # op names match whole
    SyncSource("cudaStreamSynchronize", "aten::item", "a.py:1 in f", "mylib/torch/amp/grad_scaler.py:1 in f"),
])
def test_an_unknown_source_says_no_fix_is_known(source):
    assert source.advice is None
    assert source.describe().endswith(f"    fix:       {syncs.UNKNOWN_FIX}")


def test_advice_without_criteria_matches_nothing():
    assert not syncs.Advice("x", "y", "z").matches(SyncSource("cudaStreamSynchronize", "", "", ""))


# --- a sync in the backward pass, traced back to its forward op ----------------------------------------------------------


def flow(ph, flow_id, ts, tid):
    return {"ph": ph, "id": flow_id, "pid": 1, "tid": tid, "ts": ts, "cat": "fwdbwd", "name": "fwdbwd",
            **({"bp": "e"} if ph == "f" else {})}


def test_a_backward_sync_is_attributed_to_the_forward_line_through_the_flow_events():
    forward = [*nested(["/work/p/train.py(40): step", "/work/p/losses.py(7): masked_loss"], start=10),
               ev("aten::index", "cpu_op", 20, 30)]
    backward = [ev("IndexBackward0", "cpu_op", 200, 100, tid=2), ev("aten::nonzero", "cpu_op", 210, 50, tid=2),
                ev("cudaStreamSynchronize", "cuda_runtime", 220, 5, tid=2)]
    assert sources_of(*forward, *backward, flow("s", 5, 20, 1), flow("f", 5, 200, 2)) == Counter({SyncSource(
        "cudaStreamSynchronize", "IndexBackward0 > aten::nonzero",
        "/work/p/losses.py(7): masked_loss (line where the function starts, in the forward op aten::index that "
        "IndexBackward0 differentiates)", ""): 1})
    unlinked = sources_of(*forward, *backward, flow("s", 5, 20, 1), flow("f", 6, 200, 2))  # no start with that id
    assert [s.user_line for s in unlinked] == [NO_STACK]


def test_a_backward_sync_in_a_real_trace_names_the_forward_function(tmp_path):
    """A CPU profile of a boolean-mask loss, its backward ops moved to a thread of their own (as on a GPU, where
    autograd runs them on the device's thread without a Python stack) and a sync put inside the backward nonzero."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.randn(64, 8, requires_grad=True)

    def masked_loss(y):
        return y[y > 0].sum()

    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        with record_function("perf_step_0"):
            masked_loss(x * 2).backward()
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    events = load_trace(tmp_path / "trace.json")["traceEvents"]
    [graph] = [e for e in events if e.get("name") == "autograd::engine::evaluate_function: IndexBackward0"]
    inside = [e for e in events if e.get("ph") in ("X", "f") and e.get("cat") in ("cpu_op", "fwdbwd", "python_function")
              and graph["ts"] <= e["ts"] <= graph["ts"] + graph["dur"]]
    for e in inside:
        e["tid"] = 999
    events[:] = [e for e in events if not (e.get("tid") == 999 and e.get("cat") == "python_function")]
    [nonzero] = [e for e in inside if e["name"] == "aten::nonzero"]
    # the ops nonzero calls (aten::empty, ...) out: a sync put 1 µs in must land in nonzero itself, not in a callee
    # that the profiler happened to start in that microsecond
    callees = [id(e) for e in inside if e is not nonzero and e.get("cat") == "cpu_op"
               and nonzero["ts"] <= e["ts"] <= nonzero["ts"] + nonzero["dur"]]
    events[:] = [e for e in events if id(e) not in callees]
    events.append({**nonzero, "name": "cudaStreamSynchronize", "cat": "cuda_runtime", "ts": nonzero["ts"] + 1, "dur": 1})
    [source] = count_syncs({"traceEvents": events}).sources
    assert "IndexBackward0" in source.ops and source.ops.endswith("aten::nonzero")
    line = masked_loss.__code__.co_firstlineno
    assert f"test_syncs_sources.py({line}): masked_loss (line where the function starts, in the forward op " in source.user_line
    assert source.advice.kind == "boolean mask"


def test_an_explicit_synchronize_is_marked_with_its_line_and_put_back_after(debug_mode, marks, monkeypatch):
    """torch.cuda.synchronize(), Event.synchronize() and Stream.synchronize(): the debug mode warns for none of them."""
    import torch

    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda.Event, "synchronize", lambda self: None)
    originals = torch.cuda.synchronize, torch.cuda.Event.synchronize, torch.cuda.Stream.synchronize
    with syncs.sync_sites():
        torch.cuda.synchronize()  # sync:explicit
        torch.cuda.Event.synchronize(object())  # sync:event
    assert (torch.cuda.synchronize, torch.cuda.Event.synchronize, torch.cuda.Stream.synchronize) == originals
    lines = [n for n, text in enumerate(Path(__file__).read_text().splitlines(), 1) if text.endswith(("# sync:explicit",
                                                                                                      "# sync:event"))]
    function = "test_an_explicit_synchronize_is_marked_with_its_line_and_put_back_after"
    assert [m.split("|lib=")[0] for m in marks] == [f"{SITE_PREFIX}user=tests/syncs/{Path(__file__).name}:{n} in {function}"
                                                    for n in lines]
    source = syncs.SyncSource("cudaDeviceSynchronize", "", "fixtures/recipes.py:238 in train_step",
                              "torch/cuda/__init__.py:1271 in synchronize")
    assert source.advice.kind == "explicit synchronize" and "torch.cuda.Event(enable_timing=True)" in source.advice.fix
