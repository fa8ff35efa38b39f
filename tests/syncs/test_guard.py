"""The guard for a user's own loop (loop_guard.py), on the CPU: what reaches it as the CUDA debug mode's warning, and a
non-blocking copy from pageable memory, which its Tensor.to wrapper sees before the copy itself runs."""

import warnings

import pytest
import torch

from torch_perf_suite import guard
from torch_perf_suite.syncs.loop_guard import SyncInLoop


def debug_mode_sync():
    """What torch.cuda.set_sync_debug_mode("warn") emits where an op synchronizes (an .item(), say)."""
    warnings.warn("called a synchronizing CUDA operation", UserWarning)


def test_a_sync_in_the_loop_raises_naming_its_line():
    with pytest.raises(SyncInLoop, match=r"a host-device sync in the guarded loop at tests/syncs/test_guard.py:\d+ in "
                                         r"debug_mode_sync: remove it, or wrap an intended one"):
        with guard():
            debug_mode_sync()


def test_a_pageable_non_blocking_copy_to_the_gpu_is_caught_before_it_runs():
    batch = torch.zeros(4)
    with pytest.raises(SyncInLoop, match=r"a non-blocking copy to the GPU from pageable memory \(pin it: "
                                         r"pin_memory=True\) in the guarded loop at tests/syncs/test_guard.py:\d+ in test_"):
        with guard():
            batch.to("cuda", non_blocking=True)
    with pytest.raises(SyncInLoop, match="pageable memory"):
        with guard():
            batch.cuda(non_blocking=True)
    with pytest.raises(SyncInLoop, match="pageable memory"):
        with guard():
            batch.to(device=torch.device("cuda:0"), non_blocking=True)


def test_what_is_not_a_pageable_copy_to_the_gpu_passes_through():
    batch, original = torch.zeros(4), torch.Tensor.to
    with guard():
        assert torch.Tensor.to is not original  # wrapped inside
        assert batch.to(torch.float16, non_blocking=True).dtype == torch.float16
        assert batch.to("cpu", non_blocking=True) is batch
    assert torch.Tensor.to is original  # put back


def test_an_allowed_region_passes_and_the_guard_resumes_after_it():
    with guard() as g:
        with g.allowed("logging every 100 steps"):
            debug_mode_sync()
        with pytest.raises(SyncInLoop):
            debug_mode_sync()
    assert g.caught and len(g.caught) == 1


def test_warn_mode_warns_and_keeps_what_it_caught():
    with pytest.warns(UserWarning, match=r"a host-device sync in the guarded loop at tests/syncs/test_guard.py:\d+"):
        with guard(action="warn") as g:
            debug_mode_sync()
            debug_mode_sync()
    assert len(g.caught) == 2


def test_an_unknown_action_is_refused():
    with pytest.raises(ValueError, match=r"guard\(action='stop'\): give 'raise' or 'warn'"):
        with guard(action="stop"):
            pass
