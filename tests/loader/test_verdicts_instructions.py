"""loader/checks.verdict at its edges: a count recorded only for other environments names each of them."""

from torch_perf_suite.findings import FAILED, NOT_COMPARED, PASSED, Finding
from torch_perf_suite.loader import checks as loader_checks
from torch_perf_suite.loader import instructions


def test_a_count_recorded_for_other_environments_names_every_one(tmp_path):
    entry = {"per_sample": 1000.0, "samples": 16, "source": "s"}
    f = instructions.InstructionsFile(tmp_path / "i.json", {"k1": {"t": entry}, "k2": {"t": entry}, "k3": {"u": entry}})
    found = loader_checks.verdict(instructions.Counted(1000.0, 16, "s"), f, "k4", "t", 1.0, "record")
    assert found == Finding(NOT_COMPARED, "loader instructions not comparable: recorded with k1, k2; this is k4")  # not k3


def test_a_count_within_the_margin_of_its_own_environment_passes_and_beyond_it_fails(tmp_path):
    entry = {"per_sample": 1_000_000.0, "samples": 16, "source": "s"}
    f = instructions.InstructionsFile(tmp_path / "i.json", {"k": {"t": entry}})
    assert loader_checks.verdict(instructions.Counted(1_010_000.0, 16, "s"), f, "k", "t", 1.0, "record") == Finding(PASSED)
    found = loader_checks.verdict(instructions.Counted(1_020_000.0, 16, "s"), f, "k", "t", 1.0, "record")
    assert found.outcome == FAILED
    assert "1,020,000 instructions per sample" in found.text and "1,000,000 recorded (+2.0%; allowed +1%)" in found.text


def test_a_malformed_count_names_its_environment_on_one_line_and_its_test():
    entry = {"per_sample": 1000.0, "source": "toyloader:parts", "files": {"toyloader.py": "abc"}}
    assert instructions._validate({"schema": instructions.SCHEMA, "environments": {"py3.11-x\n": {"t": entry}}}) is None
    bad = {**entry, "per_sample": 0}
    assert instructions._validate({"schema": instructions.SCHEMA, "environments": {"py3.11-x\n": {"t": bad}}}) == (
        "py3.11-x\\n / 't': 'per_sample' is 0, expected a positive number")
    assert instructions._validate({"schema": instructions.SCHEMA, "environments": {"py3.11-x": {"t": bad}}}) == (
        "py3.11-x / 't': 'per_sample' is 0, expected a positive number")  # a printable key as it is


def test_the_environments_that_may_be_this_one_are_told_by_python_torch_machine_and_valgrind(monkeypatch):
    import importlib.metadata
    import platform

    monkeypatch.setattr(instructions, "valgrind_version", lambda: None)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: (_ for _ in ()).throw(
        importlib.metadata.PackageNotFoundError(name)))
    here = f"py{platform.python_version()}-torch-none-cpu-{platform.machine()}-valgrind-none"
    other = f"py{platform.python_version()}-torch2.11.0-cpu-{platform.machine()}-valgrind-none"
    assert instructions.installed_keys([here, other]) == [here]


def test_a_test_without_a_count_of_its_own_is_compared_with_another_tests_count_of_the_same_loader(tmp_path):
    """A spread over GPUs feeds its ranks test_storage's loader: that loader's count is its record too."""
    same, other = {"per_sample": 1_000_000.0, "samples": 16, "source": "s"}, {"per_sample": 10.0, "samples": 16, "source": "o"}
    f = instructions.InstructionsFile(tmp_path / "i.json", {"k": {"a_storage": same, "b_other": other},
                                                            "k2": {"spread": other}})
    assert loader_checks.verdict(instructions.Counted(1_010_000.0, 16, "s"), f, "k", "spread", 1.0, "record") == Finding(
        PASSED, "loader instructions compared (counted for a_storage, the same loader)")
    found = loader_checks.verdict(instructions.Counted(1_020_000.0, 16, "s"), f, "k", "spread", 1.0, "record")
    assert found.outcome == FAILED
    assert found.text.endswith("1,000,000 recorded (+2.0%; allowed +1%): more CPU work per sample in the dataset, its "
                               "transforms or the collate (counted for a_storage, the same loader)")
    # another loader's count is no record of this one; nor is the same test's count in another environment
    assert loader_checks.verdict(instructions.Counted(10.0, 16, "x"), f, "k", "spread", 1.0, "record").outcome != PASSED
    assert loader_checks.verdict(instructions.Counted(10.0, 16, "o"), f, "k3", "spread", 1.0, "record").outcome == NOT_COMPARED


def test_a_count_that_grew_names_the_loaders_functions_that_changed_since_it_was_recorded(tmp_path):
    """The user's line: each function the loader runs whose code differs from the count's, at its first line."""
    from torch_perf_suite.loader.digest import Read

    read = Read({"tiny.py": "ab" * 32}, {"tiny.py": ("Images.__getitem__", "loader_parts")},
                functions={"tiny.py": {"Images.__getitem__": ("new", 21), "loader_parts": ("same", 27)}})
    recorded = {"per_sample": 1000.0, "samples": 16, "source": "s",
                "functions": {"tiny.py": {"Images.__getitem__": "old", "loader_parts": "same", "gone": "x"}}}
    f = instructions.InstructionsFile(tmp_path / "i.json", {"k": {"t": recorded}})
    found = loader_checks.verdict(instructions.Counted(9000.0, 16, "s", read=read), f, "k", "t", 1.0, "record: x")
    assert found.outcome == FAILED and found.text.endswith(
        "\n  changed since the count: tiny.py:21 in Images.__getitem__\n  changed since the count: tiny.py: gone no longer runs")
