"""nvidia-smi's GPU-Util over a test's timed rounds against its floor, as findings: the first window's, and a
shortfall's second measurement."""

from __future__ import annotations

from dataclasses import replace

from ..findings import FAILED, NOT_CHECKED, PASSED, Finding


def verdict(util, at_least: float, part: str) -> Finding:
    """nvidia-smi's GPU-Util over `part`'s rounds is at least `at_least` percent. Where NVML cannot say, not checked,
    with why: a warning, and a failure under --perf-strict (a GPU without NVML access measures everything else)."""
    if util is None or util.unavailable or util.gpu_util_pct is None:
        why = util.unavailable if util is not None and util.unavailable else f"no utilization sampled in the {part} window"
        return Finding(NOT_CHECKED, f"utilization not checked: {why}", "utilization not checked")
    if util.gpu_util_pct < at_least:
        return Finding(FAILED, f"GPU-Util {util.gpu_util_pct:.0f}% over the {part} rounds (NVML, {util.samples} samples), "
                               f"expected at least {at_least:g}%: the GPU waits for the host. {util.describe()}",
                       f"GPU-Util {util.gpu_util_pct:.0f}% over the {part} rounds, expected at least {at_least:g}%")
    return Finding(PASSED)


def confirmed(first: Finding, again, at_least: float, part: str) -> Finding:
    """A shortfall (`first`, failed) with its second measurement's utilization (`again`): failed only where that falls
    short too. A burst of a neighbour's host work (another runner or xdist worker on the node) idles the GPU for a
    window, while a step that waits on the host does so in both. Not confirmed, it passed, measured twice (a note);
    where NVML could not say the second time, it was not checked."""
    second, head = verdict(again, at_least, part), first.text.split(". ", 1)[0]
    if second.outcome == NOT_CHECKED:  # no verdict either way: a failure under --perf-strict
        return Finding(NOT_CHECKED, f"{head}; measured again: {second.text}")
    said = f"measured again: GPU-Util {again.gpu_util_pct:.0f}%"
    if second.outcome == PASSED:
        return Finding(PASSED, f"{head}; {said}: not confirmed")
    return replace(first, text=f"{first.text}; {said}")
