"""What the GPU ran in a profiled window: kernels per step, Tensor Core use, layout conversions, bytes copied.

Read from the same Chrome trace as the sync count (GPU events of category "kernel" launched inside a
`perf_step_<i>` range), so it is as deterministic as the sync count: which kernels run
does not depend on the host's speed. Kernels are told apart by name, the way DLProf and Nsight
Systems users read them:

- layout conversions: cuDNN's `nchwToNhwcKernel` / `nhwcToNchwKernel`, launched around each
  convolution whose input is NCHW where the chosen kernel wants NHWC (seed 001: channels_last makes
  them disappear);
- convolution and matmul kernels: cuDNN and CUTLASS implicit GEMMs (`fprop`, `dgrad`, `wgrad`),
  cuBLAS GEMMs (`gemm`, Hopper's `nvjet`), Winograd and FFT transforms;
- of those, Tensor Core kernels: named for their Tensor Core instruction or input type (`tf32`,
  `f16`, `bf16`, `hmma`, `s16816`, `tensorop`, `nvjet`, `gmma`); plain FP32 ones are named `ffma`,
  `sgemm` or templated on `<float`. Names as seen on H200s with torch 2.11 (docs/seed-001-resnet50.md).
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass, field

CONVERSION = re.compile(r"nchwToNhwc|nhwcToNchw", re.IGNORECASE)
CONV_OR_MATMUL = re.compile(r"gemm|convolve|convolution|conv2d|fprop|dgrad|wgrad|xmma|cutlass|nvjet|winograd|fft|hmma|tensorop",
                            re.IGNORECASE)
NOT_TENSOR_CORE = re.compile(r"ffma|sgemm|<float|winograd|fft", re.IGNORECASE)  # read first: "f32f32_f32f32_f32..._ffma"
TENSOR_CORE = re.compile(r"tf32|f16|hmma|1688|16816|tensorop|nvjet|gmma", re.IGNORECASE)  # "f16" covers bf16
TOP = 10
# the caching allocator's calls to the driver for device memory (cudaMalloc; cuMem* under expandable segments): a warm
# step makes none, its blocks come from the cache, which these calls fill or empty. Pinned host memory's calls
# (cudaHostAlloc) are not counted: the pin-memory thread allocates whenever more batches are in flight than it has
# cached blocks, 0.67 a step in a clean loader-fed step on an H200 (docs/counted-gates.md), no count to hold exactly
ALLOCATOR_CALLS = frozenset({"cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cuMemAlloc", "cuMemFree",
                             "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemAddressReserve",
                             "cuMemAddressFree"})
MEMCPY = re.compile(r"^Memcpy (\w+)(?: \((\w+) -> (\w+)\))?")  # "Memcpy HtoD (Pinned -> Device)": direction, kinds
ANONYMOUS = "(anonymous namespace)::"


def family(name: str) -> str:
    """A kernel's name without its template and call arguments: "at::native::vectorized_elementwise_kernel" for every
    instantiation of that template; cuDNN's and cuBLAS's generated names and Triton's stay whole."""
    name = name.replace(ANONYMOUS, "")
    name = name[5:] if name.startswith("void ") else name
    return re.split(r"[<(]", name, maxsplit=1)[0].strip() or name


def copy_kind(name: str) -> str | None:
    """"Memcpy HtoD (Pinned -> Device)" -> "HtoD Pinned": the direction, and the kind of host memory where one side is
    the host (a copy from pageable memory is a sync the pinned one is not)."""
    found = MEMCPY.search(name)
    if not found:
        return None
    direction, src, dst = found.groups()
    host = next((k for k in (src, dst) if k and k != "Device"), None)
    return f"{direction} {host}" if host else direction


def is_conversion(name: str) -> bool:
    return bool(CONVERSION.search(name))


def tensor_core(name: str) -> bool | None:
    """True or False for a convolution or matmul kernel, by whether it runs on Tensor Cores; None for any other kernel.

    torch.compile's Triton kernels are named after the ops they fuse ("..._convolution_backward_...")
    and are elementwise or reductions; its matmul templates (max-autotune) do not name their
    instruction. Both count as other kernels."""
    if name.startswith("triton_") or not CONV_OR_MATMUL.search(name):
        return None
    return not NOT_TENSOR_CORE.search(name) and bool(TENSOR_CORE.search(name))


@dataclass(frozen=True)
class Kernel:
    name: str
    us_per_step: float  # GPU time, summed over its launches, per step
    launches_per_step: float
    share: float  # of all kernel time in the steps
    tensor_core: bool | None  # None: not a convolution or matmul

    def describe(self) -> str:
        tc = {True: "Tensor Cores", False: "no Tensor Cores", None: ""}[self.tensor_core]
        per_step = f"{self.us_per_step / 1000:8.3f} ms/step {self.launches_per_step:6.1f}x"
        return f"{self.share:6.1%} {per_step}  {tc:15} {self.name[:140]}"


@dataclass
class KernelStats:
    steps: int
    kernels: list[Kernel] = field(default_factory=list)  # every kernel name seen, most GPU time first
    copied_bytes_per_step: dict[str, float] = field(default_factory=dict)  # "HtoD", "DtoH", ...: memcpy bytes a step
    copies_per_step: dict[str, float] = field(default_factory=dict)  # "HtoD Pinned", "DtoH Pageable", ...: bytes a step
    allocator_per_step: dict[str, float] = field(default_factory=dict)  # "cudaMalloc", "cudaFree", ...: calls a step

    @property
    def launches_per_step(self) -> float:
        return sum(k.launches_per_step for k in self.kernels)

    @property
    def families(self) -> dict[str, float]:
        """Kernel launches a step by family (kernels.family), most first."""
        counts: dict[str, float] = defaultdict(float)
        for k in self.kernels:
            counts[family(k.name)] += k.launches_per_step
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def total_us_per_step(self) -> float:
        return sum(k.us_per_step for k in self.kernels)

    @property
    def conversions(self) -> list[Kernel]:
        return [k for k in self.kernels if is_conversion(k.name)]

    @property
    def conversions_per_step(self) -> float:
        return sum(k.launches_per_step for k in self.conversions)

    @property
    def tensor_core_share(self) -> float | None:
        """Share of convolution and matmul GPU time in Tensor Core kernels; None where there is none."""
        mm = [k for k in self.kernels if k.tensor_core is not None]
        total = sum(k.us_per_step for k in mm)
        return sum(k.us_per_step for k in mm if k.tensor_core) / total if total else None

    def top(self, n: int = TOP) -> list[Kernel]:
        return self.kernels[:n]

    def describe(self, n: int = TOP) -> str:
        tc = self.tensor_core_share
        head = (f"top {min(n, len(self.kernels))} of {len(self.kernels)} kernels by GPU time per step "
                f"({self.total_us_per_step / 1000:.2f} ms of kernels a step; conv/matmul time on Tensor Cores: "
                + ("-" if tc is None else f"{tc:.1%}") + "):")
        return "\n".join([head, *("  " + k.describe() for k in self.top(n))])

    def as_json(self, n: int = TOP) -> dict:
        return {
            "steps": self.steps,
            "kernel_ms_per_step": round(self.total_us_per_step / 1000, 3),
            "tensor_core_share": None if self.tensor_core_share is None else round(self.tensor_core_share, 4),
            "conversions_per_step": self.conversions_per_step,
            "conversions": [k.name for k in self.conversions],
            "copied_bytes_per_step": self.copied_bytes_per_step,
            "copies_per_step": self.copies_per_step,
            "allocator_per_step": self.allocator_per_step,
            "launches_per_step": self.launches_per_step,
            "top": [{"name": k.name, "ms_per_step": round(k.us_per_step / 1000, 4), "launches_per_step": k.launches_per_step,
                     "share": round(k.share, 4), "tensor_core": k.tensor_core} for k in self.top(n)],
        }


def kernel_stats(events: list[dict], steps: list[tuple[float, float]]) -> KernelStats:
    """Per-step kernel figures from a trace's usable events (syncs.trace._usable) and its step spans (start, end).

    A kernel belongs to the step in whose span it was launched: kernels run later than the host launched
    them, so each is placed by its launch (the runtime or driver call with the same correlation id), or by
    its own start where the trace has no launch for it. Kernels launched outside every step are left out."""
    launched_at = {e["args"]["correlation"]: e["ts"] for e in events
                   if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    starts = [s for s, _ in steps]

    def step_of(at: float) -> int | None:
        i = bisect.bisect_right(starts, at) - 1
        return None if i < 0 or at > steps[i][1] else i

    allocator: dict[str, int] = defaultdict(int)
    for e in events:  # the host's calls, each in the step it was made in
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and (call := call_name(e["name"])) in ALLOCATOR_CALLS \
                and step_of(e["ts"]) is not None:
            allocator[call] += 1
    time_us: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    copied: dict[str, float] = defaultdict(float)
    by_kind: dict[str, float] = defaultdict(float)
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy"):
            continue
        if step_of(launched_at.get(e.get("args", {}).get("correlation"), e["ts"])) is None:
            continue
        if e["cat"] == "gpu_memcpy":  # "Memcpy HtoD (Pinned -> Device)": bytes by direction
            bytes_ = e.get("args", {}).get("bytes")
            if isinstance(bytes_, (int, float)) and (kind := copy_kind(e["name"])):
                copied[kind.split()[0]] += bytes_
                by_kind[kind] += bytes_
            continue
        time_us[e["name"]] += float(e.get("dur", 0))
        count[e["name"]] += 1
    n = len(steps)
    total = sum(time_us.values())
    kernels = [Kernel(name, us / n, count[name] / n, us / total if total else 0.0, tensor_core(name))
               for name, us in sorted(time_us.items(), key=lambda kv: -kv[1])]
    return KernelStats(n, kernels, {direction: total / n for direction, total in sorted(copied.items())},
                       {kind: total / n for kind, total in sorted(by_kind.items())},
                       {call: count / n for call, count in sorted(allocator.items())})


def call_name(name: str) -> str:
    """A runtime or driver call's name without its per-thread-stream and version suffixes: cudaStreamSynchronize_ptsz
    and friends are the per-thread-stream variants of the same call, cuMemAlloc_v2 a version of it."""
    return re.sub(r"(_ptsz|_ptds|_v\d+)+$", "", name)
