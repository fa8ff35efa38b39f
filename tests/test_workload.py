"""The public API: what `torch_perf_suite` exports, and TrainingStep on a CPU."""

import gc
import time
import weakref

import pytest
import torch

import torch_perf_suite
from torch_perf_suite import TrainingStep, Workload
from torch_perf_suite.workload import Members, members


def test_the_public_api_is_what_all_names():
    assert torch_perf_suite.__all__ == ["Advice", "Chart", "Perf", "PerfWarning", "Result", "TrainingStep", "Workload",
                                        "guard", "hf_train", "lightning_fit", "periodic", "torch_settings"]
    for name in torch_perf_suite.__all__:
        assert getattr(torch_perf_suite, name).__name__ == name
    with pytest.raises(AttributeError, match="has no attribute 'measure'; the public API is"):
        torch_perf_suite.measure


def make(workers=0, batches=2, train=None, loader_source=None):
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(4 * batches, 3), torch.randint(0, 2, (4 * batches,)))
    loader = torch.utils.data.DataLoader(data, batch_size=4, num_workers=workers)
    model = torch.nn.Linear(3, 2)
    return TrainingStep(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.functional.cross_entropy, loader, "cpu",
                        train=train, loader_source=loader_source)


def test_a_training_step_trains_on_the_loaders_batches_across_epochs():
    step = make(batches=2)
    assert isinstance(step, Workload) and step.batch_size == 4
    before = step.model.weight.detach().clone()
    losses = [step.step() for _ in range(5)]  # two epochs and a half
    assert all(loss.shape == () and torch.isfinite(loss) for loss in losses)
    assert not torch.equal(before, step.model.weight)
    inputs, targets = step.loader_step()
    assert inputs.shape == (4, 3) and targets.shape == (4,)


def test_the_gpu_side_step_keeps_one_batch():
    step = make()
    step.gpu_step()
    kept = step._resident
    step.gpu_step()
    assert step._resident is kept


def test_a_loader_with_workers_is_drained_and_timed_in_bursts():
    step = make(workers=2)
    assert (step.warmup_steps, step.cycle_steps) == (2 * (2 + 1) + 2, 2)  # two workers, two batches prefetched each
    assert (make().warmup_steps, make().cycle_steps) == (0, 1)
    step.close()


@pytest.mark.parametrize("train", [None, lambda inputs, targets: inputs.sum()])
def test_a_dropped_training_step_is_freed_at_once_with_its_loader(train):
    """In no reference cycle: a persistent_workers loader that only the cycle collector frees waits 5 s a worker for
    its workers to end (a session's end took 10 s longer with two)."""
    step = make(train=train)
    step.step()
    step.gpu_step()
    freed = weakref.ref(step.loader)
    gc.disable()
    try:
        del step
        assert freed() is None
    finally:
        gc.enable()


class Spin(torch.utils.data.Dataset):
    """Each sample costs 20 ms of CPU: more than the 10 ms ticks that process CPU times are counted in."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        t = time.process_time()
        while time.process_time() - t < 0.02:
            pass
        return torch.zeros(3), 0


def test_the_loaders_workers_cpu_time_is_read_while_they_run():
    model = torch.nn.Linear(3, 2)
    step = TrainingStep(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.functional.cross_entropy,
                        torch.utils.data.DataLoader(Spin(), batch_size=2, num_workers=2), "cpu")
    assert step.loader_cpu_s() is None  # no iterator yet
    step.loader_step()
    assert step.loader_cpu_s() >= 0.04  # the first batch: two samples, and the other worker's too, begun
    step.close()
    assert step.loader_cpu_s() is None and make().loader_cpu_s() is None  # stopped; none in this process


def test_a_train_function_of_ones_own_replaces_the_default():
    seen = []
    make(train=lambda inputs, targets: seen.append(inputs.shape)).step()
    assert seen == [(4, 3)]


def test_the_example_project_uses_the_public_api_only():
    """examples/guard_your_step stands for a user's project: it may import `torch_perf_suite`'s exports, nothing else."""
    import ast
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "guard_your_step"
    imported = []
    for path in example.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch_perf_suite"):
                imported += [(node.module, alias.name) for alias in node.names]
            if isinstance(node, ast.Import):
                assert not [a.name for a in node.names if a.name.startswith("torch_perf_suite")], path
    assert imported and all(module == "torch_perf_suite" and name in torch_perf_suite.__all__ for module, name in imported)


def test_a_periodic_phase_is_counted_apart(tmp_path):
    from torch.profiler import ProfilerActivity, profile, record_function

    from torch_perf_suite import periodic
    from torch_perf_suite.syncs import count_syncs, load_trace

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(2):
            with record_function(f"perf_step_{i}"):
                if i == 1:
                    with periodic("metrics"):
                        torch.ones(2).sum()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    assert count_syncs(load_trace(tmp_path / "t.json")).periodic_runs == {"perf_periodic:metrics": 1}


def test_a_bare_workloads_members_are_the_defaults():
    class Bare:
        batch_size = 4

        def step(self):
            pass

    assert isinstance(Bare(), Workload)
    got = members(Bare())
    assert got == Members()
    assert (got.gpu_step, got.loader_step, got.warmup_steps, got.cycle_steps, got.gpu_cycle_steps, got.loader_key,
            got.gpu_key, got.loader_cpu_s, got.loader_source, got.close) == (None, None, 0, 1, 1, None, None, None, None, None)


def test_every_member_a_workload_has_is_read():
    def gpu_step(): ...
    def loader_step(): ...
    def loader_cpu_s(): ...
    def close(): ...

    given = {"gpu_step": gpu_step, "loader_step": loader_step, "warmup_steps": 8, "cycle_steps": 2, "gpu_cycle_steps": 3,
             "loader_key": ("loader", 1), "gpu_key": ("gpu", 2), "loader_cpu_s": loader_cpu_s,
             "loader_source": ("pkg.mod:fn", {"n": 1}), "close": close}
    full = type("Full", (), {"batch_size": 4, "step": lambda self: None})()
    vars(full).update(given)
    assert members(full) == Members(**given)
    with pytest.raises(AttributeError):  # read once: frozen
        members(full).warmup_steps = 0


def test_a_training_steps_members_are_its_own():
    step = make(workers=2)
    got = members(step)
    assert (got.warmup_steps, got.cycle_steps, got.gpu_cycle_steps) == (8, 2, 1)
    assert got.gpu_step == step.gpu_step and got.loader_step == step.loader_step and got.close == step.close
    assert got.loader_key is None and got.loader_source is None
    step.close()
    named = ("mydata:loader_parts", {"n": 8})  # counted and timed by turns where given
    assert members(make(loader_source=named)).loader_source == named
