"""What NVML (nvidia-ml-py, imported as pynvml) tells about the GPU: driver, power limit, energy,
utilization as nvidia-smi shows it, and the topology between the visible GPUs.

Optional: without the package, or where NVML refuses, every function returns None (a Sampler's
summary says "unavailable" and why). nvidia-ml-py is NVIDIA's own binding of the library
nvidia-smi is built on, so these are nvidia-smi's numbers. The energy
counter tells whether a GPU-side window ran at the power limit: the H200 machines measured drew
their limit through the compiled ladder steps, and some ran the bf16 step slower than the others,
for a reason not established (docs/seed-000-ladder.md, "GPU-side numbers across chips").
"""

from __future__ import annotations

import functools
import statistics
import threading
from dataclasses import dataclass

try:
    import pynvml
except ImportError:  # not installed: nothing to read
    pynvml = None


@functools.lru_cache(maxsize=None)
def _open(uuid: str | None) -> tuple[object, str | None]:
    """(NVML handle of this GPU, None) or (None, why not)."""
    if pynvml is None:
        return None, "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    if not uuid:
        return None, "this GPU's uuid is not known"
    try:
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByUUID(uuid), None
    except pynvml.NVMLError as e:
        return None, f"NVML refused: {e}"


def _handle(uuid: str | None):
    return _open(uuid)[0]


def driver_version() -> str | None:
    if pynvml is None:
        return None
    try:
        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
    except pynvml.NVMLError:
        return None
    return v.decode() if isinstance(v, bytes) else v


def gpus_on_node() -> int | None:
    """The node's GPUs as NVML counts them: every one, whatever CUDA_VISIBLE_DEVICES hides from CUDA. None
    without NVML."""
    if pynvml is None:
        return None
    try:
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetCount()
    except pynvml.NVMLError:
        return None


def _read(uuid: str | None, query, scale: float) -> float | None:
    """`query(handle) / scale` for this GPU, or None where NVML cannot say."""
    handle = _handle(uuid)
    if handle is None:
        return None
    try:
        return query(handle) / scale
    except pynvml.NVMLError:
        return None


def power_limit_w(uuid: str | None) -> float | None:
    """The power limit the driver enforces on this GPU, in watts."""
    return _read(uuid, lambda h: pynvml.nvmlDeviceGetEnforcedPowerLimit(h), 1000)  # milliwatts


def energy_j(uuid: str | None) -> float | None:
    """Joules this GPU used since the driver loaded (Volta and later)."""
    return _read(uuid, lambda h: pynvml.nvmlDeviceGetTotalEnergyConsumption(h), 1000)  # millijoules


@dataclass(frozen=True)
class Utilization:
    """What nvidia-smi would have shown over a window: medians of the samples (memory: the most used)."""

    samples: int = 0
    gpu_util_pct: float | None = None  # nvidia-smi's GPU-Util: time in which a kernel ran, per sample period
    mem_used_gb: float | None = None
    mem_total_gb: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_mhz: float | None = None
    unavailable: str | None = None  # why nothing was read

    def describe(self) -> str:
        return f"unavailable: {self.unavailable}" if self.unavailable else shown(self.as_json())

    def as_json(self) -> dict:
        return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def shown(util: dict) -> str:
    """Memory, power and clock from `Utilization.as_json()`, as nvidia-smi shows them ("45/141 GB, 640/700 W,
    1,980 MHz"); a total or limit NVML did not give is left out, and so is a figure it did not give."""
    def of(value, total, unit, fmt="{:.0f}"):
        return None if value is None else fmt.format(value) + ("" if not total else f"/{total:.0f}") + f" {unit}"
    return ", ".join(filter(None, [of(util["mem_used_gb"], util["mem_total_gb"], "GB"),
                                   of(util["power_w"], util["power_limit_w"], "W"),
                                   of(util["sm_mhz"], None, "MHz", "{:,.0f}")]))


QUERIES = {  # field: (query, scale to the field's unit); each is one nvidia-smi column
    "gpu_util_pct": (lambda h: pynvml.nvmlDeviceGetUtilizationRates(h).gpu, 1),
    "mem_used_gb": (lambda h: pynvml.nvmlDeviceGetMemoryInfo(h).used, 1e9),
    "mem_total_gb": (lambda h: pynvml.nvmlDeviceGetMemoryInfo(h).total, 1e9),
    "power_w": (lambda h: pynvml.nvmlDeviceGetPowerUsage(h), 1000),  # milliwatts
    "sm_mhz": (lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM), 1),
}


class Sampler:
    """`with Sampler(uuid) as s: ...` reads NVML every `interval_s` in a thread; then `s.summary()`.

    NVML's utilization is the share of its own sample period (1/6 s to 1 s, by product) in which a
    kernel ran, so a window shorter than a few periods reads from before it."""

    def __init__(self, uuid: str | None, interval_s: float = 0.1):
        self.uuid, self.interval_s = uuid, interval_s
        self.rows: list[dict] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.why_not: str | None = None
        self.errors: dict[str, str] = {}  # query -> the first error other than NVML's own

    def _sample(self, handle) -> None:
        row = {}
        for name, (query, scale) in QUERIES.items():
            try:
                row[name] = query(handle) / scale
            except pynvml.NVMLError:
                continue  # a GPU without this counter: the column stays empty
            except Exception as error:  # a broken binding must not end the thread: say so in the summary
                self.errors.setdefault(name, f"{type(error).__name__}: {error}")
        self.rows.append(row)

    def _run(self, handle) -> None:
        while True:
            self._sample(handle)
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> Sampler:
        handle, self.why_not = _open(self.uuid)
        if handle is not None:
            self._thread = threading.Thread(target=self._run, args=(handle,), name="nvml-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type, *_) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if exc_type is None:  # the window's end; not when the window raised (a CUDA error may be NVML's too)
                self._sample(_handle(self.uuid))

    def summary(self) -> Utilization:
        if self.why_not:
            return Utilization(unavailable=self.why_not)
        def median(name):
            values = [r[name] for r in self.rows if name in r]
            return statistics.median(values) if values else None
        if not any(self.rows):
            errors = "".join(f"; {name}: {error}" for name, error in self.errors.items())
            return Utilization(len(self.rows), unavailable="NVML answered no utilization query on this GPU" + errors)
        used = [r["mem_used_gb"] for r in self.rows if "mem_used_gb" in r]
        return Utilization(len(self.rows), gpu_util_pct=median("gpu_util_pct"), mem_used_gb=max(used) if used else None,
                           mem_total_gb=median("mem_total_gb"), power_w=median("power_w"),
                           power_limit_w=power_limit_w(self.uuid), sm_mhz=median("sm_mhz"))


TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}  # NVML_TOPOLOGY_* -> nvidia-smi topo -m


def topology(uuids: list[str]) -> str | None:
    """How the visible GPUs are joined, as `nvidia-smi topo -m` names it: "GPU0-GPU1 NV18" (NVLinks joining
    them: direct, or through NVSwitches, as on HGX boards), or the PCIe path ("PIX", "PHB", "NODE", "SYS");
    "GPU0 alone" for one GPU."""
    handles = [_handle(u) for u in uuids]
    if not handles or None in handles:
        return None
    if len(handles) == 1:
        return "GPU0 alone"
    pairs = []
    for i in range(len(handles)):
        for j in range(i + 1, len(handles)):
            pairs.append(f"GPU{i}-GPU{j} {_link(handles[i], handles[j])}")
    return ", ".join(pairs)


def _nvlinks(a, b) -> int:
    """Active NVLinks of GPU `a` that reach GPU `b`: wired to it, or to an NVSwitch when the two can talk over
    NVLink (an H200 pair measured: 18 links, each to a switch, which nvidia-smi shows as NV18)."""
    try:
        if pynvml.nvmlDeviceGetP2PStatus(a, b, pynvml.NVML_P2P_CAPS_INDEX_NVLINK) != pynvml.NVML_P2P_STATUS_OK:
            return 0
        peer = pynvml.nvmlDeviceGetPciInfo(b).busId
    except pynvml.NVMLError:
        return 0
    links = 0
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        try:
            if pynvml.nvmlDeviceGetNvLinkState(a, link) != pynvml.NVML_FEATURE_ENABLED:
                continue
            to_switch = pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(a, link) == pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
            links += to_switch or pynvml.nvmlDeviceGetNvLinkRemotePciInfo(a, link).busId == peer
        except pynvml.NVMLError:  # a link this GPU does not have
            continue
    return links


def _link(a, b) -> str:
    links = _nvlinks(a, b)
    if links:
        return f"NV{links}"
    try:
        return TOPOLOGY_LEVELS.get(pynvml.nvmlDeviceGetTopologyCommonAncestor(a, b), "?")
    except pynvml.NVMLError as e:
        return f"unknown ({e})"
