"""NVML readings: power limit, energy, utilization as nvidia-smi shows it, topology; None or "unavailable" where
NVML cannot say."""

import types

import pytest

from torch_perf_suite.machine import nvml


class FakeNVML(types.ModuleType):
    class NVMLError(Exception):
        pass

    def __init__(self, fail_on=(), error=None):
        super().__init__("pynvml")
        self.fail_on, self.error = fail_on, error or self.NVMLError
        self.util = iter([50, 100, 90, 100, 100] * 1000)

    def _maybe_fail(self, name):
        if name in self.fail_on:
            raise self.error(name)

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

    NVML_CLOCK_SM = 1
    NVML_NVLINK_MAX_LINKS = 4
    NVML_FEATURE_ENABLED = 1

    # GPU-1 is busy; any other GPU idles (so that reading the wrong handle shows)
    def nvmlDeviceGetUtilizationRates(self, handle):
        self._maybe_fail("util")
        return types.SimpleNamespace(gpu=next(self.util) if handle == ("handle", "GPU-1") else 0, memory=10)

    def nvmlDeviceGetMemoryInfo(self, handle):
        self._maybe_fail("memory")
        return types.SimpleNamespace(used=45e9 if handle == ("handle", "GPU-1") else 1e9, total=141e9, free=96e9)

    def nvmlDeviceGetPowerUsage(self, handle):
        self._maybe_fail("power")
        return 640_000 if handle == ("handle", "GPU-1") else 80_000  # milliwatts

    def nvmlDeviceGetClockInfo(self, handle, clock):
        self._maybe_fail("clock")
        assert clock == self.NVML_CLOCK_SM
        return 1980 if handle == ("handle", "GPU-1") else 345

    # GPU-1 has links 0 and 2 to GPU-2 (link 1 is down on GPU-2 and missing on GPU-1, link 3 goes elsewhere);
    # GPU-3 is on PCIe only; GPU-4 and GPU-5 have 3 links: 0 and 1 to NVSwitches (an HGX board), 2 to another GPU;
    # GPU-6's NVLink status cannot be read
    NVML_P2P_CAPS_INDEX_NVLINK = 3
    NVML_P2P_STATUS_OK = 0
    NVML_NVLINK_DEVICE_TYPE_GPU = 0
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2

    def nvmlDeviceGetPciInfo(self, handle):
        return types.SimpleNamespace(busId=f"bus-{handle[1]}")

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        assert index == self.NVML_P2P_CAPS_INDEX_NVLINK
        if "GPU-6" in (a[1], b[1]):
            raise self.NVMLError("not supported")
        return 0 if {a[1], b[1]} in ({"GPU-1", "GPU-2"}, {"GPU-4", "GPU-5"}) else 4  # 4: NVML_P2P_STATUS_NOT_SUPPORTED

    def nvmlDeviceGetNvLinkState(self, handle, link):
        missing = handle[1] == "GPU-3" or link > 3 or (handle[1] in ("GPU-4", "GPU-5") and link > 2)
        if missing or (handle[1], link) == ("GPU-1", 1):
            raise self.NVMLError("not supported")
        return 0 if link == 1 and handle[1] == "GPU-2" else 1

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link):
        to_switch = handle[1] in ("GPU-4", "GPU-5") and link in (0, 1)
        return self.NVML_NVLINK_DEVICE_TYPE_SWITCH if to_switch else self.NVML_NVLINK_DEVICE_TYPE_GPU

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle, link):
        if handle[1] in ("GPU-4", "GPU-5"):
            return types.SimpleNamespace(busId="FFFFFFFF:FF:FF.0")  # a switch has no PCI address (as NVML answers)
        return types.SimpleNamespace(busId="bus-GPU-9" if link == 3 else ("bus-GPU-2" if handle[1] == "GPU-1" else "bus-GPU-1"))

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return 40  # NVML_TOPOLOGY_NODE


@pytest.fixture
def fake(monkeypatch):
    def use(module):
        nvml._open.cache_clear()
        monkeypatch.setattr(nvml, "pynvml", module)
        return module
    yield use
    nvml._open.cache_clear()


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


def test_sampler_reads_what_nvidia_smi_shows(fake):
    fake(FakeNVML())
    with nvml.Sampler("GPU-1", interval_s=0.01) as s:
        deadline = __import__("time").monotonic() + 5
        while len(s.rows) < 6 and __import__("time").monotonic() < deadline:
            pass
    u = s.summary()
    assert u.samples >= 7  # the thread's, and one at the window's end
    assert u.gpu_util_pct == 100  # the median: one 50 and one 90 among 100s
    assert (u.mem_used_gb, u.mem_total_gb, u.power_w, u.power_limit_w, u.sm_mhz) == (45, 141, 640, 700, 1980)
    assert u.describe() == "45/141 GB, 640/700 W, 1,980 MHz"
    assert u.unavailable is None


@pytest.mark.parametrize("module, uuid, why", [
    (None, "GPU-1", "nvidia-ml-py is not installed"),
    (FakeNVML(fail_on=("init",)), "GPU-1", "NVML refused: init"),
    (FakeNVML(), None, "uuid is not known"),
])
def test_sampler_without_nvml_says_unavailable_and_why(fake, module, uuid, why):
    fake(module)
    with nvml.Sampler(uuid, interval_s=0.01) as s:
        pass
    u = s.summary()
    assert u.unavailable and why in u.unavailable
    assert u.describe().startswith("unavailable: ") and u.gpu_util_pct is None


@pytest.mark.parametrize("lacks, shown", [(("power",), "45/141 GB, 1,980 MHz"), (("memory",), "640/700 W, 1,980 MHz"),
                                          (("limit",), "45/141 GB, 640 W, 1,980 MHz")])
def test_sampler_leaves_out_a_counter_the_gpu_lacks(fake, lacks, shown):
    fake(FakeNVML(fail_on=lacks))
    with nvml.Sampler("GPU-1", interval_s=0.01) as s:
        pass
    u = s.summary()
    assert u.describe() == shown and u.gpu_util_pct is not None and u.unavailable is None


def test_sampler_of_a_gpu_that_answers_no_query(fake):
    fake(FakeNVML(fail_on=("util", "memory", "power", "clock")))
    with nvml.Sampler("GPU-1", interval_s=0.01) as s:
        pass
    u = s.summary()
    assert u.unavailable == "NVML answered no utilization query on this GPU" and u.samples >= 2


def test_sampler_survives_a_binding_that_raises_something_else_and_says_what(fake):
    fake(FakeNVML(fail_on=("util", "memory", "power", "clock"), error=TypeError))
    with nvml.Sampler("GPU-1", interval_s=0.01) as s:
        pass
    u = s.summary()
    assert u.unavailable == ("NVML answered no utilization query on this GPU; gpu_util_pct: TypeError: util; "
                             "mem_used_gb: TypeError: memory; mem_total_gb: TypeError: memory; power_w: TypeError: power; "
                             "sm_mhz: TypeError: clock")


@pytest.mark.parametrize("raised, samples", [(False, 2), (True, 1)])
def test_sampler_reads_the_window_end_only_when_the_window_did_not_raise(fake, raised, samples):
    fake(FakeNVML())
    with pytest.raises(ZeroDivisionError) if raised else __import__("contextlib").nullcontext():
        with nvml.Sampler("GPU-1", interval_s=60) as s:  # the thread reads once, then waits
            while not s.rows:
                pass
            if raised:
                1 / 0
    assert len(s.rows) == samples


def test_a_total_or_limit_nvml_did_not_give_is_left_out():
    util = nvml.Utilization(3, gpu_util_pct=90.0, mem_used_gb=45.0, power_w=640.0).as_json()
    assert nvml.shown(util) == "45 GB, 640 W"
    assert nvml.Utilization(3, gpu_util_pct=90.0, mem_used_gb=45.0, power_w=640.0).describe() == "45 GB, 640 W"
    assert nvml.shown({**util, "mem_used_gb": None, "power_w": None}) == ""


def test_sampler_reads_its_own_gpu(fake):
    """An idle second GPU reads 0%, 1 GB, 80 W, 345 MHz in the fake: what the sampler of GPU-2 must show."""
    fake(FakeNVML())
    with nvml.Sampler("GPU-2", interval_s=0.01) as s:
        pass
    u = s.summary()
    assert (u.gpu_util_pct, u.mem_used_gb, u.power_w, u.power_limit_w, u.sm_mhz) == (0, 1, 80, 600, 345)


def test_topology_names_nvlinks_and_pcie_paths_as_nvidia_smi_topo_does(fake):
    fake(FakeNVML())
    assert nvml.topology(["GPU-1"]) == "GPU0 alone"
    assert nvml.topology(["GPU-1", "GPU-2"]) == "GPU0-GPU1 NV2"  # links 0 and 2 up and to GPU-2
    assert nvml.topology(["GPU-1", "GPU-3"]) == "GPU0-GPU1 NODE"  # no NVLink to it: the PCIe path
    assert nvml.topology(["GPU-1", "GPU-2", "GPU-3"]) == "GPU0-GPU1 NV2, GPU0-GPU2 NODE, GPU1-GPU2 NODE"
    assert nvml.topology(["GPU-4", "GPU-5"]) == "GPU0-GPU1 NV2"  # through NVSwitches: each link to a switch counts
    assert nvml.topology(["GPU-1", "GPU-6"]) == "GPU0-GPU1 NODE"  # NVLink status unreadable: the PCIe path
    assert nvml.topology(["GPU-4", "GPU-3"]) == "GPU0-GPU1 NODE"  # links to a switch, but no NVLink path to this GPU
    fake(None)
    assert nvml.topology(["GPU-1", "GPU-2"]) is None
