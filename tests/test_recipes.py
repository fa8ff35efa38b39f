"""The recipes: each ladder step is the one-field change the article makes, and bad knobs say so."""

from dataclasses import fields

import pytest
import torch

from fixtures.metrics import MetricCollector, compute_all, loss_and_classification_metrics, update_classification
from fixtures.recipes import BASELINE, LADDER_STEPS, Recipe, ladder

CHANGES = {
    "workers": {"num_workers"},
    "pin_memory": {"pin_memory", "non_blocking"},
    "batch_512": {"batch_size"},
    "uint8_h2d": {"cast_on", "batch_size"},
    "set_to_none": {"set_to_none"},
    "amp_fp16": {"amp", "grad_scaler"},
    "compile": {"compile"},
    "fused_optimizer": {"fused_optimizer"},
    "bf16_channels_last": {"amp", "grad_scaler", "channels_last"},
    "gpu_resize": {"resize_on"},
}


def test_each_ladder_step_changes_only_its_knob():
    steps = ladder(workers=6)
    assert list(steps) == LADDER_STEPS == ["baseline", *CHANGES]
    assert steps["baseline"] == BASELINE
    for prev, step in zip(LADDER_STEPS, LADDER_STEPS[1:]):
        changed = {f.name for f in fields(Recipe) if getattr(steps[prev], f.name) != getattr(steps[step], f.name)}
        assert changed == CHANGES[step], step
    assert steps["workers"].num_workers == 6


def test_the_article_baseline():
    assert (BASELINE.batch_size, BASELINE.num_workers, BASELINE.pin_memory, BASELINE.non_blocking) == (32, 0, False, False)
    assert BASELINE.set_to_none is False  # torch's default became True; the article's step zeroed


@pytest.mark.parametrize("bad, message", [
    ({"amp": "fp8"}, "Recipe.amp='fp8'"),
    ({"resize_on": "gpu"}, "resize_on='gpu' needs cast_on='gpu'"),
    ({"dataset": "mnist"}, "Recipe.dataset='mnist'"),
])
def test_bad_recipe_names_the_field(bad, message):
    with pytest.raises(ValueError, match=message):
        Recipe(**bad)


def test_fixed_metrics_compute_what_the_naive_ones_do():
    g = torch.Generator().manual_seed(0)
    naive, fixed = loss_and_classification_metrics(fixed=False), loss_and_classification_metrics(fixed=True)
    for _ in range(5):
        outputs = torch.randn(64, 1000, generator=g)
        target = torch.randint(0, 1000, (64,), generator=g)
        target[:16] = outputs[:16].argmax(1)  # some right answers, so the scores are not all zero
        loss = torch.nn.functional.cross_entropy(outputs, target)
        update_classification(naive, outputs, target, loss)
        update_classification(fixed, outputs, target, loss)
    want = compute_all(naive)
    assert want["accuracy"] > 0.2
    assert compute_all(fixed) == pytest.approx(want, rel=1e-6)


def test_collector_computes_every_k_steps_inside_its_profiler_range():
    collector = MetricCollector("naive", torch.device("cpu"), compute_every=3)
    outputs, target = torch.randn(8, 1000), torch.randint(0, 1000, (8,))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(6):
            collector.update(outputs, target, torch.tensor(1.5))
    ranges = [e for e in prof.events() if e.name == "perf_periodic:metrics_compute"]
    assert len(ranges) == 2
    assert collector.last_values["avg_loss"] == 1.5


def test_unknown_metrics_variant():
    with pytest.raises(ValueError, match="unknown metrics variant 'fancy'"):
        MetricCollector("fancy", torch.device("cpu"), 8)
