"""The device: a CUDA GPU does the synchronizing, memory and profiling; the CPU (smoke runs) does none of it."""

import pytest
import torch

from torch_perf_suite import syncs
from torch_perf_suite.machine import device
from torch_perf_suite.syncs import recording


@pytest.fixture
def cuda_calls(monkeypatch):
    """torch.cuda as a GPU machine would have it, recording what is called."""
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append("synchronize"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda: calls.append("reset_peak_memory_stats"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 2_500_000_000)
    return calls


def test_a_gpu_synchronizes_and_reports_peak_memory_in_gb(cuda_calls):
    gpu = device.Device("cuda", {})
    gpu.synchronize()
    gpu.reset_peak_memory()
    assert cuda_calls == ["synchronize", "reset_peak_memory_stats"]
    assert gpu.peak_memory_gb() == 2.5  # 2.5e9 bytes


def test_the_cpu_touches_no_cuda(cuda_calls):
    cpu = device.Device("cpu", {})
    cpu.synchronize()
    cpu.reset_peak_memory()
    assert cuda_calls == [] and cpu.peak_memory_gb() is None
    assert cpu.count_syncs(lambda: None, 3, "unused.json") is None


def test_a_gpu_counts_syncs_by_profiling_and_the_steps_peak_memory_above_what_they_began_with(monkeypatch, cuda_calls):
    seen = []
    counted = syncs.SyncCount(steps=3)
    monkeypatch.setattr(recording, "profile_steps",
                        lambda step, steps, path, all_threads: seen.append((step, steps, path, all_threads)) or counted)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: 1_000_000_000)  # the model, its optimizer, a batch

    def step():
        pass

    gpu = device.Device("cuda:0", {}, recording.count_steps)  # the sync counter the session gives it
    assert gpu.count_syncs(step, 3, "t.json") is counted
    assert gpu.count_syncs(step, 3, "t.json", all_threads=True) is counted
    assert seen == [(step, 3, "t.json", False), (step, 3, "t.json", True)]
    assert cuda_calls == ["synchronize", "reset_peak_memory_stats"] * 2  # the peak is the window's own
    assert counted.step_peak_bytes == 1_500_000_000  # 2.5 GB at the peak, 1 GB held before


@pytest.mark.parametrize("available, name", [(True, "cuda"), (False, "cpu")])
def test_detect_device(monkeypatch, available, name):
    env = {"gpu": "NVIDIA H200"}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    monkeypatch.setattr(device, "_environment", lambda: env)
    d = device.detect_device()
    assert d.name == name and d.env is env and d.is_gpu == available


def test_the_clock_is_the_wall_clock_in_seconds(monkeypatch):
    monkeypatch.setattr(device.time, "perf_counter", lambda: 12.5)
    assert device.Device("cpu", {}).clock() == 12.5


@pytest.mark.parametrize("count, visible, expected", [(1, None, True), (8, "2,3", True), (None, None, False),
                                                      (0, None, False), (1, "", False), (1, "-1", False)])
def test_a_gpu_is_told_visible_without_importing_torch(monkeypatch, count, visible, expected):
    monkeypatch.setattr(device.nvml, "gpus_on_node", lambda: count)  # None: no NVML (the CPU machines)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert device.gpu_visible() is expected


def test_a_gpu_given_no_sync_counter_refuses_to_count_rather_than_count_none():
    with pytest.raises(RuntimeError, match="a GPU device made without a sync counter"):
        device.Device("cuda:0", {}).count_syncs(lambda: None, 3, "t.json")
