"""Kernels per step from a profiled window: which are convolutions or matmuls, which of those use
Tensor Cores, which are layout conversions; on made-up events and on the committed traces."""

from pathlib import Path

import pytest

from torch_perf_suite import syncs
from torch_perf_suite.counts import kernels

TRACES = Path(__file__).parents[1] / "traces"

# Names as the profiler recorded them: the committed traces (ResNet-18) and the ResNet-50 tests' reports
# (perf_tests/test_resnet50.py on an H200, torch 2.11, cuDNN 9), with what they are.
NAMES = [
    # strict FP32: FFMA instructions, cuBLAS's SGEMM/GEMV and complex GEMMs (FFT convolutions), cuDNN's float kernels
    ("sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize256x64x8_stage3_warpsize2x2x1_g1_ffma_aligna4_alignc4"
     "_execute_kernel__5x_cudnn", False),
    ("sm80_xmma_wgrad_implicit_gemm_indexed_f32f32_f32f32_f32_nhwckrsc_nhwc_tilesize32x32x8_stage3_warpsize1x2x1_g1_ffma_execute"
     "_kernel__5x_cudnn", False),
    ("sm80_xmma_gemm_cf32cf32_f32f32_cf32_nt_n_tilesize64x64x8_stage3_warpsize2x2x1_ffma_aligna8_alignc8_execute_kernel__5x_cublas",
     False),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
     False),
    ("void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false, cublasGemvTensorStridedBatched<float const>>", False),
    ("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*, int, float const*)", False),
    ("void wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(int, int, int, float const*, int, float*)", False),
    ("void cudnn::cnn::wgrad_alg1_engine<float, float, 128, 5, 5, 3, 3, 3, false, true>(int, int, int, float const*)", False),
    # direct (non-GEMM) convolutions in fp16: CUDA cores
    ("void cudnn::cnn::wgrad2d_grouped_direct_kernel<false, true, int, __half, float, float>(WgradGroupedDirectParams)", False),
    ("void precomputed_convolve_sgemm<__half, 1024, 5, 5, 4, 3, 3, 1, false>(int, int, int, __half const*)", False),
    # Tensor Cores: TF32, fp16 and bf16 implicit GEMMs (Hopper's sm90_xmma, CUTLASS tensorop), Hopper's cuBLAS (nvjet)
    ("sm90_xmma_wgrad_indexed_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1_g1_execute"
     "_segment_k_on_kernel__5x_cudnn", True),
    ("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_segment_k"
     "_off_kernel__5x_cudnn", True),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_segment"
     "_k_off_kernel__5x_cudnn", True),
    ("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>(Params)", True),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_nn_align2>(Params)", True),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_16x16_64x1_tn_align2>(Params)", True),
    ("nvjet_sm90_hsh_128x128_64x6_2x1_v_bz_splitK_NTT", True),
    # neither: elementwise, batch norm, pooling, layout conversions, and torch.compile's Triton kernels (named after ops)
    ("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::Half>, std::array<char*, 3ul> >", None),
    ("void cudnn::batchnorm_bwtr_nhwc_semiPersist<__half, float, __half, 512, 16, 3, 4, 1, 0, true, 2>(NhwcBatchNormBwdParams)",
     None),
    ("void at::native::(anonymous namespace)::max_pool_backward_nhwc<c10::Half, float>(c10::Half const*, long const*)", None),
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<__half, __half, float, false, true, (cudnnKernelDataType_t)0>(params)",
     None),
    ("triton_poi_fused__native_batch_norm_legit_functional_add_convolution_backward_native_batch_norm_backward_threshold"
     "_backward_61", None),
    ("triton_red_fused__native_batch_norm_legit_functional_14", None),
]


@pytest.mark.parametrize("name, expected", NAMES, ids=[n[:48] for n, _ in NAMES])
def test_each_kernel_is_told_apart_by_name(name, expected):
    assert kernels.tensor_core(name) is expected


@pytest.mark.parametrize("name, expected", [
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)0>(p)", True),
    ("void cudnn::engines_precompiled::nhwcToNchwKernel<__nv_bfloat16, __nv_bfloat16, float, true, false, "
     "(cudnnKernelDataType_t)0>(params)", True),
    ("void cudnn::batchnorm_fwtr_nhwc_semiPersist<__half, float, __half, 512, 16, 5, 4, 1, 0, false, false, true, 2>", False),
    ("triton_poi_fused__native_batch_norm_legit_functional_add_relu_18", False),
])
def test_layout_conversions(name, expected):
    assert kernels.is_conversion(name) is expected


TC = "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_k"
FP32 = "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_ffma"
CONVERT = "void cudnn::engines_precompiled::nchwToNhwcKernel<__half>"
RELU = "void at::native::vectorized_elementwise_kernel<4, relu>"


def window(kernel_runs):
    """Two steps, 0-100 us and 200-300 us, on one host thread; each kernel launched at `launch` and run on the GPU
    for `dur` us from `start` (the GPU runs behind the host)."""
    events = [{"ph": "X", "cat": "user_annotation", "name": f"perf_step_{i}", "ts": 200 * i, "dur": 100, "pid": 1, "tid": 1}
              for i in range(2)]
    for corr, (name, launch, start, dur) in enumerate(kernel_runs, start=1):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": launch, "dur": 1, "pid": 1, "tid": 1,
                       "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": start, "dur": dur, "pid": 0, "tid": 7,
                       "args": {"correlation": corr}})
    return syncs.count_syncs({"traceEvents": events}).kernels


def test_kernel_figures_per_step():
    k = window([
        (TC, 10, 20, 60), (FP32, 20, 80, 20), (CONVERT, 30, 100, 10), (RELU, 40, 110, 10),  # step 0
        (TC, 210, 220, 60), (CONVERT, 230, 290, 10), (CONVERT, 240, 300, 10),  # step 1: runs past the step's end
    ])
    assert k.steps == 2
    assert [(x.name, x.us_per_step, x.launches_per_step) for x in k.kernels] == [
        (TC, 60.0, 1.0), (CONVERT, 15.0, 1.5), (FP32, 10.0, 0.5), (RELU, 5.0, 0.5)]
    assert k.total_us_per_step == 90.0
    assert [round(x.share, 4) for x in k.kernels] == [0.6667, 0.1667, 0.1111, 0.0556]
    assert k.tensor_core_share == pytest.approx(60 / 70)  # conv and matmul time only: TC 120 us, FFMA 20 us
    assert k.conversions_per_step == 1.5 and [c.name for c in k.conversions] == [CONVERT]


def test_kernels_launched_outside_the_steps_do_not_count_even_when_they_run_inside():
    k = window([(TC, 10, 20, 60), (FP32, 150, 210, 50), (FP32, 350, 360, 10)])  # launched between the steps, after the last
    assert [x.name for x in k.kernels] == [TC] and k.tensor_core_share == 1.0


def test_no_conv_or_matmul_means_no_share():
    k = window([(RELU, 10, 20, 5)])
    assert k.tensor_core_share is None and k.conversions_per_step == 0


def test_json_and_description_list_the_top_kernels():
    k = window([(f"kernel_{i}", 10 + i, 20 + i, 1 + i) for i in range(12)] + [(TC, 50, 60, 2)])
    data = k.as_json()
    assert len(data["top"]) == kernels.TOP == 10
    assert data["top"][0] == {"name": "kernel_11", "ms_per_step": 0.006, "launches_per_step": 0.5, "share": round(12 / 80, 4),
                              "tensor_core": None}
    assert data["tensor_core_share"] == 1.0 and data["conversions"] == [] and data["steps"] == 2
    text = k.describe()
    assert text.startswith("top 10 of 13 kernels by GPU time per step (0.04 ms of kernels a step; conv/matmul time on "
                           "Tensor Cores: 100.0%):")
    assert "kernel_11" in text and "kernel_0" not in text  # the two shortest are left out


def share_by_hand(case: str) -> tuple[int, float]:
    """(kernels, Tensor Core share) summed over every kernel event of a committed trace, whose profiled
    windows hold nothing but the steps."""
    events = [e for e in syncs.load_trace(TRACES / f"{case}.json.gz")["traceEvents"] if e.get("cat") == "kernel"]
    on_tc = sum(e["dur"] for e in events if kernels.tensor_core(e["name"]))
    conv_or_matmul = sum(e["dur"] for e in events if kernels.tensor_core(e["name"]) is not None)
    return len(events), on_tc / conv_or_matmul


def test_the_committed_traces():
    """The fp32 trace (ResNet-18 on an H200, strict FP32 matmuls) ran no Tensor Core kernel; the fp16 one (autocast
    with a GradScaler) ran its matmuls on CUTLASS tensorop kernels and some convolutions on CUDA cores."""
    for case, tensor_core_kernels in [("clean", set()), ("grad_scaler", {"cutlass_80_wmma_tensorop_f16_s161616gemm"})]:
        k = syncs.count_syncs(syncs.load_trace(TRACES / f"{case}.json.gz")).kernels
        launches, share = share_by_hand(case)
        assert round(sum(x.launches_per_step for x in k.kernels) * k.steps) == launches  # all of them, once each
        assert k.tensor_core_share == pytest.approx(share) and k.conversions_per_step == 0
        assert {next(w for w in tensor_core_kernels if w in x.name) for x in k.kernels if x.tensor_core} == tensor_core_kernels
    assert share_by_hand("clean")[1] == 0 and 0.3 < share_by_hand("grad_scaler")[1] < 0.7


def copied_by_hand(case: str) -> dict[str, float]:
    """Bytes a step of a committed trace's memcpy events by direction (the word after "Memcpy "), summed over every
    one of them (the profiled windows hold nothing but the steps) and divided by its steps."""
    events = syncs.load_trace(TRACES / f"{case}.json.gz")["traceEvents"]
    steps = sum(e.get("cat") == "user_annotation" and e["name"].startswith("perf_step_") for e in events)
    copied: dict[str, float] = {}
    for e in events:
        if e.get("cat") == "gpu_memcpy":
            direction = e["name"].split()[1]
            copied[direction] = copied.get(direction, 0) + e["args"]["bytes"]
    return {direction: total / steps for direction, total in copied.items()}


@pytest.mark.parametrize("case", sorted(p.name.removesuffix(".json.gz") for p in TRACES.glob("*.json.gz")))
def test_bytes_copied_a_step_in_the_committed_traces(case):
    k = syncs.count_syncs(syncs.load_trace(TRACES / f"{case}.json.gz")).kernels
    by_hand = copied_by_hand(case)
    assert by_hand["HtoD"] > 0  # every trace copies its batch to the GPU
    assert k.copied_bytes_per_step == pytest.approx(by_hand) and k.as_json()["copied_bytes_per_step"] == k.copied_bytes_per_step
    assert not any(x.name.startswith("Memcpy") for x in k.kernels)  # copies are not kernels


HTOD, DTOH, DTOD = "Memcpy HtoD (Pinned -> Device)", "Memcpy DtoH (Device -> Pinned)", "Memcpy DtoD (Device -> Device)"


def copies_window(copies, kernel_runs=()):
    """window()'s two steps (0-100 us, 200-300 us), with memcpy events: each (name, launch, start, bytes) launched by
    cudaMemcpyAsync at `launch` (None: no launch in the trace) and run on the GPU from `start` for 2 us."""
    events = [{"ph": "X", "cat": "user_annotation", "name": f"perf_step_{i}", "ts": 200 * i, "dur": 100, "pid": 1, "tid": 1}
              for i in range(2)]
    for corr, (name, launch, start, dur) in enumerate(kernel_runs, start=1000):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": launch, "dur": 1, "pid": 1, "tid": 1,
                       "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": start, "dur": dur, "pid": 0, "tid": 7,
                       "args": {"correlation": corr}})
    for corr, (name, launch, start, size) in enumerate(copies, start=1):
        if launch is not None:
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "ts": launch, "dur": 1, "pid": 1,
                           "tid": 1, "args": {"correlation": corr}})
        args = {"correlation": corr} if size is None else {"correlation": corr, "bytes": size}
        events.append({"ph": "X", "cat": "gpu_memcpy", "name": name, "ts": start, "dur": 2, "pid": 0, "tid": 8, "args": args})
    return syncs.count_syncs({"traceEvents": events}).kernels


def test_bytes_copied_a_step_are_placed_by_their_launch():
    k = copies_window([
        (HTOD, 10, 20, 1000), (DTOH, 90, 120, 8),  # step 0; the DtoH runs after the step ended, launched in it
        (HTOD, 210, 220, 3000), (DTOD, 250, 260, 4), (DTOD, 260, 270, 4),  # step 1
        (HTOD, 150, 210, 10**6),  # launched between the steps, runs inside step 1: not counted
        (HTOD, 350, 360, 10**7), (DTOH, 310, 320, 10**7),  # launched after the last step
        (HTOD, None, 230, 500),  # no launch in the trace: placed by its own start, in step 1
        (HTOD, None, 150, 10**8),  # nor launch, starts between the steps
    ], kernel_runs=[(RELU, 10, 20, 6)])
    assert k.copied_bytes_per_step == {"DtoD": 4.0, "DtoH": 4.0, "HtoD": (1000 + 3000 + 500) / 2}
    assert [(x.name, x.us_per_step) for x in k.kernels] == [(RELU, 3.0)]  # copies are not kernels, nor their time
    assert k.as_json()["copied_bytes_per_step"] == {"DtoD": 4.0, "DtoH": 4.0, "HtoD": 2250.0}


def test_copies_without_a_size_or_a_direction_are_left_out():
    k = copies_window([(DTOH, 10, 20, None), (HTOD, 15, 25, None), ("Memset (Device)", 20, 30, 64),  # no bytes; not a Memcpy
                       (HTOD, 30, 40, 64)])
    assert k.copied_bytes_per_step == {"HtoD": 32.0}
    assert copies_window([], kernel_runs=[(RELU, 10, 20, 6)]).copied_bytes_per_step == {}


def test_the_json_and_the_description_of_a_window_in_full():
    """The window of test_kernel_figures_per_step: 90 us of kernels a step, 60 of 70 us of conv/matmul time on Tensor Cores."""
    k = window([(TC, 10, 20, 60), (FP32, 20, 80, 20), (CONVERT, 30, 100, 10), (RELU, 40, 110, 10),
                (TC, 210, 220, 60), (CONVERT, 230, 290, 10), (CONVERT, 240, 300, 10)])
    assert k.as_json() == {
        "steps": 2, "kernel_ms_per_step": 0.09, "tensor_core_share": 0.8571, "conversions_per_step": 1.5,
        "conversions": [CONVERT], "copied_bytes_per_step": {}, "copies_per_step": {},  # no memcpy in this window
        "allocator_per_step": {},
        "launches_per_step": 3.5,
        "top": [{"name": TC, "ms_per_step": 0.06, "launches_per_step": 1.0, "share": 0.6667, "tensor_core": True},
                {"name": CONVERT, "ms_per_step": 0.015, "launches_per_step": 1.5, "share": 0.1667, "tensor_core": None},
                {"name": FP32, "ms_per_step": 0.01, "launches_per_step": 0.5, "share": 0.1111, "tensor_core": False},
                {"name": RELU, "ms_per_step": 0.005, "launches_per_step": 0.5, "share": 0.0556, "tensor_core": None}]}
    assert k.describe().split("\n") == [
        "top 4 of 4 kernels by GPU time per step (0.09 ms of kernels a step; conv/matmul time on Tensor Cores: 85.7%):",
        "   66.7%    0.060 ms/step    1.0x  Tensor Cores    " + TC,
        "   16.7%    0.015 ms/step    1.5x                  " + CONVERT,
        "   11.1%    0.010 ms/step    0.5x  no Tensor Cores " + FP32,
        "    5.6%    0.005 ms/step    0.5x                  " + RELU,
    ]
    no_conv = window([(RELU, 10, 20, 6)]).describe()  # 3 us a step, in one launch of two steps
    assert no_conv.endswith("conv/matmul time on Tensor Cores: -):\n  100.0%    0.003 ms/step    0.5x                  " + RELU)


def test_a_kernel_launched_through_the_driver_api_is_placed_by_its_launch_too():
    """cuLaunchKernel (cuda_driver, as Triton launches): the kernel runs after the step ended, it was launched in it."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "perf_step_0", "ts": 0, "dur": 100, "pid": 1, "tid": 1},
              {"ph": "X", "cat": "kernel", "name": RELU, "ts": 500, "dur": 5, "pid": 0, "tid": 7, "args": {"correlation": 9}},
              {"ph": "X", "cat": "kernel", "name": TC, "ts": 150, "dur": 5, "pid": 0, "tid": 7, "args": {"correlation": 8}},
              {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "ts": 50, "dur": 1, "pid": 1, "tid": 1,
               "args": {"correlation": 8}},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 400, "dur": 1, "pid": 1, "tid": 1,
               "args": {"correlation": 9}}]  # RELU: listed first, launched after the step: left out, and TC still counted
    k = syncs.count_syncs({"traceEvents": events}).kernels
    assert [(x.name, x.us_per_step) for x in k.kernels] == [(TC, 5.0)]


def test_a_family_is_the_kernels_name_without_template_and_arguments():
    assert kernels.family("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
                          "namespace)::TensorListMetadata<2>, float>(x)") == "at::native::multi_tensor_apply_kernel"
    assert kernels.family("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64") == (
        "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64")
    assert kernels.family("triton_poi_fused_add_0") == "triton_poi_fused_add_0"


@pytest.mark.parametrize("name, kind", [("Memcpy HtoD (Pinned -> Device)", "HtoD Pinned"),
                                        ("Memcpy DtoH (Device -> Pageable)", "DtoH Pageable"),
                                        ("Memcpy DtoD (Device -> Device)", "DtoD"), ("Memcpy HtoD", "HtoD"),
                                        ("Memset (Device)", None)])
def test_a_copy_is_told_by_its_direction_and_host_memory(name, kind):
    assert kernels.copy_kind(name) == kind


def test_launches_a_step_by_family_sum_the_templates_of_one_family():
    stats = kernels.KernelStats(2, [kernels.Kernel("void f<1>(int)", 5.0, 2.0, 0.5, None),
                                    kernels.Kernel("void f<2>(int)", 5.0, 1.5, 0.5, None),
                                    kernels.Kernel("g", 1.0, 0.5, 0.0, None)])
    assert stats.families == {"f": 3.5, "g": 0.5} and stats.launches_per_step == 4.0


def test_the_allocators_calls_to_the_driver_are_counted_in_the_step_they_were_made_in():
    """cudaMalloc and cudaFree (empty_cache() every step), their suffixed variants, the driver's calls under expandable
    segments; a call outside every step (warming up) is not counted, nor a pinned host allocation (the pin-memory
    thread's, as batches in flight come and go) or a runtime call that allocates nothing."""
    events = [{"ph": "X", "cat": "user_annotation", "name": f"perf_step_{i}", "ts": 200 * i, "dur": 100, "pid": 1, "tid": 1}
              for i in range(2)]
    for name, ts in [("cudaFree", 10), ("cudaMalloc", 20), ("cudaFree", 210), ("cudaMalloc_v3020", 220),
                     ("cudaHostAlloc", 230), ("cudaMalloc", 150), ("cudaGetDevice", 30), ("cuMemCreate", 40)]:
        events.append({"ph": "X", "cat": "cuda_runtime" if name.startswith("cuda") else "cuda_driver", "name": name, "ts": ts,
                       "dur": 1, "pid": 1, "tid": 1, "args": {"correlation": ts}})
    k = syncs.count_syncs({"traceEvents": events}).kernels
    assert k.allocator_per_step == {"cuMemCreate": 0.5, "cudaFree": 1.0, "cudaMalloc": 1.0}
