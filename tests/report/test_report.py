"""The session report: the JSON rows and the Markdown table, on results whose every number is worked out here."""

import json
import math
import os
import struct
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from torch_perf_suite import store, syncs
from torch_perf_suite.counts import host_side
from torch_perf_suite.machine.nvml import Utilization
from torch_perf_suite.report import charts, saved
from torch_perf_suite.report import markdown as report
from torch_perf_suite.report.markdown import DETAILS, LEGEND  # the words are the module's; the tests check where they stand
from torch_perf_suite.syncs import SyncCount, SyncSource
from torch_perf_suite.throughput.gates import Verdict
from torch_perf_suite.throughput.parts import Parts
from torch_perf_suite.throughput.stats import Comparison
from torch_perf_suite.throughput.timing import Throughput

ENV = {"gpu": "NVIDIA H200", "driver": "580", "cuda": "13.0", "torch": "2.11", "torchvision": "0.26", "torchmetrics": "1.9",
       "host": {"cpu": "Xeon", "cores": 16}, "date": "2026-11-22"}
ITEM = SyncSource("cudaStreamSynchronize", "aten::item > aten::_local_scalar_dense", "train.py:3 in step", "")
UNKNOWN = SyncSource("cudaDeviceSynchronize", "", "", "")
METRIC = SyncSource("cudaStreamSynchronize", "", "metrics.py:9 in compute", "torchmetrics/x.py:1 in f")


UTIL = Utilization(20, gpu_util_pct=97.0, mem_used_gb=45.123, mem_total_gb=141.0, power_w=640.4, power_limit_w=700.0,
                   sm_mhz=1980.0)


def full():
    """pipeline: 100 samples in 0.3, 0.4, 0.3 s = 333.33, 250, 333.33 samples/s: median 333.33; mean 305.56, sample
    standard deviation 48.11, so a spread of 15.75%; three rounds: the interval is the whole range, 12.5% of the median.
    GPU-side: 2000 samples/s in five equal rounds (two of them added); kernels 0.04 s of each 0.05 s step: 80% busy,
    not launch-bound, so the GPU is the bottleneck and the efficiency 333.33 / 2000 = 0.167."""
    parts = Parts(batch_size=100, pipeline=Throughput(100, (0.3, 0.4, 0.3)),
                  gpu=Throughput(100, (0.05,) * 5, extended=2, window_s=1.23456, energy_j=172.6, util=UTIL), gpu_busy_s=0.04,
                  measured_in={"loader": "tests/test_x.py::test_x"})
    verdicts = {
        "gpu": Verdict("gpu", 2100.0, Comparison(0.95, 0.97, True, "Mann-Whitney U, p=0.004"),
                       confirmation=Comparison(0.9, 0.97, True, "Mann-Whitney U, p=0.004")),
        "loader": Verdict("loader", None, why_not="not comparable: recorded on elsewhere"),
        "pipeline": Verdict("pipeline", 333.34, Comparison(0.99999, 0.9, False, "")),  # -0.001%: shown as 0.0, not -0.0
    }
    syncs = SyncCount(steps=4, sources=Counter({ITEM: 2}), periodic=Counter({("perf_periodic:metrics", METRIC): 3}),
                      periodic_runs=Counter({"perf_periodic:metrics": 1}))
    return SimpleNamespace(test_id="test_a", parts=parts, samples_per_s=parts.pipeline.median, verdicts=verdicts,
                           syncs=syncs, peak_mem_gb=1.23456, mfu=None, extra={"gain": 1.5, "workers": 8, "ratio": 0.12345},
                           notes=["loader measured in test_x"], outcome="passed", failure=None, host=None, ranks=None,
                           counts=dict)


def bare():
    """One round of 10 samples in 0.01 s, nothing else measured, compared or profiled."""
    parts = Parts(batch_size=10, pipeline=Throughput(10, (0.01,)))
    return SimpleNamespace(test_id="test_b", parts=parts, samples_per_s=parts.pipeline.median, verdicts={}, syncs=None,
                           peak_mem_gb=None, mfu=None, extra={}, notes=[], outcome=None, failure=None, host=None, ranks=None,
                           counts=dict)


FULL_ROW = {
    "test": "test_a",
    "samples_per_s": 333.3,
    "parts": {
        "pipeline": {"samples_per_s": 333.3, "rounds": [333.3, 250.0, 333.3], "spread_pct": 15.75, "ci_pct": 12.5,
                     "added_rounds": 0, "window_s": 0.0, "watts": None, "util": None},
        "gpu": {"samples_per_s": 2000.0, "rounds": [2000.0] * 5, "spread_pct": 0.0, "ci_pct": 0.0, "added_rounds": 2,
                "window_s": 1.23, "watts": 690,  # 172.6 J over 0.25 s
                "util": {"samples": 20, "gpu_util_pct": 97.0, "mem_used_gb": 45.12, "mem_total_gb": 141.0, "power_w": 640.4,
                         "power_limit_w": 700.0, "sm_mhz": 1980.0, "unavailable": None}},
        "loader": None,
        "loader_cpu": None,
    },
    "loader_measured_in": "tests/test_x.py::test_x", "gpu_measured_in": None,
    "bottleneck": "GPU",
    "efficiency": 0.167,
    "gpu_busy_pct": 80.0,
    "baseline": {
        "gpu": {"compared": True, "baseline_samples_per_s": 2100.0, "change_pct": -5.0, "allowed_pct": -3.0,
                "method": "Mann-Whitney U, p=0.004", "failed": True, "confirmed_change_pct": -10.0, "why_not": None},
        "loader": {"compared": False, "baseline_samples_per_s": None, "change_pct": None, "allowed_pct": None, "method": None,
                   "failed": False, "confirmed_change_pct": None, "why_not": "not comparable: recorded on elsewhere"},
        "pipeline": {"compared": True, "baseline_samples_per_s": 333.34, "change_pct": 0.0, "allowed_pct": -10.0, "method": "",
                     "failed": False, "confirmed_change_pct": None, "why_not": None},
    },
    "syncs_per_step": 0.5,
    "sync_sources": [{"per_step": 0.5, "call": "cudaStreamSynchronize", "ops": "aten::item > aten::_local_scalar_dense",
                      "user": "train.py:3 in step", "library": "", "kind": "tensor read on the host",
                      "fix": ITEM.advice.fix, "more": "https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution"}],
    "periodic_syncs": [{"phase": "perf_periodic:metrics", "count": 3, "runs": 1, "call": "cudaStreamSynchronize", "ops": "",
                        "user": "metrics.py:9 in compute", "library": "torchmetrics/x.py:1 in f",
                        "kind": "torchmetrics input check", "fix": METRIC.advice.fix,
                        "more": "https://lightning.ai/docs/torchmetrics/stable/aggregation/mean.html"}],
    "kernels": None,
    "peak_mem_gb": 1.23,
    "mfu": None,
    "host": None,
    "counts": {},
    "extra": {"gain": 1.5, "workers": 8, "ratio": 0.123},
    "outcome": "passed",
    "notes": ["loader measured in test_x"],
    "seconds": None,
}
BARE_ROW = {
    "test": "test_b", "samples_per_s": 1000.0,
    "parts": {"pipeline": {"samples_per_s": 1000.0, "rounds": [1000.0], "spread_pct": None, "ci_pct": 0.0, "added_rounds": 0,
                           "window_s": 0.0, "watts": None, "util": None},
              "gpu": None, "loader": None, "loader_cpu": None},
    "loader_measured_in": None, "gpu_measured_in": None, "bottleneck": None, "efficiency": None, "gpu_busy_pct": None,
    "baseline": {},
    "syncs_per_step": None, "sync_sources": [], "periodic_syncs": [], "kernels": None, "peak_mem_gb": None, "mfu": None,
    "host": None, "counts": {}, "extra": {},
    "outcome": None,
    "notes": [],
    "seconds": None,
}
# bare() then full(): the columns padded to their widest cell, each part's number aligned and its change beside it
TABLE_HEAD = ("| test | verdict | pipeline    | GPU-side           | loader | syncs/step |\n"
              "|------|---------|-------------|--------------------|--------|-----------:|\n")
BARE_LINE = "| b    | -       | 1,000       |     -              |      - |          - |"
FULL_LINE = "| a    | passed  |   333 +0.0% | 2,000 -5.0% FAILED |      - |       0.50 |"
FULL_DETAILS = ("<details><summary>a: passed</summary>\n\n`test_a`\n\n"
                "- bottleneck GPU; efficiency 0.17; spread 15.8/0.0%\n"
                "- GPU-Util 97%; 45/141 GB, 640/700 W, 1,980 MHz; peak mem 1.23 GB\n"
                "- gain 1.50x, workers 8, ratio 0.12x\n"
                "- loader measured in test_x\n\n</details>\n")
BARE_DETAILS = "<details><summary>b</summary>\n\n`test_b`\n\n</details>\n"  # no verdict, nothing measured but the pipeline
HEAD = ("GPU: NVIDIA H200 | driver 580 | CUDA 13.0 | torch 2.11 | torchvision 0.26 | torchmetrics 1.9 | "
        "host Xeon x 16 cores | 2026-11-22\n\n")
LADDER = {"ladder": [{"step": "baseline", "samples/s": 1234.4, "gain": 1.0, "runs": 3},
                     {"step": "workers", "samples/s": 99.5, "note": None}]}
LADDER_SECTION = ("### ladder\n\n| step | samples/s | gain | runs | note |\n|---|---|---|---|---|\n"
                  "| baseline | 1,234 | 1.00 | 3 | - |\n| workers | 99.50 | - | - | - |\n")


def test_rows_hold_every_number_rounded():
    assert saved.rows([full(), bare()]) == [FULL_ROW, BARE_ROW]


def test_a_change_that_rounds_to_zero_is_not_negative():
    change = saved.rows([full()])[0]["baseline"]["pipeline"]["change_pct"]
    assert change == 0.0 and math.copysign(1, change) == 1


def test_markdown_table():
    md = report.markdown(saved.rows([bare(), full()]), ENV)
    assert md.startswith(HEAD + LEGEND + TABLE_HEAD + BARE_LINE + "\n" + FULL_LINE + "\n\n### Where the syncs come from\n")
    assert md.endswith(DETAILS + BARE_DETAILS + "\n" + FULL_DETAILS)


def test_markdown_lists_each_sync_with_its_fix_between_the_table_and_the_sections():
    unknown = full()
    unknown.test_id, unknown.syncs = "test_c", SyncCount(steps=2, sources=Counter({UNKNOWN: 2}))
    md = report.markdown(saved.rows([full(), bare(), unknown]), ENV, LADDER)
    table, listing = md.split("\n\n### Where the syncs come from\n\n")
    *_, line_a, line_b, line_c = table.splitlines()
    assert [line.split(" | ")[0] for line in (line_a, line_b, line_c)] == ["| a   ", "| b   ", "| c   "]
    listing, details = listing.split("\n### Details\n\n")
    assert listing == (
        "- **test_a**: 0.50/step `cudaStreamSynchronize` in `aten::item > aten::_local_scalar_dense` at "
        f"`train.py:3 in step`. Fix: {ITEM.advice.fix} ([more](https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution))\n"
        "- **test_a**: 3x in perf_periodic:metrics (1 runs) `cudaStreamSynchronize` at `metrics.py:9 in compute`; "
        f"library `torchmetrics/x.py:1 in f`. Fix: {METRIC.advice.fix} "
        "([more](https://lightning.ai/docs/torchmetrics/stable/aggregation/mean.html))\n"
        f"- **test_c**: 1.00/step `cudaDeviceSynchronize` at `(not seen)`. Fix: {syncs.UNKNOWN_FIX}\n"
        "\n" + LADDER_SECTION)
    assert details.count("<details>") == 3


def test_markdown_of_a_smoke_run_says_so_first_and_shows_no_throughput():
    md = report.markdown(saved.rows([full()]), ENV, smoke=True)
    assert md == ("SMOKE RUN (--perf-smoke): 1 scenario(s) built and trained for 2 steps on NVIDIA H200; nothing "
                  "was timed. torch 2.11 | torchvision 0.26 | host Xeon x 16 cores | 2026-11-22\n\n"
                  "| test | verdict | counted |\n|------|---------|---------|\n| a    | passed  | -       |\n"
                  "\n### Details\n\n<details><summary>a: passed</summary>\n\n`test_a`\n\n- loader measured in test_x\n\n"
                  "</details>\n")


def test_markdown_without_host_or_results():
    md = report.markdown([], {k: v for k, v in ENV.items() if k != "host"})
    assert "| host None x None cores |" in md
    assert md.endswith("| test | verdict | pipeline | GPU-side | loader | syncs/step |\n"
                       "|------|---------|----------|----------|--------|-----------:|\n")  # and no details


def test_sections_follow_the_table():
    md = report.markdown(saved.rows([bare()]), ENV, LADDER)
    assert md.endswith("| b    | -       |    1,000 |        - |      - |          - |\n\n" + LADDER_SECTION + "\n"
                       + DETAILS + BARE_DETAILS)


@pytest.mark.parametrize("value, cell", [(None, "-"), (1234.4, "1,234"), (100.0, "100"), (-250.0, "-250"), (99.5, "99.50"),
                                         (-3.25, "-3.25"), (7, "7"), ("x", "x"), (True, "True")])
def test_cell(value, cell):
    assert charts._cell(value) == cell


def test_write_makes_the_folder_and_both_files(tmp_path):
    written = saved.write(tmp_path / "out" / "perf", saved.document([full()], ENV, LADDER, smoke=True))
    md, js = tmp_path / "out" / "perf.md", tmp_path / "out" / "perf.json"
    assert written == [md, js]
    assert md.read_text() == report.markdown(saved.rows([full()]), ENV, LADDER, smoke=True)
    text = js.read_text()
    assert json.loads(text) == {"env": ENV, "smoke": True, "tests": [FULL_ROW], "sections": LADDER, "charts": {}}
    assert text.startswith('{\n "env": {\n  "gpu": "NVIDIA H200",') and text.endswith("}\n")


def test_a_new_report_gets_the_usual_mode_and_a_rewritten_one_keeps_its_own(tmp_path):
    umask = os.umask(0o022)
    try:
        saved.write(tmp_path / "new" / "perf", saved.document([], ENV))
        assert {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "new").iterdir()} == {"perf.md": 0o644,
                                                                                           "perf.json": 0o644}
        (tmp_path / "new" / "perf.md").chmod(0o600)
        saved.write(tmp_path / "new" / "perf", saved.document([], ENV))
        assert (tmp_path / "new" / "perf.md").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(umask)


def test_write_without_sections_writes_an_empty_object(tmp_path):
    saved.write(tmp_path / "perf", saved.document([], ENV))
    assert json.loads((tmp_path / "perf.json").read_text()) == {"env": ENV, "smoke": False, "tests": [], "sections": {},
                                                                "charts": {}}


def test_markdown_explains_its_columns_before_the_table():
    assert report.markdown([], ENV).startswith(HEAD + LEGEND + "| test | verdict |")


def test_part_rounds_spread_and_interval_to_two_places():
    """600 samples in 2, 3, 2 s: 300, 200, 300 samples/s; mean 266.67, standard deviation 57.735: 21.65%; three rounds,
    so the interval is the whole range: 50 x 100 / 300 = 16.67%."""
    assert saved._part(Throughput(600, (2.0, 3.0, 2.0), extended=1, window_s=2.3456, energy_j=4100.0)) == {
        "samples_per_s": 300.0, "rounds": [300.0, 200.0, 300.0], "spread_pct": 21.65, "ci_pct": 16.67, "added_rounds": 1,
        "window_s": 2.35, "watts": 586, "util": None}  # 4,100 J over 7 s


def test_verdict_percentages_to_one_place():
    v = Verdict("gpu", 1000.0, Comparison(0.9676, 0.9775, True, "m"), confirmation=Comparison(0.9543, 0.9775, True, "m"))
    # -3.24% against an allowed -2.25% (a tolerance of 2.25; in binary 2.2499..., so -2.2), measured again at -4.57%
    assert saved._verdict(v) == {"compared": True, "baseline_samples_per_s": 1000.0, "change_pct": -3.2, "allowed_pct": -2.2,
                                  "method": "m", "failed": True, "confirmed_change_pct": -4.6, "why_not": None}


def test_row_rounding_of_busy_syncs_and_extra_columns():
    """Kernels 0.04166 s of a 0.05 s GPU-side step: 83.32% busy; one sync in three steps; a text column stays text."""
    parts = Parts(batch_size=100, pipeline=Throughput(100, (0.1,) * 3), gpu=Throughput(100, (0.05,) * 3),
                  loader=Throughput(600, (2.0, 3.0, 2.0), cpu_s=(6.0, 5.0, 6.0)), gpu_busy_s=0.04166)
    result = SimpleNamespace(test_id="test_c", parts=parts, samples_per_s=parts.pipeline.median, verdicts={},
                             syncs=SyncCount(steps=3, sources=Counter({ITEM: 1})), peak_mem_gb=None,
                             mfu=None, extra={"workers": "8 of 16"}, notes=[], outcome=None, failure=None, host=None, ranks=None,
                             counts=dict)
    [row] = saved.rows([result])
    assert (row["gpu_busy_pct"], row["syncs_per_step"], row["extra"]) == (83.3, 0.333, {"workers": "8 of 16"})
    assert row["bottleneck"] == "loader" and row["efficiency"] == 3.333  # 1000 / 300
    md = report.markdown(saved.rows([result]), ENV)
    line = md.split("\n\n### Where the syncs come from")[0].splitlines()[-1]
    assert line == "| c    | -       |    1,000 |    2,000 |    300 |       0.33 |"
    # the details show the row's numbers: the loader's spread 21.6506% is 21.65 there (a binary 21.6499...), "21.6";
    # the loader's workers: 6 CPU seconds for 600 samples, 5 for 600: 100 and 120 samples per CPU second, median 100,
    # spread 11.5 / 106.7 = 10.8%
    assert md.endswith("`test_c`\n\n- bottleneck loader; efficiency 3.33; spread 0.0/0.0/21.6/10.8%; loader/CPU s 100\n"
                       "- workers 8 of 16\n\n</details>\n")


def test_write_writes_beside_each_file_then_renames(tmp_path, monkeypatch):
    """A reader (the nightly, a sharded run's controller) never sees half a report: each file is written to a
    temporary file beside it, then renamed over it."""
    renamed = []
    real = os.replace
    monkeypatch.setattr(store.os, "replace", lambda a, b: renamed.append((Path(a), Path(b))) or real(a, b))
    saved.write(tmp_path / "perf", saved.document([], ENV), images=False)
    assert [b.name for _, b in renamed] == ["perf.md", "perf.json"]
    assert all(a.parent == tmp_path and a.name.startswith(b.name) and a.suffix == ".tmp" for a, b in renamed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["perf.json", "perf.md"]


def test_write_makes_missing_folders(tmp_path):
    saved.write(tmp_path / "a" / "b" / "perf", saved.document([], ENV))
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir()) == ["perf.json", "perf.md"]


CHART = saved.Chart(x="step", bars=("pipeline",), lines=("gpu_side",), ceiling="gpu_side", note="bottleneck")
CHARTED = [{"step": "baseline", "pipeline": 400.4, "gpu_side": 5000.0, "bottleneck": "loader"},
           {"step": "compile", "pipeline": 7000.0, "gpu_side": None, "bottleneck": None}]


def test_a_charted_section_is_drawn_in_mermaid_below_its_table():
    md = report.markdown([], ENV, {"Ladder": CHARTED}, charts={"Ladder": CHART})
    assert md.endswith(
        "| compile | 7,000 | - | - |\n\n"
        "```mermaid\nxychart-beta\n"
        '    title "Ladder"\n'
        '    x-axis ["baseline (loader)", "compile"]\n'
        '    y-axis "samples/s"\n'
        "    bar [400, 7000]\n"
        "    line [5000, 0]\n"  # a value not measured is drawn at 0
        "    line [5000, 5000]\n"
        "```\n\n"
        "bars: pipeline; line 1: gpu_side; line 2: ceiling (best gpu_side, 5,000)\n")


def test_an_uncharted_or_empty_section_has_no_chart():
    assert "mermaid" not in report.markdown([], ENV, {"Ladder": CHARTED, "Empty": []}, charts={"Empty": CHART})


def test_write_draws_a_png_per_charted_section(tmp_path):
    pytest.importorskip("matplotlib", reason="pip install -e '.[charts]'")
    written = saved.write(tmp_path / "perf", saved.document([], ENV, {"Ladder (seed 000)": CHARTED, "Plain": CHARTED},
                                                              charts={"Ladder (seed 000)": CHART}))
    assert [p.name for p in written] == ["perf.md", "perf.json", "perf.ladder_seed_000.png"]
    assert written[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_png_draws_the_bars_the_points_and_a_dashed_ceiling(tmp_path, monkeypatch):
    plt = pytest.importorskip("matplotlib.pyplot", reason="pip install -e '.[charts]'")
    from matplotlib.colors import to_hex

    close, drawn = plt.close, []
    monkeypatch.setattr(plt, "close", drawn.append)
    assert charts.png(tmp_path / "ladder.png", "Ladder (seed 000)", CHARTED, CHART)
    (fig,) = drawn
    ax = fig.axes[0]
    assert ax.get_title() == "Ladder (seed 000)" and ax.get_ylabel() == "samples/s"
    ticks = ax.get_xticklabels()
    assert [t.get_text() for t in ticks] == ["baseline\n(loader)", "compile"]  # the note under the label
    assert {(t.get_rotation(), t.get_ha(), t.get_fontsize()) for t in ticks} == {(30, "right", 8)}
    assert [(b.get_height(), to_hex(b.get_facecolor())) for b in ax.patches] == [(400.4, "#9ecae1"), (7000.0, "#9ecae1")]
    gpu, ceiling = ax.get_lines()
    assert (list(gpu.get_ydata()), gpu.get_marker(), gpu.get_linestyle()) == ([5000.0, 0.0], "o", "-")
    assert (list(ceiling.get_ydata()), ceiling.get_marker(), ceiling.get_linestyle()) == ([5000.0, 5000.0], "", "--")
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == [
        "ceiling (best gpu_side, 5,000)", "gpu_side", "pipeline"]
    header = (tmp_path / "ladder.png").read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", header[16:24]) == (600, 450)  # 6 x 4.5 in, 100 dpi
    close(fig)


def test_a_png_of_many_rows_is_wider(tmp_path):
    pytest.importorskip("matplotlib", reason="pip install -e '.[charts]'")
    table = [{"step": f"s{i}", "pipeline": 100.0} for i in range(10)]
    charts.png(tmp_path / "many.png", "Many", table, charts.Chart(x="step", bars=("pipeline",)))
    assert struct.unpack(">II", (tmp_path / "many.png").read_bytes()[16:24]) == (900, 450)  # 0.9 in a label, 100 dpi


def test_write_without_images_draws_none(tmp_path):
    """The plugin writes the report after every test: the images only once, at the end."""
    doc = saved.document([], ENV, {"Ladder": CHARTED}, charts={"Ladder": CHART})
    written = saved.write(tmp_path / "perf", doc, images=False)
    assert [p.name for p in written] == ["perf.md", "perf.json"] and not list(tmp_path.glob("*.png"))


# --- the notes' MFU, the worker's device and the GPU-Util cells, each string written out ----------------------------


PEAKED = {"gflops_per_sample": 24.299, "dtype": "bfloat16", "peak_tflops": 1989.4, "peak_source": "a datasheet",
          "pipeline_tflops": 133.66, "pipeline_mfu": 0.1351, "gpu_tflops": 1234.56, "gpu_mfu": 1.2478}


@pytest.mark.parametrize("mfu, cell", [
    (None, ""),
    ({}, ""),
    ({"gflops_per_sample": 0.50812, "dtype": "float32"}, "model 0.51 GFLOP/sample (float32)"),  # a smoke run: counted only
    (PEAKED, "MFU: pipeline 133.7 TFLOP/s (13.5%), GPU-side 1,234.6 TFLOP/s (124.8%) of 1,989.4 bfloat16 (a datasheet); "
             "model 24.30 GFLOP/sample"),
    ({**PEAKED, "gpu_tflops": 2.04, "gpu_mfu": None}, "MFU: pipeline 133.7 TFLOP/s (13.5%), "
     "GPU-side 2.0 TFLOP/s of 1,989.4 bfloat16 (a datasheet); model 24.30 GFLOP/sample"),
    ({"gflops_per_sample": 1234.5, "dtype": "float8", "peak_tflops": None, "peak_source": "no entry for the XPU",
      "gpu_tflops": 0.01, "gpu_mfu": None}, "MFU: GPU-side 0.0 TFLOP/s float8, no peak: no entry for the XPU; "
                                            "model 1,234.50 GFLOP/sample"),
])
def test_the_mfu_note(mfu, cell):
    assert report._mfu(mfu) == cell


@pytest.mark.parametrize("worker, shown", [
    ({}, "the CPU"),
    ({"gpu": "cpu", "cores": "0-3"}, "the CPU, cores 0-3"),
    ({"gpu": "NVIDIA H200"}, "NVIDIA H200 (no UUID)"),
    ({"gpu": "NVIDIA H200", "gpu_uuid": "GPU-1", "cuda_visible_devices": "1", "cores": "8-15"},
     "NVIDIA H200 (GPU-1, CUDA_VISIBLE_DEVICES=1), cores 8-15"),
])
def test_the_device_a_worker_measured_on(worker, shown):
    assert report._worker_device(worker) == shown


def util(pct=None, unavailable=None, **fields):
    return {"gpu_util_pct": pct, "unavailable": unavailable, "mem_used_gb": None, "mem_total_gb": None, "power_w": None,
            "power_limit_w": None, "sm_mhz": None, **fields}


@pytest.mark.parametrize("pipeline, gpu, cells", [
    (None, None, ("-", "-")),
    ({"util": None}, {}, ("-", "-")),
    ({"util": util(97.4)}, None, ("97%", "-")),
    ({"util": util(97.4)}, {"util": util(None, mem_used_gb=45.1, mem_total_gb=141.0, sm_mhz=1980.0)},
     ("97/-%", "45/141 GB, 1,980 MHz")),
    ({"util": util(10.0)}, {"util": util(unavailable="no NVML")}, ("unavailable: no NVML", "-")),
])
def test_the_gpu_util_cells(pipeline, gpu, cells):
    assert report._gpu_util({"parts": {"pipeline": pipeline, "gpu": gpu}}) == cells


def test_the_host_side_is_a_row_field_and_a_line_of_the_details():
    counted = full()
    counted.host = host_side.HostCount(3, {"a.py:f": 1200.0, "b.py:g": 34.4}, {"b.py:3 in g": 1.0})
    [row, bare_row] = saved.rows([counted, bare()])
    assert row["host"] == {"lines_per_step": 1234.4, "blocks_per_step": 1.0} and bare_row["host"] is None
    md = report.markdown([row, bare_row], ENV)
    assert "- host side 1,234 Python lines, 1.00 blocks a step" in md and md.count("host side") == 1


def test_a_smoke_run_without_a_gpu_says_once_what_it_could_not_check_and_lists_no_details_without_tests():
    md = report.markdown(saved.rows([full(), bare()]), {**ENV, "gpu": "cpu"}, smoke=True)
    head, rest = md.split("\n\n", 1)
    assert head.startswith("SMOKE RUN (--perf-smoke): 2 scenario(s) built and trained for 2 steps on cpu")
    assert rest.startswith(report.NOT_WITHOUT_GPU + "\n\n") and md.count(report.NOT_WITHOUT_GPU) == 1
    assert report.NOT_WITHOUT_GPU not in report.markdown(saved.rows([full()]), ENV, smoke=True)  # a GPU checked them
    assert "### Details" not in report.markdown([], {**ENV, "gpu": "cpu"}, smoke=True)


def test_a_rows_failure_whole_its_phases_seconds_and_the_test_that_measured_its_gpu_side():
    failed = full()
    failed.outcome, failed.failure = "FAILED", "test_a: first line\nsecond line"
    failed.seconds = {"call": 12.3456, "timed": 4.0}
    failed.parts.measured_in["gpu"] = "tests/test_x.py::test_y"
    [row] = saved.rows([failed])
    assert row["failure"] == "test_a: first line\nsecond line"
    assert row["seconds"] == {"call": 12.35, "timed": 4.0}
    assert row["gpu_measured_in"] == "tests/test_x.py::test_y"
    assert "failure" not in saved.rows([full()])[0]
