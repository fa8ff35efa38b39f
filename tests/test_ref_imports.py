"""REF's processes import REF's code from REF's tree, whatever points the interpreter at the working tree
(torch_perf_suite/ref_imports.py): the finder on small trees, then a src-layout project installed with `pip install -e`
(setuptools' `.pth` path, and its import finder for a `package-dir` mapping) whose loader settings change in the
working tree, run with `--perf-against HEAD`."""

import importlib
import importlib.abc
import importlib.machinery
import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import torch

from tests.against.test_against import git
from tests.conftest import WITHOUT_HYPOTHESIS
from torch_perf_suite import ref_imports
from torch_perf_suite.loader import count_worker, turn_worker, turns


@pytest.fixture
def trees(tmp_path, monkeypatch):
    """(W, R, a unique module name prefix); the finder and what the test imported removed afterwards."""
    w, r = tmp_path / "work", tmp_path / "cache" / "ref" / "tree"
    w.mkdir()
    r.mkdir(parents=True)
    prefix = f"rfmod_{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in (ref_imports.WORKTREE, ref_imports.REF_TREE, ref_imports.SAID, ref_imports.LABEL):
        monkeypatch.delenv(name, raising=False)
    yield w, r, prefix
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, ref_imports.RefFinder)
                        and type(f).__name__ != "RefFinder"]
    for name in [n for n in sys.modules if n.startswith(prefix) or n == "_perf_ref_imports"]:
        del sys.modules[name]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def both(w: Path, r: Path, relative: str, value: str = "VALUE = {!r}\n") -> None:
    write(w / relative, value.format("head"))
    write(r / relative, value.format("ref"))


def mapped(w: Path, r: Path, said: Path | None = None) -> ref_imports.RefFinder:
    return ref_imports.install(ref_imports.Mapping((str(w),), str(r), "REF (abc)", str(said) if said else None))


def test_a_plain_module_found_in_the_working_tree_is_imported_from_refs_tree(trees):
    w, r, prefix = trees
    both(w, r, f"src/{prefix}.py")
    sys.path.insert(0, str(w / "src"))  # setuptools' static .pth of a src layout
    mapped(w, r)
    module = importlib.import_module(prefix)
    assert (module.VALUE, module.__file__) == ("ref", str(r / "src" / f"{prefix}.py"))


def test_a_package_and_its_submodules_come_from_refs_tree(trees):
    w, r, prefix = trees
    both(w, r, f"src/{prefix}/__init__.py")
    both(w, r, f"src/{prefix}/data.py")
    sys.path.insert(0, str(w / "src"))
    mapped(w, r)
    data = importlib.import_module(f"{prefix}.data")
    assert data.VALUE == "ref" and sys.modules[prefix].__path__ == [str(r / "src" / prefix)]


def test_a_package_another_finder_makes_with_no_folder_is_left_as_it_is(trees, monkeypatch):
    """six.moves: six's meta path importer answers with a package spec whose search locations are empty (dateutil
    imports it, under matplotlib as the report draws its charts); REF's finder raised IndexError on it, and a
    bisected commit's session on the GPU image ended in that error (docs/measurements/creep.md)."""
    w, r, prefix = trees

    class Virtual(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path=None, target=None):
            if fullname == f"{prefix}_moves":
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)  # search locations: []
            return None

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            module.VALUE = "virtual"

    monkeypatch.setattr(sys, "meta_path", [Virtual(), *sys.meta_path])
    mapped(w, r)
    assert importlib.import_module(f"{prefix}_moves").VALUE == "virtual"


def test_a_namespace_packages_folders_are_mapped(trees):
    w, r, prefix = trees
    both(w, r, f"src/{prefix}/inner.py")  # no __init__.py
    sys.path.insert(0, str(w / "src"))
    mapped(w, r)
    assert importlib.import_module(f"{prefix}.inner").VALUE == "ref"
    assert list(sys.modules[prefix].__path__) == [str(r / "src" / prefix)]


def test_setuptools_strict_link_tree_maps_through_its_symlinks(trees):
    w, r, prefix = trees
    both(w, r, f"src/{prefix}/__init__.py")
    both(w, r, f"src/{prefix}/data.py")
    links = w / "build" / "__editable__.x-0.1-py3-none-any"  # editable_mode=strict: a tree of links into the sources
    (links / prefix).mkdir(parents=True)
    for name in ("__init__.py", "data.py"):
        (links / prefix / name).symlink_to(w / "src" / prefix / name)
    sys.path.insert(0, str(links))
    mapped(w, r)
    assert importlib.import_module(f"{prefix}.data").VALUE == "ref"


def test_a_module_refs_tree_lacks_fails_in_one_line_said_to_the_parent(trees, tmp_path):
    w, r, prefix = trees
    write(w / "src" / f"{prefix}.py", "VALUE = 'new'\n")
    sys.path.insert(0, str(w / "src"))
    said = tmp_path / "said.txt"
    mapped(w, r, said)
    with pytest.raises(ModuleNotFoundError) as e:
        importlib.import_module(prefix)
    line = (f"REF (abc)'s run imports {prefix} from the working tree ({w / 'src' / prefix}.py), and REF (abc)'s tree "
            f"has no {r / 'src' / prefix}.py (deleted or never committed at REF (abc), or generated): commit it, or "
            "compare with a commit that has it")
    assert str(e.value) == line and e.value.name == prefix
    assert ref_imports.read_said(said) == ([line], [])


def test_the_harness_the_refs_cache_folder_and_the_interpreter_are_never_mapped(trees):
    w, r, _ = trees
    mapping = ref_imports.Mapping((str(w),), str(r))
    finder = ref_imports.RefFinder(mapping)
    assert finder.find_spec("torch_perf_suite.against.ref") is None
    harness = ref_imports.Mapping((ref_imports.HERE,), str(r))  # the suite's own checkout as the working tree
    assert harness.counterpart(os.path.join(ref_imports.HERE, "against.py")) is None
    assert mapping.counterpart(str(r.parent / "plugin" / "perf_against_select.py")) is None  # beside REF's tree
    assert mapping.counterpart(str(w / ".venv" / "lib" / "site-packages" / "torch" / "__init__.py")) is None
    assert mapping.counterpart(str(w / "src" / "m.py")) == (str(w), str(r / "src" / "m.py"))
    kernel = w / ".pytest_cache" / "d" / "perf-against" / "ref-pytest-cache" / "d" / "perf-compile" / "c2f.main.so"
    assert mapping.counterpart(str(kernel)) is None  # torch.compile's kernel, loaded by path from a cache in W


def test_a_conftest_that_puts_refs_src_first_keeps_working(trees):
    """In REF's run the conftest.py is REF's: the folder it inserts is REF's, found first, and left as it is."""
    w, r, prefix = trees
    both(w, r, f"src/{prefix}.py")
    sys.path[:0] = [str(r / "src"), str(w / "src")]
    mapped(w, r)
    assert importlib.import_module(prefix).VALUE == "ref"


def test_the_guard_names_a_module_imported_from_the_working_tree_before_the_finder(trees, tmp_path):
    w, r, prefix = trees
    both(w, r, f"src/{prefix}.py")
    sys.path.insert(0, str(w / "src"))
    importlib.import_module(prefix)  # before the finder: the working tree's
    said = tmp_path / "said.txt"
    mapped(w, r, said)
    errors, notes = ref_imports.finish()
    assert errors == [f"REF (abc)'s run imported {prefix} from the working tree ({w / 'src' / prefix}.py), not from "
                      f"REF (abc)'s tree ({r / 'src' / prefix}.py): imported before the harness mapped REF (abc)'s "
                      "imports (by a plugin or a .pth file) or by its file's path; import it by name, after pytest "
                      "starts"] and notes == []


def test_code_installed_from_the_working_tree_without_e_is_said_not_compared(trees, tmp_path):
    w, r, prefix = trees
    site = tmp_path / "site-packages"
    write(site / f"{prefix}.py", "")
    info = site / f"{prefix}-0.1.dist-info"
    write(info / "METADATA", f"Metadata-Version: 2.1\nName: {prefix}\nVersion: 0.1\n")
    write(info / "top_level.txt", prefix + "\n")
    write(info / "direct_url.json", json.dumps({"url": w.as_uri(), "dir_info": {}}))
    sys.path.insert(0, str(site))
    importlib.import_module(prefix)
    mapped(w, r)
    assert ref_imports.finish() == ([], [
        f"{prefix} is installed into site-packages from the working tree ({w}) without -e: REF (abc)'s run and the "
        f"head's ran the same installed code, so they were not compared; install it with `pip install -e {w}`, or put "
        "its folder on PYTHONPATH"])


def test_a_bisected_commits_run_passes_its_own_mapping_on_to_its_refs(trees, monkeypatch, tmp_path):
    w, r, _ = trees
    commit = w / ".pytest_cache" / "bisect" / "tree"
    monkeypatch.setenv(ref_imports.WORKTREE, str(w))  # the commit's run: the checkout mapped onto the commit's tree
    monkeypatch.setenv(ref_imports.REF_TREE, str(commit))
    env = ref_imports.child_env(commit, r, "REF (abc)", tmp_path / "said.txt")
    assert env[ref_imports.WORKTREE] == os.pathsep.join([str(w), str(commit)]) and env[ref_imports.REF_TREE] == str(r)
    mapping = ref_imports.from_env(env)
    assert mapping.counterpart(str(commit / "src" / "m.py"))[1] == str(r / "src" / "m.py")  # the deepest tree


def test_the_counting_process_builds_refs_loader(trees, monkeypatch):
    w, r, prefix = trees
    loader = "import torch\ndef parts():\n    return [torch.tensor([{!r}])] * 4, torch.stack\n"
    both(w, r, f"src/{prefix}.py", loader.replace("{!r}", "{!r}.__len__() * 1.0"))
    sys.path.insert(0, str(w / "src"))
    monkeypatch.setenv(ref_imports.WORKTREE, str(w))
    monkeypatch.setenv(ref_imports.REF_TREE, str(r))
    out, threads = io.StringIO(), torch.get_num_threads()
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # this process's torch left as it is
    count_worker.serve(io.StringIO(json.dumps({"factory": f"{prefix}:parts", "kwargs": {}}) + "\ngo\n"), out)
    assert out.getvalue().split() == ["started", "ready", "done"] and torch.get_num_threads() == threads
    assert sys.modules[prefix].__file__ == str(r / "src" / f"{prefix}.py")


def test_refs_side_of_the_turns_maps_and_the_heads_does_not(trees):
    w, r, prefix = trees
    both(w, r, f"src/{prefix}.py")
    sys.path.insert(0, str(w / "src"))
    t = turns.Turns()
    t.aim(r / "sub", w / "sub", (w, r))
    assert t.maps == {"REF": {"worktrees": [str(w)], "ref_tree": str(r), "label": "REF"}, "the working tree": None}
    turn_worker.mapped({"map": t.maps["REF"]})
    assert importlib.import_module(prefix).VALUE == "ref"


# --- a user's project, installed with pip install -e, end to end ----------------------------------------------------

TEST = """import torch
from {pkg} import data

from torch_perf_suite import TrainingStep


def test_step(perf):
    model = torch.nn.Linear(1, 1)
    step = TrainingStep(model, torch.optim.SGD(model.parameters(), lr=0.01), data.loss_fn,
                        data.make_loader(), torch.device("cpu"))
    perf.assert_baseline(perf.measure(step))
    step.close()
"""
DATA = """import torch


class Items(torch.utils.data.Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.tensor([float(i % 4)]), torch.tensor([0.0])


def loader_parts():
    return Items(), torch.utils.data.default_collate


def make_loader():
    return torch.utils.data.DataLoader(Items(), batch_size=8, num_workers=2, persistent_workers=True)


def loss_fn(out, target):
    return torch.nn.functional.mse_loss(out, target)
"""
# in the working tree at once: a loader setting, 300 Python lines and a 5 ms sleep a step in the loss
PLANTS = [("num_workers=2, persistent_workers=True", "num_workers=0"),
          ("    return torch.nn.functional.mse_loss", "    for _ in range(150):\n        pass\n"
           "    __import__('time').sleep(0.005)\n    return torch.nn.functional.mse_loss")]
CAUSES = ["num_workers 2 -> 0", "Python lines a step to issue it", "data.py:loss_fn (0.00 -> 303.00)",
          "the host blocks 1.00 times a step while issuing it, 0.00 at REF"]


@pytest.fixture
def installed(tmp_path, request):
    """A project with one commit, installed with `pip install -e` (no build isolation): (its folder, the file to plant
    in); uninstalled afterwards."""
    pkg, mode = f"rfpkg_{request.param}_{uuid.uuid4().hex[:8]}", request.param
    root = tmp_path / "proj"
    where = {"pth": f"src/{pkg}", "finder": f"lib/{pkg}_impl"}[mode]
    layout = {"pth": "", "finder": f'[tool.setuptools]\npackages = ["{pkg}"]\npackage-dir = {{"{pkg}" = "{where}"}}\n'}
    write(root / "pyproject.toml", '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
          f'[project]\nname = "{pkg}"\nversion = "0.1"\n{layout[mode]}[tool.pytest.ini_options]\n')
    write(root / where / "__init__.py", "")
    write(root / where / "data.py", DATA)
    write(root / "tests" / "test_speed.py", TEST.format(pkg=pkg))
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run([*pip, "install", "--no-build-isolation", "--no-deps", "-e", str(root)], check=True,
                   capture_output=True)
    yield root, root / where / "data.py"
    subprocess.run([*pip, "uninstall", "-y", pkg], capture_output=True)


def perf_against(root: Path, *how: str) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TORCH_PERF_SUITE_"))},
           "PYTEST_ADDOPTS": WITHOUT_HYPOTHESIS}
    return subprocess.run([sys.executable, "-m", "pytest", "tests", "-p", "no:randomly", "-p", "no:xdist",
                           "--perf-smoke", "--perf-strict", *(how or ("--perf-against", "HEAD"))], cwd=root,
                          capture_output=True, text=True, env=env)


@pytest.mark.slow
@pytest.mark.parametrize("installed", ["pth", "finder"], indirect=True)
def test_an_editable_installs_planted_changes_fail_against_head(installed, request):
    """REF measured cold with the changes planted: without the mapping REF's run imported the working tree's package
    and compared the head with itself, and passed. Each plant is named. The unchanged project then passes (REF's
    results from the cache), in one mode only: each run here costs pytest processes that import torch."""
    root, data = installed
    original = planted_text = data.read_text()
    for old, new in PLANTS:
        planted_text = planted_text.replace(old, new)
    data.write_text(planted_text)
    planted = perf_against(root)
    assert planted.returncode == 1, planted.stdout[-3000:]
    assert [c for c in CAUSES if c not in planted.stdout] == [], planted.stdout[-3000:]
    if request.node.callspec.params["installed"] == "pth":
        data.write_text(original)
        same = perf_against(root)
        assert same.returncode == 0, same.stdout[-3000:] + same.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("installed", ["pth"], indirect=True)
def test_a_bisection_of_an_editable_install_names_the_commit_that_planted_the_sleep(installed):
    """Each commit's run imports that commit's code, not the checkout's (which holds the sleep): without the mapping
    every commit, GOOD too, measured the checkout and none was first bad."""
    root, data = installed
    for i in range(1, 3):  # the sleep, then an unrelated change: the planted commit is judged between GOOD and BAD
        if i == 1:
            data.write_text(data.read_text().replace(*PLANTS[1]))
        else:
            (root / "notes.txt").write_text(f"change {i}\n")
        git(root, "add", str(data if i == 1 else root / "notes.txt"))
        git(root, "commit", "-qm", f"change {i}")
    planted = git(root, "rev-parse", "HEAD~1")
    found = perf_against(root, "--perf-bisect", "HEAD~2..HEAD")
    assert f"first bad commit: {planted[:12]} 'change 1'" in found.stdout, found.stdout[-3000:]
    assert "the host blocks 1.00 times a step while issuing it, 0.00 at REF" in found.stdout, found.stdout[-3000:]
