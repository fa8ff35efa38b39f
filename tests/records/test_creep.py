"""The slow creep (records/changes.py, records/creep.py): change points in the nightly's series, on synthetic histories
with the noise the suite measures, and the alert the nightly files for one."""

import json
import subprocess

import numpy as np
import pytest

from torch_perf_suite import nightly
from torch_perf_suite.against import bisect_alerts
from torch_perf_suite.records import changes, creep

TEST = "perf_tests/test_ladder.py::test_ladder[set_to_none]"
# the GPU-side number's noise from night to night on one H200: 0.103% over ten nights (docs/measurements/creep.md)
AA_NOISE = 0.001
LEVEL = 5577.0


def noisy(nights: int, seed: int, noise: float = AA_NOISE) -> np.ndarray:
    return LEVEL * (1 + noise * np.random.default_rng(seed).standard_normal(nights))


def nights_of(gpu_side: list[float], kernels: float = 390.0) -> list[nightly.Night]:
    return [nightly.Night(date=f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}", commit=f"{i:040x}", gpu="NVIDIA H200",
                          samples={TEST: {"gpu": float(v)}}, numbers={TEST: {"kernel launches a step": kernels}})
            for i, v in enumerate(gpu_side)]


def alerts_night_by_night(nights: list[nightly.Night]) -> list[tuple[int, nightly.Alert]]:
    """What the nightly would have filed, each night deciding on the nights before it."""
    return [(k, a) for k in range(1, len(nights)) for a in nightly.decide(nights[:k], nights[k]).alerts]


@pytest.mark.parametrize("seed", range(5))
def test_a_half_percent_step_in_the_suites_noise_is_found_at_its_night(seed):
    values = noisy(40, seed)
    values[20:] *= 0.995  # every night passes: 0.5% is a sixth of the 3% tolerance
    [change] = changes.change_points(list(values))
    assert change.at == 20 and -0.6 < change.change_pct < -0.4, change
    assert changes.change_points(list(values[:20])) == []  # the nights before it hold none


def test_a_year_of_pure_noise_raises_nothing_read_again_every_night():
    for seed in range(3):
        assert alerts_night_by_night(nights_of(list(noisy(365, 100 + seed)))) == []


def test_one_bad_night_among_good_ones_raises_nothing():
    values = noisy(30, 7)
    values[15] *= 0.9  # one night 10% slow (another tenant, a throttled GPU): that night fails on its own
    assert alerts_night_by_night(nights_of(list(values))) == []
    assert changes.change_points(list(values)) == []


def test_a_creep_is_alerted_once_on_the_night_it_is_found_with_the_commits_around_it_and_how_to_bisect():
    values = noisy(12, 3)
    values[5:] *= 0.99  # night 6 on: 1% slower, under the 3% tolerance every night
    filed = alerts_night_by_night(nights_of(list(values)))
    [(night, alert)] = filed
    assert night == 5 + changes.MIN_NIGHTS - 1  # found on the change's fourth night, and not again
    assert alert.title == f"perf creep: {TEST}: gpu samples/s"
    assert (alert.good, alert.bad) == (f"{4:040x}", f"{5:040x}")
    assert alert.args == ["--perf-tolerance=0.50"]  # a commit judged at half the creep's size
    assert "moved -1.0" in alert.body and "the first night on the new level: 2026-01-06" in alert.body
    assert "```mermaid" in alert.body and "line 2: level" in alert.body


def test_an_improvement_is_said_not_alerted_and_a_count_that_grew_is_a_creep():
    values = noisy(9, 4)
    values[5:] *= 1.02  # found on night 9, the fourth on the new level
    nights = nights_of(list(values))
    for n in nights[5:]:
        n.numbers[TEST]["kernel launches a step"] = 392.0  # two launches more: the kernels' gate fails that night too
    decision = nightly.decide(nights[:-1], nights[-1])
    assert [a.title for a in decision.alerts] == [f"perf creep: {TEST}: kernel launches a step"]
    assert decision.alerts[0].args == []  # compared exactly already
    assert f"improvement: {TEST} gpu samples/s +" in decision.status
    assert decision.charts.count("```mermaid") == 2


def test_a_nights_numbers_come_from_its_report_row_and_are_kept_in_the_history(tmp_path):
    row = {"test": TEST, "syncs_per_step": 0.0, "peak_mem_gb": 0.98, "host": {"lines_per_step": 5840.0},
           "kernels": {"launches_per_step": 390.0, "kernel_ms_per_step": 7.3, "copied_bytes_per_step": {"HtoD": 2e6, "DtoH": 8}},
           "extra": {"loader instructions/sample": 7576559, "host": "main 1.53 GB"}}
    assert creep.numbers(row) == {"host-device syncs a step": 0.0, "kernel launches a step": 390.0,
                                  "GPU kernel ms a step": 7.3, "bytes copied a step": 2000008.0, "peak GPU memory GB": 0.98,
                                  "Python lines a step": 5840.0, "loader instructions a sample": 7576559.0}
    assert creep.numbers({"test": TEST, "kernels": None, "syncs_per_step": None}) == {}
    [night] = nights_of([LEVEL])
    nightly.save_night(tmp_path, night)
    assert nightly.load_history(tmp_path) == [night]
    (tmp_path / "bad.json").write_text(json.dumps({**vars(night), "numbers": {TEST: {"syncs": "many"}}}))
    with pytest.raises(SystemExit, match="'numbers' is .*expected an object of test ids and their numbers by name"):
        nightly.load_history(tmp_path)


def test_the_bisect_half_judges_a_creeps_commits_at_its_tolerance(tmp_path):
    decision = tmp_path / "alerts.json"
    alert = nightly.Alert(TEST, "perf creep", "body", good="a" * 40, bad="b" * 40, args=["--perf-tolerance=0.50"])
    decision.write_text(json.dumps({"status": "s", "alerts": [vars(alert)], "charts": ""}))
    calls = []
    bisect_alerts.bisect_alerts(decision, tmp_path, ["--perf-strict"],
                                run=lambda cmd, **kw: calls.append(cmd) or subprocess.CompletedProcess(cmd, 4, "", "x"))
    assert calls[0][-2:] == ["--perf-strict", "--perf-tolerance=0.50"]
