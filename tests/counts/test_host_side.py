"""The step's host side, counted (host_side.py): Python lines a step by function, blocks a step by line, and the
verdict that compares them with a record."""

import sys
import threading
import time

import pytest

from torch_perf_suite.counts import host_side
from torch_perf_suite.findings import failures
from torch_perf_suite.workload import Members

HERE = host_side.short_path(__file__)  # as pytest's sys.path names this file: "test_host_side.py" or "tests/..."


def light():
    return sum(range(3))


def with_loop():
    for _ in range(40):
        pass
    return light()


def napping():
    time.sleep(0.001)
    return light()


def test_lines_are_counted_by_function_and_are_the_same_each_time():
    first, second = host_side.count(light, 4), host_side.count(light, 4)
    assert first.lines == second.lines == {f"{HERE}:light": 1.0}
    assert first.blocks_per_step == 0 and first.steps == 4


def test_a_loop_a_step_shows_as_lines_of_its_function():
    counted = host_side.count(with_loop, 3)
    assert counted.lines[f"{HERE}:with_loop"] >= 40  # a line event each turn at least (two on Python 3.11)
    assert counted.lines_per_step == counted.lines[f"{HERE}:with_loop"] + 1  # and light's one


def test_a_sleep_a_step_is_a_block_at_its_line():
    counted = host_side.count(napping, 5)
    line = napping.__code__.co_firstlineno + 1
    assert counted.blocks == {f"{HERE}:{line} in napping": 1.0}


def test_the_settle_before_each_counted_step_is_outside_the_counts():
    """The device's synchronize before each step (the GPU's queue emptied): its own waits and lines are not the step's."""
    settled = []

    def settle():
        settled.append(1)
        time.sleep(0.001)

    counted = host_side.count(light, 4, settle=settle)
    assert len(settled) == 8 and counted.lines == {f"{HERE}:light": 1.0} and counted.blocks_per_step == 0
    line = napping.__code__.co_firstlineno + 1
    assert host_side.count(napping, 4, settle=settle).blocks == {f"{HERE}:{line} in napping": 1.0}


def test_a_block_that_comes_back_in_one_pass_only_is_not_the_codes():
    """Another thread taking the interpreter's lock at one moment blocks the step's thread once; the code's own blocks
    come back in every pass. Here the step sleeps in its first counted pass only (calls 2-4 of 1 + 3 + 3)."""
    calls = []

    def sometimes():
        calls.append(1)
        if 2 <= len(calls) <= 4:
            time.sleep(0.001)
        return light()

    counted = host_side.count(sometimes, 3)
    assert len(calls) == 7 and counted.blocks == {}
    assert counted.lines == host_side.count(light, 3).lines | {f"{HERE}:sometimes": counted.lines[f"{HERE}:sometimes"]}


def test_a_block_in_the_first_two_passes_only_is_counted_again_and_is_not_the_codes():
    """Two passes that both blocked at a line (a loaded host's waits can repeat): more passes, up to MOST_PASSES, and a
    block counts only where it came back in each (calls 2-7 of 1 + 3 + 3 + 3 sleep; the third pass does not)."""
    calls = []

    def twice():
        calls.append(1)
        if 2 <= len(calls) <= 7:
            time.sleep(0.001)
        return light()

    counted = host_side.count(twice, 3)
    assert len(calls) == 10 and counted.blocks == {}
    always = host_side.count(napping, 2)  # a block the code makes: in every pass, all five counted
    assert always.blocks_per_step == 1.0


def test_a_wait_on_another_thread_is_a_block():
    def handed_over():
        done = threading.Event()
        threading.Thread(target=lambda: (time.sleep(0.001), done.set())).start()
        done.wait()

    assert host_side.count(handed_over, 3).blocks_per_step >= 1


def test_a_tracer_already_set_is_put_back_and_steps_are_checked():
    def tracer(frame, event, arg):
        return None

    sys.settrace(tracer)
    try:
        host_side.count(light, 1)
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(None)
    with pytest.raises(ValueError, match="steps=0"):
        host_side.count(light, 0)


def test_the_entry_keeps_the_totals_and_the_busiest():
    counted = host_side.HostCount(2, {f"f{i}": float(i) for i in range(60)}, {"a.py:3 in f": 1.0})
    entry = counted.entry()
    assert entry["lines_per_step"] == sum(range(60)) and entry["blocks_per_step"] == 1.0
    assert len(entry["lines"]) == host_side.KEPT and "f59" in entry["lines"] and "f0" not in entry["lines"]
    assert host_side.validate(entry) is None


REF = {"lines_per_step": 1000.0, "blocks_per_step": 1.0,
       "lines": {"torch/nn/modules/module.py:_call_impl": 600.0, "fixtures/recipes.py:train_step": 400.0},
       "blocks": {"torch/_tensor.py:625 in backward": 1.0}}


def now(lines=None, blocks=None):
    lines = {**REF["lines"], **(lines or {})}
    blocks = {**REF["blocks"], **(blocks or {})}
    return {"lines_per_step": sum(lines.values()), "blocks_per_step": sum(blocks.values()), "lines": lines, "blocks": blocks}


def test_the_same_counts_pass_and_fewer_pass():
    assert failures(host_side.failure(now(), REF, "REF main")) is None
    assert failures(host_side.failure(now({"fixtures/recipes.py:train_step": 100.0}), REF, "REF main")) is None


@pytest.mark.parametrize("more, fails", [(10, False), (20, False), (21, True)])
def test_lines_may_grow_by_the_margin_or_the_floor(more, fails):
    """1% of 1,000 is 10 lines; the floor of 20 is the larger."""
    grown = now({"fixtures/recipes.py:train_step": 400.0 + more})
    assert (failures(host_side.failure(grown, REF, "REF main")) is not None) == fails


def test_more_lines_fail_naming_the_functions_that_grew():
    message = failures(host_side.failure(now({"fixtures/recipes.py:train_step": 450.0, "scratch/plant.py:hook": 320.0}), REF,
                                         "REF main"))
    assert message.startswith("the host runs 1,370 Python lines a step to issue it, 1,000 at REF main (+370, +37.0%; "
                              "allowed +1% or +20): per-step Python")
    assert message.splitlines()[1:] == ["    +320.00 scratch/plant.py:hook (0.00 -> 320.00, new)",
                                        "    +50.00 fixtures/recipes.py:train_step (400.00 -> 450.00)"]


def test_what_grew_is_summed_by_its_own_line_most_first_with_a_functions_busiest_lines():
    """A library's block is its own line whichever project line called it: two callers recorded, one now."""
    now = {"train.py:step": 30.0, "train.py:hook": 5.0, "train.py:extra": 1.0,
           "lib.py:5 in wait (from train.py:40 in step)": 2.0}
    recorded = {"train.py:step": 20.0, "train.py:hook": 5.0, "train.py:gone": 0.5,
                "lib.py:5 in wait (from train.py:38 in step)": 0.75, "lib.py:5 in wait (from train.py:39 in step)": 0.5}
    assert host_side.grown(now, recorded, True, {"train.py:step": {41: 12.0, 42: 9.5}}) == [
        "    +10.00 train.py:step (20.00 -> 30.00), its busiest lines now: train.py:41 (12.00), train.py:42 (9.50)",
        "    +1.00 train.py:extra (0.00 -> 1.00, new)",
        "    +0.75 lib.py:5 in wait (from train.py:40 in step) (1.25 -> 2.00)"]
    mine = {"lib.py:5 in wait (from a.py:1 in f)": 1.0, "lib.py:5 in wait (from a.py:2 in g)": 1.0}
    assert host_side.grown(mine, {"lib.py:5 in wait (from a.py:3 in h)": 1.5}, False) == [
        "    +0.50 lib.py:5 in wait (from a.py:2 in g) (1.50 -> 2.00)"]


def test_a_function_beyond_the_kept_ones_is_not_called_new():
    recorded = {**REF, "lines": {f"f{i}": 25.0 for i in range(host_side.KEPT)}}
    message = failures(host_side.failure(now({"g": 100.0}), recorded, "the baseline"))
    assert "+100.00 g (0.00 -> 100.00)" in message and "new" not in message


@pytest.mark.parametrize("blocks, fails", [(1.5, False), (1.51, True), (2.0, True)])
def test_blocks_may_grow_by_half_a_step(blocks, fails):
    grown = now(blocks={"fixtures/recipes.py:300 in train_step": blocks - 1.0})
    message = failures(host_side.failure(grown, REF, "REF main"))
    assert (message is not None) == fails
    if fails:
        assert f"the host blocks {blocks:.2f} times a step while issuing it, 1.00 at REF main" in message
        assert f"+{blocks - 1:.2f} fixtures/recipes.py:300 in train_step (0.00 -> {blocks - 1:.2f}, new)" in message


@pytest.mark.parametrize("entry, problem", [
    ([], "must be an object"),
    ({**REF, "lines_per_step": "many"}, "lines_per_step must be a number"),
    ({**REF, "blocks_per_step": -1}, "blocks_per_step must be a number"),
    ({**REF, "lines": {"f": True}}, "lines must map names to numbers"),
    ({**REF, "blocks": None}, "blocks must map names to numbers"),
])
def test_a_malformed_record_is_named(entry, problem):
    assert problem in host_side.validate(entry)


@pytest.mark.parametrize("changed, problem", [
    ({}, None),
    ({"lines": {"f": 0.0}, "blocks": {}, "at": {"f": {"3": 0.0}}}, None),  # nothing a step: none is below 0
    ({"lines": {"f": -0.5}}, "host counts' lines must map names to numbers of at least 0"),
    ({"lines": {"f": "many"}}, "host counts' lines must map names to numbers of at least 0"),
    ({"at": []}, "host counts' at must map functions to their lines' numbers of at least 0"),
    ({"at": {"f": [3]}}, "host counts' at must map functions to their lines' numbers of at least 0"),
    ({"at": {"f": {"3": -1.0}}}, "host counts' at must map functions to their lines' numbers of at least 0"),
    ({"at": {"f": {"3": True}}}, "host counts' at must map functions to their lines' numbers of at least 0"),
    ({"at": {"f": {"3": "x"}}}, "host counts' at must map functions to their lines' numbers of at least 0"),
])
def test_a_recorded_tables_numbers_and_busiest_lines_are_numbers_of_at_least_0(changed, problem):
    assert host_side.validate({**REF, **changed}) == problem
    assert host_side.validate("counts") == "host counts must be an object, not str"


def test_a_lines_failure_shows_the_busiest_lines_of_what_grew_and_a_percent_of_none_is_infinite():
    grown = {**now({"fixtures/recipes.py:train_step": 450.0}), "at": {"fixtures/recipes.py:train_step": {88: 30.0}}}
    message = failures(host_side.failure(grown, REF, "REF main"))
    assert message.splitlines()[1:] == ["    +50.00 fixtures/recipes.py:train_step (400.00 -> 450.00), its busiest lines "
                                        "now: fixtures/recipes.py:88 (30.00)"]
    empty = {"lines_per_step": 0.0, "blocks_per_step": 0.0, "lines": {}, "blocks": {}}
    message = failures(host_side.failure({**empty, "lines_per_step": 25.0, "lines": {"f": 25.0}}, empty, "REF"))
    assert message.startswith("the host runs 25 Python lines a step to issue it, 0 at REF (+25, +inf%; allowed +1% or "
                              "+20): per-step Python (a hook, a callback, a logging helper, a library's wrapper, a part "
                              "run eagerly); lines a step by function, most grown first:\n    +25.00 f (0.00 -> 25.00, new)")


def test_lines_may_grow_by_the_percent_where_it_is_more_than_the_floor():
    big = {**REF, "lines_per_step": 10_000.0}
    assert failures(host_side.failure({**big, "lines_per_step": 10_100.0}, big, "REF")) is None  # +1% exactly
    assert failures(host_side.failure({**big, "lines_per_step": 10_101.0}, big, "REF")) is not None


def test_a_blocks_failure_lists_each_line_that_grew_on_its_own_line():
    grown = now(blocks={"a.py:3 in f": 1.0, "b.py:4 in g": 0.5})
    message = failures(host_side.failure(grown, REF, "REF main"))
    assert message == ("the host blocks 2.50 times a step while issuing it, 1.00 at REF main (allowed +0.5): a sleep, a "
                       "lock, I/O or a wait on another thread (voluntary context switches), at these lines, most grown "
                       "first:\n    +1.00 a.py:3 in f (0.00 -> 1.00, new)\n    +0.50 b.py:4 in g (0.00 -> 0.50, new)")


def test_a_step_that_cannot_be_counted_says_why():
    assert "a thread of their own" in host_side.why_uncountable(Members(all_threads=True, gpu_step=light), False)
    assert "give it a gpu_step()" in host_side.why_uncountable(Members(), has_loader=True)
    assert host_side.why_uncountable(Members(), has_loader=False) is None
    assert host_side.why_uncountable(Members(gpu_step=light), has_loader=True) is None


def test_paths_are_named_from_their_sys_path_entry():
    assert host_side.short_path(host_side.__file__) == "torch_perf_suite/counts/host_side.py"
    assert host_side.short_path("/nowhere/x.py") == "/nowhere/x.py"


def test_a_block_in_a_library_names_the_project_line_that_called_it():
    def waits():
        threading.Event().wait(0.001)

    [(where, n)] = host_side.count(waits, 2).blocks.items()
    line = waits.__code__.co_firstlineno + 1
    assert where.startswith("threading.py:") and where.endswith(f" in wait (from {HERE}:{line} in waits)") and n == 1.0


def test_the_first_step_finishes_what_came_before_and_is_not_counted():
    calls = []

    def step():
        if not calls:
            time.sleep(0.001)  # an earlier window's leftovers: a loader's workers shutting down
        calls.append(1)

    counted = host_side.count(step, 3)
    assert len(calls) == 7 and counted.blocks_per_step == 0  # 1 uncounted, then two passes of 3


def test_a_library_block_whose_caller_moved_is_the_same_block():
    """An edit above `loss.backward()` moves the project line that called into autograd: not a new block."""
    recorded = {**REF, "blocks": {"torch/autograd/graph.py:869 in _engine_run_backward (from fixtures/recipes.py:328 in "
                                  "train_step)": 1.0}}
    grown = now(blocks={"fixtures/recipes.py:315 in train_step": 1.0})
    grown["blocks"] = {"fixtures/recipes.py:315 in train_step": 1.0, "torch/autograd/graph.py:869 in "
                       "_engine_run_backward (from fixtures/recipes.py:329 in train_step)": 1.0}
    grown["blocks_per_step"] = 2.0
    rows = failures(host_side.failure(grown, recorded, "REF main")).splitlines()[1:]
    assert rows == ["    +1.00 fixtures/recipes.py:315 in train_step (0.00 -> 1.00, new)"]


# --- a smoke run against REF (judging.smoke_counted): the same counts, on any machine -------------------------------


def smoke_judge(tmp_path, recorded: dict | None, strict: bool = False):
    from types import SimpleNamespace

    from torch_perf_suite.against import smoke_counts
    from torch_perf_suite.fixture.judging import Judge
    from torch_perf_suite.settings import Measure

    kept = smoke_counts.SmokeFile(tmp_path / smoke_counts.FILE, {})
    if recorded is not None:
        kept.save({"t.py::test": recorded})
    at_ref = SimpleNamespace(label="HEAD~1 (abc)", status={"t.py::test": "passed"})
    session = SimpleNamespace(ref_state=SimpleNamespace(ref=at_ref),
                              settings=SimpleNamespace(strict=strict, smoke=True), compared_with="REF HEAD~1 (abc)",
                              records=SimpleNamespace(smoke_file=smoke_counts.SmokeFile.load(kept.path)))
    return Judge(session, "t.py::test", Measure(), confirm=None)


def smoke_result(lines: float, blocks: float, reads: dict[str, int] | None = None):
    """A smoke run's result without a GPU: its host side (train_step's lines, a sleep's blocks) and its host reads."""
    from torch_perf_suite.fixture.result import Result
    from torch_perf_suite.syncs import SyncCount, SyncSource
    from torch_perf_suite.throughput.parts import Parts
    from torch_perf_suite.throughput.timing import Throughput

    host = host_side.HostCount(2, {"torch/nn/modules/module.py:_call_impl": 400.0, "fixtures/training.py:train_step": lines},
                               {"fixtures/training.py:131 in train_step": blocks} if blocks else {})
    counted = None if reads is None else SyncCount(steps=2)
    for line, n in (reads or {}).items():
        counted.sources[SyncSource("host read", "aten::_local_scalar_dense", line, "")] += n
    parts = Parts(batch_size=4, pipeline=Throughput(4, (0.1,)))
    return Result("t.py::test", parts, None, None, None, host=host, reads=counted, compared=True)


def smoke_ref(**kwargs) -> dict:
    from torch_perf_suite.against import smoke_counts

    return smoke_counts.entry(smoke_result(**kwargs))


def test_against_ref_a_smoke_run_passes_the_same_counts_and_judges_the_host_side(tmp_path):
    ref = smoke_ref(lines=39.0, blocks=0.0, reads={"fixtures/training.py:140 in train_step": 2})
    r = smoke_result(lines=39.0, blocks=0.0, reads={"fixtures/training.py:140 in train_step": 2})
    from torch_perf_suite.fixture.judging import smoke_counted

    assert smoke_counted(smoke_judge(tmp_path, ref), r) == [] and "host" in r.judged and r.holes() == []


def test_against_ref_a_smoke_run_fails_more_lines_and_a_block_a_step_naming_the_function_and_the_line(tmp_path):
    """The CPU's plants: 300 lines more a step and a 5 ms sleep a step in the step, which a smoke run without REF's
    counts passed."""
    from torch_perf_suite.fixture.judging import smoke_counted

    found = failures(smoke_counted(smoke_judge(tmp_path, smoke_ref(lines=39.0, blocks=0.0)),
                                   smoke_result(lines=643.0, blocks=1.0)))
    assert "the host runs 1,043 Python lines a step to issue it, 439 at REF HEAD~1 (abc) (+604, +137.6%" in found
    assert "    +604.00 fixtures/training.py:train_step (39.00 -> 643.00)" in found
    assert "the host blocks 1.00 times a step while issuing it, 0.00 at REF HEAD~1 (abc) (allowed +0.5)" in found
    assert "    +1.00 fixtures/training.py:131 in train_step (0.00 -> 1.00, new)" in found


def test_against_ref_a_smoke_run_fails_more_host_reads_naming_the_line_not_a_read_moved_by_an_edit(tmp_path):
    from torch_perf_suite.fixture.judging import smoke_counted

    ref = smoke_ref(lines=39.0, blocks=0.0, reads={"fixtures/training.py:140 in train_step": 2})
    moved = smoke_result(lines=39.0, blocks=0.0, reads={"fixtures/training.py:141 in train_step": 2})
    assert smoke_counted(smoke_judge(tmp_path, ref), moved) == []
    more = smoke_result(lines=39.0, blocks=0.0, reads={"fixtures/training.py:140 in train_step": 2,
                                                       "fixtures/training.py:150 in train_step": 2})
    found = failures(smoke_counted(smoke_judge(tmp_path, ref), more))
    assert found.startswith("measured 2.00 host reads per step with no GPU, 1.00 at REF HEAD~1 (abc) (+1.00)")
    assert "    +1.00 aten::_local_scalar_dense at fixtures/training.py:150 in train_step (0.00 -> 1.00, new)" in found


@pytest.mark.parametrize("recorded, hole", [
    (None, "host side and host reads not compared: REF HEAD~1 (abc) recorded no smoke counts for this test (its suite "
           "is older than them)"),
    ({"counts": {}, "reads": None}, "host side not compared: REF HEAD~1 (abc) recorded none for this test"),
])
def test_against_ref_a_count_refs_smoke_run_lacks_is_a_hole_never_a_silent_pass(tmp_path, recorded, hole):
    from torch_perf_suite.fixture.judging import smoke_counted

    r = smoke_result(lines=39.0, blocks=0.0, reads={} if recorded is None else None)
    assert smoke_counted(smoke_judge(tmp_path, recorded), r) == []
    assert r.holes() == [hole] and "host" not in r.judged  # --perf-strict fails the test on it when it ends


def test_a_smoke_counts_file_is_kept_whole_and_a_malformed_one_is_named(tmp_path):
    from torch_perf_suite.against import smoke_counts

    path = tmp_path / smoke_counts.FILE
    smoke_counts.SmokeFile(path, {}).save({"t.py::test": smoke_ref(lines=1.0, blocks=0.0, reads={})})
    assert smoke_counts.SmokeFile.load(path).get("t.py::test")["counts"]["host"]["lines_per_step"] == 401.0
    path.write_text('{"schema": 1, "tests": {"t.py::test": {"counts": {"host": {"lines_per_step": -1}}}}}')
    with pytest.raises(smoke_counts.SmokeCountsError, match="'t.py::test': 'counts' 'host': host counts' lines_per_step"):
        smoke_counts.SmokeFile.load(path)


@pytest.mark.slow
def test_an_unchanged_training_step_counts_no_block_while_other_processes_load_every_core():
    """A/A on a loaded machine (the 2-core CI machine, two busy processes beside it): a step's own code never blocks,
    so its count is 0.00 blocks a step every time, whatever waits the load makes for torch's threads or the
    interpreter's lock (the fewest of up to five passes: a wait the load made does not come back in each)."""
    import multiprocessing
    import os

    import torch

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.LazyLinear(10))
    optimizer = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(32, 3, 16, 16), torch.randint(0, 10, (32,))

    def step():
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    step()
    busy = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 2)]
    for p in busy:
        p.start()
    try:
        counts = [host_side.count(step, 2) for _ in range(10)]
    finally:
        for p in busy:
            p.terminate()
    assert [c.blocks_per_step for c in counts] == [0.0] * 10
    assert len({c.lines_per_step for c in counts}) == 1  # and the same lines each time


def _spin():
    while True:
        pass
