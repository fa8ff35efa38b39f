"""instructions.verdict at its edges: a count recorded only for other environments names each of them."""

from torch_perf_suite.findings import FAILED, NOT_COMPARED, PASSED, Finding
from torch_perf_suite.loader import instructions


def test_a_count_recorded_for_other_environments_names_every_one(tmp_path):
    entry = {"per_sample": 1000.0, "samples": 16, "source": "s"}
    f = instructions.InstructionsFile(tmp_path / "i.json", {"k1": {"t": entry}, "k2": {"t": entry}, "k3": {"u": entry}})
    found = instructions.verdict(instructions.Counted(1000.0, 16, "s"), f, "k4", "t", 1.0, "record")
    assert found == Finding(NOT_COMPARED, "loader instructions not comparable: recorded with k1, k2; this is k4")  # not k3


def test_a_count_within_the_margin_of_its_own_environment_passes_and_beyond_it_fails(tmp_path):
    entry = {"per_sample": 1_000_000.0, "samples": 16, "source": "s"}
    f = instructions.InstructionsFile(tmp_path / "i.json", {"k": {"t": entry}})
    assert instructions.verdict(instructions.Counted(1_010_000.0, 16, "s"), f, "k", "t", 1.0, "record") == Finding(PASSED)
    found = instructions.verdict(instructions.Counted(1_020_000.0, 16, "s"), f, "k", "t", 1.0, "record")
    assert found.outcome == FAILED
    assert "1,020,000 instructions per sample" in found.text and "1,000,000 recorded (+2.0%; allowed +1%)" in found.text
