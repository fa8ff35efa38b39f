"""The environment recorded with every measurement: GPU, chip, driver, library versions and host class."""

from __future__ import annotations

import datetime
import importlib.metadata
import importlib.util
import re
from pathlib import Path

from . import nvml
from .host import host_class
from .versions import torchvision_version


class Mismatched(RuntimeError):
    """Installed libraries that do not load together: the message says which, and how to install them."""


def environment() -> dict:
    """GPU, driver, library versions and host class of this process, as recorded with every measurement."""
    import torch

    env = {"gpu": "cpu", "driver": None, "cuda": torch.version.cuda, "torch": torch.__version__}
    env["torchvision"] = torchvision_version()
    try:  # from its installed metadata: importing torchmetrics takes seconds, and only the metric scenarios use it
        env["torchmetrics"] = importlib.metadata.version("torchmetrics")
    except importlib.metadata.PackageNotFoundError:
        env["torchmetrics"] = None
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        env["gpu_uuid"] = gpu_uuid()
        env["power_limit_w"] = nvml.power_limit_w(env["gpu_uuid"])
        env["topology"] = nvml.topology([gpu_uuid(i) for i in range(torch.cuda.device_count())])
        env["driver"] = _driver_version()
    env["host"] = host_class()
    env["date"] = datetime.date.today().isoformat()
    return env


def check_torchvision() -> None:
    """Import torchvision, raising Mismatched, which says how to install both, where it was built for another torch
    (a CPU torch beside a CUDA torchvision fails its import with "operator torchvision::nms does not exist")."""
    import torch

    try:
        import torchvision  # noqa: F401
    except RuntimeError as e:
        raise Mismatched(f"torchvision {importlib.metadata.version('torchvision')} does not load with torch "
                         f"{torch.__version__} ({e}): they come from different builds. Install both from one index: "
                         f"pip install --force-reinstall torch torchvision, adding --index-url "
                         f"https://download.pytorch.org/whl/cpu on a machine without a GPU") from None


def gpu_uuid(index: int | None = None) -> str | None:
    """The chip's identity (the current device's, or visible device `index`), as nvidia-smi writes it
    ("GPU-9641a40c-..."): GPU-side numbers are compared tightly only with a baseline recorded on the
    same chip (throughput/gates.py says why)."""
    import torch

    uuid = getattr(torch.cuda.get_device_properties(torch.cuda.current_device() if index is None else index), "uuid", None)
    if uuid is None:
        return None
    text = str(uuid)
    return text if text.startswith("GPU-") else f"GPU-{text}"


def _driver_version() -> str | None:
    version = nvml.driver_version()
    if version:
        return version
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    # "... x86_64 Kernel Module  580.159.04  ..." or "... Open Kernel Module for x86_64  575.57.08  ..."
    found = re.search(r"Kernel Module.*?\s(\d+\.\d+(?:\.\d+)*)\s", text)
    return found.group(1) if found else None


def gpu_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'"""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug:
        raise ValueError(f"cannot make a file name of the GPU name {name!r}")
    return slug
