"""The fix the suite knows for each kind of sync, told by its call, the torch ops around it or its library line;
`user_sources`, a project's own (the pytest_perf_sync_sources hook), is set by the plugin for its session."""

from __future__ import annotations

from dataclasses import dataclass

# a pageable copy as the trace names it: a sync where its op did not block in a synchronize call (trace.count_syncs)
PAGEABLE_COPIES = {"Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)"}


@dataclass(frozen=True)
class Advice:
    """The known fix for one kind of sync, told by the call, the torch ops around it or the library line."""

    kind: str  # a short name: "pageable copy"
    fix: str  # one line
    more: str  # where to read more
    calls: frozenset = frozenset()  # the sync's call is one of these
    op: str = ""  # the sync runs inside this torch op
    library: str = ""  # the library line starts with this
    function: str = ""  # ... and is in this function ("path:line in f", or the profiler's "path(line): f")

    def matches(self, source) -> bool:  # a trace.SyncSource
        return bool(
            (self.calls or self.op or self.library)
            and (not self.calls or source.call in self.calls)
            and (not self.op or self.op in source.ops.split(" > "))
            and source.library_line.startswith(self.library)
            and (not self.function or source.library_line.endswith((f" in {self.function}", f": {self.function}")))
        )


user_sources: tuple[Advice, ...] = ()  # from the pytest_perf_sync_sources hook, set by the plugin for its session
UNKNOWN_FIX = "no fix known to the suite for this source: the lines above and the trace show where it waits"
EXPLICIT_LIBRARY = "torch/cuda/"  # torch.cuda.synchronize(), Event.synchronize() and Stream.synchronize() live there
# First match wins: a library's own sync before the op it syncs in (GradScaler's check is an .item()).
KNOWN_SOURCES: list[Advice] = [
    Advice(
        "GradScaler inf check",
        "GradScaler.step reads the found-inf flag on the host; an optimizer with a fused step "
        "(torch.optim.AdamW(..., fused=True), SGD, Adam) takes the flag on the GPU; bf16 autocast needs no scaler",
        "https://pytorch.org/docs/stable/amp.html#gradient-scaling",
        library="torch/amp/grad_scaler.py",
    ),
    Advice(
        "explicit synchronize",
        "remove it from the step: the step's own work needs no wait. To time the step, record "
        "torch.cuda.Event(enable_timing=True) before and after it and read elapsed_time() outside the step, every k steps",
        "https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution",
        library=EXPLICIT_LIBRARY,
    ),
    Advice(
        "torchmetrics input check",
        'construct the metric with nan_strategy="disable" (its NaN check reads the GPU), and feed it tensors: '
        "a CPU scalar tensor with a weight, not a Python float that is copied to the GPU on each update",
        "https://lightning.ai/docs/torchmetrics/stable/aggregation/mean.html",
        library="torchmetrics/",
    ),
    Advice(
        "Hugging Face logging",
        "TrainingArguments(logging_steps=...): at each logging step the Trainer reads the loss it logs and the "
        "gradient norm on the host; log every 50 steps or more (logging_strategy=\"steps\", logging_steps=50), not "
        "every step",
        "https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments.logging_steps",
        library="transformers/trainer.py",
        function="_maybe_log_save_evaluate",
    ),
    Advice(
        "Lightning logged value read",
        "Lightning reads each value logged with self.log on the host for its progress bar (prog_bar=True, every "
        "refresh) and its logger (every log_every_n_steps): log with prog_bar=False or give the bar a refresh_rate "
        "of 50 or more, and keep Trainer(log_every_n_steps=...) at 50 or more",
        "https://lightning.ai/docs/pytorch/stable/extensions/logging.html#logging-frequency",
        library="lightning/fabric/utilities/apply_func.py",
    ),
    Advice(
        "Hugging Face loss check",
        "TrainingArguments(logging_nan_inf_filter=False): with it on, the Trainer tests every step's loss for NaN and "
        "inf on the host (`torch.isnan(loss) or torch.isinf(loss)`)",
        "https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments",
        op="aten::is_nonzero",
        library="transformers/trainer.py",
    ),
    Advice(
        "Accelerate blocking batch copy",
        "TrainingArguments(dataloader_pin_memory=True, accelerator_config={\"non_blocking\": True}): Accelerate copies "
        "each batch to the GPU with non_blocking=False unless told",
        "https://huggingface.co/docs/accelerate/package_reference/utilities#accelerate.utils.DataLoaderConfiguration",
        op="aten::copy_",
        library="accelerate/",
    ),
    Advice(
        "pageable copy",
        "copy from pinned memory: DataLoader(pin_memory=True) or tensor.pin_memory(), then .to(device, non_blocking=True)",
        "https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html",
        calls=frozenset(PAGEABLE_COPIES),
    ),
    Advice(
        "blocking copy",
        "to the GPU: pin the source and pass non_blocking=True; from the GPU (.cpu(), .tolist(), .numpy()): "
        "read it every k steps, or copy it non_blocking into pinned memory and read it a step later",
        "https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html",
        op="aten::copy_",
    ),
    Advice(
        "boolean mask",
        "indexing with a boolean mask needs the count of its True values on the host: weight by the mask instead "
        "((x * mask).sum() / mask.sum()) or select with torch.where",
        "https://pytorch.org/docs/stable/generated/torch.where.html",
        op="aten::nonzero",
    ),
    Advice(
        "GPU JPEG decode",
        "torchvision's decode_jpeg(..., device='cuda') waits for each image's decode (torchvision 0.26): decode in the "
        "DataLoader's workers on the CPU, or with a decoder that batches without host waits (DALI, torchcodec)",
        "https://docs.pytorch.org/vision/stable/generated/torchvision.io.decode_jpeg.html",
        op="image::decode_jpegs_cuda",
    ),
    *(Advice(
        "comparison read on the host",
        "torch.equal and torch.allclose answer with a Python bool, read from the GPU: keep the answer on the device "
        "((a == b).all(), torch.isclose(a, b).all()) and read it every k steps",
        "https://pytorch.org/docs/stable/generated/torch.isclose.html",
        op=op,
    ) for op in ("aten::equal", "aten::allclose")),
    Advice(
        "output sized on the host",
        "repeat_interleave with a tensor of repeats reads their sum on the host to size its output: pass "
        "output_size= (the total, where the step knows it)",
        "https://pytorch.org/docs/stable/generated/torch.repeat_interleave.html",
        op="aten::repeat_interleave",
    ),
    Advice(
        "output sized on the host",
        "bincount reads its input's largest value on the host to size its output, whatever its minlength: count into "
        "a tensor of known size instead (torch.zeros(n, dtype=torch.long, device=x.device).scatter_add_(0, x, "
        "torch.ones_like(x)))",
        "https://pytorch.org/docs/stable/generated/torch.bincount.html",
        op="aten::bincount",
    ),
    Advice(
        "tensor read on the host",
        ".item(), float(t), bool(t), `if t:` or printing a GPU tensor waits for the GPU: read it every k steps, "
        "or copy it non_blocking into pinned memory and read it a step later",
        "https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution",
        op="aten::_local_scalar_dense",
    ),
]
