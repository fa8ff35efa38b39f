"""The custom loss's two forms compute the same thing; the loss log logs what .item() reads."""

import pytest
import torch
import torch.nn.functional as F

from fixtures import recipes, training
from fixtures.loss_log import LossLog
from fixtures.losses import HARD, IGNORE, LossStep, example_batch, naive_loss, vectorized_loss


def test_the_example_batch_exercises_every_branch_of_the_naive_loss():
    outputs, labels = example_batch(256, 10, "cpu")
    kept = labels != IGNORE
    per_sample = F.cross_entropy(outputs[kept], labels[kept], reduction="none")
    assert int((~kept).sum()) == 32 and int((per_sample > HARD).sum()) > 0 and int((per_sample <= HARD).sum()) > 0


def test_naive_and_vectorized_losses_agree_in_value_and_gradient():
    outputs, labels = example_batch(256, 10, "cpu")
    grads = []
    for loss_fn in (naive_loss, vectorized_loss):
        x = outputs.clone().requires_grad_()
        loss = loss_fn(x, labels)
        loss.backward()
        grads.append((loss.detach(), x.grad))
    (naive, g_naive), (vectorized, g_vectorized) = grads
    assert torch.allclose(naive, vectorized, rtol=1e-5)
    assert torch.allclose(g_naive, g_vectorized, rtol=1e-4, atol=1e-7)
    assert g_naive[labels == IGNORE].abs().max() == 0  # ignored samples get no gradient


def test_the_loss_by_hand():
    """Two samples kept, one ignored: losses 0.3133 (easy) and 3.0486 (hard, weighed twice): (0.3133 + 6.0972) / 2."""
    outputs = torch.tensor([[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 0.0]])
    labels = torch.tensor([0, 0, IGNORE])
    easy = -torch.log_softmax(outputs[0], 0)[0]
    hard = -torch.log_softmax(outputs[1], 0)[0]
    assert easy < HARD < hard
    for loss_fn in (naive_loss, vectorized_loss):
        assert loss_fn(outputs, labels).item() == pytest.approx(float(easy + 2 * hard) / 2, rel=1e-6)


def test_a_loss_step_runs_forward_and_backward_on_fixed_logits():
    step = LossStep("vectorized", "cpu", batch=16)
    first, second = step.step(), step.step()
    assert first.item() == second.item() and step.outputs.grad is not None
    with pytest.raises(ValueError, match="loss variant 'fancy'"):
        LossStep("fancy", "cpu")


@pytest.mark.parametrize("mode", ["item", "pinned"])
def test_a_log_keeps_every_kth_step(mode):
    log = LossLog(mode, 4, "cpu")
    for i in range(10):
        log(torch.tensor(float(i)))
    assert log.values() == [(0, 0.0), (4, 4.0), (8, 8.0)]


@pytest.mark.parametrize("mode, reads", [("pinned", 0), ("item", 3)])
def test_the_pinned_log_reads_nothing_in_the_step_on_a_cpu_either_and_item_reads_each_step(mode, reads):
    """A loss computed from a parameter, as a step's is (a tensor made from a Python number is not counted as a read)."""
    from torch_perf_suite.syncs import host_reads

    weight = torch.nn.Parameter(torch.tensor(1.0))
    log = LossLog(mode, 1, "cpu")
    assert host_reads.count(lambda: log(weight * 2.0), 3).total == reads
    assert log.values() == [(0, 2.0), (1, 2.0), (2, 2.0)]


@pytest.mark.parametrize("mode, every", [("print", 1), ("item", 0)])
def test_a_bad_log_setting_is_refused(mode, every):
    with pytest.raises(ValueError, match="expected a mode of"):
        LossLog(mode, every, "cpu")
    with pytest.raises(ValueError, match="Recipe.log="):
        recipes.Recipe(log=mode, log_every=every)


def test_a_logging_recipe_logs_its_training_losses():
    workload = training.build(recipes.for_smoke(recipes.Recipe(log="item", log_every=2)), "cpu")
    try:
        losses = [workload.step().item() for _ in range(5)]
    finally:
        workload.close()
    assert workload.log.values() == [(0, losses[0]), (2, losses[2]), (4, losses[4])]
