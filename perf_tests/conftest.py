import math
from dataclasses import replace

import pytest

from fixtures import recipes


@pytest.fixture
def measure(perf):
    """measure(recipe, parts=None) -> Result: build the recipe on the perf device and measure it.

    The workload stays open until the test ends, so that a failing check can measure it again.
    In smoke mode (no measurement), it checks what a CPU can: the recipe trained for the steps the
    smoke window runs, and its first loss was finite. (Only the first: on a CPU, torch 2.14.1, the
    fused_optimizer recipe, fused SGD with momentum under an fp16 GradScaler, reaches NaN on its
    seventh step where foreach SGD does not; not seen on a GPU, where the loss is not checked.)"""
    opened = []

    def run(recipe: recipes.Recipe, parts: tuple[str, ...] | None = None):
        if perf.worker_start:
            recipe = replace(recipe, worker_start=perf.worker_start)
        if perf.smoke:
            recipe = recipes.for_smoke(recipe)
        workload = recipes.build(recipe, perf.device)
        opened.append(workload)
        if not perf.smoke:
            return perf.measure(workload, parts)
        losses = []
        step = workload.step
        workload.step = lambda: losses.append(step()) or losses[-1]
        result = perf.measure(workload, parts)
        if parts is None or "pipeline" in parts:
            assert len(losses) == 3, f"the smoke window ran {len(losses)} training steps, expected 1 warm-up + 2 timed"
            assert math.isfinite(losses[0].item()), f"the first training step's loss is {losses[0].item()}"
        return result

    yield run
    for workload in opened:
        workload.close()
