"""fixtures/multi_gpu.py and the DataParallel knobs of the recipes, on a CPU: ranks through gloo, the arithmetic
of a spread, the DataParallel recipes' loss against the plain one."""

import os
from dataclasses import replace

import pytest
import torch

from fixtures import multi_gpu, recipes, training
from fixtures.multi_gpu import Rank, Spread
from torch_perf_suite.throughput.timing import Throughput

pytestmark = pytest.mark.slow

STEP = recipes.for_smoke(recipes.resnet50_ladder()["fused_optimizer"])


def rank(index: int, durations: tuple[float, ...], peak: dict[int, float], per_round: int = 100) -> Rank:
    return Rank(index, Throughput(per_round, durations), peak, None, None)


def test_a_spread_round_lasts_as_long_as_its_slowest_rank():
    spread = Spread(2, [rank(0, (1.0, 1.0, 2.0), {0: 3.0}), rank(1, (2.0, 1.0, 1.0), {1: 2.5})])
    # rounds of 200 samples lasting 2, 1 and 2 s: 100, 200, 100 samples/s; the median
    assert spread.samples_per_s == pytest.approx(100.0)
    assert spread.per_gpu == pytest.approx(50.0)
    assert spread.peak_gb == {0: 3.0, 1: 2.5}
    assert spread.syncs_line() == "-"


def test_data_parallel_in_one_process_counts_every_gpu():
    spread = Spread(2, [rank(0, (1.0,), {0: 4.0, 1: 3.0}, per_round=512)])
    assert (spread.samples_per_s, spread.per_gpu) == (512.0, 256.0)


@pytest.mark.parametrize("bad, why", [
    ({"data_parallel": "gather"}, "expected None, 'outputs' or 'loss'"),
    ({"data_parallel": "loss", "ddp": True}, "without ddp"),
    ({"data_parallel": "outputs", "metrics": "fixed"}, "without metrics"),
    ({"ddp_bucket_view": True}, "needs ddp=True"),
])
def test_bad_multi_gpu_knobs_say_what_is_allowed(bad, why):
    with pytest.raises(ValueError, match=why):
        replace(recipes.Recipe(), **bad)


@pytest.mark.parametrize("bucket_view", [False, True])
def test_the_ddp_wrap_passes_the_bucket_view_setting(bucket_view):
    from fixtures.distributed import single_process_group

    group = single_process_group(torch.device("cpu"))
    try:
        model = training.ddp_wrap(torch.nn.Linear(4, 3), torch.device("cpu"), bucket_view)
        assert model.gradient_as_bucket_view is bucket_view
    finally:
        group.close()


def test_the_loss_in_forward_is_the_loss():
    model = torch.nn.Linear(4, 3)
    inputs, labels = torch.randn(5, 4), torch.randint(0, 3, (5,))
    got = training.LossInForward(model, torch.nn.CrossEntropyLoss())(inputs, labels)
    assert got.shape == (1,)  # one number per replica, gathered along dim 0 without DataParallel's warning
    assert got.item() == pytest.approx(torch.nn.functional.cross_entropy(model(inputs), labels).item())


@pytest.mark.parametrize("data_parallel", ["outputs", "loss"])
def test_data_parallel_recipes_train_the_same_first_step(data_parallel):
    """On a CPU DataParallel runs its module as it is: both forms give the plain recipe's first loss."""
    losses = []
    for recipe in (replace(STEP, amp=None, grad_scaler=False), replace(STEP, amp=None, grad_scaler=False,
                                                                       data_parallel=data_parallel)):
        workload = training.build(recipe, "cpu")
        try:
            losses.append(workload.step().item())
        finally:
            workload.close()
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)


@pytest.mark.parametrize("visible, inside", [(None, "0,1"), ("3,5,6,7", "3,5"), ("GPU-a,GPU-b,GPU-c,GPU-d", "GPU-a,GPU-b")])
def test_the_ranks_see_only_the_gpus_they_spread_over(monkeypatch, visible, inside):
    """On a node with 4 GPUs, a spread over 2 (DataParallel takes every GPU its process sees)."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    with multi_gpu.first_gpus(2):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == inside
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == visible


def test_on_a_cpu_the_ranks_see_what_this_process_sees(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with multi_gpu.first_gpus(2):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == ""


def test_ranks_run_in_a_process_group_and_return_in_rank_order():
    got = multi_gpu.spawn(_who, 2, "x")
    assert got == [(0, 2, "cpu", "x", "gloo"), (1, 2, "cpu", "x", "gloo")]


def _who(rank, world, device, tag):
    import torch.distributed as dist

    return rank, world, device.type, tag, dist.get_backend()


def test_a_failing_rank_raises_with_its_traceback():
    with pytest.raises(Exception, match="rank 1 cannot"):
        multi_gpu.spawn(_fail_on_one, 2)


def _fail_on_one(rank, world, device):
    if rank == 1:
        raise RuntimeError("rank 1 cannot")
    return rank
