"""The content of the loader's code (digest.py): the files and functions a loader runs and reads, hashed by their
code; a count is reused only where it is unchanged."""

import hashlib
import sys

import pytest

from torch_perf_suite.loader import digest as loader_code
from torch_perf_suite.loader import instructions


def _write_loader(folder, body: str, other: str = "X = 1\n", times: str = "N = 1\n") -> None:
    (folder / "mydata.py").write_text(
        "import torch\n"
        "from torch.utils.data import default_collate\n"
        "import myother\n"
        "from mytimes import N\n\n"
        "class Items(torch.utils.data.Dataset):\n"
        "    def __len__(self):\n        return 100\n\n"
        f"    def __getitem__(self, i):\n        {body}\n\n"
        "def parts():\n    return Items(), default_collate\n")
    (folder / "myother.py").write_text(other)
    (folder / "mytimes.py").write_text(times)


def test_a_one_line_change_in_getitem_changes_the_digest_and_an_unrelated_file_does_not(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    digests = []
    for body, other, times in [("return torch.tensor(float(i))", "X = 1\n", "N = 1\n"),
                               ("return torch.tensor(float(i))", "X = 2\n", "N = 1\n"),
                               ("return torch.tensor(float(i + 1))", "X = 2\n", "N = 1\n"),
                               ("return torch.tensor(float(i + 1))", "X = 2\n", "N = 5\n"),
                               ("return torch.tensor(float(i + N))", "X = 2\n", "N = 5\n"),
                               ("return torch.tensor(float(i + N))", "X = 2\n", "N = 1\n")]:
        _write_loader(tmp_path, body, other, times)
        for name in ("mydata", "myother", "mytimes"):
            sys.modules.pop(name, None)
        digests.append(loader_code.content(("mydata:parts", {}), tmp_path))
    assert digests[0] == digests[1]  # myother.py is imported, never read: not the loader's code
    assert digests[1] != digests[2]  # one line of __getitem__: counted again
    assert digests[2] == digests[3]  # mytimes.N, imported and not read
    assert len({digests[3], digests[4], digests[5]}) == 3  # read now, its constant changed: counted again


def test_a_constant_read_through_its_module_is_the_loaders_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    digests = []
    for other in ("X = 1\n", "X = 5\n"):
        _write_loader(tmp_path, "return torch.tensor(float(i * myother.X))", other)
        for name in ("mydata", "myother", "mytimes"):
            sys.modules.pop(name, None)
        digests.append(loader_code.content(("mydata:parts", {}), tmp_path))
    assert digests[0] != digests[1]


def test_the_digest_names_files_by_the_rootdir_not_by_the_folder_pytest_ran_from(tmp_path, monkeypatch):
    # CI runs an example project from the repository's top (`pytest examples/guard_your_step`), a user from its folder:
    # one count recorded serves both, as the plugin passes the rootdir
    project = tmp_path / "examples" / "project"
    project.mkdir(parents=True)
    monkeypatch.syspath_prepend(str(project))
    _write_loader(project, "return torch.tensor(float(i))")
    digests = []
    for cwd in (project, tmp_path):
        monkeypatch.chdir(cwd)
        sys.modules.pop("mydata", None)
        digests.append(loader_code.content(("mydata:parts", {}), project))
    assert digests[0] == digests[1] != loader_code.content(("mydata:parts", {}), tmp_path)


def test_an_entry_names_its_files_and_a_changed_one_is_found_at_a_sessions_start(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    _write_loader(tmp_path, "return torch.tensor(float(i * myother.X))", "X = 1\n")
    for name in ("mydata", "myother", "mytimes"):
        sys.modules.pop(name, None)
    read = loader_code.read(("mydata:parts", {}), tmp_path)
    assert sorted(read.files) == ["mydata.py", "myother.py"]  # mytimes.py is imported, never read
    assert read.ran == {"mydata.py": ("Items.__getitem__", "Items.__len__", "parts"), "myother.py": ()}
    assert read.digest == loader_code.content(("mydata:parts", {}), tmp_path)
    counted = instructions.Counted(5.0, 16, "s", read.digest, read)
    f = instructions.InstructionsFile(tmp_path / "i.json", {})
    f.save("k", {"t": instructions.entry(counted)})
    f = instructions.InstructionsFile.load(tmp_path / "i.json")  # the entry as written is one the suite reads
    assert loader_code.changed_files(f, ["k"], tmp_path) == []
    assert loader_code.changed_files(f, ["another key"], tmp_path) == []
    (tmp_path / "myother.py").write_text("X = 5\n")  # a constant the loader reads: its count will follow
    assert loader_code.changed_files(f, ["k"], tmp_path) == ["myother.py"]
    (tmp_path / "mydata.py").unlink()
    assert loader_code.changed_files(f, ["k"], tmp_path) == ["mydata.py", "myother.py"]


def test_an_edit_of_a_function_the_loader_never_runs_counts_no_loader_again(tmp_path, monkeypatch):
    """A model's training_step in the file that holds the dataset is not the loader's code; the dataset's __getitem__,
    a method of a class nested in it, a function a lambda of the loader lives in, and the module's constants are."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    source = ("mixed:parts", {})

    def digest(getitem="return float(i * SCALE)", step="return batch", scale="2", nested="return i", made="lambda i: i"):
        (tmp_path / "mixed.py").write_text(
            f"SCALE = {scale}\n\n\nclass Model:\n    def training_step(self, batch):\n        {step}\n\n\n"
            "class Items:\n    class Helper:\n        @staticmethod\n"
            f"        def of(i):\n            {nested}\n\n    def __len__(self):\n        return 10\n\n"
            f"    def __getitem__(self, i):\n        {getitem}\n\n\ndef shift():\n    return {made}\n\n\n"
            "def parts():\n    items, f = Items(), shift()\n"
            "    return items, lambda batch: [Items.Helper.of(f(b)) for b in batch]\n")
        sys.modules.pop("mixed", None)
        return loader_code.content(source, tmp_path)

    first = digest()
    assert digest(step="return batch * 2") == first  # the model's step: no count
    assert loader_code.read(source, tmp_path).ran == {
        "mixed.py": ("Items.Helper.of", "Items.__getitem__", "Items.__len__", "parts", "shift")}
    changed = [digest(getitem="return float(i * SCALE + 1)"), digest(scale="3"), digest(nested="return i + 1"),
               digest(made="lambda i: i + 1")]
    assert first not in changed and len(set(changed)) == 4


def test_a_file_the_loader_opens_and_a_package_whose_code_runs_are_what_it_reads(tmp_path, monkeypatch):
    """A config read by the dataset, by its bytes (an augmentation's strength: its code unchanged); a package that is
    not the environment's key's, by its version."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "configured", raising=False)  # a run before this one's, imported from its folder
    (tmp_path / "aug.json").write_text('{"strength": 1}')
    (tmp_path / "configured.py").write_text(
        "import json\nimport pytest\n\n\nclass Items:\n    def __init__(self):\n"
        "        self.strength = json.load(open('aug.json'))['strength']\n\n    def __len__(self):\n        return 10\n\n"
        "    def __getitem__(self, i):\n        return pytest.approx(i * self.strength)\n\n\n"
        "def parts():\n    return Items(), list\n")
    read = loader_code.read(("configured:parts", {}), tmp_path)
    assert "aug.json" in read.files and "aug.json" not in read.ran
    assert read.packages == {"pytest": pytest.__version__}  # json is the interpreter's own: no package
    assert read.describe() == ("Items.__getitem__, Items.__init__, Items.__len__ and parts of configured.py; aug.json; "
                               f"pytest {pytest.__version__}")
    (tmp_path / "aug.json").write_text('{"strength": 200}')
    assert loader_code.read(("configured:parts", {}), tmp_path).digest != read.digest
    f = instructions.InstructionsFile(tmp_path / "i.json", {})
    f.save("k", {"t": instructions.entry(instructions.Counted(5.0, 16, "s", read.digest, read))})
    assert loader_code.changed_files(f, ["k"], tmp_path) == ["aug.json"]
    monkeypatch.setattr(loader_code.importlib.metadata, "version", lambda dist: "0.0")
    assert loader_code.changed_files(f, ["k"], tmp_path) == ["aug.json", f"pytest {pytest.__version__} -> 0.0"]


def test_a_files_hash_is_of_its_code_not_its_comments_or_docstrings(tmp_path):
    """A comment or docstring edit counts no loader again (a count under callgrind takes a minute a loader on a GPU
    host); an edit of the code, a constant included, does."""
    code = tmp_path / "m.py"
    hashes = {}
    for name, text in [("code", '"""Doc."""\nN = 1\n\n\ndef f(x):\n    """Doc."""\n    return x + N  # note\n'),
                       ("comments and docstrings edited", '"""Other doc."""\n# a comment\nN = 1\n\n\ndef f(x):\n'
                                                          '    """Other."""\n    return x + N\n'),
                       ("docstring dropped", 'N = 1\n\n\ndef f(x):\n    return x + N\n'),
                       ("constant", 'N = 2\n\n\ndef f(x):\n    return x + N\n'),
                       ("expression", 'N = 2\n\n\ndef f(x):\n    return x * N\n'),
                       ("two statements", 'N = 2\n\n\ndef f(x):\n    x = x * N\n    return x\n'),
                       ("a string that is not a docstring", 'N = 2\n\n\ndef f(x):\n    x = x * N\n    "kept"\n'
                                                            '    return x\n')]:
        code.write_text(text)
        hashes[name] = loader_code.code_hash(code)
    assert hashes["code"] == hashes["comments and docstrings edited"] == hashes["docstring dropped"]
    assert len({hashes[k] for k in ("code", "constant", "expression", "two statements",
                                    "a string that is not a docstring")}) == 5
    broken, data = tmp_path / "broken.py", tmp_path / "table.csv"
    for path, text in ((broken, "def f(:\n"), (data, "a,b\n")):  # by their bytes: one that does not parse, not Python
        path.write_text(text)
        assert loader_code.code_hash(path) == hashlib.sha256(text.encode()).hexdigest()


def test_the_digest_is_how_the_count_is_taken_then_each_file_in_the_order_of_its_parts_then_each_package():
    # how the count is taken, then each path in the order of its parts ("a/x" before "a-b/x") and its hash, then each
    # package and its version: a count taken another way (keyed by its files whole, COUNTED_AS 2) is counted again
    files = {"a-b/x.py": "00" * 32, "a/x.py": "11" * 32}
    expected = hashlib.sha256(b"counted as 3\0a/x.py\0" + bytes(32 * [0x11]) + b"a-b/x.py\0" + bytes(32)
                              + b"albumentations==1.4.0\0").hexdigest()[:16]
    assert loader_code.digest_of(files, {"albumentations": "1.4.0"}) == expected
    assert loader_code.Read(files, packages={"albumentations": "1.4.0"}).digest == expected


def test_the_harness_is_not_the_loaders_code(tmp_path, monkeypatch):
    # Python 3.11 runs a comprehension as a function of its own: content()'s samples are made in one, in instructions.py
    monkeypatch.chdir(instructions.Path(instructions.__file__).parent.parent)
    monkeypatch.syspath_prepend(str(tmp_path))
    _write_loader(tmp_path, "return torch.tensor(float(i))")
    sys.modules.pop("mydata", None)
    seen = []
    monkeypatch.setattr(instructions.Path, "read_bytes", lambda self: seen.append(self.name) or b"")
    loader_code.content(("mydata:parts", {}))
    assert seen == []  # mydata.py lies outside this root; loader_code.py, inside it, is the harness's
