"""Host memory (torch_perf_suite.machine.host.memory, memory_line) and the batch's bytes (fixtures.training.batch_bytes):
this process's resident set, the DataLoader workers' proportional and resident sets, and seed 003's arithmetic."""

import gc
import os
from types import SimpleNamespace

import psutil
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from fixtures import recipes, training
from torch_perf_suite.machine import host

MB = 2**20
DEAD_PID = 2**22 + 12345  # above Linux's largest pid_max (2**22): no process has it


@pytest.mark.parametrize("batches", [None, SimpleNamespace(_workers=[]), iter([1, 2])])  # no workers, an iterator without
def test_memory_without_workers_is_this_process_s(batches):
    found = host.memory(batches)
    assert abs(found["main_rss"] - psutil.Process().memory_info().rss) < 8 * MB
    assert (found["workers"], found["workers_pss"], found["workers_rss"]) == (0, 0, 0)


def test_memory_of_a_loader_s_workers():
    loader = DataLoader(TensorDataset(torch.arange(16.0)), batch_size=4, num_workers=2)
    batches = iter(loader)
    try:
        assert next(batches)[0].tolist() == [0.0, 1.0, 2.0, 3.0]
        found = host.memory(batches)
        by_hand = sum(psutil.Process(w.pid).memory_info().rss for w in batches._workers)
        # forked from this process: the pages of torch's libraries they map are shared with it, so PSS is below RSS
        assert found["workers"] == 2 and 0 < found["workers_pss"] < found["workers_rss"]
        assert abs(found["workers_rss"] - by_hand) < 16 * MB
        assert abs(found["main_rss"] - psutil.Process().memory_info().rss) < 8 * MB
        workers = list(batches._workers)
    finally:
        del batches  # shuts the workers down and joins them
        gc.collect()
    assert all(w.exitcode is not None for w in workers)
    assert host.memory(SimpleNamespace(_workers=workers))["workers"] == 0  # gone: left out, no error


def test_a_worker_that_has_exited_is_left_out():
    this = psutil.Process()
    found = host.memory(SimpleNamespace(_workers=[SimpleNamespace(pid=DEAD_PID), SimpleNamespace(pid=os.getpid())]))
    if psutil.pid_exists(DEAD_PID):
        pytest.skip(f"pid {DEAD_PID} exists here")
    assert found["workers"] == 1 and 0 < found["workers_pss"] <= found["workers_rss"]
    assert abs(found["workers_rss"] - this.memory_info().rss) < 8 * MB  # the one left: this process


# --- memory_line: the report's note -------------------------------------------------------------------------------


FULL = {"main_rss": 2_346_000_000, "workers": 8, "workers_pss": 1_500_000_000, "workers_rss": 6_126_000_000,
        "pinned": 1_073_741_824, "batch": 256 * 3 * 224 * 224}  # 38_535_168 bytes: 38.5 MB; x 8 = 308.28 MB
WORKERS = "8 workers 1.50 GB PSS (0.19 GB each; 6.13 GB RSS)"  # 1.5 GB / 8 = 0.1875 GB each
ARITHMETIC = "batch 38.5 MB x 8 workers = 308 MB"
PINNED, NO_PINNED = "pinned pool 1.07 GB", "pinned pool 0.00 GB"  # 1_073_741_824 bytes: 1.07 GB


@pytest.mark.parametrize("found, workers, line", [
    (FULL, 8, f"main 2.35 GB, {WORKERS}, {PINNED}; {ARITHMETIC}"),
    ({**FULL, "pinned": None}, 8, f"main 2.35 GB, {WORKERS}; {ARITHMETIC}"),
    ({**FULL, "pinned": 0}, 8, f"main 2.35 GB, {WORKERS}, {NO_PINNED}; {ARITHMETIC}"),
    ({**FULL, "batch": None}, 8, f"main 2.35 GB, {WORKERS}, {PINNED}"),
    (FULL, 0, f"main 2.35 GB, {WORKERS}, {PINNED}"),  # a recipe without workers: no arithmetic
    ({**FULL, "workers": 3, "workers_pss": 900_000_000, "workers_rss": 3_000_000_000}, 3,  # 0.3 GB each
     f"main 2.35 GB, 3 workers 0.90 GB PSS (0.30 GB each; 3.00 GB RSS), {PINNED}; "
     "batch 38.5 MB x 3 workers = 116 MB"),
    # no worker found (the loader not started): the arithmetic still, on the recipe's workers; 1024 x 150_528 = 154_140_672
    # bytes, x 16 = 2_466_250_752
    ({"main_rss": 500_000_000, "workers": 0, "workers_pss": 0, "workers_rss": 0, "batch": 1024 * 3 * 224 * 224}, 16,
     "main 0.50 GB; batch 154.1 MB x 16 workers = 2,466 MB"),
    ({"main_rss": 500_000_000, "workers": 0, "workers_pss": 0, "workers_rss": 0}, 4, "main 0.50 GB"),
])
def test_memory_line(found, workers, line):
    assert host.memory_line(found, workers) == line


def test_memory_line_of_a_measured_memory():
    found = host.memory()
    assert host.memory_line(found, 2) == f"main {found['main_rss'] / 1e9:.2f} GB"


# --- batch_bytes: seed 003's arithmetic ---------------------------------------------------------------------------


def test_a_batch_s_bytes_are_its_images_and_int64_labels():
    image = 3 * 224 * 224
    assert training.batch_bytes((torch.zeros(3, 224, 224, dtype=torch.uint8), 7), 256) == 256 * (image + 8)
    assert training.batch_bytes((torch.zeros(3, 224, 224, dtype=torch.float32), 7), 256) == 256 * (4 * image + 8)
    assert training.batch_bytes((torch.zeros(3, 224, 224, dtype=torch.uint8), torch.tensor(7)), 2) == 2 * (image + 8)
    three = (torch.zeros(1000, dtype=torch.uint8), 7, torch.zeros(2, dtype=torch.int32))  # every part of an item counts
    assert training.batch_bytes(three, 3) == 3 * (1000 + 8 + 2 * 4)


def test_a_workload_reports_its_workers_memory_and_its_batch():
    """uint8 32x32 CIFAR batches of 4 (the smoke size), 2 workers: while the loader runs they are counted; closed, not."""
    w = training.build(recipes.for_smoke(recipes.ladder(workers=2)["uint8_h2d"]), "cpu")
    try:
        assert w.host_memory()["workers"] == 0  # no batch asked for yet: no workers
        assert w.step().isfinite()
        found = w.host_memory()
        assert found["workers"] == 2 and 0 < found["workers_pss"] <= found["workers_rss"]
        assert found["batch"] == 4 * (3 * 32 * 32 + 8) and found["pinned"] is None
    finally:
        w.close()
    assert w.host_memory()["workers"] == 0
