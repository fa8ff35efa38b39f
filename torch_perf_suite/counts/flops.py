"""Model FLOPs per step, counted once outside the timed windows, and what the measured samples/s make of them:
achieved TFLOP/s and MFU, the share of the GPU's peak for the dtype the step's matmuls and convolutions ran in.
A reading for the report, never a gate.

FLOPs come from `torch.utils.flop_counter`'s formulas (what its FlopCounterMode counts: matmuls, convolutions and
attention, forward and backward), tallied here by dtype so that the right peak is taken.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from . import on_this_thread

# Dense peak FLOP/s (no structured sparsity) by GPU name and dtype. NVIDIA's H100 SXM and H200 SXM datasheets give the
# Tensor Core figures with sparsity; the dense ones are half. Lightning's table has the H100 SXM's dense figures but
# the H200's sparse ones (lightning 2.6) and no entry for the name "NVIDIA H200": the suite's own table comes first.
_SXM = {"bfloat16": 989.4e12, "float16": 989.4e12, "tfloat32": 494.7e12, "float32": 66.9e12}
PEAKS = {"NVIDIA H100 80GB HBM3": _SXM, "NVIDIA H200": _SXM}
OWN_SOURCE = "NVIDIA's H100/H200 SXM datasheets, dense"


@dataclass(frozen=True)
class StepFlops:
    per_step: float  # model FLOPs of one training step
    dtype: str  # where most of them ran: bfloat16, float16, tfloat32 (float32 with TF32 allowed) or float32

    def reading(self, samples_per_s: dict[str, float], batch_size: int, gpu: str) -> dict:
        """Achieved TFLOP/s and MFU of each part's samples/s (the pipeline as trained, the GPU-side step)."""
        peak, source = peak_flops(gpu, self.dtype)
        per_sample = self.per_step / batch_size
        out = {"gflops_per_sample": round(per_sample / 1e9, 3), "dtype": self.dtype,
               "peak_tflops": None if peak is None else round(peak / 1e12, 1), "peak_source": source}
        for part, rate in samples_per_s.items():
            out[f"{part}_tflops"] = round(per_sample * rate / 1e12, 2)
            out[f"{part}_mfu"] = None if peak is None else round(per_sample * rate / peak, 4)
        return out


def peak_flops(gpu: str, dtype: str) -> tuple[float | None, str]:
    """(peak FLOP/s, its source): the suite's own table, else Lightning's where it is installed."""
    import torch

    if gpu in PEAKS:
        return PEAKS[gpu].get(dtype), OWN_SOURCE
    # a smoke run on the CPU: no GPU peak, and no import of Lightning, which takes seconds (docs/measurements/cost.md)
    if not torch.cuda.is_available():
        return None, "no GPU"
    try:
        from lightning.fabric.utilities.throughput import get_available_flops
    except ImportError:
        return None, f"no peak known for {gpu} (the suite's table has {', '.join(PEAKS)}; Lightning is not installed)"
    wanted = "tfloat32" if dtype == "tfloat32" else getattr(torch, dtype)
    peak = get_available_flops(torch.device("cuda"), wanted)
    return (None if peak is None else float(peak)), "Lightning's table (lightning.fabric.utilities.throughput)"


def count(step, within=None) -> StepFlops | None:
    """FLOPs of one call of `step`, compiled code run eagerly (torch.compiler.set_stance) so that each matmul and
    convolution passes the dispatcher, where they are counted; None where none was seen. `within(step, begin, end)`
    (workload.Members.within): the counting mode entered and left in the thread that runs the step."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    if not hasattr(torch.compiler, "set_stance"):  # torch 2.6 and later
        return None
    by_dtype: Counter = Counter()

    class Tally(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            formula = flop_registry.get(func._overloadpacket)
            if formula is not None:
                first = next(a for a in args if isinstance(a, torch.Tensor))
                by_dtype[_dtype(first, "convolution" in func.__name__)] += formula(*args, **kwargs, out_val=out)
            return out

    tally = Tally()
    with torch.compiler.set_stance("force_eager"):
        (within or on_this_thread)(step, tally.__enter__, lambda: tally.__exit__(None, None, None))
    if not by_dtype:
        return None
    return StepFlops(float(sum(by_dtype.values())), by_dtype.most_common(1)[0][0])


def _dtype(tensor, convolution: bool) -> str:
    """The dtype a matmul or convolution of `tensor` ran in: float32 as TF32 where CUDA's TF32 is allowed for it."""
    import torch

    name = str(tensor.dtype).removeprefix("torch.")
    if name != "float32" or tensor.device.type != "cuda":
        return name
    tf32 = torch.backends.cudnn.allow_tf32 if convolution else torch.get_float32_matmul_precision() != "highest"
    return "tfloat32" if tf32 else "float32"
