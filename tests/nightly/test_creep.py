"""The slow creep (nightly/changes.py, nightly/creep.py): change points in the nightly's series, on synthetic histories
with the noise the suite measures, and the alert the nightly files for one."""

import gzip
import json
import re
import subprocess
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pytest

from torch_perf_suite.nightly import bisect_alerts, changes, command, creep
from torch_perf_suite.nightly.nights import Night, load_history, save_night

TEST = "perf_tests/test_ladder.py::test_ladder[set_to_none]"
# the GPU-side number's noise from night to night on one H200: 0.103% over ten nights (docs/measurements/creep.md)
AA_NOISE = 0.001
LEVEL = 5577.0


def noisy(nights: int, seed: int, noise: float = AA_NOISE) -> np.ndarray:
    return LEVEL * (1 + noise * np.random.default_rng(seed).standard_normal(nights))


def nights_of(gpu_side: list[float], kernels: float = 390.0, numbers: dict | None = None) -> list[Night]:
    """A history of one test on one H200: its GPU-side samples/s and its numbers (name -> a value a night)."""
    return [Night(date=f"{2026 + i // 336}-{1 + i // 28 % 12:02d}-{1 + i % 28:02d}", commit=f"{i:040x}",
                          gpu="NVIDIA H200", samples={TEST: {"gpu": float(v)}},
                          numbers={TEST: {"kernel launches a step": kernels,
                                          **{k: float(n[i]) for k, n in (numbers or {}).items()}}})
            for i, v in enumerate(gpu_side)]


def alerts_night_by_night(nights: list[Night]) -> list[tuple[int, command.Alert]]:
    """What the nightly would have filed, each night deciding on the nights before it."""
    return [(k, a) for k in range(1, len(nights)) for a in command.decide(nights[:k], nights[k]).alerts]


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
    decision = command.decide(nights[:-1], nights[-1])
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
    save_night(tmp_path, night)
    assert load_history(tmp_path) == [night]
    (tmp_path / "bad.json").write_text(json.dumps({**vars(night), "numbers": {TEST: {"syncs": "many"}}}))
    with pytest.raises(SystemExit, match="'numbers' is .*expected an object of test ids and their numbers by name"):
        load_history(tmp_path)


def test_the_bisect_half_judges_a_creeps_commits_at_its_tolerance(tmp_path):
    decision = tmp_path / "alerts.json"
    alert = command.Alert(TEST, "perf creep", "body", good="a" * 40, bad="b" * 40, args=["--perf-tolerance=0.50"])
    decision.write_text(json.dumps({"status": "s", "alerts": [vars(alert)], "charts": ""}))
    calls = []
    bisect_alerts.bisect_alerts(decision, tmp_path, ["--perf-strict"],
                                run=lambda cmd, **kw: calls.append(cmd) or subprocess.CompletedProcess(cmd, 4, "", "x"))
    assert calls[0][-2:] == ["--perf-strict", "--perf-tolerance=0.50"]


# The cases of docs/measurements/creep.md, each history replayed night by night as the nightly decides it, over seeds:
# a 1% step of the GPU-side number (0.10% noise) and a 0.5% step of the loader's instructions a sample (0.02%, the
# floor: a count), early and late in histories of 40, 120 and 365 nights
INSTRUCTIONS = "loader instructions a sample"
SEEDS = 20


def stepped(nights: int, seed: int, at: int, number: str) -> list[Night]:
    values = noisy(nights, seed)
    if number == "gpu samples/s":
        values[at:] *= 0.99
        return nights_of(list(values))
    counted = 6.35e6 * (1 + 0.0002 * np.random.default_rng(10_000 + seed).standard_normal(nights))
    counted[at:] *= 1.005
    return nights_of(list(values), numbers={INSTRUCTIONS: counted})


@pytest.mark.parametrize("number", ["gpu samples/s", INSTRUCTIONS])
@pytest.mark.parametrize("nights, at", [(40, 20), (120, 20), (365, 20), (120, 100), (365, 345)])
def test_a_step_is_alerted_once_within_eight_nights_naming_the_nights_around_it(nights, at, number):
    """In long histories the change point was placed a night or two early (GOOD and BAD both on the old level) and
    alerted again as it moved; now its commits are right in at least 95% of seeds, and it is alerted once."""
    right = 0
    for seed in range(SEEDS):
        filed = alerts_night_by_night(stepped(nights, seed, at, number))
        [(night, alert)] = filed
        assert alert.title == f"perf creep: {TEST}: {number}" and night - at < 8, (seed, night)
        right += (alert.good, alert.bad) == (f"{at - 1:040x}", f"{at:040x}")
    assert right >= 0.95 * SEEDS


def test_a_year_of_noise_at_half_a_percent_alerts_at_most_once_in_twenty_histories():
    """A noisier test (`metrics[naive]`: 0.46% a night): its noise read over a long window, each split's test
    corrected for the split being the one that looks most apart. Before, 2 of 20 histories of 60 nights alerted."""
    filed = [a for seed in range(SEEDS) for a in alerts_night_by_night(nights_of(list(noisy(365, 500 + seed, 0.005))))]
    assert len(filed) <= 1, filed


def test_a_drift_is_said_once_as_a_drift_with_its_start():
    """-0.1% a night from night 20: before, a stream of one-night changes (13 alerts in 50 nights). Now its first
    two levels are alerted as creeps (each could be a commit's step), then the drift once, with its start and slope,
    not bisected, and nothing more; one issue."""
    for seed in range(5):
        values = noisy(70, 40 + seed)
        values[20:] *= 1 - 0.001 * np.arange(1, 51)
        nights = nights_of(list(values))
        filed = alerts_night_by_night(nights)
        drifts = [(night, a) for night, a in filed if "drifts" in a.body]
        [(night, drift)] = drifts
        assert len(filed) <= 3 and not drift.bisect and night < 45, [(n, a.body[:80]) for n, a in filed]
        since = re.search(r"since (\S+) ", drift.body)[1]
        start = next(i for i, n in enumerate(nights) if n.date == since)
        assert 18 <= start <= 24 and re.search(r"-0\.(0[5-9]|1[0-5])\d% a night", drift.body), drift.body[:300]
        assert len({a.title for _, a in filed}) == 1


def test_two_steps_a_few_nights_apart_are_two_creeps_each_with_its_commits():
    values = noisy(40, 8)
    values[15:] *= 0.99
    values[21:] *= 0.99
    filed = alerts_night_by_night(nights_of(list(values)))
    assert [(a.good, a.bad, a.bisect) for _, a in filed] == [(f"{14:040x}", f"{15:040x}", True),
                                                             (f"{20:040x}", f"{21:040x}", True)]


def test_a_change_said_before_is_not_said_again_when_its_point_moves_a_night():
    """Each change said is kept with the night that found it (`Night.said`): one found again a night or two from
    there, the same way, is the same change; found further away, or the other way, it is another. Tonight is the
    change's fourth night on its new level: without tonight it is not found, so only what was said can hold it."""
    values = noisy(19, 5)
    values[15:] *= 0.99
    nights = nights_of(list(values))
    [c] = creep.found(nights)
    assert c.at == 15 and nights[c.at].commit == f"{15:040x}"
    for moved, again in [(1, []), (-2, []), (3, [15])]:
        said = {**c.said(nights), "commit": nights[15 + moved].commit, "date": nights[15 + moved].date}
        nights[17].said = [said]
        assert [x.at for x in creep.found(nights)] == again, moved
    nights[17].said = [{**c.said(nights), "change_pct": 1.0}]  # said the other way: another change
    assert [x.at for x in creep.found(nights)] == [15]


def test_a_change_is_matched_among_its_series_own_nights_and_a_history_without_marks_is_not_alerted_again():
    """A test measured every third night: a change point that moved one of its nights moved three of the history's,
    and was said again. A history kept before change points were said has no marks: the change points found without
    tonight are known, so the first night after the upgrade alerts none of them again."""
    values = noisy(19, 6)
    values[15:] *= 0.99
    sparse = nights_of([LEVEL] * 57)
    for i, night in enumerate(sparse):
        if i % 3:
            night.samples, night.numbers = {}, {}
        else:
            night.samples[TEST]["gpu"] = float(values[i // 3])
    [c] = creep.found(sparse[:55])
    assert c.at == 45
    sparse[51].said = [{**c.said(sparse), "commit": sparse[48].commit, "date": sparse[48].date}]  # one point later
    assert creep.found(sparse[:55]) == []
    values = noisy(40, 7)
    values[10:] *= 0.99
    legacy = nights_of(list(values))  # no night says anything: kept before
    assert creep.found(legacy) == [] and len(changes.change_points(list(values))) == 1


def test_the_record_command_night_by_night_alerts_a_step_once_naming_its_commits(tmp_path):
    """The nightly's own command, one call a night, each night's report the suite's (clean.json.gz) with the GPU-side
    number of one test moved: a 1% step at night 20 of 30 alerted once, on the 4th night on the new level."""
    report = json.loads(gzip.open(Path(__file__).parent / "clean.json.gz").read())
    [row] = [r for r in report["tests"] if r["test"] == TEST]
    level, history = row["parts"]["gpu"]["samples_per_s"], tmp_path / "history"
    values = level * (1 + AA_NOISE * np.random.default_rng(3).standard_normal(30))
    values[20:] *= 0.99
    filed = []
    for i, value in enumerate(values):
        row["parts"]["gpu"]["samples_per_s"] = float(value)
        report["env"]["date"] = str(date(2026, 1, 1) + timedelta(days=i))
        (tmp_path / "perf.json").write_text(json.dumps(report))
        out = tmp_path / f"alerts{i}.json"
        assert command.main(["record", "--report", str(tmp_path / "perf.json"), "--history", str(history),
                             "--commit", f"{i:040x}", "--out", str(out)]) == 0
        filed += [(i, a) for a in json.loads(out.read_text())["alerts"]]
    [(night, alert)] = filed
    assert night == 23 and (alert["good"], alert["bad"]) == (f"{19:040x}", f"{20:040x}")
    assert alert["title"] == f"perf creep: {TEST}: gpu samples/s"


def test_a_count_that_alternates_between_two_values_still_shows_its_step():
    """390, 391, 390, ...: the nights' differences have a MAD of 0, the noise fell to its floor, and every night was
    left out as a bad one; a +1.3% step held six nights was not found."""
    [change] = changes.change_points([390.0, 391.0] * 10 + [395.0, 396.0] * 3)
    assert change.at == 20 and 1.0 < change.change_pct < 1.6


def test_a_number_that_moves_from_zero_is_said_from_zero_with_no_margin_to_bisect_by(tmp_path):
    """Bytes copied from 0 to 2 a step: its change in percent is infinite, which the history could not keep as JSON
    and the bisection took as `--perf-count-margin=inf`."""
    copied = [0.0] * 10 + [2.0] * 12
    nights = nights_of(list(noisy(22, 9)), numbers={"bytes copied a step": copied})
    [found] = [c for c in creep.found(nights[:20]) if c.number == "bytes copied a step"]  # its median no longer 0
    assert found.args() == [] and found.said(nights)["change_pct"] == creep.FROM_ZERO
    assert "moved from 0 to 2 on NVIDIA H200" in creep.alert_body(found, nights[:20], "a..b")
    nights[19].said = [found.said(nights)]
    save_night(tmp_path, nights[19])
    assert load_history(tmp_path) == [nights[19]]  # kept, and read back as a night
