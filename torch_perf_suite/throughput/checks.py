"""Timed readings that are claims: a pipeline's efficiency and which part is its bottleneck. They hold for the host
they were measured on, so they are checked only against a baseline recorded on this host (`host_scope`)."""

from __future__ import annotations

from ..findings import FAILED, Finding
from .parts import Parts, parts_line


def efficiency(p: Parts, at_least: float, in_turns: bool = False) -> list[Finding]:
    """The pipeline delivers at least `at_least` of its bottleneck part's samples/s; `in_turns`: of the two parts in
    series, 1 / (1/loader + 1/GPU-side) (no DataLoader workers: one thread loads a batch, then trains on it)."""
    if in_turns:
        due = 1 / (1 / p.loader.median + 1 / p.gpu.median)
        if p.pipeline.median < at_least * due:
            said = (f"the pipeline delivers {p.pipeline.median:,.0f} samples/s, {p.pipeline.median / due:.2f} of the "
                    f"{due:,.0f} that loading and training in turns allow, expected at least {at_least:g}")
            return [Finding(FAILED, f"{said}. {parts_line(p)}", said)]
        return []
    if p.efficiency < at_least:
        said = f"pipeline efficiency {p.efficiency:.2f}, expected at least {at_least:g}"
        return [Finding(FAILED, f"{said}: the pipeline delivers {p.pipeline.median:,.0f} samples/s while its bottleneck "
                                f"({p.bottleneck}) allows {min(t.median for t in (p.loader, p.gpu) if t is not None):,.0f}. "
                                f"{parts_line(p)}", said)]
    return []


def bottleneck(p: Parts, expected: str) -> list[Finding]:
    if p.bottleneck == expected:
        return []
    said = f"bottleneck {p.bottleneck}, expected {expected}"
    return [Finding(FAILED, f"{said}. {parts_line(p)}", said)]


def host_scope(entry: dict | None, why_not_same_host: str, updating: bool, vs_ref: bool = False) -> str:
    """'' where a host-bound claim is checked on this host (its baseline was recorded here); else why it is not.
    Such a claim (an efficiency floor, a bottleneck) held where it was measured: a faster or slower host moves it.
    Against REF (`vs_ref`) it is reported: REF's numbers came from this host, but from a run as noisy as this one."""
    if vs_ref:
        return "reported, not gated against REF (host-bound: it moves between runs on one host)"
    if updating:
        return "recorded as measured on this host, not checked (host-bound: a claim of the host that records it)"
    if entry is None:
        return "not checked: no baseline from this host (host-bound: a faster or slower host moves it)"
    return f"not checked: {why_not_same_host}" if why_not_same_host else ""
