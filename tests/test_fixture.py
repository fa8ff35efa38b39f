"""The perf fixture's pieces that need no pytest session: what a baseline entry records."""

from types import SimpleNamespace

from torch_perf_suite import loader
from torch_perf_suite.findings import failures
from torch_perf_suite.fixture.result import Result
from torch_perf_suite.fixture.result import power_note as _power_note
from torch_perf_suite.throughput.parts import Parts
from torch_perf_suite.throughput.timing import Throughput


def test_a_baseline_entry_rounds_each_number_to_its_places():
    # pipeline 100 samples in 0.3 s: 333.33/s; GPU-side in 0.07 s: 1,428.57/s, 10 J over its 0.21 s: 47.6 W;
    # kernels 6.6 ms of a 70 ms step: 9.43% busy (launch-bound)
    parts = Parts(batch_size=100, pipeline=Throughput(100, (0.3,) * 3),
                  gpu=Throughput(100, (0.07,) * 3, energy_j=10.0), gpu_busy_s=0.0066)
    counted = SimpleNamespace(per_step=1 / 3, kernels=None, step_peak_bytes=123_456_789)
    entry = Result("t", parts, counted, 1.23456, None).baseline_entry({"gpu": "X"})
    assert entry == {
        "parts": {"pipeline": {"samples_per_s": 333.3, "spread_pct": 0.0, "rounds": [333.3] * 3},
                  "gpu": {"samples_per_s": 1428.6, "spread_pct": 0.0, "rounds": [1428.6] * 3, "watts": 48}},
        "bottleneck": "host launch overhead", "efficiency": 0.233, "gpu_busy_pct": 9.4, "syncs_per_step": 0.333,
        "peak_mem_gb": 1.23, "counts": {"step_peak_bytes": 123_456_789}, "loader_unit": None, "env": {"gpu": "X"},
    }


def test_what_was_not_measured_is_none_in_the_entry():
    parts = Parts(batch_size=100, pipeline=Throughput(100, (0.3,)))
    entry = Result("t", parts, None, None, None).baseline_entry({"gpu": "cpu"})
    assert entry == {
        "parts": {"pipeline": {"samples_per_s": 333.3, "spread_pct": None, "rounds": [333.3]}},
        "bottleneck": None, "efficiency": None, "gpu_busy_pct": None, "syncs_per_step": None, "peak_mem_gb": None,
        "counts": {}, "loader_unit": None, "env": {"gpu": "cpu"},
    }


def test_a_pipeline_refs_run_only_warmed_up_is_left_out_of_its_entry_and_its_efficiency():
    parts = Parts(batch_size=100, pipeline=Throughput(100, (0.3,), brief=True), gpu=Throughput(100, (0.1,) * 3),
                  loader=Throughput(100, (0.2,) * 3))
    entry = Result("t", parts, None, None, None).baseline_entry({"gpu": "cpu"})
    assert set(entry["parts"]) == {"gpu", "loader"} and entry["efficiency"] is None
    assert entry["bottleneck"] == "loader"  # the parts timed whole still say which limits


def test_the_loaders_cost_per_sample_comes_from_the_loader_window_else_the_pipelines():
    unit = loader.UnitCost(100, 1000.0, 666.6666, 333.3333, 0.66666, 1, 1 / 3, 1200.0, 2 / 3, 0.05)
    parts = Parts(batch_size=100, pipeline=Throughput(100, (0.3,)), loader=Throughput(100, (0.2,), unit=unit))
    entry = Result("t", parts, None, None, None).baseline_entry({"gpu": "cpu"})
    assert entry["loader_unit"] == {"samples": 100, "wall_us": 1000.0, "cpu_us": 666.6666, "wait_us": 333.3333,
                                    "cpu_ratio": 0.6667, "batches": 1, "blocks": 0.3333, "crowd_us": 1200.0,
                                    "shared": 0.6667, "alone_blocks": 0.05}
    alone = Parts(batch_size=100, pipeline=Throughput(100, (0.3,), unit=unit))
    assert Result("t", alone, None, None, None).unit is unit


def test_the_power_note_starts_at_95_percent_of_the_limit():
    def gpu(watts):
        return Throughput(100, (1.0,), energy_j=watts)

    assert _power_note(gpu(665.0), 700.0) == "GPU-side at the power limit: 665 of 700 W"
    assert _power_note(gpu(664.0), 700.0) is None
    assert _power_note(gpu(700.0), None) is None and _power_note(Throughput(100, (1.0,)), 700.0) is None
    assert _power_note(None, 700.0) is None


def test_a_loaders_cost_is_judged_only_by_the_test_that_timed_its_window():
    from torch_perf_suite.fixture.judging import Judge
    from torch_perf_suite.session.settings import Measure

    unit = loader.UnitCost(100, 1000.0, 900.0, 400.0, 0.9, 5, 1.0, 1200.0)  # waiting and blocks far above the entry's
    entry = {"loader_unit": {"wall_us": 1000.0, "cpu_us": 900.0, "wait_us": 100.0, "blocks": 0.0, "crowd_us": 1200.0},
             "env": {}}
    session = SimpleNamespace(ref=object(), against_label="REF")
    judge = Judge(session, "t", Measure(), confirm=None)
    mine = Parts(batch_size=100, pipeline=Throughput(100, (0.3,)), loader=Throughput(100, (0.2,), unit=unit))
    assert "blocks 1.00 times a sample" in failures(judge._unit(Result("t", mine, None, None, None), entry))
    shared = Parts(batch_size=100, pipeline=Throughput(100, (0.3,)), loader=Throughput(100, (0.2,), unit=unit),
                   measured_in={"loader": "t0"})
    assert failures(judge._unit(Result("t", shared, None, None, None), entry)) is None  # t0 judged it


def test_a_loader_the_suite_cannot_describe_fails_the_test_saying_so_once(monkeypatch):
    import pytest

    from torch_perf_suite.fixture import perf as fixture
    from torch_perf_suite.session.settings import Measure

    class Unreadable:
        def __init__(self, *args):
            pass

        def run(self, workload, parts):
            raise loader.Undescribable("the workload is list, not a torch.utils.data.DataLoader: its settings cannot be read")

    monkeypatch.setattr(fixture, "Measuring", Unreadable)
    node = SimpleNamespace(nodeid="t.py::test_x", iter_markers=lambda name: iter(()))
    session = SimpleNamespace(settings=SimpleNamespace(measure=Measure(), smoke=False), results={})
    perf = fixture.Perf(session, SimpleNamespace(node=node), SimpleNamespace(extra_info={}))
    with pytest.raises(pytest.fail.Exception) as failed:
        perf.measure(object())
    assert str(failed.value) == ("the workload is list, not a torch.utils.data.DataLoader\n"  # pytest's short summary
                                 "t.py::test_x: the workload is list, not a torch.utils.data.DataLoader: its settings "
                                 "cannot be read")
    assert failed.value.__context__ is None and session.results == {}  # failed outside the handler, nothing kept


def test_a_gpu_util_shortfall_fails_only_where_measured_again_it_falls_short_too(monkeypatch):
    import pytest

    from torch_perf_suite.fixture import perf as fixture
    from torch_perf_suite.machine.nvml import Utilization
    from torch_perf_suite.session.settings import Measure

    node = SimpleNamespace(nodeid="t.py::test_x", iter_markers=lambda name: iter(()))
    session = SimpleNamespace(settings=SimpleNamespace(measure=Measure(), smoke=False), results={})
    perf = fixture.Perf(session, SimpleNamespace(node=node), SimpleNamespace(extra_info={}))

    def result(pct):
        gpu = Throughput(100, (0.1,) * 3, util=Utilization(samples=50, gpu_util_pct=pct))
        return Result("t.py::test_x", Parts(batch_size=100, pipeline=gpu, gpu=gpu), None, None, None)

    again = []  # what the confirmation measures, in order
    monkeypatch.setattr(perf, "_confirm", lambda r, part: Throughput(100, (0.1,) * 3, util=again.pop(0)))
    burst = result(84.0)
    again.append(Utilization(samples=50, gpu_util_pct=97.0))  # a neighbour's burst: gone when measured again
    perf.assert_utilization(burst, at_least=90)
    assert burst.notes == ["GPU-Util 84% over the gpu rounds (NVML, 50 samples), expected at least 90%: the GPU waits "
                           "for the host; measured again: GPU-Util 97%: not confirmed"]

    again.append(Utilization(samples=50, gpu_util_pct=85.0))  # a step that waits on the host: it waits again
    with pytest.raises(pytest.fail.Exception) as failed:
        perf.assert_utilization(result(84.0), at_least=90)
    assert "GPU-Util 84% over the gpu rounds" in str(failed.value)
    assert "; measured again: GPU-Util 85%" in str(failed.value)
    perf.assert_utilization(result(95.0), at_least=90)  # above the floor: nothing measured again
    assert again == []


HOST_READS = ("measured 1.00 host reads per step (3 in 3 steps) with no GPU, expected at most 0: each reads a tensor's value "
              "on the host, which on a GPU is a host-device sync:\n  1.00/step  host read in aten::_local_scalar_dense\n"
              "               user code: tiny.py:34 in loss_fn\n               fix:       .item() ...")


def test_a_failure_starts_with_a_line_of_its_causes_then_says_each_whole(monkeypatch):
    """pytest's short summary (-r) shows a failure's first line: there, each failed finding briefly, `; `-separated;
    below it the whole texts, as they were; the report keeps those only."""
    import pytest

    from torch_perf_suite.findings import FAILED, PASSED, Finding
    from torch_perf_suite.fixture import perf as fixture
    from torch_perf_suite.report import causes
    from torch_perf_suite.session.settings import Measure

    node = SimpleNamespace(nodeid="t.py::test_x", iter_markers=lambda name: iter(()))
    session = SimpleNamespace(settings=SimpleNamespace(measure=Measure(), smoke=False), results={})
    perf = fixture.Perf(session, SimpleNamespace(node=node), SimpleNamespace(extra_info={}))
    regression = "throughput regression in gpu:\n  gpu 9,524 samples/s, -4.8% against 10,000 (allowed -3%): slower"
    with pytest.raises(pytest.fail.Exception) as failed:
        perf._fail([Finding(FAILED, HOST_READS), Finding(PASSED, "held"), Finding(FAILED, regression)])
    first, whole = str(failed.value).split("\n", 1)
    assert first == ("1.00 host reads per step with no GPU, expected at most 0, from tiny.py:34; "
                     "throughput regression in gpu: gpu 9,524 samples/s, -4.8% against 10,000")
    assert whole == f"t.py::test_x: {HOST_READS}\n{regression}"
    assert causes.whole(str(failed.value), "t.py::test_x") == whole
    assert causes.whole(whole, "t.py::test_x") == whole  # an older failure, or one without a cause line, as it is
    assert causes.brief("--perf-strict: no baseline: none recorded") == "--perf-strict: no baseline"
    counted = ("counted at this GPU model's baseline (REF HEAD (1daa72af0bcc), measured on this GPU):\n"
               "the host runs 1,013 Python lines a step to issue it, 712 at REF HEAD (1daa72af0bcc) (+301, +42.3%; "
               "allowed +1% or +20): per-step Python\n    +303.00 userproj/data.py:loss_fn (0.00 -> 303.00)")
    assert causes.brief(counted) == ("the host runs 1,013 Python lines a step to issue it, 712 at REF HEAD "
                                     "(+301, +42.3%; allowed +1% or +20)")  # the change kept, the record's heading not
