"""The recorded loader settings (recorded.py, `baselines/loaders.json`): the file refused where it is broken, an entry
dated and read back by its test."""

import pytest

from torch_perf_suite.loader import recorded

# --- the recorded files ---------------------------------------------------------------------------


@pytest.mark.parametrize("data", [[], {"schema": 2, "tests": {}}, {"tests": {}}, {"schema": 1, "tests": []},
                                  {"schema": 1}])
def test_a_file_of_another_shape_is_refused(data):
    assert recorded._validate(data) == 'expected {"schema": 1, "tests": {...}}'


def test_a_sound_file_passes():
    assert recorded._validate({"schema": 1, "tests": {}}) is None
    assert recorded._validate({"schema": 1, "tests": {"t": {"settings": {"a": 1, "b": None, "c": "x", "d": 0.5, "e": True},
                                                          "workers": 0}}}) is None


@pytest.mark.parametrize("e, shown", [([1], "None"), ({"workers": 4}, "None"), ({"settings": [1], "workers": 4}, "[1]"),
                                      ({"settings": {"x": [1]}, "workers": 4}, "{'x': [1]}")])
def test_an_entry_without_plain_settings_is_refused_naming_the_test_and_the_value(e, shown):
    problem = recorded._validate({"schema": 1, "tests": {"ok": {"settings": {}, "workers": 1}, "tests/x.py::t": e}})
    assert problem.startswith(f"'tests/x.py::t': 'settings' is {shown}, expected")


def test_settings_too_long_to_show_are_shortened():
    problem = recorded._validate({"schema": 1, "tests": {"t": {"settings": "s" * 100, "workers": 1}}})
    assert f"is {'s' * 57}..., expected" in problem


@pytest.mark.parametrize("workers", [True, -1, 2.0, "4", None])
def test_workers_that_are_not_a_count_are_refused_naming_the_value(workers):
    problem = recorded._validate({"schema": 1, "tests": {"t": {"settings": {}, "workers": workers}}})
    assert problem.startswith(f"'t': 'workers' is {workers!r}, expected")


def test_a_settings_entry_is_dated_and_read_back_by_its_test(tmp_path):
    e = recorded.entry({"num_workers": 4}, 16)
    assert e == {"settings": {"num_workers": 4}, "workers": 16, "date": recorded.datetime.date.today().isoformat()}
    f = recorded.SettingsFile(tmp_path / "loaders.json", {"t": e})
    assert f.get("t") is e and f.get("u") is None


def test_the_settings_file_makes_its_folder_and_holds_what_it_saved(tmp_path):
    f = recorded.SettingsFile.load(tmp_path / "a" / "b" / "loaders.json")
    f.save({"t": recorded.entry({"num_workers": 4}, 16)})
    f.save({"u": recorded.entry({"num_workers": 2}, 16)})
    assert set(f.tests) == {"t", "u"} and set(recorded.SettingsFile.load(f.path).tests) == {"t", "u"}
