"""The site markers (recording.py): where a sync comes from, read off a live stack; `sync_sites` marking each sync the
CUDA debug mode warns of, and each explicit synchronize; `profile_steps` marking the steps and counting them."""

import os
import traceback
import warnings
from pathlib import Path

import pytest

from tests.syncs.hand_made import SITE, STDLIB
from torch_perf_suite import syncs
from torch_perf_suite.counts import files
from torch_perf_suite.syncs import SITE_PREFIX, load_trace

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


# --- more of _site_of ------------------------------------------------------------------------------------------------


def test_site_of_with_one_library_frame_right_below_the_user_frame():
    stack = [frame("/work/p/train.py", 9, "step"), frame("/usr/lib/python3/dist-packages/torch/_tensor.py", 40, "item")]
    assert syncs.recording._site_of(stack) == f"{SITE_PREFIX}user=/work/p/train.py:9 in step|lib=torch/_tensor.py:40 in item"


def test_site_of_names_the_innermost_of_several_library_frames():
    stack = [frame("/work/p/train.py", 9, "step"), frame(f"{SITE}/tm/a.py", 1, "update"), frame(f"{SITE}/tm/b.py", 2, "_check"),
             frame(f"{SITE}/tm/c.py", 3, "_cast")]
    assert syncs.recording._site_of(stack) == f"{SITE_PREFIX}user=/work/p/train.py:9 in step|lib=tm/c.py:3 in _cast"


# --- more of profile_steps ---------------------------------------------------------------------------------------------


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


# --- an explicit synchronize --------------------------------------------------------------------------------------------


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
