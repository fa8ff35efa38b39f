"""Recording the loader instruction counts again where the loader's code changed (recount.py); the counter is a stand-in
here (tests/loader/test_instructions.py runs the real one under callgrind)."""

import json
import sys

import pytest

from torch_perf_suite.loader import digest as loader_code
from torch_perf_suite.loader import instructions, recount

LOADER = "def parts(n, data_dir=None):\n    return list(range(n)), list\n"


class FakeCounter:
    def __init__(self, per_sample=1000.0):
        self.per_sample, self.counted = per_sample, []

    def count(self, source):
        self.counted.append(source)
        return instructions.Counted(self.per_sample, instructions.SAMPLES, instructions.describe_source(source))

    def close(self):
        pass


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "toy_parts.py").write_text(LOADER)
    monkeypatch.setattr(sys, "path", sys.path[:])  # main() puts the rootdir first
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_parts", raising=False)  # another test's project's, imported from its folder
    monkeypatch.setattr(instructions, "key", lambda: "this-env")
    return tmp_path


def write(path, environments):
    path.write_text(json.dumps({"schema": instructions.SCHEMA, "environments": environments}))
    return path


def an_entry(project, n=40, content=None, per_sample=900.0):
    source = ("toy_parts:parts", {"n": n})
    return {"per_sample": per_sample, "samples": 16, "source": instructions.describe_source(source),
            "content": content or loader_code.content(source, project), "date": "2026-11-01"}


def test_a_source_line_is_read_back_as_the_factory_and_its_arguments():
    source = ("fixtures.recipes:loader_parts", {"cast_on": "gpu", "image_size": 224, "storage": None})
    assert recount.parse_source(instructions.describe_source(source)) == source
    with pytest.raises(ValueError, match="not a loader source"):
        recount.parse_source("fixtures.recipes:loader_parts")


def test_only_the_loader_whose_code_changed_is_counted_again_and_recorded(project):
    path = write(project / "instructions.json", {"this-env": {
        "t::same": an_entry(project), "t::stale": an_entry(project, n=50, content="0" * 16)}})
    counter, said = FakeCounter(990.0), []
    updates, failed = recount.recount(path, project, counter, said.append)
    assert counter.counted == [("toy_parts:parts", {"n": 50})] and sorted(updates) == ["t::same", "t::stale"]
    assert failed == 0
    saved = json.loads(path.read_text())["environments"]["this-env"]
    files = {"toy_parts.py": loader_code.code_hash(project / "toy_parts.py", ("parts",))[:instructions.FILE_HASH]}
    functions = {"toy_parts.py": {"parts": loader_code.read(("toy_parts:parts", {"n": 40}), project).functions[
        "toy_parts.py"]["parts"][0]}}
    reads = {"files": files, "ran": {"toy_parts.py": ["parts"]}, "packages": {}, "functions": functions}
    assert saved["t::same"] == {**an_entry(project), **reads}  # unchanged: its count kept, what it reads named
    assert saved["t::stale"]["per_sample"] == 990.0 and saved["t::stale"]["content"] == an_entry(project, 50)["content"]
    assert {k: saved["t::stale"][k] for k in reads} == reads
    assert "t::stale: 990 instructions per sample (900 recorded, +10.00%)" in said[0]
    assert said[-1].endswith("1 entries recorded again, 1 unchanged (1 given what their loader reads), 0 not counted")
    said.clear()
    assert recount.recount(path, project, counter, said.append) == ({}, 0)  # nothing left to count or to name
    assert said[-1].endswith("0 entries recorded again, 2 unchanged, 0 not counted")


def test_an_environment_with_no_entries_is_left_to_a_recording_run(project):
    path = write(project / "instructions.json", {"other-env": {"t::a": an_entry(project)}})
    counter, said = FakeCounter(), []
    assert recount.recount(path, project, counter, said.append) == ({}, 1)
    assert counter.counted == [] and "no entries for this-env" in said[0] and "--perf-update-baselines" in said[0]
    assert list(json.loads(path.read_text())["environments"]) == ["other-env"]


def test_a_loader_that_cannot_be_built_is_one_line_and_the_others_are_still_recorded(project):
    broken = an_entry(project, content="0" * 16)
    broken["source"] = 'toy_parts:parts({"n": 40, "colour": "red"})'
    path = write(project / "instructions.json", {"this-env": {"t::broken": broken,
                                                              "t::stale": an_entry(project, n=50, content="0" * 16)}})
    said = []
    updates, failed = recount.recount(path, project, FakeCounter(), said.append)
    assert failed == 1 and list(updates) == ["t::stale"]
    assert said[0].startswith("t::broken: not counted: toy_parts:parts(**{'n': 40, 'colour': 'red'}) raised TypeError")
    assert json.loads(path.read_text())["environments"]["this-env"]["t::broken"] == broken


def test_a_data_directory_is_left_unless_found_under_the_data_root(project):
    (project / "data" / "images-1").mkdir(parents=True)
    stored = an_entry(project, content="0" * 16)  # its code changed
    stored["source"] = 'toy_parts:parts({"data_dir": "images-1", "n": 40})'
    path = write(project / "instructions.json", {"this-env": {"dir": stored}})
    counter, said = FakeCounter(), []
    recount.recount(path, project, counter, said.append)
    assert counter.counted == [] and said[0].startswith("dir: left as recorded: its loader reads images-1, not found")
    recount.recount(path, project, counter, lambda line: None, data_root=project / "data")
    assert counter.counted == [("toy_parts:parts", {"data_dir": str(project / "data" / "images-1"), "n": 40})]


def test_the_digest_names_files_from_the_folder_above_the_files_folder(project, monkeypatch, tmp_path_factory):
    """An example's instructions file lies in examples/<x>/baselines/: its rootdir is examples/<x>, wherever recount
    runs from; a digest named from elsewhere would count every loader again and record digests no run matches."""
    (project / "baselines").mkdir()
    path = write(project / "baselines" / "instructions.json", {"this-env": {"t::a": an_entry(project)}})
    counter = FakeCounter()
    monkeypatch.setattr(recount.instructions, "Counter", lambda: counter)
    monkeypatch.setattr(recount.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    assert recount.main([str(path)]) == 0 and counter.counted == []


def test_a_missing_or_broken_file_is_one_line_and_exit_2(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    monkeypatch.setattr(recount.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    assert recount.main(["nowhere.json"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    (project / "broken.json").write_text("{")
    assert recount.main(["broken.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("recount: ") and "not valid JSON" in err and err.count("\n") == 1


def test_without_valgrind_it_says_how_to_install_it(project, capsys, monkeypatch):
    write(project / "instructions.json", {"this-env": {"t::a": an_entry(project)}})
    monkeypatch.setattr(recount.shutil, "which", lambda tool: None)
    assert recount.main([str(project / "instructions.json")]) == 2
    assert capsys.readouterr().err == f"recount: valgrind not found; {recount.instructions.INSTALL}\n"


def test_an_entry_keyed_by_its_files_whole_is_keyed_by_what_its_loader_reads_without_a_count(project):
    """Counts recorded before what a loader reads was kept were keyed by their code's files whole: where those are
    unchanged, the count stands, given its new digest; one whose files changed is counted again."""
    whole = loader_code.read(("toy_parts:parts", {"n": 40}), project).whole
    path = write(project / "instructions.json", {"this-env": {"t::a": an_entry(project, content=whole)}})
    counter, said = FakeCounter(), []
    recount.recount(path, project, counter, said.append)
    saved = json.loads(path.read_text())["environments"]["this-env"]["t::a"]
    assert counter.counted == [] and saved["content"] == an_entry(project)["content"] != whole
    assert saved["per_sample"] == 900.0 and saved["ran"] == {"toy_parts.py": ["parts"]}


def test_another_environments_entry_whose_digest_is_this_trees_is_given_its_files(project):
    """An entry keyed by its files whole (digest.Read.whole) of another environment: given those files, so that a
    session there tells a changed file at its start; its packages are that machine's, so it keeps its digest."""
    whole = loader_code.read(("toy_parts:parts", {"n": 40}), project).whole
    this, stale = an_entry(project, content=whole), an_entry(project, n=50, content="0" * 16)
    path = write(project / "instructions.json", {"this-env": {"t::a": this}, "gpu-env": {"t::a": this, "t::b": stale}})
    said = []
    recount.recount(path, project, FakeCounter(), said.append)
    saved = json.loads(path.read_text())["environments"]["gpu-env"]
    files = {"toy_parts.py": loader_code.code_hash(project / "toy_parts.py")[:instructions.FILE_HASH]}
    assert saved == {"t::a": {**this, "files": files}, "t::b": stale}  # nothing counted there; the stale one as it was
    assert said[-1].endswith("(gpu-env): 1 entries given their files (their digest is this tree's)")
