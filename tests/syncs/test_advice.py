"""The fixes' advice (advice.py): which source of a sync gets which advice, and an unknown one none."""

import pytest

from tests.syncs.hand_made import NO_STACK, PAGEABLE
from torch_perf_suite import syncs
from torch_perf_suite.syncs import SyncSource

# --- fix advice ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source, kind", [
    (SyncSource("cudaStreamSynchronize", "aten::index > aten::nonzero", "a.py:1 in loss", ""), "boolean mask"),
    (SyncSource("cudaStreamSynchronize", "aten::is_nonzero > aten::item > aten::_local_scalar_dense", "a.py:1 in f", ""),
     "tensor read on the host"),
    (SyncSource(PAGEABLE, "", NO_STACK, ""), "pageable copy"),
    (SyncSource("cudaStreamSynchronize", "aten::_to_copy > aten::copy_", "a.py:1 in f", ""), "blocking copy"),
    (SyncSource("cudaStreamSynchronize", "aten::item > aten::_local_scalar_dense", "a.py:1 in f",
                "torchmetrics/aggregation.py:93 in _cast_and_nan_check_input"), "torchmetrics input check"),
])
def test_known_sources_get_their_advice(source, kind):
    assert source.advice.kind == kind


@pytest.mark.parametrize("source", [
    SyncSource("cudaDeviceSynchronize", "", "a.py:1 in f", ""),  # torch.cuda.synchronize() by hand
    SyncSource("cudaStreamSynchronize", "aten::nonzerox", "a.py:1 in f", ""),  # op names match whole
    SyncSource("cudaStreamSynchronize", "aten::item", "a.py:1 in f", "mylib/torch/amp/grad_scaler.py:1 in f"),
])
def test_an_unknown_source_says_no_fix_is_known(source):
    assert source.advice is None
    assert source.describe().endswith(f"    fix:       {syncs.UNKNOWN_FIX}")


def test_advice_without_criteria_matches_nothing():
    assert not syncs.Advice("x", "y", "z").matches(SyncSource("cudaStreamSynchronize", "", "", ""))
