import datetime
import json
import os
import stat

import pytest

from perf_tests.harness.baselines import SCHEMA, BaselineError, BaselineFile, gpu_slug

HOST = {"cpu": "Intel(R) Xeon(R) Platinum 8480+", "cores": 16}
ENV = {"gpu": "NVIDIA H200", "driver": "580", "cuda": "13.0", "torch": "2.11", "torchvision": "0.26",
       "torchmetrics": "1.9", "host": HOST, "date": "2026-11-22"}


def part(sps=1000.0):
    return {"samples_per_s": sps, "spread_pct": 0.5, "rounds": [0.99 * sps, sps, 1.01 * sps]}


def entry(sps=1000.0):
    return {"parts": {"pipeline": part(sps), "gpu": part(2 * sps)}, "bottleneck": "GPU", "efficiency": 0.5,
            "gpu_busy_pct": 95.0, "syncs_per_step": 0.0, "peak_mem_gb": 1.0, "env": ENV}


def write(path, tests, schema=SCHEMA, gpu="NVIDIA H200"):
    path.write_text(json.dumps({"schema": schema, "gpu": gpu, "tests": tests}))


def test_gpu_slug():
    assert gpu_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert gpu_slug("NVIDIA H200") == "nvidia-h200"
    with pytest.raises(ValueError):
        gpu_slug("+++")


def test_missing_file_is_an_empty_baseline(tmp_path):
    bf = BaselineFile.load(tmp_path / "nvidia-h200.json", "NVIDIA H200")
    assert bf.tests == {} and bf.get("t") is None


def test_save_keeps_other_entries_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "nvidia-h200.json"
    BaselineFile(path, "NVIDIA H200", {}).save({"a": entry(1.0), "b": entry(2.0)})
    bf = BaselineFile.load(path, "NVIDIA H200")
    bf.save({"b": entry(3.0), "c": entry(4.0)})
    again = BaselineFile.load(path, "NVIDIA H200")
    assert {k: v["parts"]["pipeline"]["samples_per_s"] for k, v in again.tests.items()} == {"a": 1.0, "b": 3.0, "c": 4.0}
    assert [p.name for p in tmp_path.iterdir()] == ["nvidia-h200.json"]


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
    assert [p.name for p in tmp_path.iterdir()] == ["nvidia-h200.json"]


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
        ('{"schema": 2, "gpu": "NVIDIA H200", "tests": {"t": {"parts": {"pipeline": {"samples_per_s": NaN}}, "env": {"gpu": "x"}}}}',
         "'samples_per_s' is nan, expected a finite number"),
        ('{"schema": 2, "gpu": "NVIDIA H200", "tests": {"t": {"parts": {"gpu": {"samples_per_s": Infinity}}, "env": {"gpu": "x"}}}}',
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
         "'parts' is"),
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


def test_update_keeps_a_good_file(tmp_path):
    path = tmp_path / "nvidia-h200.json"
    write(path, {"a": entry()})
    bf, note = BaselineFile.load_for_update(path, "NVIDIA H200")
    assert note is None and set(bf.tests) == {"a"}


def test_a_folder_in_place_of_the_file_is_a_clear_error(tmp_path):
    (tmp_path / "nvidia-h200.json").mkdir()
    with pytest.raises(BaselineError, match="is a folder"):
        BaselineFile.load_for_update(tmp_path / "nvidia-h200.json", "NVIDIA H200")
