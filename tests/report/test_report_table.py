"""The report as a person reads it: one line a test, the notes several tests share said once above the table, each
test's details below; drawn from a realistic document (a ladder run on another machine than its baselines')."""

import json

import pytest

from torch_perf_suite.report import markdown as report
from torch_perf_suite.report import rows, saved
from torch_perf_suite.session import runners
from torch_perf_suite.throughput import timing

ENV = {"gpu": "NVIDIA H200", "driver": "580.159.04", "cuda": "13.0", "torch": "2.11.0+cu130", "torchvision": "0.26.0",
       "torchmetrics": "1.9.0", "host": {"cpu": "Intel(R) Xeon(R) Processor (family 6 model 207 stepping 2)", "cores": 16},
       "date": "2026-11-22"}
ELSEWHERE = ("not comparable: recorded on machine a83b0204-2ba7, this is machine 37ebbe88-e541 (the same CPU class)")
LOADER_PIPELINE = f"loader, pipeline: {ELSEWHERE}"
PIPELINE = f"pipeline: {ELSEWHERE}"
SECONDS = {"setup": 0.4, "build": 3.1, "warm-up": 5.2, "timed": 12.0, "loader alone": 2.0, "profiled": 1.9,
           "instructions": 0.0, "FLOPs": 0.3, "checks": 0.5}  # 25.4 s in all
UTIL = {"samples": 20, "gpu_util_pct": 97.0, "mem_used_gb": 45.12, "mem_total_gb": 141.0, "power_w": 640.4,
        "power_limit_w": 700.0, "sm_mhz": 1980.0, "unavailable": None}
MFU = {"gflops_per_sample": 24.299, "dtype": "bfloat16", "peak_tflops": 1989.4, "peak_source": "a datasheet",
       "pipeline_tflops": 133.66, "pipeline_mfu": 0.1351, "gpu_tflops": 190.5, "gpu_mfu": 0.0958}


def part(sps, spread=1.5, util=None):
    return None if sps is None else {"samples_per_s": sps, "rounds": [sps] * 5, "spread_pct": spread, "ci_pct": 1.0,
                                     "added_rounds": 0, "window_s": 3.0, "watts": None, "util": util}


def compared(change, failed=False):
    return {"compared": True, "baseline_samples_per_s": 1000.0, "change_pct": change, "allowed_pct": -20.0, "method": "",
            "failed": failed, "confirmed_change_pct": None, "why_not": None}


NOT_COMPARED = {"compared": False, "baseline_samples_per_s": None, "change_pct": None, "allowed_pct": None, "method": None,
                "failed": False, "confirmed_change_pct": None, "why_not": ELSEWHERE}


def row(test, pipeline, gpu, loader, baseline, notes, extra=None, mfu=None, syncs=0.0, seconds=None, loader_cpu=None):
    return {"test": test, "samples_per_s": pipeline,
            "parts": {"pipeline": part(pipeline, 4.2), "gpu": part(gpu, 0.3, UTIL if gpu else None), "loader": part(loader),
                      "loader_cpu": part(loader_cpu)},
            "loader_measured_in": None, "gpu_measured_in": None, "bottleneck": "GPU" if gpu else "loader",
            "efficiency": 0.97, "gpu_busy_pct": 99.1, "baseline": baseline, "syncs_per_step": syncs, "sync_sources": [],
            "periodic_syncs": [], "kernels": None, "peak_mem_gb": 11.8, "mfu": mfu, "extra": extra or {}, "notes": notes,
            "seconds": seconds}


def realistic() -> dict:
    """Seven tests of a ladder and its neighbours, run on another machine than their baselines: loader and pipeline
    not comparable (said of most), the GPU-side compared on another chip; one failed its GPU-side number."""
    ladder = "perf_tests/test_ladder.py::test_ladder"
    base = {"gpu": compared(-0.2), "loader": NOT_COMPARED, "pipeline": NOT_COMPARED}
    tests = [
        row(f"{ladder}[baseline]", 787.5, 3097.0, 1476.8, base, ["passed", LOADER_PIPELINE, "rounds added: gpu +2"],
            syncs=2.0, seconds=SECONDS, loader_cpu=370.2),
        row(f"{ladder}[workers]", 1477.5, 2813.5, 4054.5, {**base, "gpu": compared(1.3)},
            ["passed", LOADER_PIPELINE, "rounds added: gpu +2"], extra={"pipeline vs baseline": 1.876}, syncs=2.0),
        row(f"{ladder}[pin_memory]", 1985.2, 2969.3, 3871.6, {**base, "gpu": compared(-1.2)}, ["passed", LOADER_PIPELINE],
            extra={"pipeline vs workers": 1.344}, seconds={**SECONDS, "timed": 14.1}),
        row(f"{ladder}[compile]", 16770.7, 20196.9, 16124.2, {**base, "gpu": compared(0.7)},
            ["passed", LOADER_PIPELINE, "GPU-side at the power limit: 694 of 700 W",
             "gpu +0.7% (recorded on chip GPU-c5e76222, not this one: allowed -20%)"],
            extra={"gpu vs amp_fp16": 2.733}, mfu=MFU, syncs=1.0),
        row(f"{ladder}[gpu_resize]", 20782.3, 20833.8, 424898.6, {**base, "gpu": compared(-23.5, failed=True)},
            ["FAILED", LOADER_PIPELINE, "gpu measured again to confirm: 15,938 samples/s"],
            extra={"loader vs bf16": 26.352, "ceiling": "bf16", "pipeline vs test_ladder[bf16] gpu": 0.987}, mfu=MFU),
        row("perf_tests/test_ladder.py::test_channels_last[compiled_channels_last]", 18212.0, 18212.0, None,
            {"gpu": compared(0.1), "pipeline": NOT_COMPARED}, ["passed", PIPELINE], extra={"gpu vs test_ladder[bf16]": 0.865}),
        row("perf_tests/test_metrics.py::test_ddp_metric_placement[cpu_metric_no_sync]", 4774.5, None, None,
            {"pipeline": NOT_COMPARED}, ["passed", PIPELINE]),
    ]
    tests[0]["sync_sources"] = [{"per_step": 2.0, "call": "cudaStreamSynchronize", "ops": "aten::to > aten::copy_",
                                 "user": "fixtures/recipes.py:131 in to_device", "library": "", "kind": None,
                                 "fix": "copy from pinned memory with non_blocking=True", "more": None}]
    doc = saved.document([], ENV, LADDER, charts={"Ladder": saved.Chart(x="step", bars=("pipeline",))},
                          seconds={"total": 412.3, "REF": 143.0, "tests": 269.3})
    return {**doc, "tests": tests}


LADDER = {"Ladder": [{"step": "baseline", "pipeline": 787.5}, {"step": "workers", "pipeline": 1477.5}]}


@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> str:
    """The realistic document written as the plugin writes it, and its Markdown read back."""
    path = tmp_path_factory.mktemp("report") / "perf"
    saved.write(path, realistic(), images=False)
    return path.with_suffix(".md").read_text()


def table_lines(md: str) -> list[str]:
    return [line for line in md.split("\n\n### ")[0].splitlines() if line.startswith("|")]


def details(md: str, short: str) -> str:
    """The details block of one test."""
    start = md.index(f"<details><summary>{short}")
    return md[start:md.index("</details>", start)]


def test_one_line_a_test_with_its_verdict_numbers_changes_and_syncs(drawn):
    head, rule, *lines = table_lines(drawn)
    assert head.split(" | ")[:2] == ["| test                                    ", "verdict"]
    assert [line.split(" | ")[0].strip("| ") for line in lines] == [
        "ladder[baseline]", "ladder[workers]", "ladder[pin_memory]", "ladder[compile]", "ladder[gpu_resize]",
        "channels_last[compiled_channels_last]", "ddp_metric_placement[cpu_metric_no_sync]"]
    assert lines[2] == ("| ladder[pin_memory]                       | passed  |    1,985 |  2,969 -1.2%         |   3,872 "
                        "|       0.00 |")
    assert lines[4] == ("| ladder[gpu_resize]                       | FAILED  |   20,782 | 20,834 -23.5% FAILED | 424,899 "
                        "|       0.00 |")
    assert lines[6] == ("| ddp_metric_placement[cpu_metric_no_sync] | passed  |    4,774 |      -               |       - "
                        "|       0.00 |")
    assert rule == "|" + "|".join("-" * (len(cell) + 2) for cell in head.strip("| ").split(" | ")[:-1]) + "|-----------:|"


def test_the_table_fits_a_terminal_of_120_columns(drawn):
    assert max(len(line) for line in table_lines(drawn)) <= 120


@pytest.mark.parametrize("row, shown, own", [
    ({"outcome": "FAILED", "notes": ["passed", "x"]}, "FAILED", ["passed", "x"]),  # a note is a note, whatever it says
    ({"outcome": None, "notes": ["x"]}, "-", ["x"]),
    ({"outcome": "passed", "notes": []}, "passed", []),
])
def test_the_outcome_is_the_rows_own_field_and_no_note_is_read_for_it(row, shown, own):
    assert rows.outcome(row) == shown and rows.own_notes(row) == own


@pytest.mark.parametrize("notes, shown", [(["passed", "x"], "passed"), (["FAILED"], "FAILED"), ([], "-"),
                                          (["loader measured in test_x", "passed"], "-")])
def test_a_report_written_before_rows_had_an_outcome_kept_it_as_the_first_note(notes, shown):
    assert rows.outcome({"notes": notes}) == shown


def test_a_repeated_note_is_said_once_above_the_table_and_not_in_the_rows_details(drawn):
    above = drawn[:drawn.index("| test ")]
    assert above.endswith(
        "Notes shared by several tests, said once here:\n\n"
        f"- {ELSEWHERE}:\n"  # the reason once, with what it kept from being compared in which tests
        "  - 5 tests (ladder[baseline], ladder[workers], ladder[pin_memory], ladder[compile], ladder[gpu_resize]): "
        "loader, pipeline\n"
        "  - 2 tests (channels_last[compiled_channels_last], ddp_metric_placement[cpu_metric_no_sync]): pipeline\n"
        "- 2 tests (ladder[baseline], ladder[workers]): rounds added: gpu +2\n\n")  # as many: in the order first said
    assert drawn.count(ELSEWHERE) == 1 and drawn.count("rounds added") == 1  # the verdicts' why_not are not drawn
    said_once = above[above.index("Notes shared"):]
    assert "passed" not in said_once and "FAILED" not in said_once  # though every row has one of them
    # a note of one test stays in its details
    assert "- gpu measured again to confirm: 15,938 samples/s\n" in details(drawn, "ladder[gpu_resize]")


def test_a_note_all_tests_share_says_so_and_many_are_counted_not_named():
    rows = [row(f"t.py::test_{i}", 100.0, None, None, {}, ["passed", "shared by all", *(["by six"] if i < 6 else [])])
            for i in range(8)]
    md = report.markdown(rows, ENV)
    assert "- all 8 tests: shared by all\n- 6 tests: by six\n\n| test " in md


def test_notes_that_give_one_reason_are_grouped_under_it_and_the_others_stand_alone():
    shared = {f"pipeline: {ELSEWHERE}": ["a", "b"], "rounds added: gpu +2": ["a", "c"],
              f"efficiency floor 0.8: not checked: {ELSEWHERE}": ["b", "c"], ELSEWHERE: ["c", "d"],
              "not comparable: recorded on machine x": ["a", "d"]}
    assert report.by_reason(shared) == {
        ELSEWHERE: [("pipeline", ["a", "b"]), ("efficiency floor 0.8: not checked", ["b", "c"]), ("", ["c", "d"])],
        "rounds added: gpu +2": [("", ["a", "c"])],
        "not comparable: recorded on machine x": [("", ["a", "d"])]}
    said = report._said_once(shared, 5)
    assert f"- {ELSEWHERE}:\n  - 2 tests (a, b): pipeline\n  - 2 tests (b, c): efficiency floor 0.8: not checked\n" \
           "  - 2 tests (c, d)\n" in said
    assert said.endswith("- 2 tests (a, c): rounds added: gpu +2\n- 2 tests (a, d): not comparable: recorded on machine x\n\n")


def test_a_note_repeated_in_one_row_is_not_shared():
    md = report.markdown([row("t.py::test_a", 100.0, None, None, {}, ["passed", "twice", "twice"])], ENV)
    assert "Notes shared" not in md


def test_details_hold_everything_the_notes_cell_held_and_collapse_on_github(drawn):
    assert drawn.count("<details>") == 7 and drawn.index("### Details") > drawn.index("| test ")
    assert details(drawn, "ladder[compile]") == (
        "<details><summary>ladder[compile]: passed</summary>\n\n"  # a blank line: the Markdown in it is drawn
        "`perf_tests/test_ladder.py::test_ladder[compile]`\n\n"
        "- bottleneck GPU; efficiency 0.97; spread 4.2/0.3/1.5%\n"
        "- GPU-Util 97%; 45/141 GB, 640/700 W, 1,980 MHz; peak mem 11.80 GB\n"
        "- gpu vs amp_fp16 2.73x\n"
        "- MFU: pipeline 133.7 TFLOP/s (13.5%), GPU-side 190.5 TFLOP/s (9.6%) of 1,989.4 bfloat16 (a datasheet); "
        "model 24.30 GFLOP/sample\n"
        "- GPU-side at the power limit: 694 of 700 W\n"
        "- gpu +0.7% (recorded on chip GPU-c5e76222, not this one: allowed -20%)\n\n")
    assert "- bottleneck GPU; efficiency 0.97; spread 4.2/0.3/1.5/1.5%; loader/CPU s 370\n" in details(
        drawn, "ladder[baseline]")
    assert details(drawn, "ladder[gpu_resize]").startswith("<details><summary>ladder[gpu_resize]: FAILED</summary>")


def test_a_rows_seconds_are_one_line_and_their_sum(drawn):
    assert "- seconds: setup 0.4 · build 3.1 · warm-up 5.2 · timed 12.0 · loader alone 2.0 · profiled 1.9 · FLOPs 0.3 · " \
           "checks 0.5 = 25.4 s\n" in details(drawn, "ladder[baseline]")
    assert "timed 14.1 · loader alone 2.0 · profiled 1.9 · FLOPs 0.3 · checks 0.5 = 27.5 s\n" in details(
        drawn, "ladder[pin_memory]")
    assert "seconds:" not in details(drawn, "ladder[workers]")  # none recorded


@pytest.mark.parametrize("seconds, line", [
    (None, ""),
    ({}, ""),
    ({"build": 0.0, "checks": 0.04}, ""),  # nothing to say
    ({"build": 1.0, "timed": 0.0, "checks": 0.04}, "seconds: build 1.0 = 1.0 s"),  # under 0.05 shown as 0.0: left out
    ({"build": 1.04, "timed": 2.04}, "seconds: build 1.0 · timed 2.0 = 3.1 s"),  # the sum of the numbers, not of the shown
])
def test_the_seconds_line(seconds, line):
    assert timing.seconds_line(seconds) == line


def test_the_syncs_and_the_sections_follow_the_table_and_the_details_come_last(drawn):
    table, syncs = drawn.split("\n\n### Where the syncs come from\n\n")
    assert table.endswith("|       0.00 |")
    assert syncs.startswith("- **perf_tests/test_ladder.py::test_ladder[baseline]**: 2.00/step `cudaStreamSynchronize` in "
                            "`aten::to > aten::copy_` at `fixtures/recipes.py:131 in to_device`. Fix: copy from pinned "
                            "memory with non_blocking=True\n\n### Ladder\n\n| step | pipeline |\n")
    assert drawn.index("```mermaid") < drawn.index("### Details") < drawn.index("<details>")


def test_the_session_line_ends_the_report(drawn):
    assert drawn.endswith("</details>\n\nsession: 412.3 s (REF 143.0 s, tests 269.3 s)\n")
    assert timing.session_line({"total": 5.0}) == "session: 5.0 s"
    assert "session:" not in saved.render({**realistic(), "seconds": None})


def test_the_json_keeps_the_rows_and_the_sessions_seconds(tmp_path):
    saved.write(tmp_path / "perf", realistic(), images=False)
    written = json.loads((tmp_path / "perf.json").read_text())
    assert written["seconds"] == {"total": 412.3, "REF": 143.0, "tests": 269.3}
    assert written["tests"][0]["seconds"] == SECONDS and written["tests"][0]["notes"][1] == LOADER_PIPELINE


def test_document_keeps_seconds_only_when_given():
    assert "seconds" not in saved.document([], ENV)
    assert saved.document([], ENV, seconds={"total": 1.0})["seconds"] == {"total": 1.0}


def test_merge_sums_the_workers_tests_and_takes_the_longest_total():
    doc = realistic()
    merged = runners.merge({"gw0": {**doc, "seconds": {"total": 400.0, "REF": 140.0, "tests": 250.5}},
                           "gw1": {**doc, "seconds": {"total": 412.3, "REF": 143.0, "tests": 260.25}},
                           "gw2": {**doc, "tests": [], "seconds": None}})  # a worker that said nothing of its time
    assert merged["seconds"] == {"total": 412.3, "REF": 283.0, "tests": 510.75}
    assert saved.render(merged).endswith(  # its parts ran side by side: they add up to more than the total
        "\nsession: 412.3 s (its 3 workers' parts summed, side by side: REF 283.0 s, tests 510.8 s)\n")
    assert "seconds" not in runners.merge({"gw0": {**doc, "seconds": None}})


@pytest.mark.parametrize("text, cut", [("", ""), ("a" * 120, "a" * 120), ("a" * 121, "a" * 119 + "…"),
                                       ("ab", "ab")])
def test_fit(text, cut):
    assert report.fit(text) == cut and len(report.fit(text)) <= 120
    assert report.fit("abcdef", 4) == "abc…"


def test_no_cell_is_wider_than_120_characters_and_the_whole_text_is_in_the_details():
    long_id = "perf_tests/test_x.py::test_x[" + "-".join(["bf16", "channels_last", "compile", "fused"] * 8) + "]"
    md = report.markdown([row(long_id, 1.0, 2.0, 3.0, {}, ["passed"])], ENV)
    head, _, *lines = table_lines(md)
    cells = [cell.strip() for line in [head, *lines] for cell in line.strip("|").split(" | ")]
    assert max(map(len, cells)) == 120 and any(cell.endswith("…") for cell in cells)
    assert f"`{long_id}`" in md


@pytest.mark.parametrize("test_id, short", [
    ("perf_tests/test_ladder.py::test_ladder[pin_memory]", "ladder[pin_memory]"),
    ("test_a", "a"),
    ("tests/test_x.py::TestGroup::test_one", "one"),
    ("t.py::check_that", "check_that"),
    ("t.py::test_", "test_"),
])
def test_short_id(test_id, short):
    assert report.short_id(test_id) == short


def test_the_smoke_report_has_the_same_shape():
    rows = [row(f"perf_tests/test_ladder.py::test_ladder[{step}]", 1.0, 2.0, 3.0, {},
                ["passed", "loader instructions: counted", f"{step} built"],
                extra={"loader instructions/sample": 51234, "gain": 1.5},
                mfu={"gflops_per_sample": 0.50812, "dtype": "float32"}) for step in ("baseline", "compile")]
    rows[1]["worker"] = "gw1"
    md = report.markdown(rows, ENV, smoke=True, workers={"gw1": {"gpu_uuid": "GPU-2", "tests": 1}})
    text, details_ = md.split("\n### Details\n\n")
    assert text.endswith(
        "Notes shared by several tests, said once here:\n\n"
        "- all 2 tests: loader instructions: counted\n\n"
        "| test             | verdict | counted                                                             |\n"
        "|------------------|---------|---------------------------------------------------------------------|\n"
        "| ladder[baseline] | passed  | loader instructions/sample 51234; model 0.51 GFLOP/sample (float32) |\n"
        "| ladder[compile]  | passed  | loader instructions/sample 51234; model 0.51 GFLOP/sample (float32) |\n")
    assert details(md, "ladder[compile]") == (
        "<details><summary>ladder[compile]: passed</summary>\n\n`perf_tests/test_ladder.py::test_ladder[compile]`\n\n"
        "- compile built\n- ran on gw1 (GPU-2)\n\n")
    assert "gain" not in md and "samples/s" not in md


def test_a_summary_escapes_what_html_would_read():
    md = report.markdown([row("t.py::test_x[a<b&c]", 1.0, None, None, {}, [])], ENV)
    assert "<details><summary>x[a&lt;b&amp;c]</summary>\n\n`t.py::test_x[a<b&c]`\n\n" in md
