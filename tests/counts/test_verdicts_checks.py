"""counts/checks.py's verdicts at their edges: the sizes a message gives (bytes as MB and GB), and `counted`, which puts a
test's counts against an entry that lacks some of them."""

from torch_perf_suite.counts import checks
from torch_perf_suite.counts.compiled import CompileCount
from torch_perf_suite.findings import FAILED, Finding, failures

FUSED = {"at::native::multi_tensor_apply_kernel": 2.0, "triton_poi_fused_add_0": 40.0}


# --- sizes in messages: a megabyte is 10**6 bytes, a gigabyte 10**9 ---------------------------------


def test_a_new_kind_of_copy_gives_its_size_in_megabytes():
    # 1,005,001 bytes = 1.005001 MB, which rounds up to 1.01 at two decimals
    message = failures(checks.copies({"HtoD Pageable": 1_005_001.0}, {}, 1.0))
    assert "HtoD Pageable: 1.01 MB a step, none recorded" in message


def test_a_changed_copy_gives_both_sizes_in_megabytes():
    # 1,005,001 bytes now (1.01 MB), 2,005,001 recorded (2.005001 MB: 2.01); about half: far beyond 1%
    message = failures(checks.copies({"HtoD Pinned": 1_005_001.0}, {"HtoD Pinned": 2_005_001.0}, 1.0))
    assert "HtoD Pinned: 1.01 MB a step, 2.01 MB recorded" in message


def test_step_memory_gives_both_peaks_in_gigabytes():
    # 3,000,500,001 bytes = 3.000500001 GB (3.001); 2,000,500,001 = 2.000500001 GB (2.001); +50%, allowed +1%
    message = failures(checks.step_memory(3_000_500_001, 2_000_500_001, 1.0))
    assert "3.001 GB above what they started with, 2.001 GB recorded" in message


# --- counted: counts the entry lacks count as none recorded ------------------------------------------


def test_kernel_launches_counted_against_an_entry_without_them_are_all_new():
    now = {"kernels_per_step": {"sm90_xmma_fprop": 13.0}}
    message = failures(checks.counted(now, {"step_peak_bytes": 10**9}, 1.0, CompileCount()))
    assert message == failures(checks.kernel_launches({"sm90_xmma_fprop": 13.0}, {}))
    assert "+13 sm90_xmma_fprop (0 -> 13, new)" in message


def test_copies_counted_against_an_entry_without_them_are_a_new_kind():
    now = {"copies_per_step": {"HtoD Pinned": 2e6}}
    message = failures(checks.counted(now, {"step_peak_bytes": 10**9}, 1.0, CompileCount()))
    assert message == "bytes copied per step changed:\n  HtoD Pinned: 2.00 MB a step, none recorded (a new kind of copy)"


def test_copies_beyond_the_margin_fail_on_their_own():
    recorded = {"copies_per_step": {"HtoD Pinned": 100e6}}
    assert failures(checks.counted({"copies_per_step": {"HtoD Pinned": 100.5e6}}, recorded, 1.0, CompileCount())) is None
    message = failures(checks.counted({"copies_per_step": {"HtoD Pinned": 150e6}}, recorded, 1.0, CompileCount()))
    assert message == failures(checks.copies({"HtoD Pinned": 150e6}, {"HtoD Pinned": 100e6}, 1.0))
    assert "150.00 MB a step, 100.00 MB recorded" in message


def test_an_uncounted_kind_is_not_checked_against_the_entry():
    """Only what was counted now is checked: an entry's copies are not held against a test that did not count any."""
    recorded = {"copies_per_step": {"HtoD Pinned": 100e6}, "kernels_per_step": dict(FUSED)}
    assert failures(checks.counted({"kernels_per_step": dict(FUSED)}, recorded, 1.0, CompileCount())) is None


def test_a_test_that_compiles_against_an_entry_without_compile_counts_is_checked_against_zero():
    now = {"step_peak_bytes": 10**9, "compile": CompileCount(graphs=1).as_entry()}
    message = failures(checks.counted(now, {"step_peak_bytes": 10**9}, 1.0, CompileCount(graphs=1)))
    assert message == "1 graph(s) compiled, 0 recorded"


def test_a_test_that_compiles_as_recorded_passes():
    entry = CompileCount(graphs=1).as_entry()
    assert failures(checks.counted({"compile": entry}, {"compile": entry}, 1.0, CompileCount(graphs=1))) is None


def test_every_failing_count_is_on_lines_of_its_own_in_the_documented_order():
    recorded = {"kernels_per_step": dict(FUSED), "copies_per_step": {"HtoD Pinned": 100e6}, "step_peak_bytes": 10**9,
                "compile": {"graphs": 1, "graph_breaks": 0, "recompilations": 0}}
    kernels_now = {**FUSED, "triton_poi_fused_add_0": 41.0}
    now = {"kernels_per_step": kernels_now, "copies_per_step": {"HtoD Pinned": 150e6}, "step_peak_bytes": 2 * 10**9,
           "compile": {"graphs": 2, "graph_breaks": 0, "recompilations": 0}}
    expected = [
        failures(checks.kernel_launches(kernels_now, FUSED)),
        failures(checks.copies({"HtoD Pinned": 150e6}, {"HtoD Pinned": 100e6}, 1.0)),
        failures(checks.step_memory(2 * 10**9, 10**9, 1.0)),
        "2 graph(s) compiled, 1 recorded",
    ]
    assert all(expected)
    assert failures(checks.counted(now, recorded, 1.0, CompileCount(graphs=2))) == "\n".join(expected)
    # the parts' findings one after the other, each a failed one
    assert checks.counted(now, recorded, 1.0, CompileCount(graphs=2)) == [Finding(FAILED, text) for text in expected]
    assert checks.counted(recorded, recorded, 1.0, CompileCount(graphs=1)) == []
