"""Kernels per step from a profiled window: which are convolutions or matmuls, which of those use
Tensor Cores, which are layout conversions; on made-up events and on the committed traces."""

from pathlib import Path

import pytest

from torch_perf_suite import kernels, syncs

TRACES = Path(__file__).parent / "traces"

# Names of the kinds profilers print: those of the committed traces (an H200), the rest written after the
# families seen in H100 and H200 traces (torch 2.11) and on an A100 (ampere_*), with what they are.
NAMES = [
    # strict FP32: FFMA instructions, cuBLAS's SGEMM/GEMV, cuDNN's kernels templated on float
    ("sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize32x32x8_stage3_warpsize1x2x1_g1_ffma_aligna4_alignc4"
     "_execute_kernel__5x_cudnn", False),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
     False),
    ("void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false, cublasGemvTensorStridedBatched<float const>>", False),
    ("void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>(int, int, int, float const*)", False),
    ("void cudnn::cnn::wgrad2d_grouped_direct_kernel<false, true, int, __half, float, float>(WgradGroupedDirectParams)", False),
    ("void precomputed_convolve_sgemm<__half, 1024, 5, 5, 4, 3, 3, 1, false>(int, int, int, __half const*)", False),
    ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams)", False),
    # Tensor Cores: TF32, fp16 and bf16 inputs, HMMA and tensorop instructions, Hopper's cuBLAS (nvjet)
    ("sm90_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off"
     "_kernel__5x_cudnn", True),
    ("sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_segment_k"
     "_off_kernel__5x_cudnn", True),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_16x16_64x1_tn_align2>(Params)", True),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>(Params)", True),
    ("nvjet_sm90_tst_128x64_64x8_2x1_v_bz_coopA_TNT", True),
    ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", True),
    # neither: elementwise, reductions, batch norm, layout conversions, and torch.compile's Triton kernels (named after ops)
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", None),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<__half, float, 512, true, 1>(cudnnTensorStruct)", None),
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<__half, __half, float, false, true>(nchw2nhwc_params_t<float>)", None),
    ("triton_poi_fused_convolution_backward_native_batch_norm_backward_threshold_backward_12", None),
    ("triton_red_fused__to_copy_convert_element_type_native_batch_norm_backward_7", None),
]


@pytest.mark.parametrize("name, expected", NAMES, ids=[n[:48] for n, _ in NAMES])
def test_each_kernel_is_told_apart_by_name(name, expected):
    assert kernels.tensor_core(name) is expected


@pytest.mark.parametrize("name, expected", [
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true>(params)", True),
    ("void cudnn::engines_precompiled::nhwcToNchwKernel<__nv_bfloat16, __nv_bfloat16, float, true, false>(params)", True),
    ("void at::native::batch_norm_transform_input_channels_last_kernel<float>", False),
    ("triton_poi_fused_convolution_0", False),
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


def test_the_committed_traces():
    """The fp32 trace (ResNet-18 on an H200, strict FP32 matmuls) ran no Tensor Core kernel; the fp16 one (autocast
    with a GradScaler) ran its matmuls on CUTLASS tensorop kernels and some convolutions on CUDA cores."""
    clean = syncs.count_syncs(syncs.load_trace(TRACES / "clean.json.gz")).kernels
    assert clean.tensor_core_share == 0.0 and clean.conversions_per_step == 0
    fp16 = syncs.count_syncs(syncs.load_trace(TRACES / "grad_scaler.json.gz")).kernels
    used = {x.name for x in fp16.kernels if x.tensor_core}
    assert used and all("tensorop" in name for name in used)
    assert 0 < fp16.tensor_core_share < 1
