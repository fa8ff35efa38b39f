"""Which GPU and which cores each pytest-xdist worker gets, on a CPU: the index-th visible GPU, the controller's
shares of the cores (a socket and whole cores each), a run on one GPU of several kept to its share, and a confined
process's threads and children on its cores only."""

import multiprocessing
import os
from types import SimpleNamespace

import pytest
import torch

from torch_perf_suite.machine import device, host, nvml
from torch_perf_suite.records import durations
from torch_perf_suite.session import sharding

# --- which GPU each worker gets ---------------------------------------------------------------------------------


@pytest.mark.parametrize("index, visible, count, gpu", [
    (0, None, 2, "0"),
    (1, None, 2, "1"),
    (1, "", 2, "1"),  # set but empty: the plain indices
    (0, "3,5", 2, "3"),  # an existing list: its entries, in order
    (1, "3, 5", 2, "5"),
    (1, "GPU-9641a40c-aaaa,GPU-03728b74-bbbb", 2, "GPU-03728b74-bbbb"),  # UUIDs are passed on as they are
    (0, "MIG-1c7e-cccc", 1, "MIG-1c7e-cccc"),
])
def test_a_worker_gets_the_index_th_visible_gpu_as_cuda_visible_devices_names_it(index, visible, count, gpu):
    assert device.gpu_for_worker(index, visible, count) == gpu


@pytest.mark.parametrize("index, visible, count, message", [
    (2, None, 2, "worker 2 has no GPU: 2 visible"),
    (1, "0,-1,1", 1, r"worker 1 has no GPU: 1 visible \(CUDA_VISIBLE_DEVICES=0,-1,1\)"),  # CUDA stops at the -1
    (0, None, 0, "worker 0 has no GPU: 0 visible"),
])
def test_a_worker_beyond_the_visible_gpus_has_none(index, visible, count, message):
    with pytest.raises(ValueError, match=message):
        device.gpu_for_worker(index, visible, count)


def node(wid):
    return SimpleNamespace(gateway=SimpleNamespace(id=wid), workerinput={"workerid": wid})


def test_the_controller_gives_each_live_worker_a_gpu_and_cores_of_its_own_and_a_replacement_the_crashed_ones(monkeypatch):
    monkeypatch.setattr(host, "_topology", lambda cpu: (0, cpu))  # one socket, no hyperthreads: not this machine's
    session = SimpleNamespace(worker_outputs={})
    controller = sharding.Controller(session, 3, "GPU-a,GPU-b,GPU-c", 3, list(range(8)), 3)
    gw0, gw1, gw2 = node("gw0"), node("gw1"), node("gw2")
    controller.pytest_configure_node(gw0)
    controller.pytest_configure_node(gw1)
    assert (gw0.workerinput["perf_gpu"], gw1.workerinput["perf_gpu"]) == ("GPU-a", "GPU-b")
    assert (gw0.workerinput["perf_cores"], gw1.workerinput["perf_cores"]) == ([0, 1], [2, 3])
    controller.pytest_testnodedown(gw0, error="crashed")  # no workeroutput: it died
    controller.pytest_configure_node(gw2)  # xdist's replacement, with a new id
    assert (gw2.workerinput["perf_gpu"], gw2.workerinput["perf_cores"]) == ("GPU-a", [0, 1])
    gw1.workeroutput = {"perf": {"lines": ["note"]}}
    controller.pytest_testnodedown(gw1, error=None)
    assert session.worker_outputs == {"gw0": {}, "gw1": {"lines": ["note"]}}


def test_the_clock_leaves_out_what_a_workers_setup_spent_measuring_ref():
    clock = sharding.Clock(SimpleNamespace())
    measured_ref = [(durations.REF_S, 30.0)]  # the item's, on each of its phases' reports
    for when, seconds in (("setup", 30.5), ("call", 2.0), ("teardown", 0.1)):
        clock.pytest_runtest_logreport(SimpleNamespace(nodeid="t.py::a", when=when, duration=seconds,
                                                       user_properties=measured_ref))
    clock.pytest_runtest_logreport(SimpleNamespace(nodeid="t.py::b", when="setup", duration=0.5, user_properties=[]))
    assert clock.seconds == {"t.py::a": pytest.approx(2.6), "t.py::b": 0.5}


def test_a_controller_without_gpus_to_give_gives_cores_only(monkeypatch):
    monkeypatch.setattr(host, "_topology", lambda cpu: (0, cpu))  # one socket, no hyperthreads: not this machine's
    controller = sharding.Controller(SimpleNamespace(worker_outputs={}), 2, None, 0, [0, 1, 2, 3, 4], 2)
    gw0, gw1 = node("gw0"), node("gw1")
    controller.pytest_configure_node(gw0)
    controller.pytest_configure_node(gw1)
    assert "perf_gpu" not in gw0.workerinput
    assert (gw0.workerinput["perf_cores"], gw1.workerinput["perf_cores"]) == ([0, 1], [2, 3])  # core 4 left to no one


def test_fewer_workers_than_the_nodes_gpus_get_their_gpus_shares_of_the_cores(monkeypatch):
    """-n 2 on a node of four GPUs: a quarter of the cores a worker, the quarter of its GPU where named by index."""
    monkeypatch.setattr(host, "_topology", lambda cpu: (0, cpu))  # one socket, no hyperthreads: not this machine's
    controller = sharding.Controller(SimpleNamespace(worker_outputs={}), 2, "3,1", 2, list(range(8)), 4)
    gw0, gw1 = node("gw0"), node("gw1")
    controller.pytest_configure_node(gw0)
    controller.pytest_configure_node(gw1)
    assert (gw0.workerinput["perf_gpu"], gw1.workerinput["perf_gpu"]) == ("3", "1")
    assert (gw0.workerinput["perf_cores"], gw1.workerinput["perf_cores"]) == ([6, 7], [2, 3])


class Options(SimpleNamespace):  # a pytest config's getoption, for a run without -n
    def getoption(self, name, default=None):
        return {"--perf-smoke": self.smoke, "collectonly": False, "dist": "no"}.get(name, default)


@pytest.mark.parametrize("cuda_sees, node_has, visible, smoke, cores", [
    (1, 2, "1", False, list(range(16, 32))),  # CUDA_VISIBLE_DEVICES=1 on a node of two: GPU 1's half
    (1, 2, None, False, list(range(16))),
    (1, 2, "GPU-8f3a", False, list(range(16))),  # named by UUID: the first share
    (1, 1, None, False, None),  # the node's only GPU: every core
    (1, None, None, False, None),  # no NVML to count the node's GPUs
    (2, 2, None, False, None),  # both GPUs visible: the multi_gpu scenarios spread over the node
    (0, 2, "", False, None),  # no GPU for CUDA: a CPU run
    (1, 2, "1", True, None),  # a smoke run
])
def test_a_run_on_one_gpu_of_several_keeps_to_its_gpus_share_of_the_cores(monkeypatch, cuda_sees, node_has, visible,
                                                                          smoke, cores):
    monkeypatch.setattr(host, "_topology", lambda cpu: (0, cpu))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(32)))
    monkeypatch.delenv(host.CONFINED, raising=False)
    monkeypatch.setattr(device, "gpu_count", lambda: cuda_sees)
    monkeypatch.setattr(nvml, "gpus_on_node", lambda: node_has)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    confined = []  # faked: confining this process would confine the rest of the tests
    monkeypatch.setattr(host, "confine", confined.append)
    sharding.confine_to_its_gpu(Options(smoke=smoke))
    assert confined == ([cores] if cores else [])


@pytest.mark.parametrize("marked, kept", [("16-31", True), ("0-31", False), (None, False)])
def test_a_run_the_suite_already_confined_keeps_its_cores(monkeypatch, marked, kept):
    """REF's run started by a sharded run's worker: CUDA sees the worker's GPU, the node has two, and the process
    inherited the worker's 16 cores and the mark saying so; without the mark (a container's own CPU set, a taskset)
    they are shared out as ever."""
    monkeypatch.setattr(host, "_topology", lambda cpu: (0, cpu))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16, 32)))
    monkeypatch.setattr(device, "gpu_count", lambda: 1)
    monkeypatch.setattr(nvml, "gpus_on_node", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    if marked is None:
        monkeypatch.delenv(host.CONFINED, raising=False)
    else:
        monkeypatch.setenv(host.CONFINED, marked)
    confined = []  # faked: confining this process would confine the rest of the tests
    monkeypatch.setattr(host, "confine", confined.append)
    sharding.confine_to_its_gpu(Options(smoke=False))
    assert confined == ([] if kept else [list(range(24, 32))])


FLAT = lambda cpu: (0, cpu)  # noqa: E731  (one socket, no hyperthreads)
# two sockets of two cores with two hyperthreads each, numbered as Linux does: 0-1 socket 0, 2-3 socket 1, then the twins
TWO_SOCKETS = {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1), 4: (0, 0), 5: (0, 1), 6: (1, 0), 7: (1, 1)}.get


@pytest.mark.parametrize("index, shares, cores, topology, share", [
    (0, 2, list(range(32)), FLAT, list(range(16))),
    (1, 2, list(range(32)), FLAT, list(range(16, 32))),
    (2, 3, [7, 3, 5, 1, 9, 11, 13], FLAT, [9, 11]),  # sorted, in runs; the seventh core to no one
    (1, 4, [0, 1, 2], FLAT, []),  # fewer cores than shares: none
    (0, 2, list(range(8)), TWO_SOCKETS, [0, 1, 4, 5]),  # a socket each, both threads of each core
    (1, 2, list(range(8)), TWO_SOCKETS, [2, 3, 6, 7]),
    (1, 4, list(range(8)), TWO_SOCKETS, [1, 5]),  # a core each, with its twin
])
def test_a_share_of_the_cores_keeps_to_a_socket_and_whole_cores(index, shares, cores, topology, share):
    assert host.share_of_cores(index, shares, cores, topology) == share


@pytest.mark.parametrize("cores, written", [([0], "0"), ([3, 0, 1, 2], "0-3"), ([0, 1, 4, 5, 7], "0-1,4-5,7")])
def test_cores_are_written_as_taskset_writes_them(cores, written):
    assert host.cpu_list(cores) == written


def _confined(cores, queue):
    import threading

    threading.Thread(target=threading.Event().wait, args=(30,), daemon=True).start()  # a thread started before
    torch.ones(4).sum()  # and torch's intra-op pool with it
    host.confine(cores)
    threads = {frozenset(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}
    child = multiprocessing.get_context("fork").Process(target=lambda: None)
    child.start()
    child_cores = os.sched_getaffinity(child.pid)
    child.join()
    queue.put((threads, child_cores, torch.get_num_threads(), os.environ.get(host.CONFINED)))


def test_a_confined_process_runs_its_threads_and_children_on_its_cores_only():
    cores = sorted(os.sched_getaffinity(0))[:1]
    context = multiprocessing.get_context("spawn")  # a fresh process: confining this one would confine the rest of the tests
    queue = context.Queue()
    process = context.Process(target=_confined, args=(cores, queue))
    process.start()
    threads, child_cores, torch_threads, marked = queue.get(timeout=120)
    process.join(timeout=60)
    assert threads == {frozenset(cores)} and child_cores == set(cores) and torch_threads == 1
    assert marked == host.cpu_list(cores)  # what a process it starts inherits: REF's run keeps them
