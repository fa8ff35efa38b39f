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
