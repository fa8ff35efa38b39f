"""Where a sync comes from (trace.py), on small hand-made traces: the ops around it, the user line and the library
line, the site markers, the pageable-copy rule at its edges, a backward sync traced back to its forward op, and
count_syncs on kernel time, edges and odd events.
"""

from collections import Counter
from pathlib import Path

import pytest

from tests.syncs.hand_made import NO_STACK, PAGEABLE, SITE, STDLIB, SYNC, ev
from torch_perf_suite import syncs
from torch_perf_suite.counts import files
from torch_perf_suite.syncs import SITE_PREFIX, SyncCount, SyncSource, count_syncs, load_trace

TRACES = Path(__file__).parents[1] / "traces"
STARTS = " (line where the function starts)"


def nested(names, cat="python_function", start=1, tid=1):
    """Events nested one inside the other, outermost first."""
    return [ev(n, cat, start + i, 900 - 2 * i, tid) for i, n in enumerate(names)]


def sources_of(*events, steps=1):
    trace = {"traceEvents": [ev(f"perf_step_{i}", "user_annotation", 1000 * i, 999) for i in range(steps)] + list(events)}
    return count_syncs(trace).sources


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
