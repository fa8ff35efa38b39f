"""The loader's instructions verdict (loader/checks.py) as a plain function: None where all is well, and a message naming
what changed; a count judged against its own environment's, a count recorded only for other environments naming each,
and another test's count of the same loader where a test has none of its own."""



from torch_perf_suite.findings import FAILED, NOT_CHECKED, NOT_COMPARED, PASSED, Finding, failures
from torch_perf_suite.loader import checks as loader_checks
from torch_perf_suite.loader import instructions


def test_loader_instructions_within_the_margin_pass_and_a_plant_fails():
    assert failures(loader_checks.check(6_400_000, 6_353_205.7, 1.0)) is None  # +0.7%
    assert failures(loader_checks.check(7_348_639, 6_353_205.7, 1.0)) == (
        "the loader runs 7,348,639 instructions per sample (dataset item, transforms, collate; callgrind), 6,353,206 "
        "recorded (+15.7%; allowed +1%): more CPU work per sample in the dataset, its transforms or the collate")


def test_loader_instructions_exactly_at_the_margin_pass():
    assert failures(loader_checks.check(1_500_000, 1_000_000, 50.0)) is None
    assert failures(loader_checks.check(1_500_001, 1_000_000, 50.0)) is not None
    assert failures(loader_checks.check(49_035 + 2_000, 49_035, 1.0)) is None  # a light loader: the floor, not the percent
    assert failures(loader_checks.check(49_035 + 2_001, 49_035, 1.0)) is not None


def test_what_changed_since_the_count_is_each_function_by_its_line_new_or_gone_in_every_file_then_or_now():
    from types import SimpleNamespace

    read = SimpleNamespace(files={}, functions={
        "tiny.py": {"Images.__getitem__": ("h1", 21), "Images.new": ("h9", 30), "Images.same": ("h3", 40)},
        "fresh.py": {"g": ("h8", 3)}})
    recorded = {"functions": {"tiny.py": {"Images.__getitem__": "h0", "Images.same": "h3", "Images.gone": "h5"},
                              "old.py": {"f": "h7"}}}
    assert loader_checks._changed_since(read, recorded) == [
        "fresh.py:3 in g (new)", "old.py: f no longer runs", "tiny.py:21 in Images.__getitem__",
        "tiny.py: Images.gone no longer runs", "tiny.py:30 in Images.new (new)"]


def test_a_count_recorded_before_functions_were_kept_names_the_files_whose_hash_changed():
    from types import SimpleNamespace

    read = SimpleNamespace(files={"c.json": "9f0e", "b.py": "def456", "a.py": "abc123"}, functions={})
    assert loader_checks._changed_since(read, {"files": {"a.py": "abc", "b.py": "d0d"}}) == ["b.py", "c.json"]
    assert loader_checks._changed_since(read, {"files": None}) == ["a.py", "b.py", "c.json"]


# --- the verdict: a count against its own environment's, and the loader's record where the test has none ------------


def test_a_count_is_judged_against_its_own_environment_and_loader_only(tmp_path):
    entry = {"per_sample": 1000.0, "samples": 16, "source": "s"}
    f = instructions.InstructionsFile(tmp_path / "i.json", {"k": {"t": entry}})
    now = instructions.Counted(1005.0, 16, "s")
    assert loader_checks.verdict(now, f, "k", "t", 1.0, "record: x") == Finding(PASSED)
    found = loader_checks.verdict(instructions.Counted(1e6, 16, "s"), f, "k", "t", 1.0, "record: x")
    assert found.outcome == FAILED and found.text.startswith("the loader runs 1,000,000 instructions per sample")
    assert loader_checks.verdict(now, f, "k2", "t", 1.0, "record: x") == Finding(
        NOT_COMPARED, "loader instructions not comparable: recorded with k; this is k2")
    found = loader_checks.verdict(instructions.Counted(1e6, 16, "s2"), f, "k", "t", 1.0, "record: x")
    assert found.outcome == NOT_COMPARED
    assert found.text.startswith("loader instructions not comparable: recorded for s, this test counts s2")
    assert loader_checks.verdict(instructions.Counted(1005.0, 16, "s3"), f, "k", "t2", 1.0, "record: x") == Finding(
        NOT_CHECKED, f"no loader instruction count for k in {f.path}; record: x",  # nor any of the same loader
        f"no loader instruction count for k in {f.path}")
    assert loader_checks.verdict(now, f, "k", "t2", 1.0, "record: x") == Finding(  # t's count is of the same loader
        PASSED, "loader instructions compared (counted for t, the same loader)")


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
