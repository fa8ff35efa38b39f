"""What NVML (nvidia-ml-py, imported as pynvml) tells about the GPU: driver, power limit, energy.

Optional: without the package, or where NVML refuses, every function returns None. The energy
counter tells whether a GPU-side window ran at the power limit: H200 machines of this project's
cloud drew their 700 W limit through the compiled ladder steps, and two of six ran the bf16 step
14-15% slower than the others, for a reason not established (README, "GPU-side numbers across chips").
"""

from __future__ import annotations

import functools

try:
    import pynvml
except ImportError:  # not installed: nothing to read
    pynvml = None


@functools.lru_cache(maxsize=None)
def _handle(uuid: str | None):
    if pynvml is None or not uuid:
        return None
    try:
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByUUID(uuid)
    except pynvml.NVMLError:
        return None


def driver_version() -> str | None:
    if pynvml is None:
        return None
    try:
        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
    except pynvml.NVMLError:
        return None
    return v.decode() if isinstance(v, bytes) else v


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
