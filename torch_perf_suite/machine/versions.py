"""A package's version, read without importing it: torchvision's, whose import takes seconds (its models import
torch._dynamo) and fails where it was built for another torch, in every pytest process of a project that need not use
it (the environment's record, the loader count's key)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path


def torchvision_version() -> str | None:
    """torchvision.__version__ ("0.26.0+cu130", where its metadata says "0.26.0"), read from the version.py its build
    writes rather than imported: importing it takes seconds (its models import torch._dynamo) in every pytest process,
    REF's and a bisected commit's too, where a project's tests need not use it. None where it is not installed."""
    if "torchvision" in sys.modules:  # imported, or blocked (None: not to be imported)
        return getattr(sys.modules["torchvision"], "__version__", None)
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return None
    try:
        found = re.search(r"^__version__ = ['\"]([^'\"]+)['\"]", Path(spec.origin).with_name("version.py").read_text(), re.M)
    except OSError:
        found = None
    return found.group(1) if found else importlib.metadata.version("torchvision")
