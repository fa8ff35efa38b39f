"""A test spread over several GPUs of one node (DistributedDataParallel's ranks, or one process driving them all),
judged as one test (`result`): its baseline entry keyed by the GPUs' count and how they are joined (`key`), each
rank's count (kernel launches by family, bytes copied by kind, NCCL's included, the steps' peak memory) compared
with that rank's record, the samples/s of all GPUs together as a GPU-side number (batches resident) or a pipeline one
(fed by a loader), and its scaling efficiency, a ratio measured within one run; and the verdicts of those two
(`counted`, `scaling`)."""

from __future__ import annotations

from . import checks
from .baselines import gpu_uuid
from .findings import FAILED, Finding
from .nvml import topology as joined
from .parts import Parts
from .result import Result
from .syncs import SyncCount
from .timing import Throughput


def key(test_id: str, gpus: int, topology: str | None) -> str:
    """The baseline entry's name: the test's id, the number of GPUs and their topology ("GPU0-GPU1 NV18")."""
    return f"{test_id} on {gpus} GPU{'s' if gpus != 1 else ''} ({topology or 'topology unknown'})"


def result(test_id: str, *, timed: Throughput, batch_size: int, ranks: dict[int, SyncCount | None],
           peak_gb: dict[int, float], gpus: int, resident: bool, scaling: float | None, on_gpu: bool) -> Result:
    """`timed`: all GPUs' rounds, each as long as its slowest rank's; `batch_size`: all GPUs' batches of a step;
    `ranks`: each rank's profiled count (None where nothing was profiled: a smoke run); `peak_gb`: each GPU's peak
    memory over the run; `scaling`: samples/s per GPU over one GPU's in this run (None for the one-GPU scenario)."""
    uuids = [gpu_uuid(i) for i in range(gpus)] if on_gpu else []
    topology = joined(uuids) if on_gpu else None
    env = {"gpus": gpus, "topology": topology, "gpu_uuid": ",".join(uuids) if uuids and None not in uuids else None}
    found = Result(test_id, Parts(batch_size, timed, gpu=timed if resident else None), syncs=None,
                   peak_mem_gb=max(peak_gb.values(), default=None), trace=None, ranks=ranks,
                   key=key(test_id, gpus, topology), env=env, scaling=scaling)
    found.extra.update({"GPUs": gpus, "syncs/step by rank": ", ".join(
        f"rank {rank} {s.per_step:.2f}" for rank, s in sorted(ranks.items()) if s is not None) or "-",
        "peak GB by GPU": ", ".join(f"GPU{i} {gb:.2f}" for i, gb in sorted(peak_gb.items()))})
    if scaling is not None:
        found.extra["scaling"] = round(scaling, 3)
    return found


def counted(now: dict, recorded: dict | None, margin_pct: float, compile_count,
            against: str = "the baseline") -> list[Finding]:
    """Each rank's counts (Result.counts()["ranks"]) against its own record (checks.counted), every line of a failed
    finding naming its rank; a rank that nothing was recorded for fails. Nothing counted, or nothing recorded: none."""
    if not now or not recorded:
        return []
    theirs, found = recorded.get("ranks", {}), []
    for rank, mine in now["ranks"].items():
        of_rank = (checks.counted(mine, theirs[rank], margin_pct, compile_count, against) if rank in theirs
                   else [Finding(FAILED, f"{against} recorded no count for it")])
        found += [Finding(f.outcome, f"rank {rank}: " + f.text.replace("\n", f"\nrank {rank}: ")) for f in of_rank]
    return found


def scaling(now: float, recorded: float | None, tolerance_pct: float, against: str) -> list[Finding]:
    """A test over several GPUs: its samples/s per GPU over one GPU's, a ratio measured within one run, no more than
    `tolerance_pct` below the one recorded for this GPU model, count and topology (none: nothing recorded)."""
    if recorded is None or now >= recorded * (1 - tolerance_pct / 100):
        return []
    return [Finding(FAILED, f"scaling efficiency {now:.1%} (samples/s per GPU over one GPU's, in this run), {recorded:.1%} "
                            f"recorded by {against} ({100 * (now / recorded - 1):+.1f}%; allowed -{tolerance_pct:g}%): the "
                            "GPUs wait longer for each other (the all-reduce, a rank's sync, uneven work)")]
