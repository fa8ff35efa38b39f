"""The suite sharded over the GPUs of one node with pytest-xdist, on a CPU: the worker pinned to its GPU, the
controller's refusals, a sharded run end to end, baselines recorded by several processes at once, and the order the
files are handed out.

The controller counts GPUs with `device.gpu_count`, faked here; the workers it starts are real processes on
this machine's CPU, given the GPUs' names in CUDA_VISIBLE_DEVICES as a GPU node's would be (CUDA is never
started, so the names need not be real). Which GPU and cores each worker gets: test_xdist_gpus.py; the merged
report: test_xdist_merge.py.
"""

import json
import multiprocessing
import os
from types import SimpleNamespace

import pytest
import torch

from tests.plugin_suite import TEST_FILE, FakeGPU, details
from torch_perf_suite import plugin, store
from torch_perf_suite.machine import device, host
from torch_perf_suite.machine.host import cpu_count
from torch_perf_suite.records import baselines, durations
from torch_perf_suite.session import sharding

pytest_plugins = ["pytester"]
# mutmut runs the tests inside mutants/, where xdist's workers start without the mutated modules' setup.cfg
under_mutmut = pytest.mark.skipif("'MUTANT_UNDER_TEST' in os.environ", reason="under mutmut: xdist's workers cannot load mutants")


@pytest.fixture
def two_gpus(suite, monkeypatch):
    """The pytester suite (tests/plugin_suite.py, the fake GPU) on a node whose controller counts two GPUs."""
    pytest.importorskip("xdist")
    monkeypatch.setattr(device, "gpu_count", lambda: 2)
    return suite


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
