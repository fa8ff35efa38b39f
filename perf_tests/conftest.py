from __future__ import annotations

import math
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from torch_perf_suite import PerfWarning
from torch_perf_suite.machine import host
from torch_perf_suite.machine.environment import Mismatched, check_torchvision

try:  # the recipes import torchvision: one built for another torch is said in one line (pytest_configure)
    check_torchvision()
    MISMATCHED = None
    from fixtures import compile_cache, disk, recipes, training
except Mismatched as e:
    MISMATCHED = e


def pytest_configure(config):
    if MISMATCHED:
        raise pytest.UsageError(str(MISMATCHED))


@pytest.fixture(scope="session", autouse=True)
def compiled_models_kept(request):
    """Compiled recipes' caches kept in pytest's cache from one run to the next (compile_cache.folder_for)."""
    compile_cache.keep_compiled(compile_cache_root(getattr(request.config, "cache", None)))
    yield
    compile_cache.keep_compiled(None)


def compile_cache_root(cache) -> Path | None:
    """The folder of pytest's cache (`config.cache`) that keeps compiled models; None, so that each compiles afresh,
    without one (`-p no:cacheprovider`) or where it cannot be written (a read-only checkout: one warning says so).
    `--cache-clear` empties it."""
    if cache is None:
        return None
    try:
        return cache.mkdir("perf-compile")
    except OSError as e:
        warnings.warn(PerfWarning(f"compiled models not kept between runs: {e}; give pytest a writable cache "
                                  "(-o cache_dir=DIR)"), stacklevel=1)
        return None


@pytest.fixture
def measure(perf):
    """measure(recipe, parts=None) -> Result: build the recipe on the perf device and measure it.

    The workload stays open until the test ends, so that a failing check can measure it again.
    In smoke mode (no measurement), it checks what a CPU can: the recipe trained for the steps the
    smoke window runs, and its first loss was finite (only the first: docs/limits.md says why)."""
    opened = []

    def run(recipe: recipes.Recipe, parts: tuple[str, ...] | None = None):
        if perf.worker_start:
            recipe = replace(recipe, worker_start=perf.worker_start)
        full = recipe
        if perf.smoke:
            recipe = recipes.for_smoke(recipe)
        workload = training.build(recipe, perf.device)
        opened.append(workload)
        if workload.loader_source is not None:  # the full recipe's loader is counted and compared, in smoke runs too
            workload.loader_source = recipes.loader_source(full)
            if perf.smoke:  # described, not iterated: its settings are the full recipe's
                workload.loader = recipes.make_loader(full)
        if not perf.smoke:
            result = perf.measure(workload, parts)
            describe_host_side(result, workload, recipe)
            return result
        losses = []
        step = workload.step
        workload.step = lambda: losses.append(step()) or losses[-1]
        result = perf.measure(workload, parts)
        if parts is None or "pipeline" in parts:
            # then the profiled steps, whose host reads are counted; and, where the workload has no GPU-side step of its
            # own, three whose host side is counted (a first step, then one under the tracer in each of two passes) and
            # one whose model FLOPs are
            expected = 3 + perf.measure_settings.profile_steps + 4 * (workload.gpu_step is None)
            assert len(losses) == expected, f"the smoke window ran {len(losses)} training steps, expected {expected}"
            assert math.isfinite(losses[0].item()), f"the first training step's loss is {losses[0].item()}"
        return result

    yield run
    for workload in opened:
        workload.close()


def describe_host_side(result, workload, recipe: recipes.Recipe) -> None:
    """Report notes: host memory at the end of the measurement (seed 003's arithmetic beside it), bytes copied a step."""
    result.extra["host"] = host.memory_line(workload.host_memory(), recipe.num_workers)
    copied = result.syncs.kernels.copied_bytes_per_step if result.syncs and result.syncs.kernels else {}
    if copied:
        result.extra["copied"] = ", ".join(f"{d} {n / 1e6:,.1f} MB" for d, n in copied.items()) + " a step"


@pytest.fixture(scope="session")
def image_dataset(request):
    """The on-disk image dataset (fixtures/disk.py), written once per machine and reused (small images in smoke
    runs, as many as a GPU run's); where it cannot be written, each test that needs it fails with what to do, and the
    others run."""
    try:
        return disk.ensure(disk.SMOKE_SPEC if request.config.getoption("--perf-smoke") else disk.Spec(),
                           say=request.getfixturevalue("perf_session").say)
    except disk.DatasetError as e:
        pytest.fail(str(e), pytrace=False)
