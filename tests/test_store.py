"""The suite's recorded files share one store (store.py): read and checked in one place, updated under one lock,
written whole, each keeping the mode it has."""

import json
import os

import pytest

from torch_perf_suite import store
from torch_perf_suite.loader import instructions, recorded
from torch_perf_suite.records import baselines


def test_the_three_recorded_files_are_updated_through_the_one_store(tmp_path, monkeypatch):
    updated = []
    real = store.update
    monkeypatch.setattr(store, "update", lambda path, merged: (updated.append(path.name), real(path, merged))[1])
    entry = {"parts": {"pipeline": {"samples_per_s": 5.0}}}
    baselines.BaselineFile(tmp_path / "nvidia-h200.json", "NVIDIA H200", {}).save({"t": entry})
    instructions.InstructionsFile(tmp_path / "instructions.json", {}).save("env", {"t": {"per_sample": 5.0, "source": "s"}})
    recorded.SettingsFile(tmp_path / "loaders.json", {}).save({"t": {"settings": {"num_workers": 4}, "workers": 4}})
    assert updated == ["nvidia-h200.json", "instructions.json", "loaders.json"]


def test_an_update_merges_with_what_another_process_wrote_meanwhile(tmp_path):
    path = tmp_path / "f.json"
    store.update(path, lambda: {"a": 1})
    assert store.update(path, lambda: {**json.loads(path.read_text()), "b": 2}) == {"a": 1, "b": 2}
    assert path.read_text() == '{\n "a": 1,\n "b": 2\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]  # no lock beside it for `git add` to pick up
    assert store.lock_path(path).is_file() and store.lock_path(path) == store.lock_path(tmp_path / "." / "f.json")


def test_a_rewritten_file_keeps_its_mode_and_a_failed_write_leaves_it_whole(tmp_path):
    path = tmp_path / "f.json"
    path.write_text("{}")
    os.chmod(path, 0o600)
    store.write_json(path, {"a": 1})
    assert path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(TypeError), store.atomic(path) as f:
        f.write("half")
        raise TypeError("the write failed")
    assert path.read_text() == '{\n "a": 1\n}\n' and [p.name for p in tmp_path.iterdir()] == ["f.json"]


@pytest.mark.parametrize("text, said", [
    ("{", "not valid JSON"),
    ('{"schema": 2}', "wrong schema; restore it from git (git checkout -- "),
])
def test_a_file_that_cannot_be_used_is_one_line_naming_it_and_what_to_do(tmp_path, text, said):
    path = tmp_path / "f.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="^" + str(path).replace(".", r"\.") + ": .*" + said.replace("(", r"\(")) as e:
        store.read_checked(path, lambda data: "wrong schema" if data.get("schema") != 1 else None, ValueError)
    assert "\n" not in str(e.value)
    assert store.read_checked(tmp_path / "absent.json", lambda data: None, ValueError) is None
