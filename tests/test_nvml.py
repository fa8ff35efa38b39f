"""NVML readings: the chip's power limit and energy counter, None wherever NVML cannot say."""

import types

import pytest

from torch_perf_suite import nvml


class FakeNVML(types.ModuleType):
    class NVMLError(Exception):
        pass

    def __init__(self, fail_on=()):
        super().__init__("pynvml")
        self.fail_on = fail_on

    def _maybe_fail(self, name):
        if name in self.fail_on:
            raise self.NVMLError(name)

    def nvmlInit(self):
        self._maybe_fail("init")

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self._maybe_fail("handle")
        return ("handle", uuid)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        self._maybe_fail("limit")
        return 700_000 if handle == ("handle", "GPU-1") else 600_000  # milliwatts

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        self._maybe_fail("energy")
        return 123_456_789 if handle == ("handle", "GPU-1") else 0  # millijoules


@pytest.fixture
def fake(monkeypatch):
    def use(module):
        nvml._handle.cache_clear()
        monkeypatch.setattr(nvml, "pynvml", module)
        return module
    yield use
    nvml._handle.cache_clear()


def test_power_limit_and_energy_of_the_chip_named_by_its_uuid(fake):
    fake(FakeNVML())
    assert nvml.power_limit_w("GPU-1") == 700.0
    assert nvml.power_limit_w("GPU-2") == 600.0
    assert nvml.energy_j("GPU-1") == pytest.approx(123_456.789)


@pytest.mark.parametrize("module, uuid", [
    (None, "GPU-1"),  # nvidia-ml-py not installed
    (FakeNVML(), None),  # no uuid known
    (FakeNVML(fail_on=("init",)), "GPU-1"),  # no driver
    (FakeNVML(fail_on=("handle",)), "GPU-1"),  # a uuid NVML does not know
    (FakeNVML(fail_on=("limit", "energy")), "GPU-1"),  # a GPU without the counters
])
def test_nothing_known_is_none(fake, module, uuid):
    fake(module)
    assert nvml.power_limit_w(uuid) is None
    assert nvml.energy_j(uuid) is None
