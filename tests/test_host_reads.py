"""host_reads: the host reads a step makes, seen by the dispatcher on the CPU, named by line; and the smoke verdict."""

import torch

from torch_perf_suite import checks, host_reads
from torch_perf_suite.findings import failures
from torch_perf_suite.syncs import PERIODIC_PREFIX

X = torch.arange(8.0)


def here(offset: int = 0) -> str:
    import inspect

    frame = inspect.currentframe().f_back
    return f"tests/test_host_reads.py:{frame.f_lineno + offset} in {frame.f_code.co_name}"


def only(counted):
    [(source, n)] = counted.sources.items()
    return source, n


def test_an_item_in_the_step_is_one_read_a_step_at_its_line():
    lines = []

    def step():
        lines.append(here(1))
        return X.sum().item()

    counted = host_reads.count(step, 3)
    source, n = only(counted)
    assert (n, counted.per_step) == (3, 1.0)
    assert (source.call, source.ops, source.user_line, source.library_line) == (
        "host read", "aten::_local_scalar_dense", lines[0], "")
    assert source.advice.kind == "tensor read on the host"


def test_bool_of_a_tensor_and_a_boolean_mask_are_reads():
    def step():
        if X.sum() > 0:
            X[X > 3].sum()

    counted = host_reads.count(step, 2)
    assert sorted((s.ops, n) for s, n in counted.sources.items()) == [
        ("aten::_local_scalar_dense", 2), ("aten::index > aten::nonzero", 2)]
    mask = next(s for s in counted.sources if "index" in s.ops)
    assert mask.advice.kind == "boolean mask"


def test_integer_indexing_and_arithmetic_are_not_reads():
    counted = host_reads.count(lambda: (X[torch.tensor([1, 2])] * 2).sum(), 3)
    assert counted.total == 0 and not counted.periodic


def test_reads_inside_a_periodic_phase_are_counted_apart_with_its_runs():
    calls = [0]

    def step():
        calls[0] += 1
        if calls[0] % 2 == 0:
            with torch.profiler.record_function(PERIODIC_PREFIX + "metrics"):
                X.max().item()

    counted = host_reads.count(step, 4)
    assert counted.total == 0
    assert counted.periodic_runs == {PERIODIC_PREFIX + "metrics": 2}
    [((phase, source), n)] = counted.periodic.items()
    assert (phase, n, source.ops) == (PERIODIC_PREFIX + "metrics", 2, "aten::_local_scalar_dense")


def test_an_optimizers_step_counter_is_not_a_read():
    """Adam's step counters are CPU tensors on a GPU too (not fused, not capturable): torch/optim reads them."""
    p = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.Adam([p], foreach=False)

    def step():
        opt.zero_grad()
        (p * 2).sum().backward()
        opt.step()

    step()
    assert host_reads.count(step, 2).total == 0


def test_the_smoke_verdict_fails_a_read_where_no_sync_is_expected_naming_it():
    counted = host_reads.count(lambda: X.sum().item(), 2)
    message = failures(checks.host_reads(counted, per_step=0))
    assert message.startswith("measured 1.00 host reads per step (2 in 2 steps) with no GPU, expected at most 0:")
    assert "user code: tests/test_host_reads.py:" in message and "in <lambda>" in message
    assert failures(checks.host_reads(counted, per_step=1)) is None  # the pitfall's sync, as documented
    assert failures(checks.host_reads(counted, per_step=None)) is None  # at_least: no upper bound to hold
    assert failures(checks.host_reads(host_reads.count(lambda: None, 2), per_step=0)) is None


def test_a_periodic_phase_that_runs_every_step_fails_as_per_step_syncs():
    def step():
        with torch.profiler.record_function(PERIODIC_PREFIX + "metrics"):
            X.max().item()

    counted = host_reads.count(step, 3)
    message = failures(checks.host_reads(counted, per_step=0))
    assert message.startswith("a phase marked periodic ran in every one of the 3 profiled steps (perf_periodic:metrics)")
    assert message == failures(checks.syncs(counted, per_step=0))  # the GPU's verdict says the same
    assert failures(checks.periodic_every_step(host_reads.count(step, 1))) is None  # one step cannot tell


def test_a_value_made_on_the_host_is_not_a_read_and_what_it_touches_on_the_device_is():
    """torch.as_tensor(a float) stays on the host on a GPU too (a metric's host value); mixed with a device tensor, the
    result is the device's."""
    counted = host_reads.count(lambda: bool(torch.isnan(torch.as_tensor(0.5)).any()), 3)
    assert counted.total == 0
    assert host_reads.count(lambda: (torch.as_tensor(0.5) * X).sum().item(), 3).total == 3


def test_a_read_in_the_datasets_item_is_the_hosts():
    class Items(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            return X[i % 8] if X.sum().item() > 0 else X[0]  # a read of a tensor made before: on the host anyway

    batches = iter(torch.utils.data.DataLoader(Items(), batch_size=4))
    assert host_reads.count(lambda: next(batches), 3).total == 0
