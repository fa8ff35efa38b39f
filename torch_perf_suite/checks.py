"""Verdicts as plain functions: each takes what was measured and what is expected, and returns its findings
(findings.py): a failed one whose text says what is wrong, none where nothing is. The `perf` fixture only turns a
failed finding into a failure.

Counted checks (syncs, kernels, bytes copied, step memory, compile graphs, loader instructions) are exact
on any machine: compared exactly, or within a margin measured on two machines. Host-bound claims (a
pipeline's efficiency, which part is its bottleneck) hold for the host they were measured on, so they are
checked only against a baseline recorded on this host (`host_scope`).
"""

from __future__ import annotations

from . import host_side
from .findings import FAILED, NOT_COMPARED, Finding
from .parts import Parts

TOP_CHANGES = 5  # kernel families named in a failure, most changed first


# --- syncs ----------------------------------------------------------------------------------------


def syncs(counted, *, per_step: float | None = None, at_least: float | None = None, from_library: str | None = None,
          versions: str = "") -> list[Finding]:
    """Exactly `per_step` syncs per step, or `at_least` that many (a pitfall), optionally all from `from_library`.

    For a pitfall, fewer syncs than expected fails too: the pitfall is gone, and the workaround the scenario
    documents can be retired, knowingly. `versions` names the libraries the pitfall was seen with."""
    if (per_step is None) == (at_least is None):
        raise TypeError("assert_syncs takes exactly one of per_step= and at_least=")
    every_step = periodic_every_step(counted)
    if every_step:
        return every_step
    measured = counted.per_step
    head = f"measured {measured:.2f} host-device syncs per step ({counted.total} in {counted.steps} profiled steps)"
    where = f"\n{counted.describe()}"
    if per_step is not None and abs(measured - per_step) > 1e-9:
        more = "a new sync appeared" if measured > per_step else "fewer syncs than this scenario documents"
        return [Finding(FAILED, f"{head}, expected {per_step:g} ({more}):{where}")]
    if at_least is not None and measured < at_least:
        return [Finding(FAILED, f"{head}, expected at least {at_least:g}: the pitfall this scenario documents no longer "
                                f"syncs with {versions}. If that is an upgrade's doing, retire the workaround and this "
                                f"expectation together.{where}")]
    if from_library is not None:
        stray = [s for s in counted.sources if from_library not in s.library_line]
        if stray:
            listing = "\n".join(s.describe() for s in stray)
            return [Finding(FAILED, f"{head}; expected every sync to come from {from_library!r}, these do not:\n{listing}")]
    return []


def periodic_every_step(counted) -> list[Finding]:
    """A phase marked periodic (`periodic()`, a `perf_periodic:` range) whose syncs are counted apart from the steps'
    must not run on every step: there its syncs are per-step syncs, and marking them would hide them."""
    steps = counted.steps
    every = sorted(name for name, runs in counted.periodic_runs.items() if steps > 1 and runs >= steps)
    if not every:
        return []
    return [Finding(FAILED, f"a phase marked periodic ran in every one of the {steps} profiled steps ({', '.join(every)}): "
                            f"its syncs are per-step syncs. Mark only what runs every k > 1 steps, or count more steps "
                            f"(--perf-profile-steps) than its period:\n{counted.describe()}")]


def host_reads(counted, *, per_step: float | None = None) -> list[Finding]:
    """A smoke run's syncs: no more host reads a step (host_reads.py) than the syncs the test expects on a GPU.

    Only an upper bound holds: a pitfall's sync that is not a read (a pageable copy) has no read to see, and which
    reads sync depends on where the tensor would live."""
    every_step = periodic_every_step(counted)
    if every_step or per_step is None or counted.per_step <= per_step + 1e-9:
        return every_step
    return [Finding(FAILED, f"measured {counted.per_step:.2f} host reads per step ({counted.total} in {counted.steps} "
                            f"steps) with no GPU, expected at most {per_step:g}: each reads a tensor's value on the host, "
                            f"which on a GPU is a host-device sync:\n{counted.describe()}")]



def host_reads_against(now: dict, recorded: dict, against: str, listing: str) -> list[Finding]:
    """A smoke run's host reads a step (smoke_counts.reads_entry) against REF's smoke run's: more reads a step than
    REF's fails, naming the lines whose reads grew, most first (a read that an edit above it moved, with none added,
    does not); `listing`: the head's reads as the syncs' check lists them (SyncCount.describe)."""
    mine, was = now["per_step"], recorded["per_step"]
    if mine <= was + 1e-9:
        return []
    rows = host_side.grown(now["lines"], recorded["lines"], complete=True)
    return [Finding(FAILED, f"measured {mine:.2f} host reads per step with no GPU, {was:.2f} at {against} ({mine - was:+.2f}): "
                            "each reads a tensor's value on the host, which on a GPU is a host-device sync; reads a "
                            "step by line, most grown first:\n" + "\n".join(rows) + f"\n{listing}")]


def smoke_holes(now: dict, reads: dict | None, recorded: dict | None, against: str) -> list[Finding]:
    """A smoke run against REF: what it counted (Result.counts, its host reads) that REF's smoke run's record of the
    test (smoke_counts.entry) lacks, NOT_COMPARED each: a hole that --perf-strict fails on, never a silent pass."""
    had = [("host side", "host" in now, recorded and "host" in recorded["counts"]),
           ("host reads", reads is not None, recorded and recorded.get("reads") is not None)]
    if recorded is None and any(has for _, has, _ in had):
        what = " and ".join(name for name, has, _ in had if has)
        return [Finding(NOT_COMPARED, f"{what} not compared: {against} recorded no smoke counts for this test (its "
                                      "suite is older than them)")]
    return [Finding(NOT_COMPARED, f"{name} not compared: {against} recorded none for this test")
            for name, has, at_ref in had if has and not at_ref]

# --- kernels, from the profiled window -------------------------------------------------------------


def layout_conversions(kernels) -> list[Finding]:
    """No NCHW<->NHWC conversion kernels in the steps (seed 001: channels_last removes them)."""
    if not kernels.conversions:
        return []
    listing = "\n".join("  " + c.describe() for c in kernels.conversions)
    return [Finding(FAILED, f"{kernels.conversions_per_step:g} layout conversion kernel(s) per step, expected 0 "
                            f"(is the model or its input no longer channels_last?):\n{listing}\n{kernels.describe()}")]


def tensor_cores(kernels, *, at_least: float | None = None, at_most: float | None = None) -> list[Finding]:
    """The share of convolution and matmul GPU time in Tensor Core kernels is within bounds."""
    share = kernels.tensor_core_share
    if share is None:
        return [Finding(FAILED, f"no convolution or matmul kernel in the steps, so no Tensor Core share\n{kernels.describe()}")]
    if (at_least is not None and share < at_least) or (at_most is not None and share > at_most):
        wanted = " and ".join(w for w in (at_least is not None and f"at least {at_least:.0%}",
                                          at_most is not None and f"at most {at_most:.0%}") if w)
        return [Finding(FAILED, f"{share:.1%} of convolution and matmul GPU time ran on Tensor Cores, expected {wanted} "
                                f"(TF32 and autocast flags, cuDNN's choice of kernels):\n{kernels.describe()}")]
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
    return [Finding(FAILED, f"{total_now:g} kernel launches per step, {total_then:g} recorded ({total_now - total_then:+g}): "
                            f"a swapped optimizer implementation, a lost fusion or a changed kernel choice; launches per "
                            f"step by family:\n" + "\n".join(rows) + more)]


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
    return [Finding(FAILED, "bytes copied per step changed:\n" + "\n".join(rows))] if rows else []


def step_memory(now_bytes: int, recorded_bytes: int, margin_pct: float) -> list[Finding]:
    """The steps' peak GPU memory (above what was held when they began) no more than `margin_pct` over the record."""
    if now_bytes <= recorded_bytes * (1 + margin_pct / 100):
        return []
    change = 100 * (now_bytes / recorded_bytes - 1) if recorded_bytes else float("inf")
    return [Finding(FAILED, f"the steps' peak GPU memory is {now_bytes / 1e9:,.3f} GB above what they started with, "
                            f"{recorded_bytes / 1e9:,.3f} GB recorded ({change:+.1f}%; allowed +{margin_pct:g}%): an extra "
                            "allocation or a tensor kept alive in the step")]


def compile_counts(now, recorded: dict) -> list[Finding]:
    """Graphs, graph breaks and recompilations of torch.compile exactly as recorded; each break and recompilation
    named with dynamo's reason and the line."""
    problems = []
    breaks, recompiled = now.graph_breaks, now.recompilations
    if len(breaks) > recorded.get("graph_breaks", 0):
        problems.append(f"{len(breaks)} graph break(s), {recorded.get('graph_breaks', 0)} recorded:\n"
                        + "\n".join(f"  {e.describe()}" for e in breaks))
    if len(recompiled) > recorded.get("recompilations", 0):
        problems.append(f"{len(recompiled)} recompilation(s), {recorded.get('recompilations', 0)} recorded (a guard failed):\n"
                        + "\n".join(f"  {e.describe()}" for e in recompiled))
    if now.graphs != recorded.get("graphs", 0) and not problems:
        problems.append(f"{now.graphs} graph(s) compiled, {recorded.get('graphs', 0)} recorded")
    if len(breaks) < recorded.get("graph_breaks", 0) or len(recompiled) < recorded.get("recompilations", 0):
        problems.append(f"fewer graph breaks or recompilations than recorded ({len(breaks)} and {len(recompiled)}, "
                        f"{recorded.get('graph_breaks', 0)} and {recorded.get('recompilations', 0)} recorded): re-record "
                        "the baseline to keep the gain")
    return [Finding(FAILED, problem) for problem in problems]


def counted(now: dict, recorded: dict | None, margin_pct: float, compile_count, against: str = "the baseline") -> list[Finding]:
    """Every count of a test (Result.counts: kernel launches, bytes copied, step memory, compile graphs, the host
    side) against its recorded entry: its parts' findings, one after the other. Nothing counted, or nothing recorded:
    none. A test over several GPUs: ranks.counted."""
    if not now or not recorded:
        return []
    found = []
    if "kernels_per_step" in now:
        found += kernel_launches(now["kernels_per_step"], recorded.get("kernels_per_step", {}))
    if "copies_per_step" in now:
        found += copies(now["copies_per_step"], recorded.get("copies_per_step", {}), margin_pct)
    if "step_peak_bytes" in now and "step_peak_bytes" in recorded:
        found += step_memory(now["step_peak_bytes"], recorded["step_peak_bytes"], margin_pct)
    if "compile" in now or "compile" in recorded:
        found += compile_counts(compile_count, recorded.get("compile", {}))
    if "host" in now and "host" in recorded:
        found += host_side.failure(now["host"], recorded["host"], against)
    return found


INSTRUCTIONS_FLOOR = 2_000  # per sample: a light loader's count moves by hundreds between processes (docs/counted-gates.md)


def instructions(per_sample: float, recorded: float, margin_pct: float) -> list[Finding]:
    """The loader's instructions per sample no more than `margin_pct` over the record, or INSTRUCTIONS_FLOOR for a
    loader so light that a percent of it is the interpreter's own noise (a raw uint8 tensor a sample)."""
    if per_sample <= max(recorded * (1 + margin_pct / 100), recorded + INSTRUCTIONS_FLOOR):
        return []
    return [Finding(FAILED, f"the loader runs {per_sample:,.0f} instructions per sample (dataset item, transforms, "
                            f"collate; callgrind), {recorded:,.0f} recorded ({100 * (per_sample / recorded - 1):+.1f}%; "
                            f"allowed +{margin_pct:g}%): more CPU work per sample in the dataset, its transforms or the "
                            "collate")]


# --- timed readings that are claims -------------------------------------------------------------------


def efficiency(p: Parts, at_least: float, in_turns: bool = False) -> list[Finding]:
    """The pipeline delivers at least `at_least` of its bottleneck part's samples/s; `in_turns`: of the two parts in
    series, 1 / (1/loader + 1/GPU-side) (no DataLoader workers: one thread loads a batch, then trains on it)."""
    if in_turns:
        due = 1 / (1 / p.loader.median + 1 / p.gpu.median)
        if p.pipeline.median < at_least * due:
            return [Finding(FAILED, f"the pipeline delivers {p.pipeline.median:,.0f} samples/s, {p.pipeline.median / due:.2f} "
                                    f"of the {due:,.0f} that loading and training in turns allow, expected at least "
                                    f"{at_least:g}. {parts_line(p)}")]
        return []
    if p.efficiency < at_least:
        return [Finding(FAILED, f"pipeline efficiency {p.efficiency:.2f}, expected at least {at_least:g}: the pipeline "
                                f"delivers {p.pipeline.median:,.0f} samples/s while its bottleneck ({p.bottleneck}) allows "
                                f"{min(t.median for t in (p.loader, p.gpu) if t is not None):,.0f}. {parts_line(p)}")]
    return []


def bottleneck(p: Parts, expected: str) -> list[Finding]:
    if p.bottleneck == expected:
        return []
    return [Finding(FAILED, f"bottleneck {p.bottleneck}, expected {expected}. {parts_line(p)}")]


def host_scope(entry: dict | None, why_not_same_host: str, updating: bool, against: bool = False) -> str:
    """'' where a host-bound claim is checked on this host (its baseline was recorded here); else why it is not.
    Such a claim (an efficiency floor, a bottleneck) held where it was measured: a faster or slower host moves it.
    Against REF (`against`) it is reported: REF's numbers came from this host, but from a run as noisy as this one."""
    if against:
        return "reported, not gated against REF (host-bound: it moves between runs on one host)"
    if updating:
        return "recorded as measured on this host, not checked (host-bound: a claim of the host that records it)"
    if entry is None:
        return "not checked: no baseline from this host (host-bound: a faster or slower host moves it)"
    return f"not checked: {why_not_same_host}" if why_not_same_host else ""


def parts_line(p: Parts) -> str:
    names = [("pipeline", p.pipeline), ("GPU-side", p.gpu), ("loader", p.loader)]
    shown = ", ".join(f"{n} {t.median:,.0f}" for n, t in names if t is not None)
    cpu = f"; loader {p.loader_cpu.median:,.0f} samples per worker CPU second" if p.loader_cpu is not None else ""
    return f"parts (samples/s): {shown}; bottleneck: {p.bottleneck}{cpu}"


def holes(left: list[str], ref: str) -> list[Finding]:
    """--perf-strict against REF: what a test left uncompared with REF and nothing else judged, one line each."""
    if not left:
        return []
    return [Finding(FAILED, f"--perf-strict: {len(left)} check(s) not made against REF {ref}, and nothing else judged "
                            "what they cover:\n" + "\n".join(f"  {what}" for what in left))]
