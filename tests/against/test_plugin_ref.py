"""REF's own run under --perf-against, in a pytester session with the fake GPU: it records what the head gates
against it, and times the loader-fed parts briefly. --perf-against end to end on a git repository:
tests/against/test_against.py."""



from tests.plugin_suite import FakeGPU
from torch_perf_suite.against.ref import AS_REF

pytest_plugins = ["pytester"]


def test_refs_run_records_what_the_head_gates_against_it_and_times_the_loader_fed_parts_briefly(suite, monkeypatch):
    gpu = FakeGPU()
    suite.gpu(gpu)
    monkeypatch.setenv(AS_REF, "1")  # as --perf-against starts REF's run
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)
    entry = suite.entry()
    assert set(entry["parts"]) == {"gpu"} and entry["efficiency"] is None
    assert gpu.steps["pipeline"] == 1 + 5 + 3  # its warm-up, one round of the least steps, the profiled steps
    monkeypatch.delenv(AS_REF)
    suite.run("--perf-update-baselines").assert_outcomes(passed=1)  # recording the committed baselines: whole
    assert {"gpu", "loader", "pipeline"} <= set(suite.entry()["parts"])
