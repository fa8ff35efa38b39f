"""A sample's CPU time timed by turns with REF's (turns.py): the verdict as a plain function, and the two processes
end to end on two small trees whose loaders differ only in their code."""

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from torch_perf_suite.findings import FAILED, PASSED, failures
from torch_perf_suite.loader import turns

LOADER = '''
import os


class Busy:
    def __len__(self):
        return 1000

    def __getitem__(self, index):
        {item}
        total = 0
        for i in range({work}):
            total += i * index
        return total


def parts(crash=False):
    {body}
    return Busy(), list
'''


def tree(root, work=20_000, body="pass", item="pass"):
    root.mkdir()
    (root / "toyloader.py").write_text(LOADER.format(work=work, body=body, item=item))
    return root


def by_turns(pairs, again=None):
    return replace(turns.from_pairs(pairs), again=again and turns.from_pairs(again))


PRELOAD = turns.PRELOAD


@pytest.fixture(autouse=True)
def light(monkeypatch):
    """The toy loaders import nothing: their processes start without torch and torchvision (turns.PRELOAD), which
    take seconds a process on the 2-core machine; only the test of the worker script keeps them. And each start would
    spawn a reserve pair beside the first: only the test of the reserve keeps it."""
    monkeypatch.setattr(turns, "PRELOAD", ())
    monkeypatch.setattr(turns, "RESERVE", False)


# CPU nanoseconds of a turn of 32 samples at REF and at the head, 40 pairs
SAME = [(1_000_000, 1_000_000 + d) for d in (-4000, -2000, 0, 2000, 4000) * 8]
MORE = [(1_000_000, 1_060_000 + d) for d in (-4000, -2000, 0, 2000, 4000) * 8]  # 6% more
NOISY = [(1_000_000, h) for h in (700_000, 1_400_000) * 20]  # a median of 6% more, an interval that holds 1
EDGE = [(1_000_000, 1_035_000 + d) for d in (-30000, -15000, 0, 15000, 30000) * 8]  # 3.5% more, the interval's low end
# +2%: past the tolerance, and past the spread by less than the tolerance


@pytest.mark.parametrize("pairs, again, fails", [
    (SAME, None, False),
    (MORE, None, True),
    (MORE, MORE, True),  # measured again: 6% more again
    (MORE, SAME, False),  # measured again: the rise was a passing disturbance
    (NOISY, None, False),  # past the tolerance, but not past the pairs' spread
    (EDGE, None, True),  # just past both: the interval's low end above 1 is enough
])
def test_more_cpu_time_a_sample_fails_past_the_tolerance_and_the_spread_and_again(pairs, again, fails):
    found = turns.verdict(by_turns(pairs, again), 3.0, "REF")
    assert found.outcome == (FAILED if fails else PASSED)
    if fails and pairs is MORE:
        assert found.text.startswith("loader CPU time a sample 33.1 µs, 31.2 at REF, timed by turns on one core: +6.0% ")
    if fails:
        assert "allowed +3%" in found.text and "more CPU work per sample in the dataset" in found.text
    else:
        assert found.text.startswith("loader CPU time a sample ") and "allowed +3%" in found.text


def test_the_figure_is_the_median_of_each_pairs_ratio_not_the_ratio_of_the_medians():
    drifting = [(1000 * k, 1050 * k) for k in (1, 2, 3, 4, 5, 6, 7)]  # the host slows both sides alike
    assert turns.from_pairs(drifting).ratio == pytest.approx(1.05)
    assert turns.from_pairs(drifting).pairs == 7


@pytest.mark.slow  # starts the two processes
def test_two_trees_timed_by_turns_tell_more_work_from_the_same(tmp_path):
    ref, same, more = tree(tmp_path / "ref"), tree(tmp_path / "same"), tree(tmp_path / "more", work=40_000)
    source = ("toyloader:parts", {})
    with turns.Turns(ref, same, seconds=0.3) as timed:
        alike = timed.time(source)
    with turns.Turns(ref, more, seconds=0.3) as timed:
        heavier = timed.time(source)
    # two processes of one tree differ for as long as they live: 11.6% apart once on CI's two loaded cores
    assert abs(alike.rise_pct) < 25 and alike.pairs >= turns.LEAST_PAIRS
    assert heavier.rise_pct > 30, heavier  # twice the loop: a margin for a shared CI core
    assert failures(turns.failure(heavier, 3.0, "REF")) is not None


@pytest.mark.slow  # starts the two processes
def test_started_ahead_settled_with_their_reserve_then_measured_again_in_fresh_processes(tmp_path, monkeypatch):
    """The session starts the processes before REF's run (which imports torch too) and goes on; they are settled, the
    reserve with them, before a window; a measurement again is made in the reserve's fresh processes, not in those that
    timed the loader first, and with no reserve left in a new pair started with a reserve beside it."""
    pids = "open(os.path.join(os.path.dirname(__file__), 'pids'), 'a').write(f'{os.getpid()}\\n')"
    ref = tree(tmp_path / "ref", body=pids)
    (slow := tmp_path / "slow").mkdir()
    (slow / "slowimport.py").write_text("import time\ntime.sleep(1.5)\n")  # as torch's import takes seconds
    monkeypatch.setenv("PYTHONPATH", str(slow))
    monkeypatch.setattr(turns, "PRELOAD", ("slowimport",))
    monkeypatch.setattr(turns, "RESERVE", True)
    with turns.Turns(ref, tree(tmp_path / "head"), seconds=0.1) as timed:
        began = time.perf_counter()
        timed.start()
        assert time.perf_counter() - began < 1.0  # not waiting for their imports
        timed.settle()  # before the first window: the reserve's imports are done too
        assert time.perf_counter() - began >= 1.5
        assert all(proc.poll() is None for proc in timed._procs.values()) and not timed._waiting
        reserve = {side: proc.pid for side, proc in timed._reserve[0].items()}
        assert not timed._reserve_waiting and all(proc.poll() is None for proc in timed._reserve[0].values())
        first = {side: proc.pid for side, proc in timed._procs.items()}
        assert timed.time(("toyloader:parts", {})).pairs >= turns.LEAST_PAIRS
        timed.time(("toyloader:parts", {}))
        timed.time(("toyloader:parts", {}), fresh=True)
        assert {side: proc.pid for side, proc in timed._procs.items()} == reserve != first and timed._reserve is None
        timed.time(("toyloader:parts", {}), fresh=True)  # no reserve left: a new pair, and a reserve beside it
        assert set(reserve.values()).isdisjoint(proc.pid for proc in timed._procs.values()) and timed._reserve
    built_in = (ref / "pids").read_text().split()  # REF's loader, built in each process that timed it
    assert built_in[0] == built_in[1] == str(first["REF"]) and built_in[2] == str(reserve["REF"]) != built_in[3]


@pytest.mark.slow  # starts the two processes
def test_both_sides_time_on_one_core_from_a_worker_script_in_the_working_tree_with_a_loader_that_prints(tmp_path,
                                                                                                       monkeypatch):
    """Both make their samples on the same one core, torch and torchvision imported before the loader is built; the
    worker script lying in the working tree (as in the suite's own repository, where the harness is the project's) is
    not taken for its module; a loader's prints do not break the protocol."""
    write = "open(os.path.join(os.path.dirname(__file__), 'cores'), 'w').write(str(sorted(os.sched_getaffinity(0))))"
    monkeypatch.setattr(turns, "PRELOAD", PRELOAD)
    ref = tree(tmp_path / "ref", item=write, body="import sys; assert {'torch', 'torchvision'} <= set(sys.modules)")
    head = tree(tmp_path / "head", item=write, body="print('building the loader')")
    (head / "torch_perf_suite").mkdir()
    monkeypatch.setattr(turns, "WORKER", head / "torch_perf_suite" / turns.WORKER.name)
    turns.WORKER.write_text(Path(turns.__file__).with_name("turn_worker.py").read_text())
    with turns.Turns(ref, head, seconds=0.1) as timed:
        assert timed.time(("toyloader:parts", {})).pairs >= turns.LEAST_PAIRS
    assert (ref / "cores").read_text() == (head / "cores").read_text() == str([max(os.sched_getaffinity(0))])


@pytest.mark.slow  # starts the two processes
def test_started_before_the_trees_exist_the_processes_time_the_trees_named_later(tmp_path):
    """The session starts them before REF's tree is written out; `aim` names the trees, each side builds from its own
    (the head's loader does twice the work), and a process never builds from the other tree."""
    with turns.Turns(seconds=0.1) as timed:
        timed.start()
        ref, head = tree(tmp_path / "ref"), tree(tmp_path / "head", work=40_000)
        with pytest.raises(RuntimeError, match="before Turns.aim"):
            timed.time(("toyloader:parts", {}))
        timed.aim(ref, head)
        assert timed.time(("toyloader:parts", {})).ratio > 1.5
        timed.aim(head, ref)
        with pytest.raises(turns.TurnsUnavailable, match="this process builds .*ref's loaders"):
            timed.time(("toyloader:parts", {}))


@pytest.mark.slow  # starts the two processes
def test_a_loader_that_cannot_be_built_on_one_side_says_which_and_why_and_the_next_one_is_timed(tmp_path):
    ref = tree(tmp_path / "ref")
    head = tree(tmp_path / "head", body="if crash: raise ValueError('no data folder')")
    with turns.Turns(ref, head, seconds=0.1) as timed:
        with pytest.raises(turns.TurnsUnavailable, match=r"^toyloader:parts could not be built by turns: at the working "
                                                     r"tree: ValueError: no data folder$"):
            timed.time(("toyloader:parts", {"crash": True}))
        assert timed.time(("toyloader:parts", {"crash": False})).pairs >= turns.LEAST_PAIRS


@pytest.mark.slow  # starts the two processes
def test_a_factory_imported_from_outside_refs_tree_is_refused_not_timed_against_itself(tmp_path, monkeypatch):
    """An editable install of the user's package would import the working tree's code on REF's side too."""
    elsewhere, head = tree(tmp_path / "elsewhere"), tree(tmp_path / "head")
    (ref := tmp_path / "ref").mkdir()  # REF's tree has no such module: it comes from the path
    monkeypatch.setenv("PYTHONPATH", str(elsewhere))
    with turns.Turns(ref, head, seconds=0.1) as timed:
        with pytest.raises(turns.TurnsUnavailable, match=r"at REF: ValueError: toyloader is imported from .*elsewhere/"
                                                     r"toyloader.py, not from the tree .*ref \(an editable install"):
            timed.time(("toyloader:parts", {}))


@pytest.mark.slow  # starts the two processes
def test_a_process_that_dies_is_said_with_its_error_and_no_later_loader_is_timed(tmp_path):
    ref, head = tree(tmp_path / "ref"), tree(tmp_path / "head", body="if crash: os._exit(3)")
    with turns.Turns(ref, head, seconds=0.1) as timed:
        with pytest.raises(turns.TurnsUnavailable, match=r"the process timing the working tree's loader by turns stopped"):
            timed.time(("toyloader:parts", {"crash": True}))
        with pytest.raises(turns.TurnsUnavailable, match=r"stopped.*; loader CPU time not timed by turns$"):
            timed.time(("toyloader:parts", {"crash": False}))


@pytest.mark.slow  # starts the two processes
def test_a_process_that_hangs_is_said_after_the_timeout_not_waited_on(tmp_path, monkeypatch):
    ref, head = tree(tmp_path / "ref"), tree(tmp_path / "head", body="import time; time.sleep(3600)")
    with turns.Turns(ref, head, seconds=0.1) as timed:
        timed._start()  # importing torch: under the default timeout
        monkeypatch.setattr(turns, "READ_TIMEOUT_S", 1)
        with pytest.raises(turns.TurnsUnavailable, match=r"the process timing the working tree's loader by turns said "
                                                     r"nothing in 1 s"):
            timed.time(("toyloader:parts", {}))


@pytest.mark.slow  # starts the two processes
def test_refs_loader_importing_the_working_trees_own_module_is_refused(tmp_path, monkeypatch):
    """The factory is REF's, but a module it imports comes from the working tree (on the path: a src/ folder, an
    editable install): REF would be timed with the head's code."""
    ref, head = tree(tmp_path / "ref", body="import helper"), tree(tmp_path / "head", body="import helper")
    (head / "helper.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(head))
    with turns.Turns(ref, head, seconds=0.1) as timed:
        with pytest.raises(turns.TurnsUnavailable, match=r"at REF: ValueError: helper is imported from .*head/helper.py, the "
                                                     r"other side's tree"):
            timed.time(("toyloader:parts", {}))


@pytest.mark.parametrize("loader, said", [(object(), True), (None, False)])
def test_a_loader_timed_without_a_loader_source_says_it_was_not_timed_by_turns(loader, said):
    from types import SimpleNamespace as NS

    from torch_perf_suite.fixture.measuring import Measuring

    session = NS(ref_state=NS(turns=object(), ref=NS(status={"t": "passed"})), shared={})  # --perf-against, REF recorded the test
    measuring = Measuring(session, "t", settings=None, smoke=False, pedantic=None, tmp_path=None, info={})
    figure, note = measuring._by_turns(NS(members=NS(loader_source=None, loader=loader)), keys={})
    assert figure is None
    assert (note is not None and note.startswith("loader CPU time not timed by turns: the workload names no "
                                                 "loader_source")) == said


@pytest.mark.slow  # starts the two processes
def test_a_process_that_died_importing_is_said_by_the_loaders_note_not_by_the_window(tmp_path, monkeypatch):
    from types import SimpleNamespace as NS

    from torch_perf_suite.fixture.measuring import Measuring

    ref, head = tree(tmp_path / "ref"), tree(tmp_path / "head")
    monkeypatch.setattr(turns, "WORKER", tmp_path / "missing_worker.py")
    timed = turns.Turns(ref, head, seconds=0.1)
    timed.start()
    session = NS(ref_state=NS(turns=timed))
    Measuring(session, "t", settings=None, smoke=False, pedantic=None, tmp_path=None, info={})._turns_settled()
    with pytest.raises(turns.TurnsUnavailable, match="the process timing .* stopped"):
        timed.time(("toyloader:parts", {}))


@pytest.mark.slow  # starts the two processes
def test_a_process_that_does_not_return_when_told_to_end_is_killed_within_the_pairs_grace(tmp_path):
    """A loader that leaves a thread running (a prefetcher, a pool) keeps its process alive past the end of its input:
    the session's end waits END_S for the pair at most, not a timeout a process."""
    lingering = "import threading; threading.Thread(target=__import__('time').sleep, args=(60,)).start()"
    ref, head = tree(tmp_path / "ref", body=lingering), tree(tmp_path / "head", body=lingering)
    timed = turns.Turns(ref, head, seconds=0.1)
    assert timed.time(("toyloader:parts", {})).pairs >= turns.LEAST_PAIRS
    procs = list(timed._procs.values())
    began = time.perf_counter()
    timed.close()
    assert time.perf_counter() - began < turns.END_S + 3
    assert all(proc.returncode is not None for proc in procs)


def timed(ratio, low=1.25, high=1.75, again=None):
    return turns.ByTurns(40, 1234.5, 1851.7, ratio, low, high, again)


def test_the_figure_is_a_samples_median_cpu_time_on_each_side_and_the_median_ratio_within_the_pairs_range():
    # three pairs of 32 samples: 1.0 µs a sample at REF; the head's turns 1.1, 1.0 and 1.05 times REF's
    found = turns.from_pairs([(32_000, 35_200), (64_000, 64_000), (32_000, 33_600)])
    assert (found.pairs, found.ref_us, found.head_us, found.ratio) == (3, 1.0, 1.1, 1.05)
    assert (found.low, found.high) == (1.0, 1.1)  # fewer than 6 pairs: the interval is their whole range
    assert found.again is None


def test_a_turn_of_no_measurable_cpu_time_at_ref_is_divided_by_one_nanosecond():
    found = turns.from_pairs([(0, 3), (0, 3), (1000, 1100)])
    assert found.ratio == 3.0 and found.high == 3.0


def test_the_line_says_both_sides_the_rise_its_interval_and_the_pairs():
    assert timed(1.5).line("REF") == ("loader CPU time a sample 1,851.7 µs, 1,234.5 at REF, timed by turns on one core: "
                                      "+50.0% (95% interval +25.0% to +75.0%, 40 pairs of 32 samples)")


def test_a_rise_is_past_the_tolerance_and_past_the_pairs_spread_both_strictly():
    assert turns.rose(timed(1.5), 49.9)
    assert not turns.rose(timed(1.5), 50)  # exactly the tolerance
    assert not turns.rose(timed(1.5, low=1.0), 10)  # the interval reaches 1: the spread explains it
    assert turns.rose(timed(1.5, low=1.5), 10)
    assert not turns.rose(timed(1.05, low=1.01), 10)  # past the spread, within the tolerance


def test_a_rise_fails_in_one_line_naming_the_tolerance():
    (found,) = turns.failure(timed(1.5), 10, "REF")
    assert found.outcome == FAILED
    assert found.text == ("loader CPU time a sample 1,851.7 µs, 1,234.5 at REF, timed by turns on one core: +50.0% (95% "
                          "interval +25.0% to +75.0%, 40 pairs of 32 samples); allowed +10%: more CPU work per sample "
                          "in the dataset, its transforms or the collate")
    assert turns.failure(timed(1.5), 50, "REF") == []


def test_measured_again_it_fails_only_past_the_tolerance_again_and_says_the_second_figure():
    (found,) = turns.failure(timed(1.5, again=timed(1.2)), 10, "REF")
    assert found.text.endswith("40 pairs of 32 samples); allowed +10%; measured again: +20.0%: more CPU work per sample "
                               "in the dataset, its transforms or the collate")
    assert turns.failure(timed(1.5, again=timed(1.5)), 50, "REF") == []  # did not rise the first time
    assert turns.failure(timed(1.75, again=timed(1.5)), 50, "REF") == []  # again exactly the tolerance: passes


def test_a_verdict_that_passes_says_the_line_the_second_figure_and_the_tolerance():
    found = turns.verdict(timed(1.5, again=timed(1.05)), 10, "REF")
    assert found.outcome == PASSED
    assert found.text == ("loader CPU time a sample 1,851.7 µs, 1,234.5 at REF, timed by turns on one core: +50.0% (95% "
                          "interval +25.0% to +75.0%, 40 pairs of 32 samples); measured again: +5.0%; allowed +10%")
    assert turns.verdict(timed(1.05), 10, "REF").text.endswith("40 pairs of 32 samples); allowed +10%")
    failed = turns.verdict(timed(1.5), 10, "REF")
    assert failed.outcome == FAILED and failed.text.startswith("loader CPU time a sample 1,851.7 µs, 1,234.5 at REF,")
    assert failed.text.endswith("in the dataset, its transforms or the collate")
