"""The sync verdicts (syncs/checks.py) as plain functions: each returns None where all is well, and a message naming what
changed."""


from types import SimpleNamespace

import pytest

from torch_perf_suite.findings import FAILED, failures
from torch_perf_suite.syncs import SyncCount, SyncSource, checks


def counted(n, library=""):
    c = SyncCount(steps=2)
    c.sources[SyncSource("cudaStreamSynchronize", "aten::item", "train.py:9 in step", library)] = n
    return c


def test_a_failed_sync_says_in_brief_where_the_users_code_made_it_from_a_marked_site_or_the_stack():
    """Its brief and the user's file:line (Finding.where) come from the count, in either form a source names its line:
    a marked site's "train.py:9 in step", the profiler's stack "fixtures/training.py(109): prepare"."""
    [found] = checks.syncs(counted(2), per_step=0)
    assert (found.brief, found.where) == ("1.00 host-device syncs per step, expected 0", "train.py:9")
    stack = SyncCount(steps=2)
    stack.sources[SyncSource("cudaStreamSynchronize", "aten::copy_", "(not seen)", "")] = 4  # listed first, no line
    stack.sources[SyncSource("cudaMemcpyAsync", "aten::copy_", "fixtures/training.py(109): prepare (line where the "
                                                                "function starts)", "")] = 2
    [found] = checks.syncs(stack, per_step=0)
    assert found.where == "fixtures/training.py:109"


def test_syncs_exact_at_least_and_from_a_library():
    assert checks.syncs(counted(0), per_step=0) == []  # nothing failed: no finding
    assert [f.outcome for f in checks.syncs(counted(2), per_step=0)] == [FAILED]
    assert failures(checks.syncs(counted(2), per_step=0)).startswith(
        "measured 1.00 host-device syncs per step (2 in 2 profiled steps), expected 0 (a new sync appeared):")
    assert failures(checks.syncs(counted(2), per_step=2)).endswith("(fewer syncs than this scenario documents):\n"
                                                                   + counted(2).describe())
    assert "the pitfall this scenario documents no longer syncs with torch 9" in failures(checks.syncs(
        counted(0), at_least=1, versions="torch 9"))
    assert failures(checks.syncs(counted(2, "torchmetrics/x.py:1"), at_least=1, from_library="torchmetrics/")) is None
    assert "expected every sync to come from 'torchmetrics/'" in failures(checks.syncs(counted(2), at_least=1,
                                                                                       from_library="torchmetrics/"))
    with pytest.raises(TypeError):
        checks.syncs(counted(0))


def test_a_pitfall_is_bounded_on_both_sides_by_what_its_entry_recorded():
    """at_least=1 alone would pass a pitfall whose syncs doubled."""
    assert failures(checks.syncs(counted(4), at_least=1, at_most=2.0)) is None  # 2 a step, 2 recorded
    assert failures(checks.syncs(counted(6), at_least=1, at_most=2.0, compared_with="REF HEAD (abc)")) == (
        "measured 3.00 host-device syncs per step (6 in 2 profiled steps), 2 recorded by REF HEAD (abc): the pitfall "
        "syncs more than it did (a new sync beside it)\n" + counted(6).describe())
    assert failures(checks.syncs(counted(6), at_least=1)) is None  # nothing recorded: the lower bound only


def test_syncs_as_many_as_documented_pass_and_a_wrong_call_names_both_options():
    assert failures(checks.syncs(counted(2), per_step=1)) is None  # 2 syncs in 2 steps
    with pytest.raises(TypeError, match=r"^assert_syncs takes exactly one of per_step= and at_least=$"):
        checks.syncs(counted(0), per_step=0, at_least=1)


def test_syncs_from_another_library_are_listed_one_a_line():
    c = counted(2, "torchmetrics/x.py:1")
    c.sources[SyncSource("cudaMemcpyAsync", "aten::copy_", "train.py:12 in step", "")] = 2
    c.sources[SyncSource("cudaStreamSynchronize", "aten::nonzero", "train.py:14 in step", "")] = 2
    stray = [s for s in c.sources if not s.library_line]
    assert failures(checks.syncs(c, at_least=1, from_library="torchmetrics/")) == (
        "measured 3.00 host-device syncs per step (6 in 2 profiled steps); expected every sync to come from "
        f"'torchmetrics/', these do not:\n{stray[0].describe()}\n{stray[1].describe()}")


def test_a_sync_failure_says_which_debugging_switches_were_on_in_its_steps():
    anomaly = "anomaly detection (torch.autograd.set_detect_anomaly(True): every backward op checked for NaN, a sync each)"
    [found] = checks.with_switches(checks.syncs(counted(282), per_step=0), [anomaly])
    assert found.text.startswith("measured 141.00 host-device syncs per step (282 in 2 profiled steps), expected 0")
    assert found.text.endswith(f"\n  debugging switched on in these steps, whose checks sync too: {anomaly}")
    assert checks.with_switches(checks.syncs(counted(0), per_step=0), [anomaly]) == []  # nothing failed: nothing said
    assert checks.with_switches(checks.syncs(counted(2), per_step=0), []) == checks.syncs(counted(2), per_step=0)


def test_a_smoke_runs_host_reads_as_many_as_refs_pass_and_one_more_fails_naming_its_line():
    """Against REF's smoke record (no GPU): the same reads a step pass, even where REF read the same value elsewhere;
    one read more fails with the line whose reads grew."""
    was = {"per_step": 1.0, "lines": {"train.py:40 in step": 1.0}}
    listed = SimpleNamespace(describe=lambda: "listing", where="train.py:40")  # the head's reads (a SyncCount)
    assert checks.host_reads_against({"per_step": 1.0, "lines": {"train.py:41 in step": 1.0}}, was, "REF HEAD (abc)",
                                     listed) == []
    [found] = checks.host_reads_against({"per_step": 2.0, "lines": {"train.py:40 in step": 1.0, "loss.py:7 in f": 1.0}},
                                        was, "REF HEAD (abc)", listed)
    assert found.outcome == FAILED and found.text.startswith(
        "measured 2.00 host reads per step with no GPU, 1.00 at REF HEAD (abc) (+1.00): each reads a tensor's value on "
        "the host, which on a GPU is a host-device sync; reads a step by line, most grown first:\n")
    assert "loss.py:7 in f" in found.text and found.text.endswith("\nlisting")
    assert (found.brief, found.where) == ("2.00 host reads per step with no GPU, 1.00 at REF HEAD (+1.00)", "train.py:40")


def test_a_dtype_new_to_the_step_or_taking_a_larger_share_fails_and_more_ops_in_its_own_dtype_pass():
    """An op more in an all-float32 step (`* 1.0` in a user's loss: 72 float32 ops a step against 70) failed as "the
    step computes in another dtype"; a share that moved is what a change of precision is."""
    assert checks.dtypes_against({"float32": 72.0}, {"float32": 70.0}, "REF") == []
    [moved] = checks.dtypes_against({"float32": 70.0, "float64": 1.0}, {"float32": 70.0}, "REF")  # a float64 constant
    assert moved.outcome == FAILED and "float64 1.00 a step, 0.00 at REF" in moved.text
    autocast_off = checks.dtypes_against({"float32": 180.0, "bfloat16": 20.0}, {"float32": 40.0, "bfloat16": 160.0}, "REF")
    assert [f.outcome for f in autocast_off] == [FAILED] and "float32 180.00 a step, 40.00 at REF" in autocast_off[0].text
    assert checks.dtypes_against({"float32": 42.0, "bfloat16": 160.0}, {"float32": 40.0, "bfloat16": 160.0}, "REF") == []
    [multiplied] = checks.dtypes_against({"float32": 1000.0, "float64": 20.0}, {"float32": 1000.0, "float64": 5.0}, "REF")
    assert "float64 20.00 a step, 5.00 at REF" in multiplied.text  # under 2 points of share, but four times as many


def test_dtypes_that_grew_are_each_named_in_order_beside_all_the_steps_dtypes():
    [moved] = checks.dtypes_against({"float64": 30.0, "float16": 10.0, "float32": 60.0}, {"float32": 100.0}, "REF")
    assert moved.text == (
        "the step computes in another dtype: ops a step by the dtype they make grew: float16 10.00 a step, 0.00 at REF; "
        "float64 30.00 a step, 0.00 at REF (all dtypes now: float16 10.00, float32 60.00, float64 30.00): a model, a "
        "tensor or a loss moved to another precision (.double(), a float64 constant, autocast off)")


@pytest.mark.parametrize("now, recorded, fails", [
    # a dtype's share up 40 points: its ops must still grow past 1% (101 of 100) ...
    ({"float64": 101.0, "float32": 100.0}, {"float64": 100.0, "float32": 900.0}, False),
    ({"float64": 150.0, "float32": 100.0}, {"float64": 100.0, "float32": 900.0}, True),
    # ... and past half an op (10.5 of 10), whichever is more
    ({"float64": 10.5, "float32": 10.0}, {"float64": 10.0, "float32": 990.0}, False),
    ({"float64": 10.6, "float32": 10.0}, {"float64": 10.0, "float32": 990.0}, True),
    # its ops grown: a share up exactly 2 points (2.75% to 4.75%) and not doubled is no move ...
    ({"float64": 19.0, "float32": 381.0}, {"float64": 11.0, "float32": 389.0}, False),
    ({"float64": 60.0, "float32": 340.0}, {"float64": 40.0, "float32": 360.0}, True),  # 10% to 15%: 5 points
    # ... nor one exactly doubled under 2 points (1% to 2%); two and a half times is
    ({"float64": 20.0, "float32": 980.0}, {"float64": 10.0, "float32": 990.0}, False),
    ({"float64": 25.0, "float32": 975.0}, {"float64": 10.0, "float32": 990.0}, True),
])
def test_a_dtype_fails_past_both_its_ops_margin_and_its_share_strictly(now, recorded, fails):
    assert (failures(checks.dtypes_against(now, recorded, "REF")) is not None) == fails
