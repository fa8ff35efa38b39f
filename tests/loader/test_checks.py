"""The loader's instructions verdict (loader/checks.py) as a plain function: None where all is well, and a message naming
what changed."""



from torch_perf_suite.findings import failures
from torch_perf_suite.loader import checks as loader_checks


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
