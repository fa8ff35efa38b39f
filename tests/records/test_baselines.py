import datetime
import json
import os
import stat
from pathlib import Path

import pytest

from torch_perf_suite import store
from torch_perf_suite.machine.environment import gpu_slug
from torch_perf_suite.records import baselines
from torch_perf_suite.records.baselines import (
    FAR,
    MAX_MEMORY_GB,
    MAX_SAMPLES_PER_S,
    RERECORD,
    SCHEMA,
    BaselineError,
    BaselineFile,
)

GPU = "NVIDIA H200"
HOST = {"cpu": "Intel(R) Xeon(R) Platinum 8480+", "cores": 16}
ENV = {"gpu": "NVIDIA H200", "driver": "580", "cuda": "13.0", "torch": "2.11", "torchvision": "0.26",
       "torchmetrics": "1.9", "host": HOST, "date": "2026-11-22"}


def part(sps=1000.0, rounds=None, spread=0.5):
    return {"samples_per_s": sps, "spread_pct": spread, "rounds": rounds or [0.99 * sps, sps, 1.01 * sps]}


def entry(sps=1000.0, **changes):
    return {"parts": {"pipeline": part(sps), "gpu": part(2 * sps)}, "bottleneck": "GPU", "efficiency": 0.5,
            "gpu_busy_pct": 95.0, "syncs_per_step": 0.0, "peak_mem_gb": 1.0, "env": ENV, **changes}


def write(path, tests, schema=SCHEMA, gpu="NVIDIA H200"):
    path.write_text(json.dumps({"schema": schema, "gpu": gpu, "tests": tests}))


def test_gpu_slug():
    assert gpu_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert gpu_slug("NVIDIA H200") == "nvidia-h200"
    with pytest.raises(ValueError, match=r"^cannot make a file name of the GPU name '\+\+\+'$"):
        gpu_slug("+++")


def test_missing_file_is_an_empty_baseline(tmp_path):
    bf = BaselineFile.load(tmp_path / "nvidia-h200.json", "NVIDIA H200")
    assert bf.tests == {} and bf.get("t") is None


def test_save_keeps_other_entries_and_leaves_no_temporary_file(tmp_path):
    """Nothing beside the file: no temporary file, and no lock (store.lock_path keeps it in the temporary folder)."""
    path = tmp_path / "nvidia-h200.json"
    BaselineFile(path, "NVIDIA H200", {}).save({"a": entry(1.0), "b": entry(2.0)})
    bf = BaselineFile.load(path, "NVIDIA H200")
    bf.save({"b": entry(3.0), "c": entry(4.0)})
    again = BaselineFile.load(path, "NVIDIA H200")
    assert {k: v["parts"]["pipeline"]["samples_per_s"] for k, v in again.tests.items()} == {"a": 1.0, "b": 3.0, "c": 4.0}
    assert {p.name for p in tmp_path.iterdir()} == {"nvidia-h200.json"}  # no temporary file


def test_save_merges_with_what_another_run_wrote_meanwhile(tmp_path):
    path = tmp_path / "nvidia-h200.json"
    stale = BaselineFile.load(path, "NVIDIA H200")
    BaselineFile(path, "NVIDIA H200", {}).save({"other": entry()})
    stale.save({"mine": entry()})
    assert set(BaselineFile.load(path, "NVIDIA H200").tests) == {"other", "mine"}


def test_save_is_atomic_a_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "nvidia-h200.json"
    BaselineFile(path, "NVIDIA H200", {}).save({"a": entry()})
    before = path.read_text()

    def broken_dump(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(json, "dump", broken_dump)
    with pytest.raises(OSError, match="disk full"):
        BaselineFile.load(path, "NVIDIA H200").save({"b": entry()})
    assert path.read_text() == before
    assert {p.name for p in tmp_path.iterdir()} == {"nvidia-h200.json"}  # no temporary file


def test_save_keeps_the_file_mode(tmp_path):
    path = tmp_path / "nvidia-h200.json"
    write(path, {})
    os.chmod(path, 0o664)
    BaselineFile.load(path, "NVIDIA H200").save({"a": entry()})
    assert stat.S_IMODE(path.stat().st_mode) == 0o664


def test_a_new_file_gets_the_umask_mode_not_0600(tmp_path):
    path = tmp_path / "nvidia-h200.json"
    old = os.umask(0o022)
    try:
        BaselineFile(path, "NVIDIA H200", {}).save({"a": entry()})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_schema_1_file_loads_as_pipeline_numbers_without_host(tmp_path):
    path = tmp_path / "nvidia-h200.json"
    old_env = {k: v for k, v in ENV.items() if k != "host"}
    write(path, {"t": {"samples_per_s": 700.0, "spread_pct": 3.0, "syncs_per_step": 2.0, "peak_mem_gb": 0.9, "env": old_env}},
          schema=1)
    bf = BaselineFile.load(path, "NVIDIA H200")
    assert bf.old_schema
    assert bf.get("t")["parts"] == {"pipeline": {"samples_per_s": 700.0, "spread_pct": 3.0, "rounds": None}}
    assert bf.get("t")["env"]["host"] is None and bf.get("t")["syncs_per_step"] == 2.0


def bad_entry(**changes):
    e = entry()
    e["parts"]["pipeline"] = {**e["parts"]["pipeline"], **changes}
    return e


@pytest.mark.parametrize(
    "content, problem",
    [
        ("{broken", "not valid JSON"),
        ("[]", "the top level is not an object"),
        (json.dumps({"schema": 99, "gpu": "NVIDIA H200", "tests": {}}), "schema 99"),
        (json.dumps({"schema": SCHEMA, "gpu": "NVIDIA H100", "tests": {}}), "holds baselines for GPU 'NVIDIA H100'"),
        (json.dumps({"schema": SCHEMA, "gpu": "NVIDIA H200", "tests": []}), "'tests' is not an object"),
        (json.dumps({"schema": SCHEMA, "gpu": "NVIDIA H200", "tests": {"t": bad_entry(samples_per_s="fast")}}),
         "'samples_per_s' is 'fast', expected a number"),
        (json.dumps({"schema": SCHEMA, "gpu": "NVIDIA H200", "tests": {"t": bad_entry(samples_per_s=0)}}),
         "'samples_per_s' is 0, expected a positive number"),
        ('{"schema": 2, "gpu": "NVIDIA H200", '
         '"tests": {"t": {"parts": {"pipeline": {"samples_per_s": NaN}}, "env": {"gpu": "x"}}}}',
         "'samples_per_s' is nan, expected a finite number"),
        ('{"schema": 2, "gpu": "NVIDIA H200", '
         '"tests": {"t": {"parts": {"gpu": {"samples_per_s": Infinity}}, "env": {"gpu": "x"}}}}',
         "'samples_per_s' is inf, expected a finite number"),
        (json.dumps({"schema": SCHEMA, "gpu": "NVIDIA H200", "tests": {"t": bad_entry(spread_pct=-1.0)}}),
         "'spread_pct' is -1.0, expected a non-negative number"),
        (json.dumps({"schema": SCHEMA, "gpu": "NVIDIA H200", "tests": {"t": bad_entry(rounds=[1.0, -5.0])}}),
         "'rounds[1]' is -5.0, expected a positive number"),
        (json.dumps({"schema": SCHEMA, "gpu": "NVIDIA H200", "tests": {"t": {**entry(), "syncs_per_step": -1}}}),
         "'syncs_per_step' is -1, expected a non-negative number"),
        (json.dumps({"schema": SCHEMA, "gpu": "NVIDIA H200", "tests": {"t": {**entry(), "env": {}}}}),
         "'env' is {}, expected the environment it was recorded in"),
        (json.dumps({"schema": SCHEMA, "gpu": "NVIDIA H200", "tests": {"t": {**entry(), "parts": {"disk": part()}}}}),
         "entry 't': unknown part(s) 'disk' in 'parts', expected some of ('pipeline', 'gpu', 'loader', 'loader_cpu')"),
    ],
)
def test_corrupt_file_names_the_file_and_the_fix(tmp_path, content, problem):
    path = tmp_path / "nvidia-h200.json"
    path.write_text(content)
    with pytest.raises(BaselineError) as e:
        BaselineFile.load(path, "NVIDIA H200")
    assert str(path) in str(e.value) and problem in str(e.value)
    assert "--perf-update-baselines" in str(e.value) and "git checkout" in str(e.value)


def test_update_moves_a_corrupt_file_aside_and_starts_afresh(tmp_path):
    path = tmp_path / "nvidia-h200.json"
    path.write_text("{broken")
    bf, note = BaselineFile.load_for_update(path, "NVIDIA H200")
    assert bf.tests == {} and not path.exists()
    [aside] = tmp_path.iterdir()
    assert aside.name.startswith(f"nvidia-h200.json.corrupt-{datetime.date.today():%Y%m%d}")
    assert aside.read_text() == "{broken"
    assert "not valid JSON" in note and str(aside) in note
    bf.save({"a": entry()})
    assert set(BaselineFile.load(path, "NVIDIA H200").tests) == {"a"}


def test_a_file_moved_aside_says_so_not_restore_it_from_git(tmp_path):
    """It said "Restore it from git" of a file it had just moved aside and was recording afresh."""
    path = tmp_path / "nvidia-h200.json"
    write(path, {"t": bad_entry(samples_per_s="fast")})
    _, note = BaselineFile.load_for_update(path, "NVIDIA H200")
    [aside] = tmp_path.iterdir()
    assert note == (f"{path}: entry 't': part 'pipeline': 'samples_per_s' is 'fast', expected a number. "
                    f"It was moved to {aside}; this run records a new nvidia-h200.json.")


def test_an_unknown_part_is_named_not_the_whole_parts_object(tmp_path):
    """It printed the whole parts object (about 600 characters for a real entry)."""
    parts = {name: part() for name in ("pipeline", "gpu", "loader")} | {"gpu_side": part()}
    message = full_problem(tmp_path, doc({"t": {**entry(), "parts": parts}}))
    assert message == ("entry 't': unknown part(s) 'gpu_side' in 'parts', expected some of "
                       "('pipeline', 'gpu', 'loader', 'loader_cpu')")


@pytest.mark.parametrize("change, problem", [
    # a number far outside its own rounds: accepted before, and every run compared with it passed
    (lambda e: e["parts"]["gpu"].update(samples_per_s=1e308),
     "entry 't': part 'gpu': 'samples_per_s' is 1e+308, more than any GPU does (at most 1e+09)"),
    (lambda e: e["parts"]["gpu"].update(samples_per_s=20000.0),
     "entry 't': part 'gpu': 'samples_per_s' 20000 is far outside its own rounds (1980 to 2020), whose median it is"),
    (lambda e: e["parts"]["pipeline"].update(rounds=[990.0, 1000.0, 5e9]),
     "entry 't': part 'pipeline': 'rounds[2]' is 5e+09, more than any GPU does (at most 1e+09)"),
    (lambda e: e.update(peak_mem_gb=1e6), "entry 't': 'peak_mem_gb' is 1e+06, more than any GPU does (at most 10000)"),
    (lambda e: e.update(counts="many"), "entry 't': 'counts' is 'many', expected an object"),
    (lambda e: e.update(counts={"kernels_per_step": {"gemm": "3"}}),
     "entry 't': 'counts' 'kernels_per_step' 'gemm' is '3', expected a number"),
    (lambda e: e.update(counts={"step_peak_bytes": -1}),
     "entry 't': 'counts' 'step_peak_bytes' is -1, expected a non-negative number"),
    (lambda e: e.update(counts={"allocator_per_step": {"malloc": None}}),
     "entry 't': 'counts' 'allocator_per_step' 'malloc' is None, expected a number"),
    (lambda e: e.update(counts={"ranks": [1, 2]}),
     "entry 't': 'counts' 'ranks' is [1, 2], expected an object of each rank's counts"),
    (lambda e: e.update(counts={"ranks": {"1": {"step_peak_bytes": "big"}}}),
     "entry 't': rank 1: 'counts' 'step_peak_bytes' is 'big', expected a number"),
    (lambda e: e.update(counts={"debugging": "anomaly"}),
     "entry 't': 'counts' 'debugging' is 'anomaly', expected a list of the debugging switches that were on"),
    (lambda e: e.update(counts={"debugging": ["anomaly", 3]}),
     "entry 't': 'counts' 'debugging' is ['anomaly', 3], expected a list of the debugging switches that were on"),
    (lambda e: e.update(counts={"host": {"lines_per_step": -1}}),
     "entry 't': 'counts' 'host': host counts' lines_per_step must be a number of at least 0, not -1"),
    (lambda e: e["env"].update(host="Xeon"), "entry 't': 'env' 'host' is 'Xeon', expected an object or null"),
])
def test_absurd_numbers_and_wrong_types_name_the_entry(tmp_path, change, problem):
    e = json.loads(json.dumps(entry()))
    change(e)
    assert full_problem(tmp_path, doc({"t": e})) == problem


def test_update_keeps_a_good_file(tmp_path):
    path = tmp_path / "nvidia-h200.json"
    write(path, {"a": entry()})
    bf, note = BaselineFile.load_for_update(path, "NVIDIA H200")
    assert note is None and set(bf.tests) == {"a"}


def test_a_folder_in_place_of_the_file_is_a_clear_error(tmp_path):
    (tmp_path / "nvidia-h200.json").mkdir()
    with pytest.raises(BaselineError, match="is a folder"):
        BaselineFile.load_for_update(tmp_path / "nvidia-h200.json", "NVIDIA H200")


# --- messages in full, and what validation accepts -----------------------------------------------------


def full_problem(tmp_path, content) -> str:
    """The message of a corrupt file, with the file's name and the fix around it cut off."""
    path = tmp_path / "nvidia-h200.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(BaselineError) as e:
        BaselineFile.load(path, "NVIDIA H200")
    head, tail = f"{path}: ", f". Restore it from git (git checkout -- {path}) or {RERECORD}"
    message = str(e.value)
    assert message.startswith(head) and message.endswith(tail), message
    return message[len(head):-len(tail)]


def doc(tests, schema=SCHEMA):
    return {"schema": schema, "gpu": "NVIDIA H200", "tests": tests}


@pytest.mark.parametrize("content, problem", [
    ([], "the top level is not an object"),
    (doc([]), "'tests' is not an object"),
    (doc({"t": []}), "entry 't' is not an object"),
    (doc({"t": {**entry(), "peak_mem_gb": -1}}), "entry 't': 'peak_mem_gb' is -1, expected a non-negative number"),
    (doc({"t": {**entry(), "parts": {}}}),
     "entry 't': 'parts' is {}, expected an object with some of ('pipeline', 'gpu', 'loader', 'loader_cpu')"),
    (doc({"t": {**entry(), "parts": {"gpu": 5}}}), "entry 't': part 'gpu' is not an object"),
    (doc({"t": bad_entry(spread_pct=-1.0)}), "entry 't': part 'pipeline': 'spread_pct' is -1.0, expected a non-negative number"),
    (doc({"t": bad_entry(samples_per_s=None)}), "entry 't': part 'pipeline': 'samples_per_s' is None, expected a number"),
    (doc({"t": bad_entry(samples_per_s=True)}), "entry 't': part 'pipeline': 'samples_per_s' is True, expected a number"),
    (doc({"t": bad_entry(rounds=[])}), "entry 't': part 'pipeline': 'rounds' is [], expected a list of samples/s"),
    (doc({"t": bad_entry(rounds="1, 2")}), "entry 't': part 'pipeline': 'rounds' is '1, 2', expected a list of samples/s"),
    (doc({"t": bad_entry(rounds=[1000.0, None])}), "entry 't': part 'pipeline': 'rounds[1]' is None, expected a number"),
    (doc({"t": bad_entry(rounds=[1000.0, 0])}), "entry 't': part 'pipeline': 'rounds[1]' is 0, expected a positive number"),
    (doc({"t": {"samples_per_s": -5.0, "spread_pct": 1.0, "env": ENV}}, schema=1),
     "entry 't': part 'pipeline': 'samples_per_s' is -5.0, expected a positive number"),
    (doc({"t": {"spread_pct": 1.0, "env": ENV}}, schema=1),
     "entry 't': part 'pipeline': 'samples_per_s' is None, expected a number"),
])
def test_corrupt_file_messages_in_full(tmp_path, content, problem):
    assert full_problem(tmp_path, content) == problem


def test_a_part_of_one_round_has_no_spread_and_loads(tmp_path):
    """A test recorded with rounds=1 has no spread (None): that is a valid part."""
    path = tmp_path / "nvidia-h200.json"
    write(path, {"t": {**entry(), "parts": {"pipeline": {"samples_per_s": 700.0, "spread_pct": None, "rounds": [700.0]}},
                       "syncs_per_step": None, "peak_mem_gb": None}})
    assert BaselineFile.load(path, "NVIDIA H200").get("t")["parts"]["pipeline"]["spread_pct"] is None


def test_a_schema_1_entry_converts_to_exactly_a_pipeline_part(tmp_path):
    path = tmp_path / "nvidia-h200.json"
    old_env = {"gpu": "NVIDIA H200", "torch": "2.4"}
    write(path, {"t": {"samples_per_s": 700.0, "spread_pct": 3.0, "syncs_per_step": 2.0, "peak_mem_gb": 0.9, "env": old_env}},
          schema=1)
    assert BaselineFile.load(path, "NVIDIA H200").get("t") == {
        "parts": {"pipeline": {"samples_per_s": 700.0, "spread_pct": 3.0, "rounds": None}},
        "syncs_per_step": 2.0, "peak_mem_gb": 0.9, "env": {"gpu": "NVIDIA H200", "torch": "2.4", "host": None}}


# --- saving: where, how it is laid out, what the object holds afterwards ---------------------------------


def test_save_creates_missing_folders(tmp_path):
    path = tmp_path / "a" / "b" / "nvidia-h200.json"
    BaselineFile(path, "NVIDIA H200", {}).save({"t": entry()})
    assert set(BaselineFile.load(path, "NVIDIA H200").tests) == {"t"}


def test_save_updates_the_object_to_what_was_written(tmp_path):
    path = tmp_path / "nvidia-h200.json"
    write(path, {"other": entry(5.0)})
    bf = BaselineFile(path, "NVIDIA H200", {})  # stale: it does not know of "other"
    bf.save({"mine": entry(1.0)})
    assert list(bf.tests) == ["mine", "other"]  # sorted, as in the file
    assert bf.get("other")["parts"]["pipeline"]["samples_per_s"] == 5.0


def test_save_writes_beside_the_file_then_renames(tmp_path, monkeypatch):
    """The temporary file lies in the same folder, named after the baseline file: a rename within one
    file system is atomic, and a crash leaves a file whose name says what it was."""
    path = tmp_path / "nvidia-h200.json"
    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (renamed.append((Path(src), Path(dst))), real_replace(src, dst)))
    BaselineFile(path, "NVIDIA H200", {}).save({"t": entry()})
    [(src, dst)] = renamed
    assert dst == path and src.parent == tmp_path
    assert src.name.startswith("nvidia-h200.json") and src.name.endswith(".tmp")


def test_saved_file_is_indented_by_one_space_and_ends_with_a_newline(tmp_path):
    """Committed files: one value a line (a re-recorded round is a one-line diff), a final newline."""
    path = tmp_path / "nvidia-h200.json"
    BaselineFile(path, "NVIDIA H200", {}).save({"t": entry()})
    text = path.read_text()
    assert text.startswith('{\n "schema": 2,\n "gpu": "NVIDIA H200",\n "tests": {\n  "t": {\n')
    assert text.endswith("}\n") and not text.endswith("\n\n")


def test_entries_older_than_the_host_count_are_said_in_one_line_naming_how_many_of_all(tmp_path):
    host = {"lines_per_step": 10.0, "blocks_per_step": 0.0, "lines": {}, "blocks": {}}
    path = tmp_path / "nvidia-h200.json"
    write(path, {"counted": {**entry(), "counts": {"host": host}},
                 "ranks": {**entry(), "counts": {"ranks": {"0": {"host": host}, "1": {"host": host}}}},  # a spread
                 "uncounted": entry()})  # no counts at all: nothing of a step was counted
    assert BaselineFile.load(path, "NVIDIA H200").older_than_the_host_count() == ""
    write(path, {"older": {**entry(), "counts": {"kernels_per_step": {"gemm": 1.0}}},
                 "counted": {**entry(), "counts": {"host": host}}, "also older": {**entry(), "counts": {"debugging": []}},
                 "older spread": {**entry(), "counts": {"ranks": {"0": {"host": host}, "1": {}}}}})  # a rank without
    assert BaselineFile.load(path, "NVIDIA H200").older_than_the_host_count() == (
        f"{path}: 3 of 4 entries were recorded before the step's host side was counted: their tests say \"host side not "
        "compared\" (a failure under --perf-strict) until they are recorded again on this GPU model: pytest "
        "--perf-update-baselines")


# --- validation at its edges: the bounds are inclusive ("at most", "within this factor"), every table of 'counts' is
# checked, optional fields may be absent, and a message names the field and the value it found ---------------------


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
