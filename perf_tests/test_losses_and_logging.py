"""Seed 003, advice 9, and its everyday sibling: Python control flow on CUDA values, and logging the loss.

A custom loss written with a loop over samples and an `if` on a CUDA value per sample syncs once per
sample and launches its kernels one sample at a time; the same loss with masks as weights and
torch.where syncs never (fixtures/losses.py: both compute the same value, tests/test_losses.py).
Logging `loss.item()` is the metric pitfall of seed 004 in one line: one sync per logged step; a
non-blocking copy into pinned memory, read when its event says it is done, logs the same values
without one (fixtures/loss_log.py).
"""

from dataclasses import replace

import pytest
import torch

from fixtures.loss_log import LossLog
from fixtures.losses import IGNORE, LossStep, example_batch
from fixtures.recipes import channels_last_pair

BATCH = 256  # the loss's batch: 224 kept samples, 32 labelled IGNORE
LOSS_SPEEDUP = 20  # vectorized over naive, the loss alone on the GPU (forward and backward)


# the naive loss profiles one step: its 480 syncs make a trace of thousands of events a step
@pytest.mark.parametrize("variant", [pytest.param("naive", marks=pytest.mark.perf(profile_steps=1)), "vectorized"])
def test_custom_loss(perf, variant):
    """The loss alone, on fixed logits on the GPU: the naive form syncs once per sample (label check) and once
    per kept sample (hard-example check), each sync attributed to its line in fixtures/losses.py."""
    batch = 4 if perf.smoke else BATCH
    workload = LossStep(variant, perf.device, batch=batch)
    try:
        result = perf.measure(workload)
        if variant == "naive":
            labels = example_batch(batch, 10, "cpu")[1]
            per_step = batch + int((labels != IGNORE).sum())
            perf.assert_syncs(result, per_step=per_step)
            if result.syncs is not None:
                lines = {s.user_line.rsplit(" in ", 1)[0] for s in result.syncs.sources}
                assert all(line.startswith("fixtures/losses.py:") for line in lines), f"syncs attributed to {lines}"
                assert len(lines) == 2, f"the label check and the hard-example check, each on its line: {lines}"
        else:
            perf.assert_syncs(result, per_step=0)
            perf.assert_gain(result, over="naive", at_least=LOSS_SPEEDUP, part="gpu")
        perf.assert_baseline(result)
    finally:
        workload.close()


LOGGING = {"none": (None, 1, 0), "item_every_step": ("item", 1, 1), "item_every_8": ("item", 8, 1 / 8),
           "pinned_every_step": ("pinned", 1, 0)}  # id: (log, log_every, syncs per step)


@pytest.mark.perf(profile_steps=8)  # a window of 8 steps holds one step of each 8
@pytest.mark.parametrize("way", list(LOGGING))
def test_logging_the_loss(perf, measure, way):
    """The bf16 channels_last ResNet-18 step (eager, batch on the GPU) logging its loss: `.item()` syncs on
    each logged step, at its line; the pinned copy logs the same values without a sync."""
    log, every, syncs = LOGGING[way]
    result = measure(replace(channels_last_pair(compiled=False)[1], log=log, log_every=every))
    perf.assert_syncs(result, per_step=syncs)
    if syncs and result.syncs is not None:
        assert {s.user_line.split(":")[0] for s in result.syncs.sources} == {"fixtures/loss_log.py"}
    perf.assert_baseline(result)


@pytest.mark.cuda
def test_the_pinned_log_reads_what_item_reads(perf_session):
    """The same CUDA values logged both ways, every third step: equal, in order, and all of them."""
    if not perf_session.device.is_gpu:
        perf_session.skip("the pinned log copies from a CUDA GPU; on a CPU it keeps the value and reads it with the log")
    losses = [torch.tensor(0.5 * i, device="cuda") * 3 for i in range(50)]
    item, pinned = LossLog("item", 3, "cuda"), LossLog("pinned", 3, "cuda")
    for loss in losses:
        item(loss)
        pinned(loss)
    assert pinned.values() == item.values() == [(i, 1.5 * i) for i in range(0, 50, 3)]
