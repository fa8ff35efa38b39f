"""Seed 000, optimization #2: pinned memory and non-blocking copies remove the copy's sync.

Both run the article's baseline step (FakeCIFAR, PIL Resize(224) on the CPU, ResNet-18, batch 32,
no workers); only the host-to-device copy differs.
"""

from dataclasses import replace

import pytest

from fixtures.recipes import BASELINE

COPIES = {
    # pageable memory, blocking .to(device): each of the two copies (images, labels) waits for the GPU
    "pageable": (BASELINE, 2),
    # pin_memory=True in the DataLoader and .to(device, non_blocking=True): no wait
    "pinned": (replace(BASELINE, pin_memory=True, non_blocking=True), 0),
}


@pytest.mark.gate
@pytest.mark.parametrize("copy", list(COPIES))
def test_h2d_copy(perf, measure, copy):
    recipe, syncs_per_step = COPIES[copy]
    result = measure(recipe)
    perf.assert_syncs(result, per_step=syncs_per_step)
    # no workers: loading and training take turns, so the floor is a share of the rate the two give in series, which
    # held where the share of the slower part alone did not (docs/multi-gpu.md, the suite sharded)
    perf.assert_efficiency(result, at_least=0.5, in_turns=True)
    perf.assert_baseline(result)
