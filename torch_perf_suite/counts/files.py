"""Which file a frame belongs to: a library (the interpreter's, an installed package's), this harness, or the user's
project; and a path as a message names it."""

from __future__ import annotations

import functools
import importlib.util
import os
import sysconfig

_LIBRARY_ROOTS = tuple(
    {os.path.realpath(p) for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]) if p}
)
_HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # torch_perf_suite/


def _is_library(filename: str) -> bool:
    f = filename.replace("\\", "/")
    if "site-packages/" in f or "dist-packages/" in f or f.startswith("<"):
        return True
    if not os.path.isabs(filename):
        # the profiler names a frame relative to its sys.path entry: "torch/amp/grad_scaler.py", "threading.py"
        top = f.split("/", 1)[0]
        return _installed_package(top if "/" in f else top.removesuffix(".py"))
    return os.path.realpath(filename).startswith(_LIBRARY_ROOTS) or _is_harness(filename)


def _is_harness(filename: str) -> bool:
    """A frame of this package: as the profiler names it (relative to its sys.path entry), or by its path."""
    f = filename.replace("\\", "/")
    if not os.path.isabs(filename):
        return f.startswith(os.path.basename(_HARNESS_DIR) + "/")
    return os.path.realpath(filename).startswith(_HARNESS_DIR + os.sep)


@functools.lru_cache(maxsize=None)
def _installed_package(name: str) -> bool:
    """A top-level package that this Python finds among its libraries (not the project's own)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    where = spec and (spec.origin or next(iter(spec.submodule_search_locations or ()), None))
    if not where or where in ("built-in", "frozen"):
        return bool(where)
    real = os.path.realpath(where).replace("\\", "/")
    return "site-packages/" in real or "dist-packages/" in real or real.startswith(_LIBRARY_ROOTS)


def _short(where: str) -> str:
    """site-packages paths from the package down, project paths relative to the working directory."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in where:
            return where.split(marker, 1)[1]
    cwd = os.getcwd() + os.sep
    return where[len(cwd) :] if where.startswith(cwd) else where
