"""The step's counts judged: kernels, bytes copied, step memory, compile graphs and the host side against their
recorded entry, exact on any machine (compared exactly, or within a margin measured on two machines). Plain
functions that return findings (findings.py); the `perf` fixture turns a failed one into a failure."""

from __future__ import annotations

from ..findings import FAILED, Finding, briefly

TOP_CHANGES = 5  # kernel families named in a failure, most changed first


def layout_conversions(kernels) -> list[Finding]:
    """No NCHW<->NHWC conversion kernels in the steps (seed 001: channels_last removes them)."""
    if not kernels.conversions:
        return []
    listing = "\n".join("  " + c.describe() for c in kernels.conversions)
    said = f"{kernels.conversions_per_step:g} layout conversion kernel(s) per step, expected 0"
    return [Finding(FAILED, f"{said} (is the model or its input no longer channels_last?):\n{listing}\n{kernels.describe()}",
                    said)]


def tensor_cores(kernels, *, at_least: float | None = None, at_most: float | None = None) -> list[Finding]:
    """The share of convolution and matmul GPU time in Tensor Core kernels is within bounds."""
    share = kernels.tensor_core_share
    if share is None:
        return [Finding(FAILED, f"no convolution or matmul kernel in the steps, so no Tensor Core share\n{kernels.describe()}")]
    if (at_least is not None and share < at_least) or (at_most is not None and share > at_most):
        wanted = " and ".join(w for w in (at_least is not None and f"at least {at_least:.0%}",
                                          at_most is not None and f"at most {at_most:.0%}") if w)
        said = f"{share:.1%} of convolution and matmul GPU time ran on Tensor Cores, expected {wanted}"
        return [Finding(FAILED, f"{said} (TF32 and autocast flags, cuDNN's choice of kernels):\n{kernels.describe()}", said)]
    return []


def kernel_launches(now: dict[str, float], recorded: dict[str, float]) -> list[Finding]:
    """Kernel launches a step, by family, exactly as recorded: a swapped optimizer implementation, a lost fusion or
    a new layout conversion launches more. The failure names the families that changed, most changed first."""
    total_now, total_then = sum(now.values()), sum(recorded.values())
    changed = {f: now.get(f, 0.0) - recorded.get(f, 0.0) for f in {*now, *recorded}}
    changed = {f: d for f, d in changed.items() if abs(d) > 1e-9}
    if not changed:
        return []
    rows = [f"  {d:+g} {f} ({recorded.get(f, 0.0):g} -> {now.get(f, 0.0):g}"
            + (", new" if f not in recorded else ", gone" if f not in now else "") + ")"
            for f, d in sorted(changed.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:TOP_CHANGES]]
    more = "" if len(changed) <= TOP_CHANGES else f"\n  ... and {len(changed) - TOP_CHANGES} more famil(ies)"
    said = f"{total_now:g} kernel launches per step, {total_then:g} recorded ({total_now - total_then:+g})"
    return [Finding(FAILED, f"{said}: a swapped optimizer implementation, a lost fusion or a changed kernel choice; launches "
                            f"per step by family:\n" + "\n".join(rows) + more, said)]


def copies(now: dict[str, float], recorded: dict[str, float], margin_pct: float) -> list[Finding]:
    """Bytes copied a step by direction and host memory kind ("HtoD Pinned") within `margin_pct` of the record, and
    no kind the record lacks (a copy from pageable memory shows as 'HtoD Pageable')."""
    rows = []
    for kind in sorted({*now, *recorded}):
        mine, theirs = now.get(kind, 0.0), recorded.get(kind, 0.0)
        if kind not in recorded:
            rows.append(f"  {kind}: {mine / 1e6:,.2f} MB a step, none recorded (a new kind of copy)")
        elif abs(mine - theirs) > margin_pct / 100 * theirs:
            rows.append(f"  {kind}: {mine / 1e6:,.2f} MB a step, {theirs / 1e6:,.2f} MB recorded "
                        f"({100 * (mine / theirs - 1) if theirs else float('inf'):+.1f}%; allowed +-{margin_pct:g}%)")
    said = "bytes copied per step changed"
    return [Finding(FAILED, f"{said}:\n" + "\n".join(rows), said)] if rows else []


def allocator_calls(now: dict[str, float], recorded: dict[str, float]) -> list[Finding]:
    """The caching allocator's calls to the driver a step (cudaMalloc, cudaFree...), no more than recorded, and none
    where none was recorded: a warm step takes its memory from the cache."""
    grown = {call: n for call, n in now.items() if n > recorded.get(call, 0.0) + 1e-9}
    if not grown:
        return []
    rows = "\n".join(f"  {call}: {n:g} a step, {recorded.get(call, 0.0):g} recorded" for call, n in sorted(grown.items()))
    said = f"{sum(now.values()):g} calls a step from the allocator to the driver, {sum(recorded.values()):g} recorded"
    return [Finding(FAILED, f"{said}: torch.cuda.empty_cache() in the step, a shape that changes from step to step or a "
                            "fragmented cache (each frees and allocates again, and cudaFree waits for the GPU):\n" + rows,
                    said)]


def debugging(now: list[str], recorded: list[str], compared_with: str) -> list[Finding]:
    """Debugging switches on in the measured steps (machine/torch_state.DEBUGGING) that `compared_with` did not have on."""
    new = [name for name in now if name not in recorded]
    if not new:
        return []
    said = "debugging switched on in the measured steps, not at {}"
    return [Finding(FAILED, said.format(compared_with) + ": " + "; ".join(new), said.format(briefly(compared_with)))]


def step_memory(now_bytes: int, recorded_bytes: int, margin_pct: float) -> list[Finding]:
    """The steps' peak GPU memory (above what was held when they began) no more than `margin_pct` over the record."""
    if now_bytes <= recorded_bytes * (1 + margin_pct / 100):
        return []
    change = 100 * (now_bytes / recorded_bytes - 1) if recorded_bytes else float("inf")
    said = (f"the steps' peak GPU memory is {now_bytes / 1e9:,.3f} GB above what they started with, "
            f"{recorded_bytes / 1e9:,.3f} GB recorded ({change:+.1f}%; allowed +{margin_pct:g}%)")
    return [Finding(FAILED, f"{said}: an extra allocation or a tensor kept alive in the step", said)]


def compile_counts(now, recorded: dict) -> list[Finding]:
    """Graphs, graph breaks and recompilations of torch.compile exactly as recorded; each break and recompilation
    named with dynamo's reason and the line."""
    problems = []  # (brief, the rest of its text)
    breaks, recompiled = now.graph_breaks, now.recompilations
    if len(breaks) > recorded.get("graph_breaks", 0):
        problems.append((f"{len(breaks)} graph break(s), {recorded.get('graph_breaks', 0)} recorded",
                         ":\n" + "\n".join(f"  {e.describe()}" for e in breaks)))
    if len(recompiled) > recorded.get("recompilations", 0):
        problems.append((f"{len(recompiled)} recompilation(s), {recorded.get('recompilations', 0)} recorded",
                         " (a guard failed):\n" + "\n".join(f"  {e.describe()}" for e in recompiled)))
    if now.graphs != recorded.get("graphs", 0) and not problems:
        problems.append((f"{now.graphs} graph(s) compiled, {recorded.get('graphs', 0)} recorded", ""))
    if len(breaks) < recorded.get("graph_breaks", 0) or len(recompiled) < recorded.get("recompilations", 0):
        problems.append(("fewer graph breaks or recompilations than recorded",
                         f" ({len(breaks)} and {len(recompiled)}, {recorded.get('graph_breaks', 0)} and "
                         f"{recorded.get('recompilations', 0)} recorded): re-record the baseline to keep the gain"))
    return [Finding(FAILED, said + rest, said) for said, rest in problems]
