"""Model FLOPs per step (flops.py), on the CPU: against a hand count, FlopCounterMode's total and its dtype."""

import sys
from types import SimpleNamespace

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from torch_perf_suite.counts import flops


def linear_step(model, x, dtype=None):
    def step():
        with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            loss = model(x).float().sum()
        loss.backward()
    return step


def test_a_linear_step_counts_forward_and_backward_matmuls_as_by_hand():
    model, x = torch.nn.Linear(8, 4), torch.randn(16, 8)
    counted = flops.count(linear_step(model, x))
    # forward 2*16*8*4; backward: the input's gradient is not needed, the weight's is 2*4*16*8
    assert counted.per_step == 2 * 16 * 8 * 4 * 2
    with FlopCounterMode(display=False) as reference:
        linear_step(model, x)()
    assert counted.per_step == reference.get_total_flops()


def test_the_dtype_is_where_the_matmuls_ran():
    model, x = torch.nn.Linear(8, 4), torch.randn(16, 8, requires_grad=True)
    assert flops.count(linear_step(model, x, torch.bfloat16)).dtype == "bfloat16"
    on_gpu = SimpleNamespace(dtype=torch.float32, device=torch.device("cuda"))  # a CUDA tensor's dtype and device
    precision = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert flops.count(linear_step(model, x)).dtype == "float32" == flops._dtype(on_gpu, convolution=False)
        torch.set_float32_matmul_precision("high")
        assert flops._dtype(on_gpu, convolution=False) == "tfloat32"
        assert flops.count(linear_step(model, x)).dtype == "float32"  # TF32 is CUDA's: a CPU matmul is float32
    finally:
        torch.set_float32_matmul_precision(precision)


def test_a_compiled_step_is_counted_as_it_runs_eagerly():
    model, x = torch.nn.Linear(8, 4), torch.randn(16, 8)
    compiled = torch.compile(model, backend="eager")
    assert flops.count(linear_step(compiled, x)).per_step == flops.count(linear_step(model, x)).per_step > 0


def test_a_step_without_matmuls_counts_nothing():
    assert flops.count(lambda: torch.ones(4).add_(1)) is None


def test_the_reading_gives_tflops_and_mfu_per_part_against_the_named_peak():
    reading = flops.StepFlops(per_step=4.1e9 * 3 * 256, dtype="bfloat16").reading(
        {"pipeline": 5000.0, "gpu": 8000.0}, 256, "NVIDIA H200")
    assert reading["gflops_per_sample"] == pytest.approx(12.3)
    assert reading["pipeline_tflops"] == pytest.approx(61.5) and reading["gpu_tflops"] == pytest.approx(98.4)
    assert reading["gpu_mfu"] == pytest.approx(98.4 / 989.4, abs=1e-4) and reading["peak_tflops"] == 989.4
    assert reading["peak_source"] == flops.OWN_SOURCE


def test_a_gpu_outside_the_tables_has_no_peak_and_says_why():
    reading = flops.StepFlops(1e9, "bfloat16").reading({"pipeline": 100.0}, 10, "Some GPU")
    assert reading["pipeline_tflops"] == pytest.approx(0.01) and reading["pipeline_mfu"] is None
    assert reading["peak_tflops"] is None and reading["peak_source"]


def test_a_peak_comes_from_the_suites_table_then_lightnings_and_on_the_cpu_from_neither(monkeypatch):
    import types

    import torch

    from torch_perf_suite.counts import flops

    assert flops.peak_flops("NVIDIA H200", "bfloat16") == (989.4e12, flops.OWN_SOURCE)
    monkeypatch.setitem(sys.modules, "lightning.fabric.utilities.throughput", None)  # an import of it fails
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert flops.peak_flops("cpu", "float32") == (None, "no GPU")  # Lightning not asked
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    peak, source = flops.peak_flops("NVIDIA A100", "float32")
    assert peak is None and source.endswith("Lightning is not installed)")
    table = types.ModuleType("throughput")
    table.get_available_flops = lambda device, dtype: 312e12 if dtype is torch.bfloat16 else None
    monkeypatch.setitem(sys.modules, "lightning.fabric.utilities.throughput", table)
    assert flops.peak_flops("NVIDIA A100", "bfloat16") == (312e12, "Lightning's table (lightning.fabric.utilities.throughput)")
    assert flops.peak_flops("NVIDIA A100", "float16")[0] is None
