"""loader.py's verdicts at their edges: what `describe` names a loader by, the settings compared and the changes
reported, the cost per sample judged at each threshold, and the recorded files refused where they are broken."""

import multiprocessing
import os
import pickle
import stat
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, IterableDataset, default_collate

from fixtures.data import EndlessShuffle
from torch_perf_suite import loader
from torch_perf_suite.findings import FAILED, NOT_COMPARED, PASSED, REPORTED, Finding, failures

HERE = __name__  # the module the classes below are named by


class Kit:
    """Classes whose qualified name differs from their bare name."""

    class Scale:
        mode = "bilinear"  # a class attribute: not a field of an instance

        def __init__(self, factor):
            self.factor = factor

        def __call__(self, x):
            return x * self.factor

    class Pairs:
        """A batch sampler without a `sampler` of its own."""

        def __iter__(self):
            return iter([[0, 1], [2, 3]])

        def __len__(self):
            return 2


class Tiles(Dataset):
    def __init__(self, root, size=12, scale=0.5, transform=None, target_transform=None):
        self.root, self.size, self.scale = root, size, scale
        self.transform, self.target_transform = transform, target_transform
        self.files = ["a.png", "b.png"]  # not a plain value
        self._cache = 3  # private

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        return torch.zeros(2), i


class Stream(IterableDataset):
    def __init__(self, shards=4):
        self.shards = shards

    def __iter__(self):
        return iter(range(self.shards))


class Slotted:
    """A map-style dataset with no __dict__."""

    __slots__ = ("n",)

    def __init__(self, n=3):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


class Addressed:
    """A repr that gives the object's address: a different text in every process."""

    def __init__(self):
        self.size, self.name = 3, "crop"

    def __repr__(self):
        return f"<Addressed object at 0x{id(self):x}>"


class Folded:
    def __repr__(self):
        return "Compose(\n    Resize(size=224)\n    ToTensor()\n)"


def seed_worker(worker_id):
    torch.manual_seed(worker_id)


def pick(items):
    return items


# --- names and values -----------------------------------------------------------------------------


def test_a_function_and_a_class_are_named_by_their_module_and_qualified_name():
    assert loader.described._name(seed_worker) == f"{HERE}.seed_worker"
    assert loader.described._name(Kit.Scale) == f"{HERE}.Kit.Scale"
    assert loader.described._name(default_collate) == "torch.utils.data._utils.collate.default_collate"


def test_an_instance_is_named_by_its_class_callable_or_not():
    assert loader.described._name(Kit.Scale(2.0)) == f"{HERE}.Kit.Scale"  # callable, but no qualified name of its own
    assert loader.described._name(Kit.Pairs()) == f"{HERE}.Kit.Pairs"
    assert loader.described._name([1, 2]) == "builtins.list"


def test_a_callable_without_a_module_is_named_with_a_question_mark():
    assert loader.described._name(str.upper) == "?.str.upper"


def test_a_value_is_its_repr_a_float_short_and_a_path_its_name_only():
    value = loader.described._value
    assert value(Path("/data/imagenet/train")) == "'train'"  # the folder, not where this machine keeps it
    assert value(0.5) == "0.5" and value(2.0) == "2" and value(1e-7) == "1e-07"
    assert value("bilinear") == "'bilinear'" and value(3) == "3" and value(None) == "None"


def test_an_object_is_its_fields_and_none_is_none():
    assert loader.described._object(Kit.Scale(2.0)) == f"{HERE}.Kit.Scale(factor=2)"
    assert loader.described._object(None) == "None"


def test_an_object_without_a_repr_of_its_own_is_described_by_its_fields():
    class Crop:
        def __init__(self):
            self.size, self.root, self.ratio, self.flip = 224, Path("/x/val"), 0.75, True
            self._seen, self.sizes, self.label = 5, [1, 2], None

    assert loader.described._object(Crop()) == (f"{HERE}.test_an_object_without_a_repr_of_its_own_is_described_by_its_fields."
                                      "<locals>.Crop(flip=True, label=None, ratio=0.75, root='val', size=224)")


def test_a_repr_with_an_address_is_replaced_by_the_fields():
    assert loader.described._object(Addressed()) == f"{HERE}.Addressed(name='crop', size=3)"


def test_a_repr_on_several_lines_is_put_on_one():
    assert loader.described._object(Folded()) == "Compose( Resize(size=224) ToTensor() )"


def test_a_class_is_described_by_its_name_and_plain_attributes_not_its_repr():
    assert loader.described._object(Kit.Scale) == f"{HERE}.Kit.Scale(mode='bilinear')"


def test_an_object_without_fields_is_its_name():
    assert loader.described._object(Slotted()) == f"{HERE}.Slotted()"


# --- the dataset ----------------------------------------------------------------------------------


def test_a_dataset_is_its_length_plain_fields_and_transforms():
    ds = Tiles(Path("/data/tiles"), transform=Kit.Scale(2.0))
    assert loader.described._dataset(ds) == (f"{HERE}.Tiles(len=12, root='tiles', scale=0.5, size=12, target_transform=None, "
                                   f"transform={HERE}.Kit.Scale(factor=2))")


def test_every_field_named_transform_is_described():
    ds = Tiles(Path("/data/tiles"), target_transform=Kit.Scale(3.0))
    assert loader.described._dataset(ds).endswith(f"transform=None, target_transform={HERE}.Kit.Scale(factor=3))")


def test_a_dataset_without_a_length_is_iterable():
    assert loader.described._dataset(Stream(shards=4)) == f"{HERE}.Stream(iterable, shards=4)"


def test_a_dataset_without_a_dict_is_its_length():
    assert loader.described._dataset(Slotted(5)) == f"{HERE}.Slotted(len=5)"


# --- the start method -----------------------------------------------------------------------------


@pytest.fixture
def no_start_method(monkeypatch):
    """A process that has not chosen its start method yet."""
    monkeypatch.setattr(multiprocessing.context._default_context, "_actual_context", None)


def test_the_start_method_is_the_loaders_own_context(no_start_method):
    assert loader.described._start_method(SimpleNamespace(num_workers=2, multiprocessing_context="forkserver")) == "forkserver"
    ctx = multiprocessing.get_context("spawn")
    assert loader.described._start_method(SimpleNamespace(num_workers=2, multiprocessing_context=ctx)) == "spawn"
    assert loader.described._start_method(SimpleNamespace(num_workers=0, multiprocessing_context=ctx)) is None


def test_without_a_context_the_start_method_is_the_process_default(no_start_method):
    got = loader.described._start_method(SimpleNamespace(num_workers=2, multiprocessing_context=None))
    assert got == multiprocessing.get_context().get_start_method()


def test_reading_the_start_method_leaves_the_process_without_one(no_start_method):
    loader.described._start_method(SimpleNamespace(num_workers=2, multiprocessing_context=None))
    assert multiprocessing.get_start_method(allow_none=True) is None  # asked, not fixed: the user's code may still choose


def test_without_a_context_the_start_method_is_the_one_the_process_chose(monkeypatch):
    monkeypatch.setattr(multiprocessing.context._default_context, "_actual_context", multiprocessing.get_context("spawn"))
    assert loader.described._start_method(SimpleNamespace(num_workers=2, multiprocessing_context=None)) == "spawn"


# --- describe -------------------------------------------------------------------------------------


def test_every_setting_is_described():
    dl = DataLoader(Tiles(Path("/x/tiles")), batch_size=4, shuffle=True, num_workers=2, pin_memory=True, drop_last=True,
                    persistent_workers=True, prefetch_factor=5, timeout=7.5, worker_init_fn=seed_worker,
                    multiprocessing_context="forkserver", collate_fn=pick)
    expected = {
        "class": "torch.utils.data.dataloader.DataLoader",
        "num_workers": 2,
        "batch_size": 4,
        "drop_last": True,
        "pin_memory": True,
        "prefetch_factor": 5,
        "persistent_workers": True,
        "start_method": "forkserver",
        "timeout": 7.5,
        "sampler": "torch.utils.data.sampler.RandomSampler(generator=None, replacement=False)",
        "batch_sampler": "torch.utils.data.sampler.BatchSampler",
        "collate_fn": f"{HERE}.pick",
        "worker_init_fn": f"{HERE}.seed_worker",
        "dataset": f"{HERE}.Tiles(len=12, root='tiles', scale=0.5, size=12, target_transform=None, transform=None)",
    }
    if hasattr(dl, "in_order"):
        expected["in_order"] = True
    assert loader.describe(dl) == expected


def test_the_sampler_is_the_batch_samplers_where_it_has_one():
    dl = DataLoader(Tiles("t"), batch_sampler=BatchSampler(EndlessShuffle(10, seed=1), 2, False))
    d = loader.describe(dl)
    assert d["sampler"] == "fixtures.data.EndlessShuffle(length=10, seed=1)"
    assert d["batch_sampler"] == "torch.utils.data.sampler.BatchSampler" and d["batch_size"] is None


def test_a_batch_sampler_without_a_sampler_leaves_the_loaders():
    d = loader.describe(DataLoader(Tiles("t"), batch_sampler=Kit.Pairs()))
    assert d["sampler"] == "torch.utils.data.sampler.SequentialSampler()" and d["batch_sampler"] == f"{HERE}.Kit.Pairs"


def test_a_loader_without_batches_has_no_batch_sampler():
    d = loader.describe(DataLoader(Tiles("t"), batch_size=None))
    assert d["batch_sampler"] is None and d["sampler"] == "torch.utils.data.sampler.SequentialSampler()"
    assert d["worker_init_fn"] is None


def test_workers_taken_away_after_the_loader_was_built_take_its_prefetch_with_them():
    dl = DataLoader(Tiles("t"), batch_size=2, num_workers=2, prefetch_factor=4)
    dl.num_workers = 0
    d = loader.describe(dl)
    assert d["num_workers"] == 0 and d["prefetch_factor"] is None and d["start_method"] is None


def test_a_timed_collate_is_named_by_the_one_it_times(tmp_path):
    dl = DataLoader(Tiles("t"), batch_size=2, collate_fn=pick)
    dl.collate_fn = loader.cost._TimedCollate(dl.collate_fn, loader.cost._Sink(str(tmp_path)))
    assert loader.describe(dl)["collate_fn"] == f"{HERE}.pick"


def test_what_is_not_a_dataloader_is_named_with_what_cannot_be_read():
    with pytest.raises(loader.Undescribable) as e:
        loader.describe(Kit.Pairs(), "seed 004's loader")
    message = str(e.value)
    assert message.startswith(f"seed 004's loader is {HERE}.Kit.Pairs, not a torch.utils.data.DataLoader")
    assert "(workers, batch size, pinning, prefetch) cannot be read" in message
    assert message.endswith("give the workload the DataLoader its batches come from")
    with pytest.raises(loader.Undescribable, match="^the workload's loader is builtins.list,"):
        loader.describe([1])


# --- the settings verdict -------------------------------------------------------------------------


def test_a_start_method_dropped_is_a_change_unless_chosen_on_the_command_line():
    then, now = {"start_method": "fork"}, {"start_method": None}
    assert loader.changes(now, then, (4, 4)) == [("start_method", "fork", None)]
    # chosen on the command line, but the loader's own differs: a change of the loader
    assert loader.changes({"start_method": "fork"}, {"start_method": "spawn"}, (4, 4), "spawn") == [
        ("start_method", "spawn", "fork")]


def test_workers_recorded_without_a_count_are_compared_as_they_are():
    assert loader.changes({"num_workers": 4}, {"num_workers": 16}, (None, 4)) == [("num_workers", 16, 4)]
    assert loader.changes({"num_workers": 4}, {"num_workers": 4}, (None, 4)) == []


def test_workers_that_follow_the_cores_only_where_both_sides_do():
    assert loader.changes({"num_workers": 16}, {"num_workers": 16}, (16, 4)) == []  # the same count: no change
    assert loader.changes({"num_workers": 16}, {"num_workers": 8}, (16, 16)) == [("num_workers", 8, 16)]
    assert loader.changes({"num_workers": 3}, {"num_workers": 16}, (16, 4)) == [("num_workers", 16, 3)]
    # another field equal to the count is not a count of workers
    assert loader.changes({"prefetch_factor": 4}, {"prefetch_factor": 16}, (16, 4)) == [("prefetch_factor", 16, 4)]


def test_every_undeclared_change_is_named_and_only_those():
    found = [("num_workers", 16, 4), ("pin_memory", True, False), ("timeout", 0, 5)]
    message = failures(loader.settings_failure(found, ("timeout",), "REF main (abc)"))
    lines = message.splitlines()
    assert "REF main (abc)" in lines[0]
    assert lines[1:3] == ["  num_workers 16 -> 4", "  pin_memory True -> False"]
    assert "timeout" not in message.replace("loader_changes", "")
    assert "loader_changes=('num_workers', 'pin_memory',)" in lines[3] and "re-record the baseline" in lines[3]
    assert failures(loader.settings_failure(found, ("timeout", "pin_memory", "num_workers"), "REF")) is None


def test_a_long_value_is_shortened_in_the_failure():
    long = "x" * 300
    message = failures(loader.settings_failure([("dataset", long, "y")], (), "REF"))
    assert f"  dataset {'x' * 197}... -> y" in message.splitlines()


def test_settings_declared_and_following_the_cores_pass_with_a_note_naming_each():
    now = {"num_workers": 4, "pin_memory": False, "timeout": 5, "start_method": "spawn"}
    then = {"num_workers": 16, "pin_memory": True, "timeout": 0, "start_method": "fork"}
    entry = {"settings": then, "workers": 16}
    assert loader.settings_verdict(now, entry, workers=4, worker_start="spawn", expected=("pin_memory", "timeout"),
                                   compared_with="REF x") == [
        Finding(PASSED, "loader changed as declared: pin_memory True -> False; timeout 0 -> 5")]


def test_an_undeclared_change_fails_naming_against_what():
    now, then = {"num_workers": 4, "timeout": 5}, {"num_workers": 16, "timeout": 0}
    [found] = loader.settings_verdict(now, {"settings": then, "workers": 16}, workers=16, worker_start=None,
                                      expected=(), compared_with="the baseline of host-7")
    assert found.outcome == FAILED
    assert "host-7" in found.text and "  num_workers 16 -> 4" in found.text and "  timeout 0 -> 5" in found.text


def test_settings_recorded_for_no_test_or_not_for_this_one_are_not_compared_and_say_how_to_record_them():
    """No loaders.json, an empty one, or one without this test: the same note (a hole under --perf-strict)."""
    [found] = loader.settings_verdict({"num_workers": 4}, None, workers=4, worker_start=None, expected=(),
                                      compared_with="the baseline",
                                      rerecord="record them with: pytest 't' --perf-update-baselines")
    assert found == Finding(NOT_COMPARED, "loader settings not compared: the baseline recorded none for this test; record "
                                          "them with: pytest 't' --perf-update-baselines")
    assert loader.settings_verdict(None, None, workers=4, worker_start=None, expected=(), compared_with="REF x") == []


# --- the cost per sample -------------------------------------------------------------------------


def unit(**changed):
    return {"wall_us": 1000.0, "cpu_us": 900.0, "wait_us": 100.0, "cpu_ratio": 1.0, "blocks": 0.0, "crowd_us": 1200.0,
            **changed}


def judge(now, then=None, tolerance_pct=5.0, timed=True, compared_with="REF"):
    return failures(loader.unit_failure(now, then or unit(), tolerance_pct, timed=timed, compared_with=compared_with))


def test_blocks_up_to_the_margin_pass_and_beyond_it_fail():
    assert judge(unit(blocks=loader.BLOCKS_MARGIN)) is None  # 0.05 more blocks a sample: allowed
    message = judge(unit(blocks=0.06), timed=False, compared_with="the baseline")
    assert "blocks 0.06 times a sample" in message and "0.00 at the baseline" in message


def test_waiting_up_to_the_floor_passes_whatever_its_share():
    # a short sample of 100 µs: 20 µs more is 20%, but not beyond the floor
    assert judge(unit(wall_us=100.0, wait_us=30.0), unit(wall_us=100.0, wait_us=10.0)) is None
    message = judge(unit(wall_us=100.0, wait_us=30.5), unit(wall_us=100.0, wait_us=10.0))
    assert "waiting 30.5 µs a sample alone" in message and "+20.5 µs, 20.5%" in message


def test_waiting_up_to_the_tolerance_passes():
    # 50 µs more of a recorded 1,000 µs sample is 5%: allowed at 5%, not at 4%
    assert judge(unit(wait_us=150.0)) is None
    message = judge(unit(wait_us=150.0), tolerance_pct=4.0)
    assert "150.0 µs" in message and "100.0 at REF" in message and "+50.0 µs, 5.0% of a sample's 1,000.0 µs" in message
    assert "(allowed 4%)" in message


def test_waiting_is_a_share_of_the_recorded_sample():
    # 60 µs more: 6% of the recorded 1,000 µs, though only 3% of the 2,000 µs a sample takes now
    message = judge(unit(wall_us=2000.0, wait_us=160.0))
    assert "6.0% of a sample's 1,000.0 µs" in message


def test_waiting_is_judged_only_where_timed_and_blocks_everywhere():
    assert judge(unit(wait_us=500.0), timed=False) is None  # another host: its waiting is not this one's
    message = judge(unit(blocks=1.0, wait_us=500.0), timed=False)
    assert "blocks 1.00" in message and "waiting" not in message


def test_cpu_time_is_not_judged_in_microseconds_or_yardsticks():
    # a reading: the yardsticks still moved +9% to +38% between identical runs; the instruction count judges the work
    assert judge(unit(cpu_us=9000.0, cpu_ratio=10.0)) is None


def test_every_failing_figure_is_on_a_line_of_its_own():
    message = judge(unit(blocks=1.0, wait_us=500.0), compared_with="REF y")
    lines = message.splitlines()
    assert len(lines) == 3 and lines[0] == "the loader's cost per sample rose:"
    assert lines[1].startswith("  blocks 1.00") and lines[2].startswith("  waiting 500.0")
    assert all("REF y" in line for line in lines[1:])


def test_the_cpu_rise_is_in_percent_of_the_recorded_ratio():
    assert loader.cpu_rise_pct(unit(cpu_ratio=1.25), unit()) == 25.0
    assert loader.cpu_rise_pct(unit(cpu_ratio=0.75), unit()) == -25.0
    assert loader.cpu_rise_pct(unit(cpu_ratio=2.0), unit(cpu_ratio=0.5)) == 300.0


def test_no_ratio_on_either_side_is_no_rise():
    old = {k: v for k, v in unit().items() if k != "cpu_ratio"}
    assert loader.cpu_rise_pct(old, unit()) is None
    assert loader.cpu_rise_pct(unit(), old) is None
    assert loader.cpu_rise_pct(unit(cpu_ratio=0.0), unit()) is None and loader.cpu_rise_pct(unit(), unit(cpu_ratio=0.0)) is None


def test_the_cpu_line_gives_both_times_and_both_rises():
    line = loader.cpu_line(unit(cpu_us=1350.0, cpu_ratio=1.25), unit(), "REF z")
    assert "1,350 µs, 900 at REF z" in line and "+50.0%" in line and "1.250 yardsticks, +25.0%" in line
    old = {k: v for k, v in unit().items() if k != "cpu_ratio"}
    assert loader.cpu_line(unit(cpu_us=450.0), old, "REF").endswith("(-50.0%; no yardsticks recorded)")


UNIT = loader.UnitCost(100, 1000.0, 900.0, 100.0, 1.0, 5, 0.0, 1200.0)


def test_the_unit_verdict_judges_waiting_only_where_timed():
    slower = {"loader_unit": unit(wait_us=40.0)}  # 60 µs more waiting now: 6% of a sample
    assert loader.unit_verdict(UNIT, slower, 5.0, why_not_timed="recorded on host-2", compared_with="the baseline") == [
        Finding(REPORTED, "loader waiting per sample: recorded on host-2")]
    failure, note = loader.unit_verdict(UNIT, slower, 5.0, why_not_timed="", compared_with="REF w")
    assert (failure.outcome, note.outcome) == (FAILED, REPORTED)
    assert "waiting 100.0 µs" in failure.text and "40.0 at REF w" in failure.text and "(allowed 5%)" in failure.text
    assert note.text.startswith("loader CPU time a sample alone 900 µs, 900 at REF w")


def test_the_unit_verdict_passes_its_tolerance_on():
    slower = {"loader_unit": unit(wait_us=40.0)}  # 6% of a sample
    assert failures(loader.unit_verdict(UNIT, slower, 6.0, why_not_timed="", compared_with="REF")) is None
    blocking = loader.UnitCost(100, 1000.0, 900.0, 100.0, 1.0, 5, 1.0, 1200.0)
    failure = failures(loader.unit_verdict(blocking, {"loader_unit": unit()}, 5.0, why_not_timed="another host",
                                           compared_with="B"))
    assert "blocks 1.00 times" in failure and "0.00 at B" in failure  # a count: judged on any host


def test_no_baseline_entry_is_none_recorded_and_none_measured_is_said():
    assert loader.unit_verdict(UNIT, None, 5.0, why_not_timed="", compared_with="REF v") == [
        Finding(NOT_COMPARED, "loader cost per sample not compared: REF v recorded none")]
    assert loader.unit_verdict(None, {"loader_unit": unit()}, 5.0, why_not_timed="", compared_with="REF v") == [
        Finding(NOT_COMPARED, "loader cost per sample not compared: none measured here")]
    assert loader.unit_verdict(None, None, 5.0, why_not_timed="", compared_with="REF v") == []


# --- in the workers -------------------------------------------------------------------------------


def batch(n, items_wall_us, collate_wall_us, switches=0):
    # (end, samples, items wall ns, items CPU ns, collate wall ns, collate CPU ns, switches, tensors): CPU times a tenth
    # of wall; a batch of two tensors
    return (5, n, items_wall_us * 1000, items_wall_us * 100, collate_wall_us * 1000, collate_wall_us * 100, switches, 2)


def test_blocks_are_counted_over_all_samples_not_averaged_over_batches():
    batches, blocks, _, _ = loader.in_workers([batch(10, 1000, 0, switches=10), batch(30, 3000, 0)])
    assert batches == 2 and blocks == pytest.approx(10 / 40)


def test_a_sample_in_the_workers_is_its_batchs_items_and_collate_wall_time():
    # per sample: (8,000 + 2,000) / 10 = 1,000 µs; (2,000 + 400) / 4 = 600 µs; (3,000 + 600) / 2 = 1,800 µs
    _, _, crowd, _ = loader.in_workers([batch(10, 8000, 2000), batch(4, 2000, 400), batch(2, 3000, 600)])
    assert crowd == pytest.approx(1000.0)


# --- parallelism ----------------------------------------------------------------------------------


def test_no_workers_count_as_one_process():
    line = loader.parallelism({"wall_us": 500.0, "crowd_us": 500.0}, 0, 2000.0)
    assert line == "1 worker(s) at 500 µs a sample could make 2,000 samples/s; the loader delivered 2,000 (100%)"


def test_parallelism_is_lost_only_below_the_share():
    assert "lost" not in loader.parallelism({"wall_us": 1000.0, "crowd_us": 3000.0}, 4, 3200.0)  # 80%
    assert "(79%): parallelism lost to CPU contention" in loader.parallelism({"wall_us": 1000.0, "crowd_us": 3000.0}, 4,
                                                                             3160.0)


def test_contention_is_a_sample_slower_in_the_workers_beyond_the_share():
    # 1.25x as long is what 80% of the rate allows: the main process holds it back, not contention
    assert loader.parallelism({"wall_us": 1000.0, "crowd_us": 1250.0}, 2, 1000.0).endswith(
        "parallelism lost to the main process (collecting, pinning and moving batches)")
    assert loader.parallelism({"wall_us": 1000.0, "crowd_us": 1260.0}, 2, 1000.0).endswith(
        "parallelism lost to CPU contention (a sample takes 1.26x as long in the workers as alone)")


# --- the recorded files ---------------------------------------------------------------------------


@pytest.mark.parametrize("data", [[], {"schema": 2, "tests": {}}, {"tests": {}}, {"schema": 1, "tests": []},
                                  {"schema": 1}])
def test_a_file_of_another_shape_is_refused(data):
    assert loader.recorded._validate(data) == 'expected {"schema": 1, "tests": {...}}'


def test_a_sound_file_passes():
    assert loader.recorded._validate({"schema": 1, "tests": {}}) is None
    assert loader.recorded._validate({"schema": 1, "tests": {"t": {"settings": {"a": 1, "b": None, "c": "x", "d": 0.5, "e": True},
                                                          "workers": 0}}}) is None


@pytest.mark.parametrize("e, shown", [([1], "None"), ({"workers": 4}, "None"), ({"settings": [1], "workers": 4}, "[1]"),
                                      ({"settings": {"x": [1]}, "workers": 4}, "{'x': [1]}")])
def test_an_entry_without_plain_settings_is_refused_naming_the_test_and_the_value(e, shown):
    problem = loader.recorded._validate({"schema": 1, "tests": {"ok": {"settings": {}, "workers": 1}, "tests/x.py::t": e}})
    assert problem.startswith(f"'tests/x.py::t': 'settings' is {shown}, expected")


def test_settings_too_long_to_show_are_shortened():
    problem = loader.recorded._validate({"schema": 1, "tests": {"t": {"settings": "s" * 100, "workers": 1}}})
    assert f"is {'s' * 57}..., expected" in problem


@pytest.mark.parametrize("workers", [True, -1, 2.0, "4", None])
def test_workers_that_are_not_a_count_are_refused_naming_the_value(workers):
    problem = loader.recorded._validate({"schema": 1, "tests": {"t": {"settings": {}, "workers": workers}}})
    assert problem.startswith(f"'t': 'workers' is {workers!r}, expected")


@pytest.mark.parametrize("name", ["wall_us", "cpu_us", "blocks", "crowd_us", "cpu_ratio"])
@pytest.mark.parametrize("value", [-0.5, True, "1", None, 1e12])
def test_a_unit_figure_that_is_not_a_count_is_named(name, value):
    assert loader.validate_unit(unit(**{name: value})) == (
        f"'loader_unit' {name!r} is {value if isinstance(value, str) else repr(value)}, expected a non-negative number")


def test_unit_figures_from_zero_to_under_a_million_seconds_pass():
    assert loader.validate_unit(unit(cpu_us=0, blocks=0.0, crowd_us=999_999_999_999.0, cpu_ratio=0.0)) is None
    assert loader.validate_unit(unit(wall_us=0.5)) is None  # a sample under a microsecond: still a sample
    assert loader.validate_unit(unit(wait_us=-5.0)) is None  # less waiting than CPU time: round-off, not broken


@pytest.mark.parametrize("changed", [{"wall_us": 0.0}, {"wait_us": "1"}, {"wait_us": True}, {"wait_us": None}])
def test_a_unit_without_a_sample_time_or_a_waiting_number_is_named(changed):
    assert "expected a positive 'wall_us' and a number 'wait_us'" in loader.validate_unit(unit(**changed))


def test_a_unit_too_long_to_show_is_shortened():
    problem = loader.validate_unit(unit(blocks="b" * 100))
    assert problem == f"'loader_unit' 'blocks' is {'b' * 57}..., expected a non-negative number"
    problem = loader.validate_unit(["u" * 100])
    assert problem == f"'loader_unit' is {repr(['u' * 100])[:57]}..., expected an object"
    problem = loader.validate_unit(unit(wall_us=0.0))  # its repr is longer than 80 characters
    assert problem == f"'loader_unit' is {repr(unit(wall_us=0.0))[:77]}..., expected a positive 'wall_us' and a number 'wait_us'"


# --- what is recorded -----------------------------------------------------------------------------


def test_a_unit_entry_keeps_counts_whole_and_figures_to_four_places():
    e = loader.UnitCost(100, 1000.123456, 900.5, 99.62346, 1.0000049, 5, 0.0123456, 1200.0, 0.0078125, 0.0).entry()
    assert e == {"samples": 100, "wall_us": 1000.1235, "cpu_us": 900.5, "wait_us": 99.6235, "cpu_ratio": 1.0,
                 "batches": 5, "blocks": 0.0123, "crowd_us": 1200.0, "shared": 0.0078, "alone_blocks": 0.0}
    assert isinstance(e["samples"], int) and isinstance(e["batches"], int)


def test_a_settings_entry_is_dated_and_read_back_by_its_test(tmp_path):
    e = loader.entry({"num_workers": 4}, 16)
    assert e == {"settings": {"num_workers": 4}, "workers": 16, "date": loader.recorded.datetime.date.today().isoformat()}
    f = loader.SettingsFile(tmp_path / "loaders.json", {"t": e})
    assert f.get("t") is e and f.get("u") is None


def test_a_value_as_long_as_the_limit_is_shown_whole():
    assert loader.described._short("x" * 200) == "x" * 200 and loader.described._short("x" * 201) == "x" * 197 + "..."
    assert loader.described._short(7, limit=1) == "7"


def test_a_tests_timings_go_to_a_folder_named_safely_under_the_sessions(tmp_path):
    folder = loader.timer_folder(tmp_path, "perf_tests/test_ladder.py::test_ladder[pin_memory]")
    assert folder == tmp_path / "perf_tests_test_ladder.py__test_ladder_pin_memory_"
    assert loader.timer_folder(str(tmp_path), "a-b_c.d e") == tmp_path / "a-b_c.d_e"
    assert loader.timer_folder(tmp_path, "t" * 149 + "[x]").name == "t" * 147 + "_x_"  # the last 150 characters


# --- the timing hooks, on a clock that ticks by known steps ----------------------------------------


class Clock:
    """What the hooks read: each wall reading 1,000 ns after the last, each CPU reading 600 ns, each count of the
    thread's voluntary switches one more; a batch ends at 5,000 ns."""

    def __init__(self):
        self.wall = self.cpu = self.blocks = 0

    def perf_counter_ns(self):
        self.wall += 1000
        return self.wall

    def thread_time_ns(self):
        self.cpu += 600
        return self.cpu

    def switches(self):
        self.blocks += 1
        return self.blocks

    @staticmethod
    def monotonic_ns():
        return 5000


class Numbers(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return i


class Batched(Numbers):
    """A dataset that makes a batch's items itself (torch's fetcher calls `__getitems__` where it exists)."""

    def __init__(self):
        self.asked = []

    def __getitems__(self, indices):
        self.asked.append(list(indices))
        return [self[i] for i in indices]


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(loader.cost, "time", c)
    monkeypatch.setattr(loader.cost, "_switches", c.switches)
    return c


def test_a_batch_is_recorded_with_its_items_and_collate_timed_apart(tmp_path, clock):
    dl = DataLoader(Numbers(), batch_size=4)
    timer = loader.Timer(tmp_path / "a" / "b")  # its folder made, parents too
    assert timer.attach(dl)
    assert [b.tolist() for b in dl] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    # (end, samples, items wall, items CPU, collate wall, collate CPU, switches during items and collate, tensors)
    assert timer.records(0, 10**9) == [(5000, 4, 1000, 600, 1000, 600, 2, 1)] * 4
    dl.collate_fn([1, 2])  # a collate with no items made before it: no batch to record
    assert len(timer.records(0, 10**9)) == 4


def test_a_batch_at_either_end_of_the_window_is_in_it_and_a_record_half_written_is_not(tmp_path, clock):
    dl = DataLoader(Numbers(), batch_size=8)
    timer = loader.Timer(tmp_path / "t")
    timer.attach(dl)
    list(dl)
    assert len(timer.records(5000, 5000)) == 2 and timer.records(5001, 10**9) == timer.records(0, 4999) == []
    (written,) = (tmp_path / "t").glob("*.bin")
    assert written.name == f"{os.getpid()}.bin" and stat.S_IMODE(written.stat().st_mode) == 0o600
    with open(written, "ab") as f:
        f.write(b"\0\1\2")  # a record being written as the window is read
    assert len(timer.records(0, 10**9)) == 2


def test_a_datasets_own_batch_maker_is_the_one_timed_and_is_left_in_place(tmp_path, clock):
    dl = DataLoader(Batched(), batch_size=8)
    timer = loader.Timer(tmp_path / "t")
    assert loader.Timer(tmp_path / "t").attach(DataLoader(Numbers(), batch_size=2))  # a folder that exists: fine
    timer.attach(dl)
    assert [b.tolist() for b in dl] == [list(range(8)), list(range(8, 16))]
    assert dl.dataset.asked == [list(range(8)), list(range(8, 16))] and len(timer.records(0, 10**9)) == 2
    timer.detach()
    assert "__getitems__" not in vars(dl.dataset) and dl.dataset.__getitems__([3]) == [3]


def test_a_sink_goes_to_a_spawned_worker_as_its_folder_alone(tmp_path):
    sink = loader.cost._Sink(str(tmp_path))
    sink.pending = (4, 1, 1, 1)
    again = pickle.loads(pickle.dumps(sink))
    assert (again.folder, again.pid, again.fd, again.pending) == (str(tmp_path), None, None, (0, 0, 0, 0))


def test_a_timer_says_nothing_until_asked_and_detaches_without_having_attached(tmp_path):
    timer = loader.Timer(tmp_path / "t")
    assert (timer.why_not, timer.alone, timer.loader) == ("", None, None)
    timer.detach()


def test_a_dataset_without_a_dict_is_not_timed_and_says_why(tmp_path):
    class Slots:  # no __dict__ to set a batch maker in
        __slots__ = ()

        def __len__(self):
            return 4

        def __getitem__(self, i):
            return i

    dl = DataLoader(Slots(), batch_size=4)
    timer = loader.Timer(tmp_path / "t")
    assert not timer.attach(dl)
    assert timer.why_not == f"{HERE}.test_a_dataset_without_a_dict_is_not_timed_and_says_why.<locals>.Slots has no " \
                            "__dict__ (__slots__): its items cannot be timed"


# --- a sample alone -------------------------------------------------------------------------------


class Seen(Numbers):
    """Which samples were made, and on how many threads torch ran while they were."""

    def __init__(self, nap_s=0.0):
        self.seen, self.threads, self.nap_s = [], set(), nap_s

    def __len__(self):
        return 1000

    def __getitem__(self, i):
        self.seen.append(i)
        self.threads.add(torch.get_num_threads())
        time.sleep(self.nap_s)
        return i


def test_a_sample_alone_is_made_from_fixed_indices_on_one_thread_in_whole_chunks():
    data, threads = Seen(), torch.get_num_threads()
    samples, *_ = loader.solo(data, default_collate, seconds=0.0)
    stride, chunk = loader.cost.STRIDE, loader.CHUNK
    assert samples == loader.SOLO_LEAST == 2 * chunk
    assert data.seen == [k * stride % 1000 for k in range(4)] + [(i + k) * stride % 1000 for i in (0, chunk)
                                                                 for k in range(chunk)]
    assert data.threads == {1} and torch.get_num_threads() == threads


def test_a_sample_alone_is_timed_for_its_seconds_up_to_its_most(monkeypatch):
    # 2 s of 1 ms naps and their yardsticks: many times SOLO_LEAST, so a host three times busier still times past it
    assert loader.solo(Seen(nap_s=0.001), default_collate, seconds=2.0)[0] > 2 * loader.SOLO_LEAST
    monkeypatch.setattr(loader.cost, "SOLO_MOST", 3 * loader.CHUNK)
    assert loader.solo(Seen(), default_collate, seconds=60.0)[0] == 3 * loader.CHUNK


def test_a_sample_alone_is_in_microseconds_and_its_cpu_time_in_yardsticks():
    samples, wall, cpu, wait, ratio, _ = loader.solo(Seen(nap_s=0.001), default_collate, seconds=0.0)
    assert 1000 <= wall < 10_000 and 900 < wait < wall and 0 <= cpu < 500  # a 1 ms nap a sample, little CPU
    assert 0 < ratio < 1  # a nap's CPU time is a small part of a yardstick's


def test_the_yardstick_is_one_fixed_image_resized_and_made_a_normalised_tensor():
    one, two = loader.Yardstick(), loader.Yardstick()
    assert one.image.size == (64, 64) and one.image.mode == "RGB" and one.image.tobytes() == two.image.tobytes()
    made = one()
    assert made.shape == (3, 224, 224) and made.dtype == torch.float32 and -0.5 <= made.min() < made.max() <= 0.5


# --- observe: described, timed where it can be ----------------------------------------------------


def test_observe_describes_the_loader_and_times_it_only_where_given_a_folder(tmp_path):
    dl = DataLoader(Numbers(), batch_size=4)
    members = SimpleNamespace(loader=dl, loader_step=None)
    assert loader.observe(members, None, "w") == (loader.describe(dl), None, None)
    described, timer, note = loader.observe(members, tmp_path / "t", "w")
    assert described == loader.describe(dl) and note is None
    assert timer.loader is dl and "__getitems__" in vars(dl.dataset) and len(timer.alone) == 6  # attached, timed alone
    timer.detach()


def test_observe_says_why_a_loader_is_not_timed_and_what_a_loader_step_needs(tmp_path):
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(4))

    dl = DataLoader(Stream(), batch_size=2)
    described, timer, note = loader.observe(SimpleNamespace(loader=dl, loader_step=None), tmp_path / "t", "w")
    assert described == loader.describe(dl) and timer is None
    assert note == "loader cost per sample not timed: an iterable dataset, or no batches (batch_size=None): torch's " \
                   "fetcher has no per-batch hook to time"
    # batches made by a batch sampler (Accelerate's loader, the Hugging Face Trainer's) are timed: no batch_size there
    sampled = DataLoader(Numbers(), batch_sampler=BatchSampler(range(8), 4, drop_last=False))
    assert sampled.batch_size is None
    described, timer, note = loader.observe(SimpleNamespace(loader=sampled, loader_step=None), tmp_path / "s", "w")
    assert note is None and timer.loader is sampled and len(timer.alone) == 6
    timer.detach()
    with pytest.raises(loader.Undescribable, match=r"^my step's loader is builtins\.generator, not a torch"):
        loader.observe(SimpleNamespace(loader=(i for i in range(3)), loader_step=None), None, "my step")
    with pytest.raises(loader.Undescribable) as e:
        loader.observe(SimpleNamespace(loader=None, loader_step=lambda: None), None, "the workload")
    assert str(e.value) == ("the workload has a loader_step but no `loader`: give it the DataLoader its batches come "
                            "from, so that the loader's settings are compared and its samples timed")


def test_the_settings_file_makes_its_folder_and_holds_what_it_saved(tmp_path):
    f = loader.SettingsFile.load(tmp_path / "a" / "b" / "loaders.json")
    f.save({"t": loader.entry({"num_workers": 4}, 16)})
    f.save({"u": loader.entry({"num_workers": 2}, 16)})
    assert set(f.tests) == {"t", "u"} and set(loader.SettingsFile.load(f.path).tests) == {"t", "u"}
