"""The host class: what the host-bound numbers (the loader's, the pipeline's) depend on.

Cloud hosts of one GPU model often show one generic CPU name ("Intel(R) Xeon(R) Processor") while
their CPUs differ in generation, clock and neighbours. So the class is the CPU's name, family, model
and stepping, its cores, and a measured speed: images resized per second by a pool of one process
per core, PIL's bilinear 32x32 -> 224x224, the loader recipes' own work. Host-bound numbers are
compared only between hosts of one CPU and core count whose speeds are within SPEED_PCT.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import statistics
import time
from pathlib import Path

SPEED_PCT = 5.0  # hosts whose speeds differ more are not compared
_IMAGES_PER_TASK = 2000


def cpu_count() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def host_class() -> dict:
    """CPU name with family/model/stepping (from /proc/cpuinfo where there is one) and cores."""
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
    return {"cpu": cpu, "cores": cpu_count()}


def _resize_images(n: int) -> int:
    from PIL import Image

    image = Image.frombytes("RGB", (32, 32), bytes(range(256)) * 12)
    for _ in range(n):
        image.resize((224, 224), Image.BILINEAR)
    return n


def host_speed(repeats: int = 3) -> float:
    """Images resized per second by one process per core (median of `repeats` passes of about 0.3 s)."""
    cores = cpu_count()
    with multiprocessing.get_context("spawn").Pool(cores) as pool:
        pool.map(_resize_images, [1] * cores)  # start the processes and import PIL outside the timing
        rates = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            done = sum(pool.map(_resize_images, [_IMAGES_PER_TASK] * (2 * cores)))
            rates.append(done / (time.perf_counter() - t0))
    return round(statistics.median(rates), 1)


def describe(host: dict | None) -> str:
    if not host:
        return "an unknown host"
    speed = f", {host['speed']:,.0f} images/s" if host.get("speed") else ""
    return f"{host.get('cpu')} x {host.get('cores')} cores{speed}"


def why_not_comparable(recorded: dict | None, current: dict) -> str:
    """'' if host-bound numbers recorded on `recorded` may be compared on `current`; else why not."""
    if not recorded:
        return ("not comparable: the baseline was recorded without host information (an old file); "
                "re-record it on this host with --perf-update-baselines")
    same_cpu = (recorded.get("cpu"), recorded.get("cores")) == (current.get("cpu"), current.get("cores"))
    speeds = recorded.get("speed"), current.get("speed")
    close = None not in speeds and abs(speeds[1] / speeds[0] - 1) * 100 <= SPEED_PCT
    if same_cpu and close:
        return ""
    return f"not comparable: recorded on {describe(recorded)}, this host is {describe(current)}"
