"""baselines.py's validation at its edges: the bounds are inclusive ("at most", "within this factor"), every table of
'counts' is checked, optional fields may be absent, and a message names the field and the value it found."""

import pytest

from torch_perf_suite import store
from torch_perf_suite.records import baselines
from torch_perf_suite.records.baselines import FAR, MAX_MEMORY_GB, MAX_SAMPLES_PER_S, SCHEMA

GPU = "NVIDIA H200"
ENV = {"gpu": GPU, "driver": "580", "cuda": "13.0", "torch": "2.11", "host": {"cpu": "Xeon", "cores": 16}}


def part(sps=1000.0, rounds=None, spread=0.5):
    return {"samples_per_s": sps, "spread_pct": spread, "rounds": rounds or [0.99 * sps, sps, 1.01 * sps]}


def entry(**changes):
    return {"parts": {"pipeline": part(), "gpu": part(2000.0)}, "syncs_per_step": 0.0, "peak_mem_gb": 1.0, "env": ENV,
            **changes}


def problem(e):
    return baselines._validate({"schema": SCHEMA, "gpu": GPU, "tests": {"t": e}}, GPU)


def test_the_sound_entry_these_tests_change_is_accepted():
    assert problem(entry()) is None


# --- inclusive bounds ---------------------------------------------------------------------------------


def test_samples_per_s_exactly_at_the_ceiling_is_accepted_and_above_it_is_not():
    at = {"samples_per_s": MAX_SAMPLES_PER_S, "spread_pct": 0.0, "rounds": [MAX_SAMPLES_PER_S]}
    assert problem(entry(parts={"gpu": at})) is None
    over = {"samples_per_s": 2e9, "spread_pct": 0.0, "rounds": [2e9]}
    assert problem(entry(parts={"gpu": over})) == (
        "entry 't': part 'gpu': 'samples_per_s' is 2e+09, more than any GPU does (at most 1e+09)")


def test_peak_memory_exactly_at_the_ceiling_is_accepted():
    assert problem(entry(peak_mem_gb=MAX_MEMORY_GB)) is None


def test_step_peak_bytes_is_held_to_the_memory_ceiling_in_bytes():
    ceiling = MAX_MEMORY_GB * 10**9  # 10,000 GB: 1e13 bytes
    assert problem(entry(counts={"step_peak_bytes": ceiling})) is None
    message = problem(entry(counts={"step_peak_bytes": ceiling + 1}))
    assert message is not None and message.startswith("entry 't': 'counts' 'step_peak_bytes' is 1e+13")


def test_the_spread_is_a_percentage_not_held_to_the_samples_per_s_ceiling():
    assert problem(entry(parts={"gpu": part(2000.0, spread=2e9)})) is None


@pytest.mark.parametrize("rounds", [[1500.0, 2000.0], [1000.0, 1200.0]])
def test_a_number_exactly_far_from_its_rounds_is_still_theirs(rounds):
    low, high = min(rounds) / FAR, max(rounds) * FAR  # 1,000 and 1,800: FAR is 1.5
    assert problem(entry(parts={"gpu": part(low, rounds)})) is None
    assert problem(entry(parts={"gpu": part(high, rounds)})) is None
    assert "is far outside its own rounds" in problem(entry(parts={"gpu": part(high * 1.001, rounds)}))
    assert "is far outside its own rounds" in problem(entry(parts={"gpu": part(low * 0.999, rounds)}))


# --- counts --------------------------------------------------------------------------------------------


def test_counts_without_step_peak_bytes_are_accepted():
    """A test that counted kernels but did not measure the steps' memory (a loader alone counts nothing)."""
    assert problem(entry(counts={"kernels_per_step": {"gemm": 3.0}, "copies_per_step": {"HtoD Pinned": 1e6}})) is None


@pytest.mark.parametrize("key", ["kernels_per_step", "copies_per_step", "compile"])
def test_every_table_of_counts_must_be_an_object(key):
    assert problem(entry(counts={key: "many"})) == f"entry 't': 'counts' '{key}' is 'many', expected an object"


@pytest.mark.parametrize("key", ["kernels_per_step", "copies_per_step", "compile"])
def test_every_count_in_a_table_must_be_a_number(key):
    assert problem(entry(counts={key: {"x": "3"}})) == f"entry 't': 'counts' '{key}' 'x' is '3', expected a number"


def test_a_missing_count_in_a_table_is_not_a_number():
    """A count is never optional: null in a table is a broken file, not a count of nothing."""
    assert problem(entry(counts={"kernels_per_step": {"gemm": None}})) == (
        "entry 't': 'counts' 'kernels_per_step' 'gemm' is None, expected a number")


# --- env and the rest of an entry ----------------------------------------------------------------------


def test_a_gpu_uuid_that_is_not_a_string_is_named_with_its_value():
    assert problem(entry(env={**ENV, "gpu_uuid": 5})) == "entry 't': 'env' 'gpu_uuid' is 5, expected a string or null"
    assert problem(entry(env={**ENV, "gpu_uuid": None})) is None
    assert problem(entry(env={**ENV, "gpu_uuid": "GPU-1"})) is None


def test_the_loaders_unit_costs_are_validated_as_part_of_the_entry():
    message = problem(entry(loader_unit="fast"))
    assert message is not None and message.startswith("entry 't': 'loader_unit'") and "fast" in message


def test_every_unknown_part_is_named():
    message = problem(entry(parts={"gpu": part(), "gpu_side": part(), "cpu": part()}))
    assert message.startswith("entry 't': unknown part(s) 'cpu', 'gpu_side' in 'parts'")


# --- a value as a message names it: its repr, cut to 60 characters ------------------------------------


def test_a_value_of_60_characters_is_named_whole():
    value = "x" * 58  # its repr, quotes included: 60 characters
    assert store.quoted(value) == repr(value)


def test_a_longer_value_is_cut_to_60_characters_ending_in_an_ellipsis():
    value = "x" * 59  # its repr: 61 characters
    assert store.quoted(value) == "'" + "x" * 56 + "..."
    assert len(store.quoted(list(range(100)))) == 60
    assert problem(entry(env="y" * 100)) == f"entry 't': 'env' is '{'y' * 56}..., expected the environment it was recorded in"
