"""The suite sharded over the GPUs of one node with pytest-xdist (`-n N --dist loadfile`).

The controller gives each worker a GPU of its own and a share of the node's cores (Controller) and orders the
files by the seconds they took last time (Clock, records/durations.py); a worker pins itself to them before CUDA starts
(pin_worker). A run without -n on one GPU of several is confined to that GPU's share (confine_to_its_gpu).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from ..machine import device, host, nvml
from ..records import durations
from . import runners

if TYPE_CHECKING:
    from .core import PerfSession


def xdist_workers(config) -> int:
    """How many pytest-xdist workers this process starts: 0 where it runs the tests itself (no -n, -n 0,
    --collect-only, or an xdist worker)."""
    if (hasattr(config, "workerinput") or config.getoption("collectonly") or config.getoption("dist", "no") == "no"
            or not config.getoption("tx", None)):
        return 0
    from xdist.workermanage import parse_tx_spec_config  # -n N is N "popen" specs by now, -n auto resolved

    return len(parse_tx_spec_config(config))


def pin_worker(config) -> None:
    """In a pytest-xdist worker of a sharded run: the cores its controller gave it (host.confine: else two workers'
    loaders and intra-op threads oversubscribe the node's cores, and a loader-bound test measured beside another
    collapses: docs/measurements/multi-gpu.md, "The suite sharded"), and its GPU, made the only GPU that CUDA shows this
    process. CUDA reads CUDA_VISIBLE_DEVICES once, when it starts, so this runs first in pytest_configure (tryfirst),
    before this plugin's device detection or another plugin's configure starts it; importing torch does not."""
    workerinput = getattr(config, "workerinput", {})
    if workerinput.get("perf_cores"):
        host.confine(workerinput["perf_cores"])
    gpu = workerinput.get("perf_gpu")
    if gpu is None:
        return
    import torch

    if torch.cuda.is_initialized():
        raise pytest.UsageError(f"xdist worker {config.workerinput.get('workerid')}: CUDA was started before the worker "
                                f"could be given GPU {gpu}, so it would measure on a GPU another worker uses. Start no "
                                "CUDA work at import time (in a conftest.py or plugin), or run without -n.")
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu


def node_gpus(visible: int) -> int:
    """The node's GPUs: NVML's count, which CUDA_VISIBLE_DEVICES does not narrow; the `visible` ones where NVML cannot
    say."""
    return max(visible, nvml.gpus_on_node() or 0)


def gpu_share(gpu: str | None, fallback: int, gpus: int, cores: list[int]) -> list[int]:
    """One GPU's share of the node's cores: `cores` split into as many parts as the node has GPUs (`gpus`), the part
    of the GPU's index where CUDA_VISIBLE_DEVICES names the GPU by one (`gpu`), else the `fallback`-th. A test on one
    GPU then measures on as many cores, and with as many DataLoader workers, with -n or without: a run on one GPU of
    two without -n gave the loaders every core of the node, which decoded JPEGs faster than the GPU trained, and
    test_storage's loader-bound scenarios failed where the sharded run passed them (docs/measurements/multi-gpu.md)."""
    index = int(gpu) if gpu is not None and gpu.strip().isdigit() and int(gpu) < gpus else fallback
    return host.share_of_cores(index, gpus, cores)


def confine_to_its_gpu(config) -> None:
    """A run without -n on one GPU of a node with several (CUDA_VISIBLE_DEVICES picked it): this process, its loaders
    and its threads on that GPU's share of the cores (gpu_share), as a sharded run's worker on that GPU would be.
    Where CUDA sees several GPUs the tests run on all the cores: the multi_gpu scenarios spread over the node. A
    process that the suite already confined (host.CONFINED: REF's run under --perf-against, started by a sharded
    run's worker) keeps its cores: split again, REF measured on 8 of the worker's 16."""
    if (hasattr(config, "workerinput") or xdist_workers(config) or config.getoption("--perf-smoke")
            or not hasattr(os, "sched_getaffinity") or device.gpu_count() != 1
            or os.environ.get(host.CONFINED) == host.cpu_list(sorted(os.sched_getaffinity(0)))):
        return
    gpus = node_gpus(1)
    if gpus > 1:
        gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0]
        host.confine(gpu_share(gpu, 0, gpus, sorted(os.sched_getaffinity(0))))


def shard(config, session: PerfSession) -> None:
    """The controller of `-n N`: on a GPU outside --perf-smoke, N must not exceed the GPUs visible, and each test
    file must run in one worker (a ladder step is compared with its predecessor measured in the same process, and
    the scenarios of a file share measurements). Worker i runs on the i-th share of the cores and, where there are
    GPUs enough, measures on the i-th GPU (Controller). A smoke run with more workers than GPUs shares them, as
    without -n; a CPU run has none to give."""
    workers = session.shards
    if not workers:
        return
    s = session.settings
    # an earlier run's partial reports: not to be merged into this one's
    for files in runners.partial_reports(s.report).values() if s.report else ():
        for f in files:
            f.unlink(missing_ok=True)
    gpus = device.gpu_count()
    if gpus and not s.smoke:
        if workers > gpus:
            raise pytest.UsageError(
                f"-n {workers} but {gpus} GPU(s) visible: each pytest-xdist worker measures on a GPU of its own. "
                f"Use -n {gpus} or fewer (-n auto starts one worker per GPU), or make more GPUs visible (CUDA_VISIBLE_DEVICES).")
        dist = config.getoption("dist")
        if dist != "loadfile":
            given = " (what -n means without --dist)" if dist == "load" else ""
            raise pytest.UsageError(
                f"-n {workers} with --dist {dist}{given} on a GPU: the tests of one file must run in one worker, since a "
                "ladder step is compared with its predecessor measured in the same process and the scenarios of a file "
                "share measurements. Add --dist loadfile.")
    pinned = gpus if gpus >= workers else 0
    shares = node_gpus(pinned) if pinned else workers  # a GPU's share of the node (gpu_share), else a worker's
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []  # none to share out off Linux
    controller = Controller(session, workers, os.environ.get("CUDA_VISIBLE_DEVICES"), pinned, cores, shares)
    config.pluginmanager.register(controller, "perf_xdist_controller")


class Controller:
    """pytest-xdist's hooks in the controller of a sharded run, registered only there (so only where xdist is
    installed and started): each worker's share of the cores and its GPU, and what each worker sends at its end."""

    def __init__(self, session: PerfSession, workers: int, visible: str | None, gpus: int, cores: list[int],
                 shares: int):
        self.session, self.workers, self.visible, self.gpus, self.cores = session, workers, visible, gpus, cores
        self.shares = shares  # the parts the cores are split into: the node's GPUs, or the workers where none is given
        self.held: dict[str, int] = {}  # live worker id -> its slot: the index of its GPU and of its share of the cores

    def pytest_configure_node(self, node):
        """The first slot no live worker holds: gw0 the first, gw1 the second, a worker started in place of a crashed
        one (with a new id) the crashed one's. With it, where there is a GPU a worker, that GPU, and a share of the
        cores (none where there are fewer cores than shares): its GPU's (gpu_share), else its slot's."""
        index = min(set(range(self.workers)) - set(self.held.values()))
        self.held[node.gateway.id] = index
        gpu = device.gpu_for_worker(index, self.visible, self.gpus) if self.gpus else None
        node.workerinput["perf_cores"] = gpu_share(gpu, index, self.shares, self.cores)
        if gpu is not None:
            node.workerinput["perf_gpu"] = gpu

    def pytest_testnodedown(self, node, error):
        self.held.pop(node.gateway.id, None)
        self.session.worker_outputs[node.gateway.id] = getattr(node, "workeroutput", {}).get("perf") or {}

    def pytest_xdist_make_scheduler(self, config, log):
        """--dist loadfile: the file with the most seconds left first, by the last run's (records/durations.py)."""
        if config.getoption("dist") == "loadfile":
            seconds = durations.load(getattr(config, "cache", None), self.session.clock)
            return durations.longest_file_first(config, log, seconds)
        return None


class Clock:
    """The seconds each test took (setup, call and teardown), put in pytest's cache at the end for the order of the
    next sharded run (records/durations.py). In the process that reports: a sharded run's controller sees its workers'."""

    def __init__(self, session: PerfSession):
        self.session, self.seconds = session, {}

    def pytest_runtest_logreport(self, report):
        """A phase's seconds, less those a sharded worker spent measuring REF before the test (--perf-against): the
        next run may take REF from its cache."""
        ref_s = dict(report.user_properties).get(durations.REF_S, 0.0) if report.when == "setup" else 0.0
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration - ref_s

    def pytest_sessionfinish(self, session):
        durations.save(getattr(session.config, "cache", None), self.session.clock, self.seconds)


def auto_num_workers(config) -> int | None:
    """`-n auto` (or `logical`) on a GPU outside --perf-smoke: one worker per visible GPU, where xdist would start one
    per core and the run would be refused. Elsewhere (and where PYTEST_XDIST_AUTO_NUM_WORKERS says), xdist's count."""
    if config.getoption("--perf-smoke") or os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return device.gpu_count() or None
