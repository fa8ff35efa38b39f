"""What one sample costs (cost.py): the cost per sample judged at each threshold, in the workers and alone, the
parallelism explained, the unit's figures validated, and the timing hooks on a clock that ticks by known steps."""

import os
import pickle
import stat
import time
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, IterableDataset, default_collate

from torch_perf_suite.findings import FAILED, NOT_COMPARED, REPORTED, Finding, failures
from torch_perf_suite.loader import checks, cost, described

HERE = __name__  # the module the classes below are named by


# --- the cost per sample -------------------------------------------------------------------------


def unit(**changed):
    return {"wall_us": 1000.0, "cpu_us": 900.0, "wait_us": 100.0, "cpu_ratio": 1.0, "blocks": 0.0, "crowd_us": 1200.0,
            **changed}


def judge(now, then=None, tolerance_pct=5.0, timed=True, compared_with="REF"):
    return failures(checks.unit_failure(now, then or unit(), tolerance_pct, timed=timed, compared_with=compared_with))


def test_blocks_up_to_the_margin_pass_and_beyond_it_fail():
    assert judge(unit(blocks=described.BLOCKS_MARGIN)) is None  # 0.05 more blocks a sample: allowed
    message = judge(unit(blocks=0.06), timed=False, compared_with="the baseline")
    assert "blocks 0.06 times a sample" in message and "0.00 at the baseline" in message


def test_waiting_up_to_the_floor_passes_whatever_its_share():
    # a short sample of 100 µs: 20 µs more is 20%, but not beyond the floor
    assert judge(unit(wall_us=100.0, wait_us=30.0), unit(wall_us=100.0, wait_us=10.0)) is None
    message = judge(unit(wall_us=100.0, wait_us=30.5), unit(wall_us=100.0, wait_us=10.0))
    assert "waiting 30.5 µs a sample alone" in message and "+20.5 µs, 20.5%" in message


def test_waiting_up_to_the_tolerance_passes():
    # 50 µs more of a recorded 1,000 µs sample is 5%: allowed at 5%, not at 4%
    assert judge(unit(wait_us=150.0)) is None
    message = judge(unit(wait_us=150.0), tolerance_pct=4.0)
    assert "150.0 µs" in message and "100.0 at REF" in message and "+50.0 µs, 5.0% of a sample's 1,000.0 µs" in message
    assert "(allowed 4%)" in message


def test_waiting_is_a_share_of_the_recorded_sample():
    # 60 µs more: 6% of the recorded 1,000 µs, though only 3% of the 2,000 µs a sample takes now
    message = judge(unit(wall_us=2000.0, wait_us=160.0))
    assert "6.0% of a sample's 1,000.0 µs" in message


def test_waiting_is_judged_only_where_timed_and_blocks_everywhere():
    assert judge(unit(wait_us=500.0), timed=False) is None  # another host: its waiting is not this one's
    message = judge(unit(blocks=1.0, wait_us=500.0), timed=False)
    assert "blocks 1.00" in message and "waiting" not in message


def test_cpu_time_is_not_judged_in_microseconds_or_yardsticks():
    # a reading: the yardsticks still moved +9% to +38% between identical runs; the instruction count judges the work
    assert judge(unit(cpu_us=9000.0, cpu_ratio=10.0)) is None


def test_every_failing_figure_is_on_a_line_of_its_own():
    message = judge(unit(blocks=1.0, wait_us=500.0), compared_with="REF y")
    lines = message.splitlines()
    assert len(lines) == 3 and lines[0] == "the loader's cost per sample rose:"
    assert lines[1].startswith("  blocks 1.00") and lines[2].startswith("  waiting 500.0")
    assert all("REF y" in line for line in lines[1:])


def test_the_cpu_rise_is_in_percent_of_the_recorded_ratio():
    assert cost.cpu_rise_pct(unit(cpu_ratio=1.25), unit()) == 25.0
    assert cost.cpu_rise_pct(unit(cpu_ratio=0.75), unit()) == -25.0
    assert cost.cpu_rise_pct(unit(cpu_ratio=2.0), unit(cpu_ratio=0.5)) == 300.0


def test_no_ratio_on_either_side_is_no_rise():
    old = {k: v for k, v in unit().items() if k != "cpu_ratio"}
    assert cost.cpu_rise_pct(old, unit()) is None
    assert cost.cpu_rise_pct(unit(), old) is None
    assert cost.cpu_rise_pct(unit(cpu_ratio=0.0), unit()) is None and cost.cpu_rise_pct(unit(), unit(cpu_ratio=0.0)) is None


def test_the_cpu_line_gives_both_times_and_both_rises():
    line = cost.cpu_line(unit(cpu_us=1350.0, cpu_ratio=1.25), unit(), "REF z")
    assert "1,350 µs, 900 at REF z" in line and "+50.0%" in line and "1.250 yardsticks, +25.0%" in line
    old = {k: v for k, v in unit().items() if k != "cpu_ratio"}
    assert cost.cpu_line(unit(cpu_us=450.0), old, "REF").endswith("(-50.0%; no yardsticks recorded)")


UNIT = cost.UnitCost(100, 1000.0, 900.0, 100.0, 1.0, 5, 0.0, 1200.0)


def test_the_unit_verdict_judges_waiting_only_where_timed():
    slower = {"loader_unit": unit(wait_us=40.0)}  # 60 µs more waiting now: 6% of a sample
    assert checks.unit_verdict(UNIT, slower, 5.0, why_not_timed="recorded on host-2", compared_with="the baseline") == [
        Finding(REPORTED, "loader waiting per sample: recorded on host-2")]
    failure, note = checks.unit_verdict(UNIT, slower, 5.0, why_not_timed="", compared_with="REF w")
    assert (failure.outcome, note.outcome) == (FAILED, REPORTED)
    assert "waiting 100.0 µs" in failure.text and "40.0 at REF w" in failure.text and "(allowed 5%)" in failure.text
    assert note.text.startswith("loader CPU time a sample alone 900 µs, 900 at REF w")


def test_the_unit_verdict_passes_its_tolerance_on():
    slower = {"loader_unit": unit(wait_us=40.0)}  # 6% of a sample
    assert failures(checks.unit_verdict(UNIT, slower, 6.0, why_not_timed="", compared_with="REF")) is None
    blocking = cost.UnitCost(100, 1000.0, 900.0, 100.0, 1.0, 5, 1.0, 1200.0)
    failure = failures(checks.unit_verdict(blocking, {"loader_unit": unit()}, 5.0, why_not_timed="another host",
                                           compared_with="B"))
    assert "blocks 1.00 times" in failure and "0.00 at B" in failure  # a count: judged on any host


def test_no_baseline_entry_is_none_recorded_and_none_measured_is_said():
    assert checks.unit_verdict(UNIT, None, 5.0, why_not_timed="", compared_with="REF v") == [
        Finding(NOT_COMPARED, "loader cost per sample not compared: REF v recorded none")]
    assert checks.unit_verdict(None, {"loader_unit": unit()}, 5.0, why_not_timed="", compared_with="REF v") == [
        Finding(NOT_COMPARED, "loader cost per sample not compared: none measured here")]
    assert checks.unit_verdict(None, None, 5.0, why_not_timed="", compared_with="REF v") == []


# --- in the workers -------------------------------------------------------------------------------


def batch(n, items_wall_us, collate_wall_us, switches=0):
    # (end, samples, items wall ns, items CPU ns, collate wall ns, collate CPU ns, switches, tensors): CPU times a tenth
    # of wall; a batch of two tensors
    return (5, n, items_wall_us * 1000, items_wall_us * 100, collate_wall_us * 1000, collate_wall_us * 100, switches, 2)


def test_blocks_are_counted_over_all_samples_not_averaged_over_batches():
    batches, blocks, _, _ = cost.in_workers([batch(10, 1000, 0, switches=10), batch(30, 3000, 0)])
    assert batches == 2 and blocks == pytest.approx(10 / 40)


def test_a_sample_in_the_workers_is_its_batchs_items_and_collate_wall_time():
    # per sample: (8,000 + 2,000) / 10 = 1,000 µs; (2,000 + 400) / 4 = 600 µs; (3,000 + 600) / 2 = 1,800 µs
    _, _, crowd, _ = cost.in_workers([batch(10, 8000, 2000), batch(4, 2000, 400), batch(2, 3000, 600)])
    assert crowd == pytest.approx(1000.0)


# --- parallelism ----------------------------------------------------------------------------------


def test_no_workers_count_as_one_process():
    line = cost.parallelism({"wall_us": 500.0, "crowd_us": 500.0}, 0, 2000.0)
    assert line == "1 worker(s) at 500 µs a sample could make 2,000 samples/s; the loader delivered 2,000 (100%)"


def test_parallelism_is_lost_only_below_the_share():
    assert "lost" not in cost.parallelism({"wall_us": 1000.0, "crowd_us": 3000.0}, 4, 3200.0)  # 80%
    assert "(79%): parallelism lost to CPU contention" in cost.parallelism({"wall_us": 1000.0, "crowd_us": 3000.0}, 4,
                                                                             3160.0)


def test_contention_is_a_sample_slower_in_the_workers_beyond_the_share():
    # 1.25x as long is what 80% of the rate allows: the main process holds it back, not contention
    assert cost.parallelism({"wall_us": 1000.0, "crowd_us": 1250.0}, 2, 1000.0).endswith(
        "parallelism lost to the main process (collecting, pinning and moving batches)")
    assert cost.parallelism({"wall_us": 1000.0, "crowd_us": 1260.0}, 2, 1000.0).endswith(
        "parallelism lost to CPU contention (a sample takes 1.26x as long in the workers as alone)")


# --- the unit's figures, validated ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["wall_us", "cpu_us", "blocks", "crowd_us", "cpu_ratio"])
@pytest.mark.parametrize("value", [-0.5, True, "1", None, 1e12])
def test_a_unit_figure_that_is_not_a_count_is_named(name, value):
    assert cost.validate_unit(unit(**{name: value})) == (
        f"'loader_unit' {name!r} is {value if isinstance(value, str) else repr(value)}, expected a non-negative number")


def test_unit_figures_from_zero_to_under_a_million_seconds_pass():
    assert cost.validate_unit(unit(cpu_us=0, blocks=0.0, crowd_us=999_999_999_999.0, cpu_ratio=0.0)) is None
    assert cost.validate_unit(unit(wall_us=0.5)) is None  # a sample under a microsecond: still a sample
    assert cost.validate_unit(unit(wait_us=-5.0)) is None  # less waiting than CPU time: round-off, not broken


@pytest.mark.parametrize("changed", [{"wall_us": 0.0}, {"wait_us": "1"}, {"wait_us": True}, {"wait_us": None}])
def test_a_unit_without_a_sample_time_or_a_waiting_number_is_named(changed):
    assert "expected a positive 'wall_us' and a number 'wait_us'" in cost.validate_unit(unit(**changed))


def test_a_unit_too_long_to_show_is_shortened():
    problem = cost.validate_unit(unit(blocks="b" * 100))
    assert problem == f"'loader_unit' 'blocks' is {'b' * 57}..., expected a non-negative number"
    problem = cost.validate_unit(["u" * 100])
    assert problem == f"'loader_unit' is {repr(['u' * 100])[:57]}..., expected an object"
    problem = cost.validate_unit(unit(wall_us=0.0))  # its repr is longer than 80 characters
    assert problem == f"'loader_unit' is {repr(unit(wall_us=0.0))[:77]}..., expected a positive 'wall_us' and a number 'wait_us'"


# --- what is recorded, and where the timings go -------------------------------------------------------


def test_a_unit_entry_keeps_counts_whole_and_figures_to_four_places():
    e = cost.UnitCost(100, 1000.123456, 900.5, 99.62346, 1.0000049, 5, 0.0123456, 1200.0, 0.0078125, 0.0).entry()
    assert e == {"samples": 100, "wall_us": 1000.1235, "cpu_us": 900.5, "wait_us": 99.6235, "cpu_ratio": 1.0,
                 "batches": 5, "blocks": 0.0123, "crowd_us": 1200.0, "shared": 0.0078, "alone_blocks": 0.0}
    assert isinstance(e["samples"], int) and isinstance(e["batches"], int)


def test_a_tests_timings_go_to_a_folder_named_safely_under_the_sessions(tmp_path):
    folder = cost.timer_folder(tmp_path, "perf_tests/test_ladder.py::test_ladder[pin_memory]")
    assert folder == tmp_path / "perf_tests_test_ladder.py__test_ladder_pin_memory_"
    assert cost.timer_folder(str(tmp_path), "a-b_c.d e") == tmp_path / "a-b_c.d_e"
    assert cost.timer_folder(tmp_path, "t" * 149 + "[x]").name == "t" * 147 + "_x_"  # the last 150 characters


# --- the timing hooks, on a clock that ticks by known steps ----------------------------------------


class Clock:
    """What the hooks read: each wall reading 1,000 ns after the last, each CPU reading 600 ns, each count of the
    thread's voluntary switches one more; a batch ends at 5,000 ns."""

    def __init__(self):
        self.wall = self.cpu = self.blocks = 0

    def perf_counter_ns(self):
        self.wall += 1000
        return self.wall

    def thread_time_ns(self):
        self.cpu += 600
        return self.cpu

    def switches(self):
        self.blocks += 1
        return self.blocks

    @staticmethod
    def monotonic_ns():
        return 5000


class Numbers(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return i


class Batched(Numbers):
    """A dataset that makes a batch's items itself (torch's fetcher calls `__getitems__` where it exists)."""

    def __init__(self):
        self.asked = []

    def __getitems__(self, indices):
        self.asked.append(list(indices))
        return [self[i] for i in indices]


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(cost, "time", c)
    monkeypatch.setattr(cost, "_switches", c.switches)
    return c


def test_a_batch_is_recorded_with_its_items_and_collate_timed_apart(tmp_path, clock):
    dl = DataLoader(Numbers(), batch_size=4)
    timer = cost.Timer(tmp_path / "a" / "b")  # its folder made, parents too
    assert timer.attach(dl)
    assert [b.tolist() for b in dl] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    # (end, samples, items wall, items CPU, collate wall, collate CPU, switches during items and collate, tensors)
    assert timer.records(0, 10**9) == [(5000, 4, 1000, 600, 1000, 600, 2, 1)] * 4
    dl.collate_fn([1, 2])  # a collate with no items made before it: no batch to record
    assert len(timer.records(0, 10**9)) == 4


def test_a_batch_at_either_end_of_the_window_is_in_it_and_a_record_half_written_is_not(tmp_path, clock):
    dl = DataLoader(Numbers(), batch_size=8)
    timer = cost.Timer(tmp_path / "t")
    timer.attach(dl)
    list(dl)
    assert len(timer.records(5000, 5000)) == 2 and timer.records(5001, 10**9) == timer.records(0, 4999) == []
    (written,) = (tmp_path / "t").glob("*.bin")
    assert written.name == f"{os.getpid()}.bin" and stat.S_IMODE(written.stat().st_mode) == 0o600
    with open(written, "ab") as f:
        f.write(b"\0\1\2")  # a record being written as the window is read
    assert len(timer.records(0, 10**9)) == 2


def test_a_datasets_own_batch_maker_is_the_one_timed_and_is_left_in_place(tmp_path, clock):
    dl = DataLoader(Batched(), batch_size=8)
    timer = cost.Timer(tmp_path / "t")
    assert cost.Timer(tmp_path / "t").attach(DataLoader(Numbers(), batch_size=2))  # a folder that exists: fine
    timer.attach(dl)
    assert [b.tolist() for b in dl] == [list(range(8)), list(range(8, 16))]
    assert dl.dataset.asked == [list(range(8)), list(range(8, 16))] and len(timer.records(0, 10**9)) == 2
    timer.detach()
    assert "__getitems__" not in vars(dl.dataset) and dl.dataset.__getitems__([3]) == [3]


def test_a_sink_goes_to_a_spawned_worker_as_its_folder_alone(tmp_path):
    sink = cost._Sink(str(tmp_path))
    sink.pending = (4, 1, 1, 1)
    again = pickle.loads(pickle.dumps(sink))
    assert (again.folder, again.pid, again.fd, again.pending) == (str(tmp_path), None, None, (0, 0, 0, 0))


def test_a_timer_says_nothing_until_asked_and_detaches_without_having_attached(tmp_path):
    timer = cost.Timer(tmp_path / "t")
    assert (timer.why_not, timer.alone, timer.loader) == ("", None, None)
    timer.detach()


def test_a_dataset_without_a_dict_is_not_timed_and_says_why(tmp_path):
    class Slots:  # no __dict__ to set a batch maker in
        __slots__ = ()

        def __len__(self):
            return 4

        def __getitem__(self, i):
            return i

    dl = DataLoader(Slots(), batch_size=4)
    timer = cost.Timer(tmp_path / "t")
    assert not timer.attach(dl)
    assert timer.why_not == f"{HERE}.test_a_dataset_without_a_dict_is_not_timed_and_says_why.<locals>.Slots has no " \
                            "__dict__ (__slots__): its items cannot be timed"


# --- a sample alone -------------------------------------------------------------------------------


class Seen(Numbers):
    """Which samples were made, and on how many threads torch ran while they were."""

    def __init__(self, nap_s=0.0):
        self.seen, self.threads, self.nap_s = [], set(), nap_s

    def __len__(self):
        return 1000

    def __getitem__(self, i):
        self.seen.append(i)
        self.threads.add(torch.get_num_threads())
        time.sleep(self.nap_s)
        return i


def test_a_sample_alone_is_made_from_fixed_indices_on_one_thread_in_whole_chunks():
    data, threads = Seen(), torch.get_num_threads()
    samples, *_ = cost.solo(data, default_collate, seconds=0.0)
    stride, chunk = cost.STRIDE, cost.CHUNK
    assert samples == cost.SOLO_LEAST == 2 * chunk
    assert data.seen == [k * stride % 1000 for k in range(4)] + [(i + k) * stride % 1000 for i in (0, chunk)
                                                                 for k in range(chunk)]
    assert data.threads == {1} and torch.get_num_threads() == threads


def test_a_sample_alone_is_timed_for_its_seconds_up_to_its_most(monkeypatch):
    # 2 s of 1 ms naps and their yardsticks: many times SOLO_LEAST, so a host three times busier still times past it
    assert cost.solo(Seen(nap_s=0.001), default_collate, seconds=2.0)[0] > 2 * cost.SOLO_LEAST
    monkeypatch.setattr(cost, "SOLO_MOST", 3 * cost.CHUNK)
    assert cost.solo(Seen(), default_collate, seconds=60.0)[0] == 3 * cost.CHUNK


def test_a_sample_alone_is_in_microseconds_and_its_cpu_time_in_yardsticks():
    samples, wall, cpu, wait, ratio, _ = cost.solo(Seen(nap_s=0.001), default_collate, seconds=0.0)
    assert 1000 <= wall < 10_000 and 900 < wait < wall and 0 <= cpu < 500  # a 1 ms nap a sample, little CPU
    assert 0 < ratio < 1  # a nap's CPU time is a small part of a yardstick's


def test_the_yardstick_is_one_fixed_image_resized_and_made_a_normalised_tensor():
    one, two = cost.Yardstick(), cost.Yardstick()
    assert one.image.size == (64, 64) and one.image.mode == "RGB" and one.image.tobytes() == two.image.tobytes()
    made = one()
    assert made.shape == (3, 224, 224) and made.dtype == torch.float32 and -0.5 <= made.min() < made.max() <= 0.5


# --- observe: described, timed where it can be ----------------------------------------------------


def test_observe_describes_the_loader_and_times_it_only_where_given_a_folder(tmp_path):
    dl = DataLoader(Numbers(), batch_size=4)
    members = SimpleNamespace(loader=dl, loader_step=None)
    assert cost.observe(members, None, "w") == (described.describe(dl), None, None)
    what, timer, note = cost.observe(members, tmp_path / "t", "w")
    assert what == described.describe(dl) and note is None
    assert timer.loader is dl and "__getitems__" in vars(dl.dataset) and len(timer.alone) == 6  # attached, timed alone
    timer.detach()


def test_observe_says_why_a_loader_is_not_timed_and_what_a_loader_step_needs(tmp_path):
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(4))

    dl = DataLoader(Stream(), batch_size=2)
    what, timer, note = cost.observe(SimpleNamespace(loader=dl, loader_step=None), tmp_path / "t", "w")
    assert what == described.describe(dl) and timer is None
    assert note == "loader cost per sample not timed: an iterable dataset, or no batches (batch_size=None): torch's " \
                   "fetcher has no per-batch hook to time"
    # batches made by a batch sampler (Accelerate's loader, the Hugging Face Trainer's) are timed: no batch_size there
    sampled = DataLoader(Numbers(), batch_sampler=BatchSampler(range(8), 4, drop_last=False))
    assert sampled.batch_size is None
    what, timer, note = cost.observe(SimpleNamespace(loader=sampled, loader_step=None), tmp_path / "s", "w")
    assert note is None and timer.loader is sampled and len(timer.alone) == 6
    timer.detach()
    with pytest.raises(described.Undescribable, match=r"^my step's loader is builtins\.generator, not a torch"):
        cost.observe(SimpleNamespace(loader=(i for i in range(3)), loader_step=None), None, "my step")
    with pytest.raises(described.Undescribable) as e:
        cost.observe(SimpleNamespace(loader=None, loader_step=lambda: None), None, "the workload")
    assert str(e.value) == ("the workload has a loader_step but no `loader`: give it the DataLoader its batches come "
                            "from, so that the loader's settings are compared and its samples timed")
