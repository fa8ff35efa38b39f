"""The suite sharded over the GPUs of one node with pytest-xdist, on a CPU.

The controller counts GPUs with `device.gpu_count`, faked here; the workers it starts are real processes on
this machine's CPU, given the GPUs' names in CUDA_VISIBLE_DEVICES as a GPU node's would be (CUDA is never
started, so the names need not be real). The merged report's partial files (PATH.gw<N>.md and .json, one
per worker that measured something, written after each of its tests) are removed once merged into PATH.md
and PATH.json; they are kept only where the merge failed, or where the controller died before its end.
"""

import json
import multiprocessing
import os
from dataclasses import asdict
from types import SimpleNamespace

import pytest
import torch

from tests.plugin_suite import TEST_FILE, FakeGPU, details
from torch_perf_suite import plugin, store
from torch_perf_suite.machine import device, host, nvml
from torch_perf_suite.machine.host import cpu_count
from torch_perf_suite.records import baselines, durations
from torch_perf_suite.report import markdown as report
from torch_perf_suite.session import runners, sharding, writing

pytest_plugins = ["pytester"]
# mutmut runs the tests inside mutants/, where xdist's workers start without the mutated modules' setup.cfg
under_mutmut = pytest.mark.skipif("'MUTANT_UNDER_TEST' in os.environ", reason="under mutmut: xdist's workers cannot load mutants")


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


@pytest.fixture
def two_gpus(suite, monkeypatch):
    """The pytester suite (tests/plugin_suite.py, the fake GPU) on a node whose controller counts two GPUs."""
    pytest.importorskip("xdist")
    monkeypatch.setattr(device, "gpu_count", lambda: 2)
    return suite


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
    monkeypatch.setattr(nvml, "gpu_count", lambda: node_has)
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
    monkeypatch.setattr(nvml, "gpu_count", lambda: 2)
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


# --- the worker ------------------------------------------------------------------------------------------------


def test_a_worker_given_a_gpu_makes_it_the_only_one_cuda_sees(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    sharding.pin_worker(SimpleNamespace(workerinput={"workerid": "gw1", "perf_gpu": "GPU-b"}))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "GPU-b"


@pytest.mark.parametrize("config", [SimpleNamespace(), SimpleNamespace(workerinput={"workerid": "gw0", "workercount": 2})])
def test_a_process_given_no_gpu_leaves_cuda_visible_devices_alone(monkeypatch, config):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b")
    sharding.pin_worker(config)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "GPU-a,GPU-b"


def test_a_worker_whose_cuda_was_already_started_is_refused(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(pytest.UsageError, match="xdist worker gw1: CUDA was started before the worker could be given GPU "
                                                "GPU-b, so it would measure on a GPU another worker uses"):
        sharding.pin_worker(SimpleNamespace(workerinput={"workerid": "gw1", "perf_gpu": "GPU-b"}))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "GPU-a,GPU-b"


class FakeWorker:
    """Makes an in-process session an xdist worker as xdist's remote.py does: workerinput and workeroutput set on the
    config after its plugins are loaded and before pytest_configure."""

    def __init__(self, workerinput):
        self.workerinput, self.config = workerinput, None

    @pytest.hookimpl(tryfirst=True)
    def pytest_cmdline_main(self, config):
        config.workerinput, config.workeroutput, self.config = self.workerinput, {}, config


WHERE_FILE = TEST_FILE + """
import json, os
from pathlib import Path

def test_where(perf):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "none")
    seen = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "sharded": perf.sharded, "workers": perf.workers}
    Path(f"seen.{worker}.{__name__}.json").write_text(json.dumps(seen))
"""


@pytest.mark.parametrize("args, workers", [((), cpu_count()), (("--perf-workers=3",), 3)])  # cpu_count: confine is faked
def test_a_worker_pins_its_gpu_before_the_device_is_detected_and_writes_its_partial_report(two_gpus, pytester, monkeypatch,
                                                                                            args, workers):
    pytester.makepyfile(test_copy=WHERE_FILE)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b")  # the controller's, inherited
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    detected = []  # CUDA_VISIBLE_DEVICES when the device was detected
    monkeypatch.setattr(device, "detect_device", lambda: detected.append(os.environ.get("CUDA_VISIBLE_DEVICES")) or FakeGPU())
    monkeypatch.setattr(device, "gpu_count", lambda: 1)  # what the worker's CUDA sees once pinned
    confined = []  # faked: confining this process would confine the rest of the tests
    monkeypatch.setattr(host, "confine", lambda cores: confined.append((cores, detected[:])))
    worker = FakeWorker({"workerid": "gw1", "workercount": 2, "perf_gpu": "GPU-b", "perf_cores": [5, 6], "testrunuid": "x"})
    result = pytester.runpytest("-p", "no:randomly", "--perf-report=out/perf", *args, plugins=[worker])
    result.assert_outcomes(passed=2)
    assert detected and set(detected) == {"GPU-b"} and confined == [([5, 6], [])]  # confined before the device was detected
    seen = json.loads((pytester.path / "seen.none.test_copy.json").read_text())
    assert seen == {"cuda_visible_devices": "GPU-b", "sharded": True, "workers": workers}
    assert sorted(p.name for p in (pytester.path / "out").iterdir()) == ["perf.gw1.json", "perf.gw1.md"]
    partial = json.loads((pytester.path / "out" / "perf.gw1.json").read_text())
    assert partial["worker"] == {"id": "gw1", "cuda_visible_devices": "GPU-b", "cores": "5-6"}
    assert [row["test"] for row in partial["tests"]] == ["test_copy.py::test_copy"]
    sent = worker.config.workeroutput["perf"]  # what the controller gets at the worker's end
    assert sent["report"]["tests"] == partial["tests"] and sent["lines"] == [] and sent["failed"] is False
    assert "perf report" not in result.stdout.str()  # a worker's controller prints it


def test_a_worker_whose_cuda_saw_every_gpu_before_it_was_pinned_is_refused(two_gpus, pytester, monkeypatch):
    """torch.cuda.is_available() at import time starts CUDA's driver, which reads CUDA_VISIBLE_DEVICES then, without
    torch.cuda.is_initialized() saying so: the worker would measure on the first GPU, whichever it was given."""
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(device, "detect_device", FakeGPU)
    worker = FakeWorker({"workerid": "gw1", "workercount": 2, "perf_gpu": "GPU-b", "testrunuid": "x"})
    result = pytester.runpytest("-p", "no:randomly", plugins=[worker])  # two_gpus: device.gpu_count() says 2
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: xdist worker gw1: CUDA sees 2 GPUs, not only GPU GPU-b that it was given:*"])


def test_a_worker_without_a_baseline_says_to_record_it_sharded(two_gpus, pytester, monkeypatch):
    """Recorded without -n, a loader's numbers are the whole node's cores', not comparable with a worker's share."""
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(device, "gpu_count", lambda: 1)
    worker = FakeWorker({"workerid": "gw0", "workercount": 2, "perf_gpu": "GPU-a", "testrunuid": "x"})
    result = pytester.runpytest("-p", "no:randomly", "--perf-strict", plugins=[worker])
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no baseline for GPU 'NVIDIA H200'*pytest 'test_copy.py::test_copy' --perf-update-baselines "
                                 "-n <as now> --dist loadfile (run sharded, as this run: *"])


def test_a_worker_that_recorded_baselines_tells_its_controller_where(two_gpus, pytester):
    worker = FakeWorker({"workerid": "gw0", "workercount": 2, "testrunuid": "x"})
    pytester.runpytest("-p", "no:randomly", "--perf-update-baselines", plugins=[worker]).assert_outcomes(passed=1)
    assert worker.config.workeroutput["perf"]["recorded"] == {str(two_gpus.baseline): 1,
                                                              str(two_gpus.baseline.parent / "loaders.json"): 1}
    assert set(json.loads(two_gpus.baseline.read_text())["tests"]) == {"test_copy.py::test_copy"}


def test_the_perf_fixture_outside_a_sharded_worker_is_not_sharded(two_gpus, pytester):
    pytester.makepyfile(test_copy="def test_plain(perf):\n    assert perf.sharded is False\n")
    two_gpus.run().assert_outcomes(passed=1)


# --- the controller's refusals --------------------------------------------------------------------------------




@pytest.mark.parametrize("args, message", [
    (("-n", "4", "--dist", "loadfile"),
     "ERROR: -n 4 but 2 GPU(s) visible: each pytest-xdist worker measures on a GPU of its own. Use -n 2 or fewer (-n auto "
     "starts one worker per GPU), or make more GPUs visible (CUDA_VISIBLE_DEVICES)."),
    (("-n", "2"),
     "ERROR: -n 2 with --dist load (what -n means without --dist) on a GPU: the tests of one file must run in one worker, "
     "since a ladder step is compared with its predecessor measured in the same process and the scenarios of a file "
     "share measurements. Add --dist loadfile."),
    (("-n", "2", "--dist", "loadscope"), "ERROR: -n 2 with --dist loadscope on a GPU: the tests of one file must run in one*"),
    (("-n", "2", "--dist", "worksteal", "--perf-report=out/perf", "--perf-update-baselines"),
     "ERROR: -n 2 with --dist worksteal on a GPU:*Add --dist loadfile."),
    (("--tx", "3*popen", "--dist", "loadfile"), "ERROR: -n 3 but 2 GPU(s) visible:*"),
])
def test_a_sharded_run_that_cannot_give_each_worker_a_gpu_and_each_file_one_worker_is_refused(two_gpus, args, message):
    result = two_gpus.run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_n_auto_on_a_gpu_starts_one_worker_per_gpu(two_gpus, monkeypatch):
    monkeypatch.setattr(device, "gpu_count", lambda: 3)  # not xdist's own count here (this machine's cores)
    result = two_gpus.run("-n", "auto")  # refused for its --dist, which shows the number it resolved to
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: -n 3 with --dist load (what -n means without --dist) on a GPU:*"])


@pytest.mark.parametrize("smoke, env, gpus, workers", [
    (False, {}, 4, 4),
    (False, {}, 0, None),  # no GPU: xdist's count of cores
    (True, {}, 4, None),  # a smoke run needs no GPU a worker
    (False, {"PYTEST_XDIST_AUTO_NUM_WORKERS": "3"}, 4, None),  # xdist's own override, which xdist then reads
])
def test_auto_workers(monkeypatch, smoke, env, gpus, workers):
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(device, "gpu_count", lambda: gpus)
    config = SimpleNamespace(getoption=lambda name: {"--perf-smoke": smoke}[name])
    assert plugin.pytest_xdist_auto_num_workers(config) == workers


# --- a sharded run end to end ----------------------------------------------------------------------------------


@pytest.mark.slow
@under_mutmut
def test_a_sharded_smoke_run_pins_a_gpu_a_worker_and_merges_their_reports(two_gpus, pytester, monkeypatch):
    """Two files on two workers (--dist loadfile gives each worker one file first); the controller sees two GPUs
    named by UUID, and gives each worker one."""
    pytester.makepyfile(test_copy=WHERE_FILE, test_other=WHERE_FILE)
    (pytester.path / "out").mkdir()
    (pytester.path / "out" / "perf.gw7.json").write_text("{not json: an earlier run's, removed at the start")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b")
    result = two_gpus.run("-n", "2", "--dist", "loadfile", "--perf-smoke", "--perf-report=out/perf")
    result.assert_outcomes(passed=4)
    seen = {p.name: json.loads(p.read_text()) for p in pytester.path.glob("seen.*.json")}
    ran_on = {name.split(".")[2]: name.split(".")[1] for name in seen}  # file -> worker: which gets which is xdist's choice
    assert sorted(seen) == sorted(f"seen.{w}.{f}.json" for f, w in ran_on.items()) and sorted(ran_on.values()) == ["gw0", "gw1"]
    for name, where in seen.items():
        gpu = {"gw0": "GPU-a", "gw1": "GPU-b"}[name.split(".")[1]]
        # half the cores each; a worker given no share (one core for two: this test in `pytest tests -n 2` on 2 cores)
        # keeps the cores this process has
        share = host.share_of_cores(0, 2, sorted(os.sched_getaffinity(0)))
        assert where == {"cuda_visible_devices": gpu, "sharded": True,
                         "workers": len(share) or len(os.sched_getaffinity(0))}
    assert sorted(p.name for p in (pytester.path / "out").iterdir()) == ["perf.json", "perf.md"]  # partial files merged
    merged = json.loads((pytester.path / "out" / "perf.json").read_text())
    assert [(row["test"], row["worker"]) for row in merged["tests"]] == [
        ("test_copy.py::test_copy", ran_on["test_copy"]), ("test_other.py::test_copy", ran_on["test_other"])]
    cores = [host.share_of_cores(i, 2, sorted(os.sched_getaffinity(0))) for i in (0, 1)]
    assert merged["workers"] == {
        f"gw{i}": {"gpu": "cpu", "gpu_uuid": None, "cuda_visible_devices": gpu, "cores": host.cpu_list(cores[i]) or None,
                   "tests": 1} for i, gpu in enumerate(("GPU-a", "GPU-b"))}  # None: no share (fewer cores than workers)
    assert merged["smoke"] is True and merged["env"]["gpu"] == "cpu"
    md = (pytester.path / "out" / "perf.md").read_text()
    on = {w: "the CPU" + (f", cores {host.cpu_list(cores[i])}" if cores[i] else "") for i, w in enumerate(("gw0", "gw1"))}
    assert f"Sharded (pytest-xdist): gw0 on {on['gw0']}, 1 test(s); gw1 on {on['gw1']}, 1 test(s)\n" in md
    # both tests are "copy" in the table: their details name them in full, and the worker each ran on
    for file in ("test_copy", "test_other"):
        assert f"- ran on {ran_on[file]}" in details(md, "copy: passed", f"{file}.py::test_copy")
    assert md.count("| copy | passed  | ") == 2 and md.count("\n- ran on gw") == 2
    result.stdout.fnmatch_lines(["*= perf report =*", "SMOKE RUN*", "perf report written to out/perf.md, out/perf.json"])
    assert f"- ran on {ran_on['test_copy']}" in details(result.stdout.str(), "copy: passed", "test_copy.py::test_copy")
    assert "PluggyTeardownRaisedWarning" not in result.stderr.str()  # what each worker sent at its end reached the controller


# --- the merged report ---------------------------------------------------------------------------------------------


def doc(tests, gpu="NVIDIA H200", uuid="GPU-1", visible="0", sections=None, charts=None, cores=None):
    env = {"gpu": gpu, "gpu_uuid": uuid, "driver": "580", "host": {"cpu": "Xeon", "cores": 16}, "date": "2026-11-23"}
    rows = [{**json.loads(json.dumps(ROW)), "test": t} for t in tests]
    return {"env": env, "smoke": False, "tests": rows, "sections": sections or {}, "charts": charts or {},
            "worker": {"id": "gw?", "cuda_visible_devices": visible, "cores": cores}}


ROW = {"test": "", "samples_per_s": 1000.0, "parts": {"pipeline": None, "gpu": None, "loader": None, "loader_cpu": None},
       "loader_measured_in": None, "gpu_measured_in": None, "bottleneck": None, "efficiency": None, "gpu_busy_pct": None,
       "baseline": {}, "syncs_per_step": 0.0, "sync_sources": [], "periodic_syncs": [], "kernels": None, "peak_mem_gb": None,
       "extra": {}, "notes": ["passed"]}
CHART = report.Chart(x="step", bars=("gain",))


def test_merge_groups_rows_by_file_names_each_rows_worker_and_joins_sections():
    gw1 = doc(["b.py::t[1]", "a.py::t[2]", "b.py::t[0]"], uuid="GPU-2", visible="1",
              sections={"Ladder": [{"step": "x", "gain": 2.0}]}, charts={"Ladder": asdict(CHART)})
    gw0 = doc(["a.py::t[1]"], cores="0-15", sections={"Ladder": [{"step": "w", "gain": 1.0}], "Other": [{"k": 1}]})
    merged = runners.merge({"gw1": gw1, "gw0": gw0})
    assert [(r["test"], r["worker"]) for r in merged["tests"]] == [
        ("a.py::t[1]", "gw0"), ("a.py::t[2]", "gw1"), ("b.py::t[1]", "gw1"), ("b.py::t[0]", "gw1")]  # by file, then as run
    assert merged["sections"] == {"Ladder": [{"step": "w", "gain": 1.0}, {"step": "x", "gain": 2.0}], "Other": [{"k": 1}]}
    assert merged["workers"] == {
        "gw0": {"gpu": "NVIDIA H200", "gpu_uuid": "GPU-1", "cuda_visible_devices": "0", "cores": "0-15", "tests": 1},
        "gw1": {"gpu": "NVIDIA H200", "gpu_uuid": "GPU-2", "cuda_visible_devices": "1", "cores": None, "tests": 3}}
    assert merged["env"] == gw0["env"] and merged["charts"] == {"Ladder": asdict(CHART)}
    md = report.render(json.loads(json.dumps(merged)))  # from the JSON, as written
    assert ("Sharded (pytest-xdist): gw0 on NVIDIA H200 (GPU-1, CUDA_VISIBLE_DEVICES=0), cores 0-15, 1 test(s); "
            "gw1 on NVIDIA H200 (GPU-2, CUDA_VISIBLE_DEVICES=1), 3 test(s)\n\n") in md
    assert "| t[2] | passed  |        - |        - |      - |       0.00 |\n" in md
    assert details(md, "t[2]: passed", "a.py::t[2]") == ["t[2]: passed</summary>", "", "`a.py::t[2]`", "",
                                                         "- ran on gw1 (GPU-2)", ""]
    assert "```mermaid" in md and '"Ladder"' in md  # drawn from the chart the JSON carries


def test_merge_names_each_workers_ref_under_perf_against_and_the_report_says_it_once():
    measured = "against HEAD (abc) on this device: 1 test(s) measured at REF in this job (12 s)"
    cached = "against HEAD (abc) on this device: 0 test(s) measured at REF in this job, 1 from the cache (/c/abc-1)"
    merged = runners.merge({"gw1": {**doc(["b.py::t"], visible="1"), "against": cached},
                           "gw0": {**doc(["a.py::t"]), "against": measured}, "gw2": doc(["c.py::t"], visible="2")})
    assert merged["against"] == f"gw0: {measured}; gw1: {cached}"
    md = report.render(json.loads(json.dumps(merged)))
    assert md.startswith(f"Compared gw0: {measured}; gw1: {cached}\n\n") and md.count("Compared") == 1
    assert "against" not in runners.merge({"gw0": doc(["a.py::t"])})


def test_merge_orders_workers_by_number_and_of_none_is_empty():
    merged = runners.merge({f"gw{i}": doc([f"f{i}.py::t"]) for i in (10, 2, 1)})
    assert list(merged["workers"]) == ["gw1", "gw2", "gw10"]
    assert runners.merge({}) == {"env": {}, "smoke": False, "tests": [], "sections": {}, "charts": {}, "workers": {}}


def test_a_document_carries_its_charts_so_that_the_json_renders_as_the_markdown():
    sections = {"Ladder": [{"step": "a", "gain": 1.5}]}
    written = json.loads(json.dumps(report.document([], {"gpu": "cpu"}, sections, charts={"Ladder": CHART})))
    assert written["charts"] == {"Ladder": {"x": "step", "bars": ["gain"], "lines": [], "ceiling": None, "note": None,
                                            "unit": "samples/s", "decimals": 0}}
    assert report.render(written) == report.markdown([], {"gpu": "cpu"}, sections, charts={"Ladder": CHART})


def merging(tmp_path, outputs):
    return SimpleNamespace(worker_outputs=outputs, settings=SimpleNamespace(report=tmp_path / "perf"), merged=None,
                           report_error=None)


def test_a_crashed_workers_partial_report_is_merged_from_its_file_and_removed(tmp_path):
    session = merging(tmp_path, {"gw0": {"report": doc(["a.py::t"])}, "gw1": {}})  # gw1 died: it sent nothing
    (tmp_path / "perf.gw1.json").write_text(json.dumps(doc(["b.py::t"], visible="1")))
    (tmp_path / "perf.gw1.md").write_text("its table")
    (tmp_path / "perf.gw0.json").write_text(json.dumps(doc(["stale.py::t"])))  # gw0's end is the newer
    written = writing.merge_reports(session)
    assert [p.name for p in written] == ["perf.md", "perf.json"] and session.report_error is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["perf.json", "perf.md"]
    assert [(r["test"], r["worker"]) for r in session.merged["tests"]] == [("a.py::t", "gw0"), ("b.py::t", "gw1")]


def test_a_partial_report_that_cannot_be_read_is_kept_and_said_so_and_the_others_merged(tmp_path):
    session = merging(tmp_path, {"gw0": {"report": doc(["a.py::t"])}, "gw1": {}})  # gw1 was killed while writing
    (tmp_path / "perf.gw1.json").write_text("{half written")
    (tmp_path / "perf.gw1.md").write_text("its table")
    written = writing.merge_reports(session)
    assert [p.name for p in written] == ["perf.md", "perf.json"]
    assert [(r["test"], r["worker"]) for r in session.merged["tests"]] == [("a.py::t", "gw0")]
    assert session.report_error.startswith(f"perf report merged into {tmp_path / 'perf'} without these workers' reports, "
                                           f"kept: {tmp_path / 'perf.gw1.json'}: Expecting property name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["perf.gw1.json", "perf.gw1.md", "perf.json", "perf.md"]


def test_a_merge_that_cannot_be_written_keeps_every_partial_report_and_says_so(tmp_path):
    session = merging(tmp_path, {})
    (tmp_path / "perf.gw0.json").write_text(json.dumps(doc(["a.py::t"])))
    (tmp_path / "perf.md").mkdir()  # PATH.md cannot be written
    assert writing.merge_reports(session) == []
    assert session.report_error.startswith(f"perf report NOT merged into {tmp_path / 'perf'}: ")
    assert session.report_error.endswith(f"the workers' reports: {tmp_path / 'perf.gw0.json'}")
    assert (tmp_path / "perf.gw0.json").exists()


def test_only_this_reports_partial_files_are_found(tmp_path):
    for name in ["perf.gw0.md", "perf.gw0.json", "perf.gw12.json", "perf.json", "perf.gwx.json", "other.gw0.json",
                 "perf.gw0.json.tmp", "perfX.gw1.json"]:
        (tmp_path / name).write_text("")
    found = runners.partial_reports(tmp_path / "perf")
    assert {wid: sorted(f.name for f in files) for wid, files in found.items()} == {
        "gw0": ["perf.gw0.json", "perf.gw0.md"], "gw12": ["perf.gw12.json"]}
    assert runners.partial_reports(tmp_path / "missing" / "perf") == {}


# --- baselines under -n --------------------------------------------------------------------------------------------


def _record(path: str, who: int, start) -> None:
    start.wait()  # both begin together, once both have imported what they need
    for i in range(50):
        baselines.BaselineFile(path, "NVIDIA H200", {}).save({f"p{who}-{i}": ENTRY})


ENTRY = {"parts": {"pipeline": {"samples_per_s": 1.0, "spread_pct": 0.0, "rounds": [1.0]}},
         "env": {"gpu": "NVIDIA H200", "host": None}}


@pytest.mark.slow
def test_two_processes_recording_into_one_baseline_file_at_once_lose_no_entry(tmp_path):
    """Each save reads the file, adds its entry and replaces the file: without the lock, two processes interleave and
    one overwrites the entry the other has just added."""
    path = tmp_path / "nvidia-h200.json"
    context = multiprocessing.get_context("spawn")  # a clean interpreter: this one may hold threads (torch)
    start = context.Barrier(2)
    processes = [context.Process(target=_record, args=(path, who, start)) for who in (0, 1)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=120)
    assert [p.exitcode for p in processes] == [0, 0]
    assert len(baselines.BaselineFile.load(path, "NVIDIA H200").tests) == 100


def test_a_baseline_file_locked_too_long_is_not_recorded_and_said_so(tmp_path, monkeypatch):
    """A process stuck holding the lock: the save gives up with an OSError (filelock's Timeout is a TimeoutError),
    which Records.record reports as "baselines NOT recorded into ..." rather than hanging the run."""
    from filelock import FileLock

    path = tmp_path / "nvidia-h200.json"
    monkeypatch.setattr(store, "LOCK_TIMEOUT_S", 0.1)
    with FileLock(str(store.lock_path(path))), pytest.raises(OSError, match="could not be acquired"):
        baselines.BaselineFile(path, "NVIDIA H200", {}).save({"t": ENTRY})
    assert not path.exists()


# --- the order the files are handed out: the longest first, by the last run's seconds ------------------------------


class Cache(dict):
    """pytest's cache as durations.py uses it (`config.cache`)."""
    get = dict.get

    def set(self, key, value):
        self[key] = json.loads(json.dumps(value))


def test_seconds_are_kept_a_gpu_model_and_a_run_keeps_those_of_the_tests_it_did_not_run():
    cache = Cache()
    durations.save(cache, "NVIDIA H200", {"a.py::t": 12.345, "b.py::t": 3.0})
    durations.save(cache, "NVIDIA H200", {"a.py::t": 10.0})
    durations.save(cache, None, {"a.py::t": 0.5})  # a smoke run's
    assert durations.load(cache, "NVIDIA H200") == {"a.py::t": 10.0, "b.py::t": 3.0}
    assert cache["perf/seconds/nvidia-h200"] == {"a.py::t": 10.0, "b.py::t": 3.0}
    assert cache["perf/seconds/smoke"] == {"a.py::t": 0.5}
    assert durations.load(cache, "NVIDIA H100 80GB HBM3") == {} and durations.load(None, "NVIDIA H200") == {}


@pytest.mark.parametrize("kept", [[1, 2], {"a.py::t": "ten", "b.py::t": -1.0, "c.py::t": 2}])
def test_a_table_of_seconds_that_is_not_one_orders_nothing_or_only_by_what_it_holds(kept):
    assert durations.load(Cache({"perf/seconds/smoke": kept}), None) == ({"c.py::t": 2.0} if isinstance(kept, dict) else {})


def test_a_test_without_a_record_costs_the_mean_of_those_with_one():
    seconds = {"a.py::t1": 10.0, "a.py::t2": 20.0}
    assert durations.cost(["a.py::t1", "b.py::new", "b.py::new2"], seconds) == 10.0 + 15.0 + 15.0
    assert durations.cost(["b.py::new"], {}) == 0.0


ORDER_FILE = """
import os, time
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_it(i):
    with open("ran." + os.environ["PYTEST_XDIST_WORKER"] + ".txt", "a") as f:
        f.write(__name__ + "\\n")
    time.sleep(0.2)  # long enough that the other worker takes its first file before this one is done
"""


@under_mutmut
@pytest.mark.parametrize("seconds, first", [
    # the file with most seconds first, then the next: xdist alone would start with test_many (4 tests)
    ({"test_heavy.py::test_it[0]": 100.0, "test_middle.py::test_it[0]": 50.0, **{f"test_many.py::test_it[{i}]": 1.0
                                                                                  for i in range(4)}},
     ["test_heavy", "test_middle"]),
    ({}, ["test_many", "test_heavy"]),  # no seconds (a first run): xdist's order, by the count of tests, stands
])
@pytest.mark.slow
def test_a_sharded_run_hands_out_the_file_with_most_seconds_first(pytester, monkeypatch, seconds, first):
    pytest.importorskip("xdist")
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    pytester.makeconftest("pytest_plugins = ['torch_perf_suite.plugin']")
    pytester.makepyfile(test_heavy=ORDER_FILE.replace("{n}", "1"), test_middle=ORDER_FILE.replace("{n}", "1"),
                        test_many=ORDER_FILE.replace("{n}", "4"))
    if seconds:
        cache = pytester.path / ".pytest_cache" / "v" / "perf" / "seconds" / "smoke"
        cache.parent.mkdir(parents=True)
        cache.write_text(json.dumps(seconds))
    result = pytester.runpytest("-p", "no:randomly", "-n", "2", "--dist", "loadfile", "--perf-smoke")
    result.assert_outcomes(passed=6)
    ran = {p.name: p.read_text().split() for p in pytester.path.glob("ran.gw*.txt")}
    assert [ran[f"ran.gw{i}.txt"][0] for i in (0, 1)] == first, ran  # dealt to gw0 first, whichever came up first
    timed = json.loads((pytester.path / ".pytest_cache" / "v" / "perf" / "seconds" / "smoke").read_text())
    assert sorted(timed) == sorted({*seconds, *(f"test_many.py::test_it[{i}]" for i in range(4)),
                                    "test_heavy.py::test_it[0]", "test_middle.py::test_it[0]"})
    assert 0.2 <= timed["test_middle.py::test_it[0]"] < 10  # this run's, over the 50 s it was handed out by
