"""torch's process-wide settings that a scenario may change: read, set for a step, restore.

A recipe that asks for TF32 or cuDNN's autotuner sets them around each of its own steps (`torch_settings`, public as
`torch_perf_suite.torch_settings`), so that two workloads open in one test do not see each other's settings. The
plugin also takes a `snapshot` before every test and `restore`s it after, naming what a test left changed: a scenario
that asked for strict FP32 gets strict FP32 whatever ran before it.

Only the legacy flags (`allow_tf32`) are read and set: torch >= 2.9 also has `fp32_precision`, and
raises when the two APIs are mixed, so the suite uses the one every supported torch has. Where a test
did mix them, a setting may not be readable at all: it is reported as `Unreadable` and left alone.
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch

# name -> (read, write); written in this order. cuBLAS's TF32 flag comes before float32_matmul_precision,
# which sets the flag too: "medium" then allow_tf32=True makes torch >= 2.9 refuse to read the precision.
SETTINGS = {
    "cuda.matmul.allow_tf32": (lambda: torch.backends.cuda.matmul.allow_tf32,
                               lambda v: setattr(torch.backends.cuda.matmul, "allow_tf32", v)),
    "float32_matmul_precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    "cuda.matmul.allow_fp16_reduced_precision_reduction": (
        lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        lambda v: setattr(torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction", v)),
    "cuda.matmul.allow_bf16_reduced_precision_reduction": (
        lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        lambda v: setattr(torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction", v)),
    "cudnn.allow_tf32": (lambda: torch.backends.cudnn.allow_tf32, lambda v: setattr(torch.backends.cudnn, "allow_tf32", v)),
    "cudnn.benchmark": (lambda: torch.backends.cudnn.benchmark, lambda v: setattr(torch.backends.cudnn, "benchmark", v)),
    "cudnn.deterministic": (lambda: torch.backends.cudnn.deterministic,
                            lambda v: setattr(torch.backends.cudnn, "deterministic", v)),
    "cudnn.enabled": (lambda: torch.backends.cudnn.enabled, lambda v: setattr(torch.backends.cudnn, "enabled", v)),
    "default_dtype": (torch.get_default_dtype, torch.set_default_dtype),
    "deterministic_algorithms": (torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms),
    "grad_enabled": (torch.is_grad_enabled, torch.set_grad_enabled),
    "anomaly_detection": (torch.is_anomaly_enabled, torch.set_anomaly_enabled),
}


# process-wide switches that debug at a cost in every step, each named as a failure names it: on in a measured step,
# the test fails naming it unless its record had it on (counts/checks.debugging)
DEBUGGING = {
    "anomaly detection (torch.autograd.set_detect_anomaly(True): every backward op checked for NaN, a sync each)":
        torch.is_anomaly_enabled,
    "deterministic algorithms (torch.use_deterministic_algorithms(True))": torch.are_deterministic_algorithms_enabled,
    "cuDNN's deterministic mode (torch.backends.cudnn.deterministic = True)": lambda: torch.backends.cudnn.deterministic,
    "the CUDA sync debug mode (torch.cuda.set_sync_debug_mode)":
        lambda: torch.cuda.is_initialized() and torch.cuda.get_sync_debug_mode() != 0,
    "a profiler left running (torch.profiler.profile or torch.autograd.profiler.profile not stopped)":
        torch.autograd._profiler_enabled,
}


def debugging_on() -> list[str]:
    """The debugging switches on now (DEBUGGING's names, in its order)."""
    return [name for name, on in DEBUGGING.items() if on()]


# set together: writing the precision rewrites the flag, so restoring one means restoring both
COUPLED = ("cuda.matmul.allow_tf32", "float32_matmul_precision")


@dataclasses.dataclass(frozen=True, repr=False)
class Unreadable:
    """A setting torch refused to read (the legacy and the new TF32 APIs mixed); `why` is torch's message."""
    why: str

    def __repr__(self):
        return f"unreadable ({self.why.split(',')[0]})"


def _with_partner(names) -> set:
    return set(names) | (set(COUPLED) if set(COUPLED) & set(names) else set())


def value_of(name: str):
    try:
        return SETTINGS[name][0]()
    except RuntimeError as error:
        return Unreadable(str(error))


def snapshot() -> dict:
    return {name: value_of(name) for name in SETTINGS}


def restore(saved: dict) -> dict:
    """Set every setting back to `saved`; return {name: (value found, value restored)} for those that had changed.

    A setting unreadable in `saved` cannot be restored: it is left as it is, and named if it reads differently now.
    """
    changed = {name: (now, saved[name]) for name in SETTINGS if (now := value_of(name)) != saved[name]}
    to_write = _with_partner(changed)
    for name in SETTINGS:  # SETTINGS' order
        if name in to_write and not isinstance(saved[name], Unreadable):
            SETTINGS[name][1](saved[name])
    return changed


@contextlib.contextmanager
def torch_settings(wanted: dict):
    """Run the block with `wanted` settings ({name: value}, names from SETTINGS), then put back what was there."""
    unknown = set(wanted) - set(SETTINGS)
    if unknown:
        raise ValueError(f"unknown torch setting(s) {sorted(unknown)}; expected names from {sorted(SETTINGS)}")
    saved = {name: SETTINGS[name][0]() for name in _with_partner(wanted)}
    try:
        for name in SETTINGS:  # SETTINGS' order
            if name in wanted:
                SETTINGS[name][1](wanted[name])
        yield
    finally:
        for name in SETTINGS:  # SETTINGS' order: the precision last, as it was read
            if name in saved:
                SETTINGS[name][1](saved[name])


@contextlib.contextmanager
def one_intra_op_thread():
    """torch's CPU ops run on the calling thread alone inside: an op that splits its work over torch's intra-op pool
    waits for the pool's threads, and on a loaded host that wait is the load's block, not the code's (the host side's
    count, counts/host_side.py)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
