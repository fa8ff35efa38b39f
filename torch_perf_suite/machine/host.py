"""The host: what the host-bound numbers (the loader's, the pipeline's) depend on.

The class is the CPU's name, family, model and stepping, and its cores. On machines of one class, loader and
pipeline numbers move from one machine to another far beyond the tolerances (docs/seed-000-ladder.md, -13% to +41%
on H200 machines of one class), so host-bound numbers are compared only with a baseline
recorded on the same machine (its DMI product UUID, else /etc/machine-id, else the kernel's boot id:
the lent GPU machines have neither of the first two and are all named "vm"): the nightly runner's own
numbers. Elsewhere they are reported as "not comparable".
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import psutil

_MACHINE_ID_FILES = ("/sys/class/dmi/id/product_uuid", "/etc/machine-id", "/proc/sys/kernel/random/boot_id")


def cpu_count() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _topology(cpu: int) -> tuple[int, int]:
    """(socket, physical core) of a logical CPU, from /sys; (0, cpu) where it does not say."""
    base = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
    try:
        return int((base / "physical_package_id").read_text()), int((base / "core_id").read_text())
    except (OSError, ValueError):
        return 0, cpu


def share_of_cores(index: int, shares: int, cores: list[int], topology=None) -> list[int]:
    """The `index`-th of `shares` equal parts of `cores` (a remainder left to no one): the cores of one GPU of the
    node (sharding.gpu_share) or one worker of a sharded run, so that its loader's processes and its intra-op
    threads do not take another's. The
    cores are ordered by socket, then physical core, so that a part keeps to one socket where it can and holds
    both hyperthreads of a core (Linux numbers a two-socket machine's twins far apart: 0-55 and 112-167 on
    socket 0). Empty where there are fewer cores than shares."""
    topology = topology or _topology
    ordered = sorted(cores, key=lambda cpu: (*topology(cpu), cpu))
    size = len(ordered) // shares
    return sorted(ordered[index * size:(index + 1) * size])


def cpu_list(cores: list[int]) -> str:
    """Cores as taskset and /proc write them: "0-3,8-11"."""
    runs: list[list[int]] = []
    for cpu in sorted(cores):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


CONFINED = "TORCH_PERF_SUITE_CORES"  # the cores `confine` gave this process, inherited by the processes it starts


def confine(cores: list[int]) -> None:
    """Run this process, every thread it has (an OpenMP pool already started among them) and every process
    and thread it starts, on `cores` only; torch's intra-op threads: one per core of them. The processes it starts
    are told so (CONFINED): REF's pytest run by a sharded run's worker keeps the worker's cores."""
    import torch

    os.environ[CONFINED] = cpu_list(cores)

    for tid in os.listdir("/proc/self/task"):  # sched_setaffinity sets one thread's mask; a thread started later inherits
        try:
            os.sched_setaffinity(int(tid), cores)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass
    torch.set_num_threads(len(cores))


def workers_cpu_s(batches) -> float | None:
    """CPU seconds (user + system) that the worker processes of a DataLoader iterator have run; None
    where it has no workers or one of them has exited (its seconds are gone).

    Reads the iterator's `_workers` (multiprocessing.Process objects: a private attribute of torch's
    multi-process iterator since torch 1.2) and their times with psutil."""
    workers = getattr(batches, "_workers", None)
    if not workers:
        return None
    try:
        return sum(t.user + t.system for t in (psutil.Process(w.pid).cpu_times() for w in workers))
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def memory(batches=None) -> dict:
    """Host memory now, in bytes: this process's resident set ("main_rss"), and where `batches` is a DataLoader
    iterator with workers, their number and the sum of their proportional sets ("workers_pss": a page shared by
    k processes counts 1/k to each, so pages forked from the main process are not counted once per worker)
    and resident sets ("workers_rss": what `top` adds up). A worker that has exited is left out."""
    found = {"main_rss": psutil.Process().memory_info().rss, "workers": 0, "workers_pss": 0, "workers_rss": 0}
    for worker in getattr(batches, "_workers", None) or ():
        try:
            info = psutil.Process(worker.pid).memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        found["workers"] += 1
        found["workers_pss"] += getattr(info, "pss", info.rss)  # pss: Linux only
        found["workers_rss"] += info.rss
    return found


def memory_line(found: dict, workers: int) -> str:
    """`memory(...)` as a report note, with seed 003's arithmetic (one batch per worker) where `found` has the
    batch's bytes ("batch") and pinned memory ("pinned") where known."""
    def gb(n):
        return f"{n / 1e9:.2f} GB"
    shown = [f"main {gb(found['main_rss'])}"]
    if found["workers"]:
        each = found["workers_pss"] / found["workers"]
        shown.append(f"{found['workers']} workers {gb(found['workers_pss'])} PSS ({gb(each)} each; "
                     f"{gb(found['workers_rss'])} RSS)")
    if found.get("pinned") is not None:
        shown.append(f"pinned pool {gb(found['pinned'])}")
    line = ", ".join(shown)
    if found.get("batch") is not None and workers:
        line += f"; batch {found['batch'] / 1e6:.1f} MB x {workers} workers = {found['batch'] * workers / 1e6:,.0f} MB"
    return line


def machine_id() -> str:
    for path in _MACHINE_ID_FILES:
        try:
            value = Path(path).read_text().strip()
        except OSError:
            continue
        if value:
            return value
    return platform.node()


def host_class() -> dict:
    """CPU name with family/model/stepping (from /proc/cpuinfo where there is one), cores, machine."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    cpu = fields.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in fields:
        cpu += f" (family {fields['cpu family']} model {fields.get('model')} stepping {fields.get('stepping')})"
    return {"cpu": cpu, "cores": cpu_count(), "machine": machine_id()}


def host_line(host: dict | None) -> str:
    if not host:
        return "an unknown host"
    return f"{host.get('cpu')} x {host.get('cores')} cores, machine {str(host.get('machine'))[:13]}"


def why_not_comparable(recorded: dict | None, current: dict) -> str:
    """'' if host-bound numbers recorded on `recorded` may be compared on `current`; else why not."""
    if not recorded:
        return ("not comparable: the baseline was recorded without host information (an old file); "
                "re-record it on this host with --perf-update-baselines")
    if all(recorded.get(k) == current.get(k) for k in ("cpu", "cores")):
        if recorded.get("machine") == current.get("machine"):
            return ""
        return (f"not comparable: recorded on machine {str(recorded.get('machine'))[:13]}, this is machine "
                f"{str(current.get('machine'))[:13]} (the same CPU class)")
    return f"not comparable: recorded on {host_line(recorded)}, this host is {host_line(current)}"
