"""The merged report of a run sharded with pytest-xdist: the workers' rows grouped by file, their sections joined.

The merged report's partial files (PATH.gw<N>.md and .json, one per worker that measured something, written after each
of its tests) are removed once merged into PATH.md and PATH.json; they are kept only where the merge failed, or where
the controller died before its end.
"""

import json
from dataclasses import asdict
from types import SimpleNamespace

from tests.plugin_suite import details
from torch_perf_suite.report import markdown as report
from torch_perf_suite.report import saved
from torch_perf_suite.session import runners, writing

# --- the merged report ---------------------------------------------------------------------------------------------


def doc(tests, gpu="NVIDIA H200", uuid="GPU-1", visible="0", sections=None, charts=None, cores=None):
    env = {"gpu": gpu, "gpu_uuid": uuid, "driver": "580", "host": {"cpu": "Xeon", "cores": 16}, "date": "2026-11-23"}
    rows = [{**json.loads(json.dumps(ROW)), "test": t} for t in tests]
    return {"env": env, "smoke": False, "tests": rows, "sections": sections or {}, "charts": charts or {},
            "worker": {"id": "gw?", "cuda_visible_devices": visible, "cores": cores}}


ROW = {"test": "", "samples_per_s": 1000.0, "parts": {"pipeline": None, "gpu": None, "loader": None, "loader_cpu": None},
       "loader_measured_in": None, "gpu_measured_in": None, "bottleneck": None, "efficiency": None, "gpu_busy_pct": None,
       "baseline": {}, "syncs_per_step": 0.0, "sync_sources": [], "periodic_syncs": [], "kernels": None, "peak_mem_gb": None,
       "extra": {}, "notes": ["passed"]}
CHART = saved.Chart(x="step", bars=("gain",))


def test_merge_groups_rows_by_file_names_each_rows_worker_and_joins_sections():
    gw1 = doc(["b.py::t[1]", "a.py::t[2]", "b.py::t[0]"], uuid="GPU-2", visible="1",
              sections={"Ladder": [{"step": "x", "gain": 2.0}]}, charts={"Ladder": asdict(CHART)})
    gw0 = doc(["a.py::t[1]"], cores="0-15", sections={"Ladder": [{"step": "w", "gain": 1.0}], "Other": [{"k": 1}]})
    merged = runners.merge({"gw1": gw1, "gw0": gw0})
    assert [(r["test"], r["worker"]) for r in merged["tests"]] == [
        ("a.py::t[1]", "gw0"), ("a.py::t[2]", "gw1"), ("b.py::t[1]", "gw1"), ("b.py::t[0]", "gw1")]  # by file, then as run
    assert merged["sections"] == {"Ladder": [{"step": "w", "gain": 1.0}, {"step": "x", "gain": 2.0}], "Other": [{"k": 1}]}
    assert merged["workers"] == {
        "gw0": {"gpu": "NVIDIA H200", "gpu_uuid": "GPU-1", "cuda_visible_devices": "0", "cores": "0-15", "tests": 1},
        "gw1": {"gpu": "NVIDIA H200", "gpu_uuid": "GPU-2", "cuda_visible_devices": "1", "cores": None, "tests": 3}}
    assert merged["env"] == gw0["env"] and merged["charts"] == {"Ladder": asdict(CHART)}
    md = saved.render(json.loads(json.dumps(merged)))  # from the JSON, as written
    assert ("Sharded (pytest-xdist): gw0 on NVIDIA H200 (GPU-1, CUDA_VISIBLE_DEVICES=0), cores 0-15, 1 test(s); "
            "gw1 on NVIDIA H200 (GPU-2, CUDA_VISIBLE_DEVICES=1), 3 test(s)\n\n") in md
    assert "| t[2] | passed  |        - |        - |      - |       0.00 |\n" in md
    assert details(md, "t[2]: passed", "a.py::t[2]") == ["t[2]: passed</summary>", "", "`a.py::t[2]`", "",
                                                         "- ran on gw1 (GPU-2)", ""]
    assert "```mermaid" in md and '"Ladder"' in md  # drawn from the chart the JSON carries


def test_merge_names_each_workers_ref_under_perf_against_and_the_report_says_it_once():
    measured = "against HEAD (abc) on this device: 1 test(s) measured at REF in this job (12 s)"
    cached = "against HEAD (abc) on this device: 0 test(s) measured at REF in this job, 1 from the cache (/c/abc-1)"
    merged = runners.merge({"gw1": {**doc(["b.py::t"], visible="1"), "against": cached},
                           "gw0": {**doc(["a.py::t"]), "against": measured}, "gw2": doc(["c.py::t"], visible="2")})
    assert merged["against"] == f"gw0: {measured}; gw1: {cached}"
    md = saved.render(json.loads(json.dumps(merged)))
    assert md.startswith(f"Compared gw0: {measured}; gw1: {cached}\n\n") and md.count("Compared") == 1
    assert "against" not in runners.merge({"gw0": doc(["a.py::t"])})


def test_merge_orders_workers_by_number_and_of_none_is_empty():
    merged = runners.merge({f"gw{i}": doc([f"f{i}.py::t"]) for i in (10, 2, 1)})
    assert list(merged["workers"]) == ["gw1", "gw2", "gw10"]
    assert runners.merge({}) == {"env": {}, "smoke": False, "tests": [], "sections": {}, "charts": {}, "workers": {}}


def test_a_document_carries_its_charts_so_that_the_json_renders_as_the_markdown():
    sections = {"Ladder": [{"step": "a", "gain": 1.5}]}
    written = json.loads(json.dumps(saved.document([], {"gpu": "cpu"}, sections, charts={"Ladder": CHART})))
    assert written["charts"] == {"Ladder": {"x": "step", "bars": ["gain"], "lines": [], "ceiling": None, "note": None,
                                            "unit": "samples/s", "decimals": 0}}
    assert saved.render(written) == report.markdown([], {"gpu": "cpu"}, sections, charts={"Ladder": CHART})


def merging(tmp_path, outputs):
    return SimpleNamespace(worker_outputs=outputs, settings=SimpleNamespace(report=tmp_path / "perf"), merged=None,
                           report_error=None)


def test_a_crashed_workers_partial_report_is_merged_from_its_file_and_removed(tmp_path):
    session = merging(tmp_path, {"gw0": {"report": doc(["a.py::t"])}, "gw1": {}})  # gw1 died: it sent nothing
    (tmp_path / "perf.gw1.json").write_text(json.dumps(doc(["b.py::t"], visible="1")))
    (tmp_path / "perf.gw1.md").write_text("its table")
    (tmp_path / "perf.gw0.json").write_text(json.dumps(doc(["stale.py::t"])))  # gw0's end is the newer
    written = writing.merge_reports(session)
    assert [p.name for p in written] == ["perf.md", "perf.json"] and session.report_error is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["perf.json", "perf.md"]
    assert [(r["test"], r["worker"]) for r in session.merged["tests"]] == [("a.py::t", "gw0"), ("b.py::t", "gw1")]


def test_a_partial_report_that_cannot_be_read_is_kept_and_said_so_and_the_others_merged(tmp_path):
    session = merging(tmp_path, {"gw0": {"report": doc(["a.py::t"])}, "gw1": {}})  # gw1 was killed while writing
    (tmp_path / "perf.gw1.json").write_text("{half written")
    (tmp_path / "perf.gw1.md").write_text("its table")
    written = writing.merge_reports(session)
    assert [p.name for p in written] == ["perf.md", "perf.json"]
    assert [(r["test"], r["worker"]) for r in session.merged["tests"]] == [("a.py::t", "gw0")]
    assert session.report_error.startswith(f"perf report merged into {tmp_path / 'perf'} without these workers' reports, "
                                           f"kept: {tmp_path / 'perf.gw1.json'}: Expecting property name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["perf.gw1.json", "perf.gw1.md", "perf.json", "perf.md"]


def test_a_merge_that_cannot_be_written_keeps_every_partial_report_and_says_so(tmp_path):
    session = merging(tmp_path, {})
    (tmp_path / "perf.gw0.json").write_text(json.dumps(doc(["a.py::t"])))
    (tmp_path / "perf.md").mkdir()  # PATH.md cannot be written
    assert writing.merge_reports(session) == []
    assert session.report_error.startswith(f"perf report NOT merged into {tmp_path / 'perf'}: ")
    assert session.report_error.endswith(f"the workers' reports: {tmp_path / 'perf.gw0.json'}")
    assert (tmp_path / "perf.gw0.json").exists()


def test_only_this_reports_partial_files_are_found(tmp_path):
    for name in ["perf.gw0.md", "perf.gw0.json", "perf.gw12.json", "perf.json", "perf.gwx.json", "other.gw0.json",
                 "perf.gw0.json.tmp", "perfX.gw1.json"]:
        (tmp_path / name).write_text("")
    found = runners.partial_reports(tmp_path / "perf")
    assert {wid: sorted(f.name for f in files) for wid, files in found.items()} == {
        "gw0": ["perf.gw0.json", "perf.gw0.md"], "gw12": ["perf.gw12.json"]}
    assert runners.partial_reports(tmp_path / "missing" / "perf") == {}
