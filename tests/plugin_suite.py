"""The pytester suite that the plugin's end-to-end tests share (tests/test_plugin.py, tests/*/test_plugin_*.py,
tests/session/test_xdist.py): a project with the plugin and one measured test, run in pytester sessions on a CPU.

A fake GPU stands in for CUDA: it times real (sleeping) steps and reports the syncs of a real
trace recorded on an H200, so every message the suite prints is exercised. tests/conftest.py hands the `suite`
fixture to every test below it; a test file that takes it declares `pytest_plugins = ["pytester"]` itself.
"""

import contextlib
import itertools
import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from torch_perf_suite.loader import cost
from torch_perf_suite.machine import device, nvml
from torch_perf_suite.syncs import count_syncs, load_trace

TRACES = Path(__file__).parent / "traces"
ENV = json.loads((TRACES / "environment.json").read_text())  # recorded with the traces: NVIDIA H200

CONFTEST = 'pytest_plugins = ["torch_perf_suite.plugin"]\n'
TEST_FILE = """
import time
import pytest
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __len__(self):
        return 100

    def __getitem__(self, i):
        return i

class Work:
    # 2 ms a pipeline step, 1 ms on the GPU, 0.5 ms for the loader, batch 10: on the fake GPU's clock
    # (exact numbers), or slept on a real device; `loader` is described, never iterated
    batch_size = 10
    loader = DataLoader(Items(), batch_size=10)

    def __init__(self, device):
        self.work = getattr(device, "work", lambda part, seconds: time.sleep(seconds))
        self.loader_cpu_s = getattr(device, "loader_cpu_s", lambda: None)  # its workers' CPU seconds

    def step(self):
        self.work("pipeline", 0.002)

    def gpu_step(self):
        self.work("gpu", 0.001)

    def loader_step(self):
        self.work("loader", 0.0005)

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
def test_copy(perf, perf_session):
    result = perf.measure(Work(perf_session.device))
    perf.assert_syncs(result, per_step=0)
    perf.assert_baseline(result)
"""
HOST = {"cpu": "Intel(R) Xeon(R) Platinum 8480+", "cores": 16, "machine": "4c4c4544"}


UTIL = nvml.Utilization(5, gpu_util_pct=97.0, mem_used_gb=45.0, mem_total_gb=141.0, power_w=640.0, power_limit_w=700.0,
                        sm_mhz=1980.0)


class FakeGPU(device.Device):
    """A GPU by its name and environment. Time is a clock that the workload's steps advance (so every
    number is exact); `slow` makes a part slower by a factor for its first `slow_steps` steps (all, if
    None; a set: those steps). Syncs come from the recorded trace `case`; the kernels keep the GPU 95% busy."""

    is_gpu = True

    def __init__(self, case="clean", gpu="NVIDIA H200", host=None, slow=None, slow_steps=None, chip="GPU-1", watts=None,
                 util=UTIL, kernels=None, step_peak_bytes=1_000_000_000):
        super().__init__("cpu", {**ENV, "gpu": gpu, "gpu_uuid": chip, "host": host or HOST, "power_limit_w": 700.0})
        self.watts, self.util, self.kernels, self.step_peak_bytes = watts, util, kernels, step_peak_bytes
        self.case, self.now, self.slow, self.slow_steps = case, 0.0, slow or {}, slow_steps
        self.steps = {"pipeline": 0, "gpu": 0, "loader": 0}
        self.cpu_s = 0.0  # the loader's workers'
        self.order = []  # parts in the order they were first stepped

    def work(self, part, seconds):
        self.steps[part] += 1
        if part not in self.order:
            self.order.append(part)
        n = self.steps[part]
        slowed = self.slow_steps is None or (n in self.slow_steps if isinstance(self.slow_steps, set) else n <= self.slow_steps)
        self.now += seconds * (self.slow.get(part, 1.0) if slowed else 1.0)
        if part == "loader":  # two workers busy all the while: 10,000 samples per CPU second
            self.cpu_s += 2 * seconds * (self.slow.get("loader_cpu", 1.0) if slowed else 1.0)

    def loader_cpu_s(self):
        return self.cpu_s

    @property
    def monitor(self):
        """What NVML says over every GPU window (`util`)."""
        return lambda: contextlib.nullcontext(SimpleNamespace(summary=lambda: self.util))

    def clock(self):
        return self.now

    def energy_j(self):
        return None if self.watts is None else self.watts * self.now

    def synchronize(self):
        pass

    def reset_peak_memory(self):
        pass

    def peak_memory_gb(self):
        return 1.5

    def count_syncs(self, step, steps, trace_path, all_threads=False):
        self.all_threads = all_threads
        for _ in range(steps):
            step()
        shutil.copy(TRACES / f"{self.case}.json.gz", trace_path)
        counted = count_syncs(load_trace(TRACES / f"{self.case}.json.gz"))
        counted.gpu_busy_s = 0.95 * 0.001
        counted.kernels = self.kernels or counted.kernels  # the trace's own, unless given
        counted.step_peak_bytes = self.step_peak_bytes
        return counted


@pytest.fixture
def suite(pytester, monkeypatch):
    """A pytester dir with the plugin and one measured test; `suite.gpu(...)` picks the fake GPU."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_copy=TEST_FILE)
    # under `pytest tests -n N` this process is an xdist worker; the session it starts is not one, but would
    # read this variable and have pytest-benchmark disable itself
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    # a loader's samples made alone: SOLO_LEAST of them, not 2 s of them a measured loader (the fake GPU's clock
    # times the rest; tests/loader/ times them for real)
    monkeypatch.setattr(cost, "SOLO_S", 0.0)

    class Suite:
        path = pytester.path
        baseline = pytester.path / "baselines" / "nvidia-h200.json"

        @staticmethod
        def gpu(dev):
            monkeypatch.setattr(device, "detect_device", lambda: dev)

        @staticmethod
        def run(*args, traceback=False):
            """`traceback`: whether a frame of the harness may show (a check called wrongly raises); a check
            that fails says its message only."""
            # the plugin, imported by this session, cannot be assertion-rewritten by the one it starts, which says so
            # where this one was started as `pytest` rather than `python -m pytest` (pytest 9.2, an editable install)
            result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args,
                                        "-W", "ignore::pytest.PytestAssertRewriteWarning")
            frames = [line for line in result.stdout.lines if re.match(r"\S*torch_perf_suite/(?:\w+/)?\w+\.py:\d+: \w+$", line)]
            assert traceback or not frames, frames
            return result

        @staticmethod
        def entry(test="test_copy.py::test_copy"):
            return json.loads(Suite.baseline.read_text())["tests"][test]

        @staticmethod
        def edit(change):
            data = json.loads(Suite.baseline.read_text())
            change(data["tests"]["test_copy.py::test_copy"])
            Suite.baseline.write_text(json.dumps(data))

    Suite.gpu(FakeGPU())
    return Suite


def details(text: str, summary: str, test: str | None = None) -> list[str]:
    """The lines of one test's <details> block in a report (PATH.md), or of its plain-text block in the terminal (its
    summary line, its lines indented under it, returned without the indent): the block whose summary is `summary`, the
    test's short id and verdict ("copy: passed"), and, where given, whose full id is `test`."""
    if "<details><summary>" in text:
        blocks = [block.split("</details>")[0].splitlines() for block in text.split("<details><summary>")[1:]]
        head = f"{summary}</summary>"
    else:
        lines = text.splitlines()
        blocks = [[line, *(under[2:] for under in itertools.takewhile(lambda u: u.startswith("  "), lines[i + 1:]))]
                  for i, line in enumerate(lines) if line == summary]
        head = summary
    found = [lines for lines in blocks if lines[0] == head and (test is None or {f"`{test}`", test} & set(lines))]
    assert len(found) == 1, f"{len(found)} details blocks of {summary!r}" + (f" ({test})" if test else "")
    return found[0]


def clean(result) -> str:
    """The output, asserted free of tracebacks and internal errors."""
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    return out


CLAIM_FILE = TEST_FILE + """
class Other(Work):
    def gpu_step(self):
        self.work("gpu", 0.001 / {speed})  # {speed} times test_copy's GPU-side speed

@pytest.mark.perf(warmup=1, rounds=3, steps=5, round_s=0)
def test_other(perf, perf_session):
    result = perf.measure(Other(perf_session.device))
    perf.{check}
"""


def claim(pytester, suite, speed, check, *args):
    pytester.makepyfile(test_copy=CLAIM_FILE.format(speed=speed, check=check))
    return suite.run("-p", "no:randomly", *args)


KERNEL_CHECK = TEST_FILE.replace("    perf.assert_syncs(result, per_step=0)\n    perf.assert_baseline(result)\n",
                                 "    perf.{check}\n")
assert "{check}" in KERNEL_CHECK
