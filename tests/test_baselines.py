import json

import pytest

from perf_tests.harness.baselines import BaselineError, BaselineFile, allowed_drop_pct, gpu_slug

ENV = {"gpu": "NVIDIA H200", "driver": "580", "cuda": "13.0", "torch": "2.11", "torchvision": "0.26",
       "torchmetrics": "1.9", "date": "2026-11-22"}


def entry(sps=1000.0):
    return {"samples_per_s": sps, "spread_pct": 0.5, "syncs_per_step": 0.0, "peak_mem_gb": 1.0, "env": ENV}


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
    assert {k: v["samples_per_s"] for k, v in again.tests.items()} == {"a": 1.0, "b": 3.0, "c": 4.0}
    assert [p.name for p in tmp_path.iterdir()] == ["nvidia-h200.json"]


def test_save_merges_with_what_another_run_wrote_meanwhile(tmp_path):
    path = tmp_path / "nvidia-h200.json"
    stale = BaselineFile.load(path, "NVIDIA H200")
    BaselineFile(path, "NVIDIA H200", {}).save({"other": entry()})
    stale.save({"mine": entry()})
    assert set(BaselineFile.load(path, "NVIDIA H200").tests) == {"other", "mine"}


@pytest.mark.parametrize(
    "content, problem",
    [
        ("{broken", "not valid JSON"),
        ("[]", "the top level is not an object"),
        (json.dumps({"schema": 99, "gpu": "NVIDIA H200", "tests": {}}), "schema 99"),
        (json.dumps({"schema": 1, "gpu": "NVIDIA H100", "tests": {}}), "holds baselines for GPU 'NVIDIA H100'"),
        (json.dumps({"schema": 1, "gpu": "NVIDIA H200", "tests": {"t": {**entry(), "samples_per_s": "fast"}}}),
         "field 'samples_per_s' is 'fast'"),
        (json.dumps({"schema": 1, "gpu": "NVIDIA H200", "tests": {"t": {**entry(), "samples_per_s": 0}}}),
         "samples_per_s must be positive"),
    ],
)
def test_corrupt_file_names_the_file_and_the_fix(tmp_path, content, problem):
    path = tmp_path / "nvidia-h200.json"
    path.write_text(content)
    with pytest.raises(BaselineError) as e:
        BaselineFile.load(path, "NVIDIA H200")
    assert str(path) in str(e.value) and problem in str(e.value)
    assert "--perf-update-baselines" in str(e.value)


def test_allowed_drop_counts_the_recorded_spread():
    assert allowed_drop_pct(5, 0) == 5
    assert allowed_drop_pct(5, 1.5) == 8
