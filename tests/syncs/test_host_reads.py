"""host_reads: the host reads a step makes, seen by the dispatcher on the CPU, named by line; and the smoke verdict."""

import torch

from torch_perf_suite.against import smoke_counts
from torch_perf_suite.findings import NOT_CHECKED, Finding, failures
from torch_perf_suite.syncs import PERIODIC_PREFIX, host_reads
from torch_perf_suite.syncs import checks as sync_checks

X = torch.arange(8.0)


def here(offset: int = 0) -> str:
    import inspect

    frame = inspect.currentframe().f_back
    return f"tests/syncs/test_host_reads.py:{frame.f_lineno + offset} in {frame.f_code.co_name}"


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
    message = failures(sync_checks.host_reads(counted, per_step=0))
    assert message.startswith("measured 1.00 host reads per step (2 in 2 steps) with no GPU, expected at most 0:")
    assert "user code: tests/syncs/test_host_reads.py:" in message and "in <lambda>" in message
    assert failures(sync_checks.host_reads(counted, per_step=1)) is None  # the pitfall's sync, as documented
    assert failures(sync_checks.host_reads(counted, per_step=None)) is None  # at_least: no upper bound to hold
    assert failures(sync_checks.host_reads(host_reads.count(lambda: None, 2), per_step=0)) is None


def test_a_periodic_phase_that_runs_every_step_fails_as_per_step_syncs():
    def step():
        with torch.profiler.record_function(PERIODIC_PREFIX + "metrics"):
            X.max().item()

    counted = host_reads.count(step, 3)
    message = failures(sync_checks.host_reads(counted, per_step=0))
    assert message.startswith("a phase marked periodic ran in every one of the 3 profiled steps (perf_periodic:metrics)")
    assert message == failures(sync_checks.syncs(counted, per_step=0))  # the GPU's verdict says the same
    # one step cannot tell: not checked, which --perf-strict fails on (--perf-profile-steps 1 switched the guard off)
    [found] = sync_checks.periodic_every_step(host_reads.count(step, 1))
    assert found == Finding(NOT_CHECKED, "a phase marked periodic (perf_periodic:metrics) ran in the one profiled step: "
                                         "one step cannot tell a phase that runs every step from one that runs every k "
                                         "steps; profile 2 or more (--perf-profile-steps)",
                           "a phase marked periodic ran in the one profiled step")
    assert sync_checks.host_reads(host_reads.count(step, 1), per_step=0) == [found]


def test_a_read_every_other_step_fails_as_one_every_step_does():
    """Half a read a step is a sync every other step on a GPU: no margin lets it pass, here or against REF."""
    calls = []

    def step():
        calls.append(1)
        if len(calls) % 2:
            X.sum().item()

    counted = host_reads.count(step, 4)
    assert counted.per_step == 0.5
    assert failures(sync_checks.host_reads(counted, per_step=0)).startswith("measured 0.50 host reads per step (2 in 4 "
                                                                            "steps) with no GPU, expected at most 0")
    now, none = smoke_counts.reads_entry(counted), smoke_counts.reads_entry(host_reads.count(lambda: None, 4))
    assert failures(sync_checks.host_reads_against(now, none, "REF", counted)).startswith(
        "measured 0.50 host reads per step with no GPU, 0.00 at REF (+0.50)")


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
    counted = host_reads.count(lambda: next(batches), 3)
    assert (counted.total, counted.dtypes) == (0, {})  # nor are the ops that make the batch: the loader's, not the step's


def test_the_ops_of_a_batch_from_the_loaders_workers_are_not_the_steps():
    """A worker's batch is unpickled in the main thread when it arrives, into the step that waits for it or a later
    one: its ops counted there moved a smoke run's ops by dtype with the machine's load (17.67 a step at REF, 19 at
    the same commit). Only the step's own matmul is counted."""
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(64, 4)), batch_size=4,
                                         num_workers=2)
    batches = iter(loader)
    counted = host_reads.count(lambda: LAYER(next(batches)[0]), 3)
    assert dict(counted.dtypes) == {"float32": 6}  # a Linear: its weight transposed, then addmm


# Reads a GPU makes that the CPU shows only as calls, or as reads of tensors it took for the host's

LAYER = torch.nn.Linear(4, 1)


def loss_of():
    """A loss computed from the model's parameters: the device's."""
    return LAYER(X[:4].reshape(1, 4)).pow(2).mean()


def read_at(step, steps=2):
    """(ops, user line, fix's kind) of the one read `step` makes a step."""
    counted = host_reads.count(step, steps)
    source, n = only(counted)
    assert n == steps
    return source.ops, source.user_line, source.advice.kind


def test_printing_a_loss_is_a_read_at_its_line(capsys):
    lines = []

    def step():
        lines.append(here(1))
        print(loss_of())

    assert read_at(step) == ("Tensor.__repr__ > aten::_local_scalar_dense", lines[0], "tensor read on the host")


def test_formatting_a_loss_is_one_read_at_its_line():
    lines = []

    def step():
        lines.append(here(1))
        return f"loss {loss_of():.3f}", str(loss_of().detach()), repr(loss_of())

    counted = host_reads.count(step, 2)
    assert sorted((s.ops, s.user_line, n) for s, n in counted.sources.items()) == [
        ("Tensor.__format__ > aten::_local_scalar_dense", lines[0], 2),  # its .item() inside not counted again
        ("Tensor.__repr__ > aten::_local_scalar_dense", lines[0], 4)]


def test_copies_of_the_loss_to_the_host_are_reads_at_their_lines():
    for copy in (lambda t: t.tolist(), lambda t: t.cpu(), lambda t: t.to("cpu"), lambda t: t.detach().numpy()):
        ops, user, kind = read_at(lambda: copy(loss_of().detach()))
        assert ops.endswith(" > aten::copy_") and kind == "blocking copy"
        assert user.startswith("tests/syncs/test_host_reads.py:") and user.endswith("in <lambda>")


def test_copies_that_do_not_wait_or_move_to_the_device_are_not_reads():
    batch = torch.randn(4, 4)  # not computed from the model: a batch, moved to the device ("cpu" here)
    counted = host_reads.count(lambda: (batch.to("cpu"), loss_of().to("cpu", non_blocking=True),
                                        loss_of().to(torch.float64), loss_of().cpu().item()), 2)
    assert [(s.ops, n) for s, n in counted.sources.items()] == [("Tensor.cpu > aten::copy_", 2)]  # the copy's read: 0


def test_a_value_made_with_device_and_read_is_a_read():
    def accumulated():
        acc = torch.tensor(0.0, device="cpu")
        acc += loss_of().detach()
        return acc.item()

    def compared():
        if torch.tensor(2.0, device="cpu") > 1:
            return 1

    assert read_at(accumulated)[0] == read_at(compared)[0] == "aten::_local_scalar_dense"


def test_a_host_value_updated_in_place_by_the_device_is_the_devices():
    def step():
        acc = torch.tensor(0.0)  # the host's
        acc += loss_of().detach()
        return acc.item()

    assert read_at(step)[0] == "aten::_local_scalar_dense"


def test_a_host_value_updated_in_place_by_host_values_stays_the_hosts():
    def step():
        acc = torch.tensor(0.0)
        acc += torch.tensor(1.0)
        acc.mul_(2)
        return acc.item(), print(acc, end=""), acc.cpu().tolist()

    assert host_reads.count(step, 2).total == 0


def test_a_read_inside_torch_optim_that_is_not_a_step_counter_is_a_read():
    p = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.SGD([p], lr=0.1)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
    counted = host_reads.count(lambda: scheduler.step(loss_of().detach()), 2)
    source, n = only(counted)
    assert (n, source.ops) == (2, "aten::_local_scalar_dense")
    assert source.library_line.startswith("torch/optim/lr_scheduler.py:") and source.user_line.endswith("in <lambda>")


def test_an_optimizers_step_counters_made_in_the_counted_steps_are_not_reads():
    p = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.AdamW([p], foreach=True)

    def step():
        opt.zero_grad()
        (p * 2).sum().backward()
        opt.step()

    assert host_reads.count(step, 2).total == 0  # its state made in the first step, read in both


def test_comparisons_and_outputs_sized_by_their_values_are_reads():
    labels = (LAYER(X[:4].reshape(1, 4)).detach() * 0).long().reshape(1).abs()
    for read, op, kind in ((lambda: torch.equal(loss_of(), loss_of()), "aten::equal", "comparison read on the host"),
                           (lambda: torch.allclose(loss_of(), loss_of()), "aten::allclose", "comparison read on the host"),
                           (lambda: torch.bincount(labels, minlength=3), "aten::bincount", "output sized on the host"),
                           (lambda: X[:1].repeat_interleave(labels + 1), "aten::repeat_interleave",
                            "output sized on the host")):
        ops, user, advice = read_at(read)
        assert (ops, advice) == (op, kind) and user.endswith("in <lambda>")
    assert host_reads.count(lambda: X[:1].repeat_interleave(labels + 1, output_size=1), 2).total == 0
