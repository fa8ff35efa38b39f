"""The environment recorded with every measurement: GPU, driver, library versions and host class."""

import datetime
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest


def test_environment_on_a_machine_without_cuda(monkeypatch):
    import torch
    import torchmetrics
    import torchvision

    from torch_perf_suite.machine import environment, host

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    env = environment.environment()
    assert env == {"gpu": "cpu", "driver": None, "cuda": torch.version.cuda, "torch": torch.__version__,
                   "torchvision": torchvision.__version__, "torchmetrics": torchmetrics.__version__,
                   "host": host.host_class(), "date": datetime.date.today().isoformat()}
    installed = environment.importlib.metadata.version

    def without_torchmetrics(name):
        if name == "torchmetrics":
            raise environment.importlib.metadata.PackageNotFoundError(name)
        return installed(name)

    monkeypatch.setattr(environment.importlib.metadata, "version", without_torchmetrics)
    assert environment.environment()["torchmetrics"] is None  # not installed: recorded as None


def test_environment_on_a_gpu_names_it_and_its_driver(monkeypatch):
    import torch

    from torch_perf_suite.machine import environment

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(environment, "_driver_version", lambda: "580.65.06")
    monkeypatch.setattr(environment, "gpu_uuid", lambda: "GPU-9641a40c")
    monkeypatch.setattr(environment.nvml, "power_limit_w", lambda uuid: 700.0 if uuid == "GPU-9641a40c" else None)
    env = environment.environment()
    assert (env["gpu"], env["driver"]) == ("NVIDIA H200", "580.65.06")
    assert (env["gpu_uuid"], env["power_limit_w"]) == ("GPU-9641a40c", 700.0)


class FakeNVML(types.ModuleType):
    class NVMLError(Exception):
        pass

    def __init__(self, version):
        super().__init__("pynvml")
        self.version = version

    def nvmlInit(self):
        if isinstance(self.version, Exception):
            raise self.version

    def nvmlSystemGetDriverVersion(self):
        return self.version


PROC_VERSION = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  575.57.08  Sat May 24 07:21:13 UTC 2025\n"
                "GCC version:  gcc 12.2.0\n")
OPEN_PROC_VERSION = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build"
                     "  (dvs-builder@U16-I1-N07-12-3)"
                     "  Sat May 24 07:21:13 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")


@pytest.fixture
def proc_version(fake_proc):
    """Point _driver_version at a made-up /proc/driver/nvidia/version (None: there is none)."""
    from torch_perf_suite.machine import environment

    return lambda text: fake_proc(environment, "/proc/driver/nvidia/version", text)


@pytest.mark.parametrize("reported", [b"580.65.06", "580.65.06"])
def test_driver_version_from_nvml(monkeypatch, proc_version, reported):
    from torch_perf_suite.machine import environment

    proc_version(PROC_VERSION)
    monkeypatch.setattr(environment.nvml, "pynvml", FakeNVML(reported))
    assert environment._driver_version() == "580.65.06"


@pytest.mark.parametrize("nvml", [None, FakeNVML(FakeNVML.NVMLError("no driver"))])  # not installed; fails
def test_driver_version_falls_back_to_proc(monkeypatch, proc_version, nvml):
    from torch_perf_suite.machine import environment

    proc_version(PROC_VERSION)
    monkeypatch.setattr(environment.nvml, "pynvml", nvml)
    assert environment._driver_version() == "575.57.08"


@pytest.mark.parametrize("text", [None, "something else entirely\n"])
def test_driver_version_unknown_is_none(monkeypatch, proc_version, text):
    from torch_perf_suite.machine import environment

    proc_version(text)
    monkeypatch.setattr(environment.nvml, "pynvml", None)
    assert environment._driver_version() is None


def test_driver_version_from_proc_with_the_open_kernel_module(monkeypatch, proc_version):
    """The open kernel module's line reads 'Open Kernel Module for x86_64  <version>': the version, not 'for'."""
    from torch_perf_suite.machine import environment

    proc_version(OPEN_PROC_VERSION)
    monkeypatch.setattr(environment.nvml, "pynvml", None)
    assert environment._driver_version() == "575.57.08"


def test_a_torchvision_built_for_another_torch_is_named_with_how_to_install_both(monkeypatch):
    """A CPU torch beside a CUDA torchvision fails its import with an operator error: one line saying what to do."""
    import builtins

    import torchvision

    installed_torchvision = torchvision.__version__
    monkeypatch.delitem(sys.modules, "torchvision")

    real = builtins.__import__

    def broken(name, *args, **kwargs):
        if name == "torchvision":
            raise RuntimeError("operator torchvision::nms does not exist")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", broken)
    from torch_perf_suite.machine import environment

    with pytest.raises(environment.Mismatched, match=r"^torchvision \S+ does not load with torch \S+ \(operator "
                                                   r"torchvision::nms does not exist\): .* pip install --force-reinstall "
                                                   r"torch torchvision, adding --index-url"):
        environment.check_torchvision()
    # the environment reads its version without importing it: a project's pytest need not pay torchvision's import
    assert environment.environment()["torchvision"] == installed_torchvision


@pytest.mark.slow
def test_the_suites_recipes_refuse_a_torchvision_built_for_another_torch_in_one_line(tmp_path):
    """The scenarios' conftest imports torchvision first, where the plugin no longer does: one line, no traceback."""
    fake = tmp_path / "torchvision"
    fake.mkdir()
    (fake / "__init__.py").write_text('raise RuntimeError("operator torchvision::nms does not exist")\n')
    root = Path(__file__).parents[2]
    run = subprocess.run([sys.executable, "-m", "pytest", "perf_tests", "--co", "-q", "-p", "no:hypothesispytest",
                          "-p", "no:cacheprovider"], cwd=root, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert run.stderr.strip().splitlines()[-1].startswith("ERROR: torchvision "), run.stderr[-2000:]
    assert "does not load with torch" in run.stderr and "Traceback" not in run.stdout + run.stderr
