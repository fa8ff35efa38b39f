"""What a loader is (described.py): what `describe` names a loader by, its dataset and start method, the settings
compared and the changes reported."""

import multiprocessing
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, IterableDataset, default_collate

from fixtures.data import EndlessShuffle
from torch_perf_suite.findings import FAILED, NOT_COMPARED, PASSED, Finding, failures
from torch_perf_suite.loader import cost, described

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
    assert described._name(seed_worker) == f"{HERE}.seed_worker"
    assert described._name(Kit.Scale) == f"{HERE}.Kit.Scale"
    assert described._name(default_collate) == "torch.utils.data._utils.collate.default_collate"


def test_an_instance_is_named_by_its_class_callable_or_not():
    assert described._name(Kit.Scale(2.0)) == f"{HERE}.Kit.Scale"  # callable, but no qualified name of its own
    assert described._name(Kit.Pairs()) == f"{HERE}.Kit.Pairs"
    assert described._name([1, 2]) == "builtins.list"


def test_a_callable_without_a_module_is_named_with_a_question_mark():
    assert described._name(str.upper) == "?.str.upper"


def test_a_value_is_its_repr_a_float_short_and_a_path_its_name_only():
    value = described._value
    assert value(Path("/data/imagenet/train")) == "'train'"  # the folder, not where this machine keeps it
    assert value(0.5) == "0.5" and value(2.0) == "2" and value(1e-7) == "1e-07"
    assert value("bilinear") == "'bilinear'" and value(3) == "3" and value(None) == "None"


def test_an_object_is_its_fields_and_none_is_none():
    assert described._object(Kit.Scale(2.0)) == f"{HERE}.Kit.Scale(factor=2)"
    assert described._object(None) == "None"


def test_an_object_without_a_repr_of_its_own_is_described_by_its_fields():
    class Crop:
        def __init__(self):
            self.size, self.root, self.ratio, self.flip = 224, Path("/x/val"), 0.75, True
            self._seen, self.sizes, self.label = 5, [1, 2], None

    assert described._object(Crop()) == (f"{HERE}.test_an_object_without_a_repr_of_its_own_is_described_by_its_fields."
                                      "<locals>.Crop(flip=True, label=None, ratio=0.75, root='val', size=224)")


def test_a_repr_with_an_address_is_replaced_by_the_fields():
    assert described._object(Addressed()) == f"{HERE}.Addressed(name='crop', size=3)"


def test_a_repr_on_several_lines_is_put_on_one():
    assert described._object(Folded()) == "Compose( Resize(size=224) ToTensor() )"


def test_a_class_is_described_by_its_name_and_plain_attributes_not_its_repr():
    assert described._object(Kit.Scale) == f"{HERE}.Kit.Scale(mode='bilinear')"


def test_an_object_without_fields_is_its_name():
    assert described._object(Slotted()) == f"{HERE}.Slotted()"


# --- the dataset ----------------------------------------------------------------------------------


def test_a_dataset_is_its_length_plain_fields_and_transforms():
    ds = Tiles(Path("/data/tiles"), transform=Kit.Scale(2.0))
    assert described._dataset(ds) == (f"{HERE}.Tiles(len=12, root='tiles', scale=0.5, size=12, target_transform=None, "
                                   f"transform={HERE}.Kit.Scale(factor=2))")


def test_every_field_named_transform_is_described():
    ds = Tiles(Path("/data/tiles"), target_transform=Kit.Scale(3.0))
    assert described._dataset(ds).endswith(f"transform=None, target_transform={HERE}.Kit.Scale(factor=3))")


def test_a_dataset_without_a_length_is_iterable():
    assert described._dataset(Stream(shards=4)) == f"{HERE}.Stream(iterable, shards=4)"


def test_a_dataset_without_a_dict_is_its_length():
    assert described._dataset(Slotted(5)) == f"{HERE}.Slotted(len=5)"


# --- the start method -----------------------------------------------------------------------------


@pytest.fixture
def no_start_method(monkeypatch):
    """A process that has not chosen its start method yet."""
    monkeypatch.setattr(multiprocessing.context._default_context, "_actual_context", None)


def test_the_start_method_is_the_loaders_own_context(no_start_method):
    assert described._start_method(SimpleNamespace(num_workers=2, multiprocessing_context="forkserver")) == "forkserver"
    ctx = multiprocessing.get_context("spawn")
    assert described._start_method(SimpleNamespace(num_workers=2, multiprocessing_context=ctx)) == "spawn"
    assert described._start_method(SimpleNamespace(num_workers=0, multiprocessing_context=ctx)) is None


def test_without_a_context_the_start_method_is_the_process_default(no_start_method):
    got = described._start_method(SimpleNamespace(num_workers=2, multiprocessing_context=None))
    assert got == multiprocessing.get_context().get_start_method()


def test_reading_the_start_method_leaves_the_process_without_one(no_start_method):
    described._start_method(SimpleNamespace(num_workers=2, multiprocessing_context=None))
    assert multiprocessing.get_start_method(allow_none=True) is None  # asked, not fixed: the user's code may still choose


def test_without_a_context_the_start_method_is_the_one_the_process_chose(monkeypatch):
    monkeypatch.setattr(multiprocessing.context._default_context, "_actual_context", multiprocessing.get_context("spawn"))
    assert described._start_method(SimpleNamespace(num_workers=2, multiprocessing_context=None)) == "spawn"


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
    assert described.describe(dl) == expected


def test_the_sampler_is_the_batch_samplers_where_it_has_one():
    dl = DataLoader(Tiles("t"), batch_sampler=BatchSampler(EndlessShuffle(10, seed=1), 2, False))
    d = described.describe(dl)
    assert d["sampler"] == "fixtures.data.EndlessShuffle(length=10, seed=1)"
    assert d["batch_sampler"] == "torch.utils.data.sampler.BatchSampler" and d["batch_size"] is None


def test_a_batch_sampler_without_a_sampler_leaves_the_loaders():
    d = described.describe(DataLoader(Tiles("t"), batch_sampler=Kit.Pairs()))
    assert d["sampler"] == "torch.utils.data.sampler.SequentialSampler()" and d["batch_sampler"] == f"{HERE}.Kit.Pairs"


def test_a_loader_without_batches_has_no_batch_sampler():
    d = described.describe(DataLoader(Tiles("t"), batch_size=None))
    assert d["batch_sampler"] is None and d["sampler"] == "torch.utils.data.sampler.SequentialSampler()"
    assert d["worker_init_fn"] is None


def test_workers_taken_away_after_the_loader_was_built_take_its_prefetch_with_them():
    dl = DataLoader(Tiles("t"), batch_size=2, num_workers=2, prefetch_factor=4)
    dl.num_workers = 0
    d = described.describe(dl)
    assert d["num_workers"] == 0 and d["prefetch_factor"] is None and d["start_method"] is None


def test_a_timed_collate_is_named_by_the_one_it_times(tmp_path):
    dl = DataLoader(Tiles("t"), batch_size=2, collate_fn=pick)
    dl.collate_fn = cost._TimedCollate(dl.collate_fn, cost._Sink(str(tmp_path)))
    assert described.describe(dl)["collate_fn"] == f"{HERE}.pick"


def test_what_is_not_a_dataloader_is_named_with_what_cannot_be_read():
    with pytest.raises(described.Undescribable) as e:
        described.describe(Kit.Pairs(), "seed 004's loader")
    message = str(e.value)
    assert message.startswith(f"seed 004's loader is {HERE}.Kit.Pairs, not a torch.utils.data.DataLoader")
    assert "(workers, batch size, pinning, prefetch) cannot be read" in message
    assert message.endswith("give the workload the DataLoader its batches come from")
    with pytest.raises(described.Undescribable, match="^the workload's loader is builtins.list,"):
        described.describe([1])


# --- the settings verdict -------------------------------------------------------------------------


def test_a_start_method_dropped_is_a_change_unless_chosen_on_the_command_line():
    then, now = {"start_method": "fork"}, {"start_method": None}
    assert described.changes(now, then, (4, 4)) == [("start_method", "fork", None)]
    # chosen on the command line, but the loader's own differs: a change of the loader
    assert described.changes({"start_method": "fork"}, {"start_method": "spawn"}, (4, 4), "spawn") == [
        ("start_method", "spawn", "fork")]


def test_workers_recorded_without_a_count_are_compared_as_they_are():
    assert described.changes({"num_workers": 4}, {"num_workers": 16}, (None, 4)) == [("num_workers", 16, 4)]
    assert described.changes({"num_workers": 4}, {"num_workers": 4}, (None, 4)) == []


def test_workers_that_follow_the_cores_only_where_both_sides_do():
    assert described.changes({"num_workers": 16}, {"num_workers": 16}, (16, 4)) == []  # the same count: no change
    assert described.changes({"num_workers": 16}, {"num_workers": 8}, (16, 16)) == [("num_workers", 8, 16)]
    assert described.changes({"num_workers": 3}, {"num_workers": 16}, (16, 4)) == [("num_workers", 16, 3)]
    # another field equal to the count is not a count of workers
    assert described.changes({"prefetch_factor": 4}, {"prefetch_factor": 16}, (16, 4)) == [("prefetch_factor", 16, 4)]


def test_every_undeclared_change_is_named_and_only_those():
    found = [("num_workers", 16, 4), ("pin_memory", True, False), ("timeout", 0, 5)]
    message = failures(described.settings_failure(found, ("timeout",), "REF main (abc)"))
    lines = message.splitlines()
    assert "REF main (abc)" in lines[0]
    assert lines[1:3] == ["  num_workers 16 -> 4", "  pin_memory True -> False"]
    assert "timeout" not in message.replace("loader_changes", "")
    assert "loader_changes=('num_workers', 'pin_memory',)" in lines[3] and "re-record the baseline" in lines[3]
    assert failures(described.settings_failure(found, ("timeout", "pin_memory", "num_workers"), "REF")) is None


def test_a_long_value_is_shortened_in_the_failure():
    long = "x" * 300
    message = failures(described.settings_failure([("dataset", long, "y")], (), "REF"))
    assert f"  dataset {'x' * 197}... -> y" in message.splitlines()


def test_settings_declared_and_following_the_cores_pass_with_a_note_naming_each():
    now = {"num_workers": 4, "pin_memory": False, "timeout": 5, "start_method": "spawn"}
    then = {"num_workers": 16, "pin_memory": True, "timeout": 0, "start_method": "fork"}
    entry = {"settings": then, "workers": 16}
    assert described.settings_verdict(now, entry, workers=4, worker_start="spawn", expected=("pin_memory", "timeout"),
                                   compared_with="REF x") == [
        Finding(PASSED, "loader changed as declared: pin_memory True -> False; timeout 0 -> 5")]


def test_an_undeclared_change_fails_naming_against_what():
    now, then = {"num_workers": 4, "timeout": 5}, {"num_workers": 16, "timeout": 0}
    [found] = described.settings_verdict(now, {"settings": then, "workers": 16}, workers=16, worker_start=None,
                                      expected=(), compared_with="the baseline of host-7")
    assert found.outcome == FAILED
    assert "host-7" in found.text and "  num_workers 16 -> 4" in found.text and "  timeout 0 -> 5" in found.text


def test_settings_recorded_for_no_test_or_not_for_this_one_are_not_compared_and_say_how_to_record_them():
    """No loaders.json, an empty one, or one without this test: the same note (a hole under --perf-strict)."""
    [found] = described.settings_verdict({"num_workers": 4}, None, workers=4, worker_start=None, expected=(),
                                      compared_with="the baseline",
                                      rerecord="record them with: pytest 't' --perf-update-baselines")
    assert found == Finding(NOT_COMPARED, "loader settings not compared: the baseline recorded none for this test; record "
                                          "them with: pytest 't' --perf-update-baselines")
    assert described.settings_verdict(None, None, workers=4, worker_start=None, expected=(), compared_with="REF x") == []


def test_a_value_as_long_as_the_limit_is_shown_whole():
    assert described._short("x" * 200) == "x" * 200 and described._short("x" * 201) == "x" * 197 + "..."
    assert described._short(7, limit=1) == "7"
