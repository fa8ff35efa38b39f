"""The counted gates' verdicts (counts/checks.py) as plain functions: each returns None where all is well, and a message
naming what changed; at their edges, the sizes a message gives (bytes as MB and GB), and `counted`, which puts a test's
counts against an entry that lacks some of them."""



from torch_perf_suite.counts import checks, registry
from torch_perf_suite.counts.compiled import CompileCount, Event
from torch_perf_suite.counts.kernels import Kernel, KernelStats
from torch_perf_suite.findings import FAILED, NOT_COMPARED, Finding, failures


def counted(now, recorded, margin_pct, compile_count, compared_with="the baseline"):
    """Every count against its record, as the fixture asks (counts/registry.counted)."""
    return registry.counted(now, recorded, registry.Judging(margin_pct, compared_with, compile_count))

# ladder[bf16]'s families on an H200 (abridged), and the foreach optimizer planted in its place
FUSED = {"at::native::multi_tensor_apply_kernel": 2.0, "triton_poi_fused_add_0": 40.0, "sm90_xmma_fprop": 13.0}


def test_kernel_launches_as_recorded_pass():
    assert failures(checks.kernel_launches(dict(FUSED), FUSED)) is None


def test_one_more_launch_a_step_fails_naming_its_family():
    planted = {**FUSED, "at::native::multi_tensor_apply_kernel": 3.0}
    assert failures(checks.kernel_launches(planted, FUSED)) == (
        "56 kernel launches per step, 55 recorded (+1): a swapped optimizer implementation, a lost fusion or a changed "
        "kernel choice; launches per step by family:\n  +1 at::native::multi_tensor_apply_kernel (2 -> 3)")


def test_new_and_gone_families_are_named_most_changed_first_and_the_rest_counted():
    now = {"bf16_conv": 14.0, "triton_poi_fused_add_0": 40.0, **{f"k{i}": 1.0 for i in range(6)}}
    message = failures(checks.kernel_launches(now, FUSED))
    lines = message.splitlines()
    assert lines[1] == "  +14 bf16_conv (0 -> 14, new)" and lines[2] == "  -13 sm90_xmma_fprop (13 -> 0, gone)"
    assert lines[-1] == "  ... and 4 more famil(ies)"  # 9 changed: 2 named above, 3 more shown, 4 counted


def test_bytes_copied_within_the_margin_pass_and_beyond_it_fail():
    recorded = {"HtoD Pinned": 154_140_672}
    assert failures(checks.copies({"HtoD Pinned": 154_140_672 * 1.009}, recorded, 1.0)) is None
    assert failures(checks.copies({"HtoD Pinned": 154_140_672 * 1.02}, recorded, 1.0)) == (
        "bytes copied per step changed:\n  HtoD Pinned: 157.22 MB a step, 154.14 MB recorded (+2.0%; allowed +-1%)")


def test_a_copy_of_a_kind_never_recorded_fails_by_its_kind():
    message = failures(checks.copies({"HtoD Pinned": 1e6, "HtoD Pageable": 2e6}, {"HtoD Pinned": 1e6}, 1.0))
    assert message == "bytes copied per step changed:\n  HtoD Pageable: 2.00 MB a step, none recorded (a new kind of copy)"


def test_step_memory_names_the_peak_before_and_after():
    assert failures(checks.step_memory(11_700_000_000, 11_590_000_000, 1.0)) is None  # +0.95%
    assert failures(checks.step_memory(11_859_000_000, 11_590_000_000, 1.0)) == (
        "the steps' peak GPU memory is 11.859 GB above what they started with, 11.590 GB recorded (+2.3%; allowed +1%): "
        "an extra allocation or a tensor kept alive in the step")


BREAK = Event("graph break", "User-inserted graph break", "fixtures/recipes.py:197")
GUARD = Event("recompilation", "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 9", "fixtures/model.py:3 in f")
ONE_GRAPH = {"graphs": 1, "graph_breaks": 0, "recompilations": 0, "compile_s": 12.5}


def test_compile_counts_as_recorded_pass():
    # compile time: reported only
    assert failures(checks.compile_counts(CompileCount(graphs=1, compile_s=30.0), ONE_GRAPH)) is None


def test_a_new_graph_break_fails_with_its_reason_and_line():
    assert failures(checks.compile_counts(CompileCount(graphs=2, events=[BREAK, BREAK]), ONE_GRAPH)) == (
        "1 graph break(s), 0 recorded:\n  graph break at fixtures/recipes.py:197: User-inserted graph break")


def test_a_recompilation_fails_naming_the_guard():
    assert failures(checks.compile_counts(CompileCount(graphs=2, events=[GUARD]), ONE_GRAPH)) == (
        "1 recompilation(s), 0 recorded (a guard failed):\n  recompilation at fixtures/model.py:3 in f: 0/0: tensor 'x' "
        "size mismatch at index 0. expected 8, actual 9")


def test_other_graph_counts_and_fewer_breaks_fail_too():
    assert failures(checks.compile_counts(CompileCount(graphs=0), ONE_GRAPH)) == "0 graph(s) compiled, 1 recorded"
    message = failures(checks.compile_counts(CompileCount(graphs=1), {**ONE_GRAPH, "graph_breaks": 1}))
    assert message.startswith("fewer graph breaks or recompilations than recorded (0 and 0, 1 and 0 recorded)")


def stats(*kernels_):
    return KernelStats(2, list(kernels_))


CONVERSION = Kernel("void cudnn::nchwToNhwcKernel<float>", 40.0, 2.0, 0.1, None)
BF16_CONV = Kernel("sm90_xmma_fprop_implicit_gemm_bf16", 300.0, 13.0, 0.6, True)
FP32_CONV = Kernel("implicit_convolve_sgemm<float>", 100.0, 13.0, 0.2, False)


def test_layout_conversions_none_pass_and_each_is_listed():
    assert failures(checks.layout_conversions(stats(BF16_CONV))) is None
    k = stats(BF16_CONV, CONVERSION, CONVERSION)
    assert failures(checks.layout_conversions(k)) == (
        "4 layout conversion kernel(s) per step, expected 0 (is the model or its input no longer channels_last?):\n"
        f"  {CONVERSION.describe()}\n  {CONVERSION.describe()}\n{k.describe()}")


def test_tensor_core_share_within_its_bounds_passes_and_outside_them_fails():
    k = stats(BF16_CONV, FP32_CONV)  # 300 of 400 us: 75%
    assert failures(checks.tensor_cores(k, at_least=0.75)) is None and failures(checks.tensor_cores(k, at_most=0.75)) is None
    assert failures(checks.tensor_cores(k, at_least=0.5, at_most=0.9)) is None
    assert failures(checks.tensor_cores(k, at_least=0.8)) == (
        "75.0% of convolution and matmul GPU time ran on Tensor Cores, expected at least 80% (TF32 and autocast flags, "
        f"cuDNN's choice of kernels):\n{k.describe()}")
    assert failures(checks.tensor_cores(k, at_least=0.1, at_most=0.5)).startswith(
        "75.0% of convolution and matmul GPU time ran on Tensor Cores, expected at least 10% and at most 50% (")
    assert failures(checks.tensor_cores(k, at_most=0.7)).startswith(
        "75.0% of convolution and matmul GPU time ran on Tensor Cores, expected at most 70% (")


def test_without_a_convolution_or_matmul_there_is_no_tensor_core_share():
    k = stats(CONVERSION)
    assert failures(checks.tensor_cores(k, at_least=0.5)) == (
        f"no convolution or matmul kernel in the steps, so no Tensor Core share\n{k.describe()}")


def test_families_changed_by_as_many_launches_are_listed_by_name():
    swapped = {**FUSED, "at::native::multi_tensor_apply_kernel": 3.0, "sm90_xmma_fprop": 12.0}
    assert failures(checks.kernel_launches(swapped, FUSED)).splitlines()[1:] == [
        "  +1 at::native::multi_tensor_apply_kernel (2 -> 3)", "  -1 sm90_xmma_fprop (13 -> 12)"]


def test_five_changed_families_are_all_named_with_nothing_more_counted():
    now = {f"k{i}": 1.0 for i in range(5)}
    assert failures(checks.kernel_launches(now, {})).splitlines()[-1] == "  +1 k4 (0 -> 1, new)"


def test_bytes_copied_exactly_at_the_margin_pass():
    assert failures(checks.copies({"HtoD Pinned": 1_010_000.0}, {"HtoD Pinned": 1_000_000.0}, 1.0)) is None


def test_each_changed_kind_of_copy_has_its_line():
    recorded = {"HtoD Pinned": 100e6, "DtoH Pinned": 4.0, "DtoD": 0.0}
    assert failures(checks.copies({"HtoD Pinned": 200e6, "DtoD": 1e6}, recorded, 1.0)) == (
        "bytes copied per step changed:\n"
        "  DtoD: 1.00 MB a step, 0.00 MB recorded (+inf%; allowed +-1%)\n"
        "  DtoH Pinned: 0.00 MB a step, 0.00 MB recorded (-100.0%; allowed +-1%)\n"  # a scalar no longer read back
        "  HtoD Pinned: 200.00 MB a step, 100.00 MB recorded (+100.0%; allowed +-1%)")


def test_step_memory_exactly_at_the_margin_passes_and_against_nothing_recorded_fails():
    assert failures(checks.step_memory(3_000_000_000, 2_000_000_000, 50.0)) is None
    assert "(+60.0%; allowed +50%)" in failures(checks.step_memory(3_200_000_000, 2_000_000_000, 50.0))
    assert failures(checks.step_memory(1_000_000, 0, 1.0)).startswith(
        "the steps' peak GPU memory is 0.001 GB above what they started with, 0.000 GB recorded (+inf%; allowed +1%)")


BREAK_2 = Event("graph break", "Dynamic control flow is not supported", "fixtures/recipes.py:203")
GUARD_2 = Event("recompilation", "0/1: tensor 'x' size mismatch at index 0. expected 9, actual 10", "fixtures/model.py:3 in f")


def test_compile_counts_with_breaks_and_recompilations_as_recorded_pass():
    now = CompileCount(graphs=3, events=[BREAK, GUARD])
    assert failures(checks.compile_counts(now, {"graphs": 3, "graph_breaks": 1, "recompilations": 1})) is None


def test_more_breaks_and_recompilations_than_recorded_are_each_listed():
    now = CompileCount(graphs=5, events=[BREAK, BREAK_2, GUARD, GUARD_2])
    assert failures(checks.compile_counts(now, {"graphs": 3, "graph_breaks": 1, "recompilations": 1})) == (
        f"2 graph break(s), 1 recorded:\n  {BREAK.describe()}\n  {BREAK_2.describe()}\n"
        f"2 recompilation(s), 1 recorded (a guard failed):\n  {GUARD.describe()}\n  {GUARD_2.describe()}")


def test_a_workload_that_starts_compiling_against_a_baseline_without_compile_counts():
    """The fixture passes {} where the baseline entry has no compile counts: all of them count as zero."""
    assert failures(checks.compile_counts(CompileCount(), {})) is None
    assert failures(checks.compile_counts(CompileCount(graphs=1), {})) == "1 graph(s) compiled, 0 recorded"
    assert failures(checks.compile_counts(CompileCount(graphs=2, events=[BREAK, GUARD]), {})) == (
        f"1 graph break(s), 0 recorded:\n  {BREAK.describe()}\n1 recompilation(s), 0 recorded (a guard failed):\n"
        f"  {GUARD.describe()}")


def test_fewer_recompilations_than_recorded_fail_naming_both_counts():
    recorded = {"graphs": 2, "graph_breaks": 1, "recompilations": 2}
    assert failures(checks.compile_counts(CompileCount(graphs=2, events=[BREAK, GUARD]), recorded)) == (
        "fewer graph breaks or recompilations than recorded (1 and 1, 1 and 2 recorded): re-record the baseline to "
        "keep the gain")
    assert failures(checks.compile_counts(CompileCount(graphs=1), {"graphs": 1, "recompilations": 1})).startswith(
        "fewer graph breaks or recompilations than recorded (0 and 0, 0 and 1 recorded)")
    assert failures(checks.compile_counts(CompileCount(graphs=1), {"graphs": 1, "graph_breaks": 1})).startswith(
        "fewer graph breaks or recompilations than recorded (0 and 0, 1 and 0 recorded)")


def test_step_memory_against_an_entry_without_it_is_not_compared_and_says_so():
    found = counted({"step_peak_bytes": 10**9, "copies_per_step": {}}, {"copies_per_step": {}}, 1.0, CompileCount(),
                           "REF HEAD (abc)")
    assert found == [Finding(NOT_COMPARED, "step memory not compared: REF HEAD (abc) recorded none for this test")]


def test_a_count_the_entry_has_and_this_run_did_not_take_is_not_compared_and_says_so():
    """A workload whose step is no longer counted (no gpu_step now, no profiled window): each count its entry holds is
    a hole under --perf-strict, not a silent pass."""
    recorded = {"kernels_per_step": dict(FUSED), "copies_per_step": {}, "step_peak_bytes": 10**9,
                "host": {"lines_per_step": 10.0, "blocks_per_step": 0.0, "lines": {}, "blocks": {}}}
    assert counted({"copies_per_step": {}}, recorded, 1.0, CompileCount()) == [
        Finding(NOT_COMPARED, f"{what} not compared: the baseline counted it, this run did not")
        for what in ("kernel launches a step", "step memory", "the step's host side")]


def test_every_count_of_a_test_is_checked_against_its_entry_and_said_together():
    recorded = {"kernels_per_step": dict(FUSED), "copies_per_step": {"HtoD Pinned": 1000}, "step_peak_bytes": 10**9}
    assert failures(counted({}, recorded, 1.0, CompileCount())) is None  # nothing counted (a loader alone)
    assert failures(counted(dict(recorded), None, 1.0, CompileCount())) is None  # nothing recorded: said by the caller
    assert failures(counted(dict(recorded), recorded, 1.0, CompileCount())) is None
    now = {**recorded, "kernels_per_step": {**FUSED, "at::native::multi_tensor_apply_kernel": 3.0},
           "step_peak_bytes": 2 * 10**9}
    lines = failures(counted(now, recorded, 1.0, CompileCount())).splitlines()
    assert lines[0].startswith("56 kernel launches per step, 55 recorded (+1)") and "peak GPU memory" in lines[-1]
    gone = failures(counted(dict(recorded), {**recorded, "compile": {"graphs": 1, "breaks": 0, "recompiles": 0}}, 1.0,
                                   CompileCount()))
    assert gone is not None and "graph" in gone  # compiled when recorded, not now


def test_a_warm_step_calls_the_driver_to_allocate_no_more_than_recorded_and_none_where_none_was():
    assert checks.allocator_calls({}, {}) == []
    assert checks.allocator_calls({"cudaMalloc": 2.0}, {"cudaMalloc": 2.0}) == []  # recorded so (a scenario that must)
    [grown] = checks.allocator_calls({"cudaFree": 161.0, "cudaMalloc": 161.0}, {})  # empty_cache() every step
    assert grown.text.splitlines() == [
        "322 calls a step from the allocator to the driver, 0 recorded: torch.cuda.empty_cache() in the step, a shape that "
        "changes from step to step or a fragmented cache (each frees and allocates again, and cudaFree waits for the GPU):",
        "  cudaFree: 161 a step, 0 recorded", "  cudaMalloc: 161 a step, 0 recorded"]
    [grown] = checks.allocator_calls({"cuMemCreate": 1.5, "cudaMalloc": 1.0}, {"cudaMalloc": 2.0})
    assert grown.text.splitlines()[1:] == ["  cuMemCreate: 1.5 a step, 0 recorded"]  # fewer cudaMalloc: not a failure


def test_a_debugging_switch_the_record_did_not_have_on_fails_naming_it_first():
    anomaly = "anomaly detection (torch.autograd.set_detect_anomaly(True): every backward op checked for NaN, a sync each)"
    assert checks.debugging([anomaly], [anomaly], "the baseline") == []  # recorded with it on, on purpose
    [on] = checks.debugging([anomaly], [], "REF HEAD (abc)")
    assert on.text == f"debugging switched on in the measured steps, not at REF HEAD (abc): {anomaly}"
    found = counted({"kernels_per_step": {"k": 2.0}, "debugging": [anomaly]}, {"kernels_per_step": {"k": 1.0}}, 1.0,
                           CompileCount())
    assert [f.text.split(":")[0] for f in found] == ["debugging switched on in the measured steps, not at the baseline",
                                                     "2 kernel launches per step, 1 recorded (+1)"]
    assert counted({"allocator_per_step": {"cudaMalloc": 1.0}}, {"kernels_per_step": {}}, 1.0, CompileCount())


def test_each_count_recorded_as_measured_passes_and_each_grown_one_is_said_beside_the_others():
    """Kernels, copies, the allocator's calls, the host side and a debugging switch, each recorded: as measured, no
    finding; each grown, one finding each, none of them dropping another's."""
    anomaly = "anomaly detection (torch.autograd.set_detect_anomaly(True): every backward op checked for NaN, a sync each)"
    host = {"lines_per_step": 1000.0, "blocks_per_step": 0.0, "lines": {"train.py:step": 1000.0}, "blocks": {}}
    recorded = {"kernels_per_step": dict(FUSED), "copies_per_step": {"HtoD Pinned": 1000}, "allocator_per_step":
                {"cudaMalloc": 2.0}, "host": host, "debugging": [anomaly]}
    assert counted(dict(recorded), recorded, 1.0, CompileCount()) == []
    grown = {"kernels_per_step": {**FUSED, "at::native::multi_tensor_apply_kernel": 3.0},
             "copies_per_step": {"HtoD Pinned": 2000}, "allocator_per_step": {"cudaMalloc": 3.0},
             "host": {**host, "lines_per_step": 2000.0, "lines": {"train.py:step": 2000.0}}, "debugging": [anomaly]}
    found = [f.text.split(" ")[0:3] for f in counted(grown, recorded, 1.0, CompileCount())]
    assert found == [["56", "kernel", "launches"], ["bytes", "copied", "per"], ["3", "calls", "a"], ["the", "host", "runs"]]


def test_a_step_still_calling_the_driver_as_often_as_recorded_passes():
    assert checks.allocator_calls({"cudaMalloc": 2.0, "cudaFree": 2.0}, {"cudaMalloc": 2.0, "cudaFree": 2.0}) == []


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
    message = failures(counted(now, {"step_peak_bytes": 10**9}, 1.0, CompileCount()))
    assert message == failures(checks.kernel_launches({"sm90_xmma_fprop": 13.0}, {}))
    assert "+13 sm90_xmma_fprop (0 -> 13, new)" in message


def test_copies_counted_against_an_entry_without_them_are_a_new_kind():
    now = {"copies_per_step": {"HtoD Pinned": 2e6}}
    message = failures(counted(now, {"step_peak_bytes": 10**9}, 1.0, CompileCount()))
    assert message == "bytes copied per step changed:\n  HtoD Pinned: 2.00 MB a step, none recorded (a new kind of copy)"


def test_copies_beyond_the_margin_fail_on_their_own():
    recorded = {"copies_per_step": {"HtoD Pinned": 100e6}}
    assert failures(counted({"copies_per_step": {"HtoD Pinned": 100.5e6}}, recorded, 1.0, CompileCount())) is None
    message = failures(counted({"copies_per_step": {"HtoD Pinned": 150e6}}, recorded, 1.0, CompileCount()))
    assert message == failures(checks.copies({"HtoD Pinned": 150e6}, {"HtoD Pinned": 100e6}, 1.0))
    assert "150.00 MB a step, 100.00 MB recorded" in message


def test_an_uncounted_kind_is_not_checked_against_the_entry():
    """Only what was counted now is checked: an entry's copies are not held against a test that did not count any."""
    recorded = {"copies_per_step": {"HtoD Pinned": 100e6}, "kernels_per_step": dict(FUSED)}
    assert failures(counted({"kernels_per_step": dict(FUSED)}, recorded, 1.0, CompileCount())) is None


def test_a_test_that_compiles_against_an_entry_without_compile_counts_is_checked_against_zero():
    now = {"step_peak_bytes": 10**9, "compile": CompileCount(graphs=1).as_entry()}
    message = failures(counted(now, {"step_peak_bytes": 10**9}, 1.0, CompileCount(graphs=1)))
    assert message == "1 graph(s) compiled, 0 recorded"


def test_a_test_that_compiles_as_recorded_passes():
    entry = CompileCount(graphs=1).as_entry()
    assert failures(counted({"compile": entry}, {"compile": entry}, 1.0, CompileCount(graphs=1))) is None


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
    assert failures(counted(now, recorded, 1.0, CompileCount(graphs=2))) == "\n".join(expected)
    # the parts' findings one after the other, each a failed one
    assert [(f.outcome, f.text) for f in counted(now, recorded, 1.0, CompileCount(graphs=2))] == [
        (FAILED, text) for text in expected]
    assert counted(recorded, recorded, 1.0, CompileCount(graphs=1)) == []
