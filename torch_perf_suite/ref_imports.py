"""REF's code imported from REF's tree, in the processes that run it: REF's pytest under --perf-against
(against/ref.py), its loader's counting process (loader/count_worker.py), REF's side of the turns (loader/turn_worker.py)
and a commit's run under --perf-bisect (against/bisecting.py, where REF is the commit's worktree and the working tree
the user's checkout).

A project installed with `pip install -e .` imports its package from the working tree W whatever the folder a process
runs in, so REF's run would measure the head's code against itself. `RefFinder`, first on `sys.meta_path`, asks the
other finders and, where the spec found lies in W (its file with symlinks resolved, so setuptools' strict link tree
maps too; a namespace package's folders), returns the spec of the same path in REF's tree R instead. This covers the
static `.pth` path of a src layout, setuptools' link tree (`editable_mode=strict`) and its import finder (a
`package-dir` mapping), and a folder put on the path by hand. Not mapped: the harness's own package `torch_perf_suite`
(the harness that measures both sides is the head's), what lies in R already or in the folder that holds it (REF's
cached results and the selection plugin), what lies under a dot-folder of W (a cache's generated code: torch.compile's
kernels under `.pytest_cache`), and the interpreter's folders (a virtual environment inside W, site-packages).

A module with no counterpart in R (deleted or never committed at REF, or generated) fails the run in one line. At the
end of REF's process `finish` names any module still imported from W (imported before the finder was installed, or by
its file's path) and says, once, where the code under test was installed into site-packages from W without `-e`:
there REF and the head run the same installed code. Lines go to the file named by SAID, which the parent reads.

No import of the harness's other modules, nor of pytest: loader/turn_worker.py loads this file by its path.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

WORKTREE = "TORCH_PERF_SUITE_WORKTREE"  # the working trees mapped (os.pathsep between them: a bisected commit's run
# maps the user's checkout, and its REF's run that checkout and the commit's worktree)
REF_TREE = "TORCH_PERF_SUITE_REF_TREE"  # REF's tree, the top of its files
SAID = "TORCH_PERF_SUITE_REF_SAID"  # a file the process appends its errors and notes to, one a line
LABEL = "TORCH_PERF_SUITE_REF_LABEL"  # how the lines name REF
HARNESS = "torch_perf_suite"
HERE = os.path.dirname(os.path.realpath(__file__))  # the harness's package folder, never mapped


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _harness(name: str) -> bool:
    return name == HARNESS or name.startswith(HARNESS + ".")


@dataclass(frozen=True)
class Mapping:
    worktrees: tuple[str, ...]
    ref_tree: str
    label: str = "REF"
    said: str | None = None

    def counterpart(self, path: str) -> tuple[str, str] | None:
        """(the working tree holding `path`, the same relative path in REF's tree), or None where it is not mapped."""
        if _under(path, os.path.dirname(self.ref_tree)) or _under(path, HERE) or _interpreter(path):
            return None
        tree = max((w for w in self.worktrees if _under(path, w)), key=len, default=None)
        if tree is None or _hidden(os.path.relpath(path, tree)):
            return None
        return tree, os.path.join(self.ref_tree, os.path.relpath(path, tree))


def _hidden(relative: str) -> bool:
    """A path under a dot-folder of the working tree: a cache's generated code (torch.compile's kernels under
    `.pytest_cache`, REF's own pytest cache beside REF's tree), not the project's."""
    return any(part.startswith(".") and part not in (".", "..") for part in relative.split(os.sep)[:-1])


def _interpreter(path: str) -> bool:
    parts = path.split(os.sep)
    return "site-packages" in parts or "dist-packages" in parts or any(
        _under(path, os.path.realpath(p)) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})


class RefFinder(importlib.abc.MetaPathFinder):
    """The other finders' spec, taken from REF's tree where it lies in the working tree."""

    def __init__(self, mapping: Mapping):
        self.mapping = mapping
        self.errors: list[str] = []

    def find_spec(self, fullname, path=None, target=None):
        if _harness(fullname):
            return None
        spec = self._found(fullname, path, target)
        if spec is None:
            return None
        if spec.origin and spec.has_location:
            return self._file(spec)
        return self._namespace(spec) if spec.submodule_search_locations is not None else spec

    def _found(self, fullname, path, target):
        for finder in list(sys.meta_path):
            if finder is self or isinstance(finder, RefFinder) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def _file(self, spec):
        real = os.path.realpath(spec.origin)
        found = self.mapping.counterpart(real)
        if found is None:
            return spec
        if not os.path.isfile(found[1]):
            raise self._missing(spec.name, real, found[1])
        package = spec.submodule_search_locations is not None
        return importlib.util.spec_from_file_location(
            spec.name, found[1], submodule_search_locations=[os.path.dirname(found[1])] if package else None)

    def _namespace(self, spec):
        if not spec.submodule_search_locations:  # another finder's package with nothing on disk: six.moves (six's own
            return spec  # meta path importer's, which dateutil imports under matplotlib) has no folder to map
        kept, missing = [], []
        for location in list(spec.submodule_search_locations):
            found = self.mapping.counterpart(os.path.realpath(location))
            if found is None or os.path.isdir(found[1]):
                kept.append(location if found is None else found[1])
            else:
                missing.append((os.path.realpath(location), found[1]))
        if not kept:  # a portion REF lacks is left out, as at REF; none left is a module REF does not have
            raise self._missing(spec.name, *missing[0])
        mapped = importlib.machinery.ModuleSpec(spec.name, None, is_package=True)
        mapped.submodule_search_locations = kept
        return mapped

    def _missing(self, name: str, path: str, ref_path: str) -> ModuleNotFoundError:
        label = self.mapping.label
        line = (f"{label}'s run imports {name} from the working tree ({path}), and {label}'s tree has no {ref_path} "
                f"(deleted or never committed at {label}, or generated): commit it, or compare with a commit that has "
                "it")
        if line not in self.errors:
            self.errors.append(line)
            write_said(self.mapping, "error", line)
        return ModuleNotFoundError(line, name=name)


def install(mapping: Mapping) -> RefFinder:
    """The finder first on sys.meta_path (one that was there before replaced); the import caches cleared."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, RefFinder)]
    finder = RefFinder(mapping)
    sys.meta_path.insert(0, finder)
    importlib.invalidate_caches()
    return finder


def from_env(environ=os.environ) -> Mapping | None:
    """The mapping this process runs under, as its parent set it; None where it runs the working tree's code."""
    trees, ref_tree = environ.get(WORKTREE), environ.get(REF_TREE)
    if not (trees and ref_tree):
        return None
    return Mapping(tuple(os.path.realpath(t) for t in trees.split(os.pathsep) if t), os.path.realpath(ref_tree),
                   environ.get(LABEL) or "REF", environ.get(SAID) or None)


def install_from_env() -> RefFinder | None:
    """Installed where this process runs REF's code (the variables set), once."""
    mapping = from_env()
    if mapping is None:
        return None
    current = installed_finder()
    return current if current is not None and current.mapping == mapping else install(mapping)


def installed_finder() -> RefFinder | None:
    return next((f for f in sys.meta_path if isinstance(f, RefFinder)), None)


def child_mapping(worktree, ref_tree, label: str = "REF", said=None) -> Mapping | None:
    """What a process running REF's code maps: `worktree` (this process's working tree) and the trees this process
    maps itself (a bisected commit's run), onto `ref_tree`; None where there is no working tree to map."""
    inherited = from_env()
    trees = [*(inherited.worktrees if inherited else ()), *([os.path.realpath(worktree)] if worktree else [])]
    if not trees:
        return None
    return Mapping(tuple(dict.fromkeys(trees)), os.path.realpath(ref_tree), label, str(said) if said else None)


def child_env(worktree, ref_tree, label: str = "REF", said=None) -> dict[str, str]:
    """The variables that make a process run REF's code from `ref_tree` (child_mapping); SAID always, where given."""
    mapping = child_mapping(worktree, ref_tree, label, said)
    env = {SAID: str(said)} if said else {}
    if mapping is not None:
        env.update({WORKTREE: os.pathsep.join(mapping.worktrees), REF_TREE: mapping.ref_tree, LABEL: label})
    return env


def as_request(mapping: Mapping | None) -> dict | None:
    return None if mapping is None else {"worktrees": list(mapping.worktrees), "ref_tree": mapping.ref_tree,
                                         "label": mapping.label}


def leaks(mapping: Mapping) -> list[str]:
    """One line for each module imported from the working tree in this process (not the harness's)."""
    found = []
    for name, module in sorted(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file or _harness(name):
            continue
        real = os.path.realpath(file)
        where = mapping.counterpart(real)
        if where is not None:
            found.append(f"{mapping.label}'s run imported {name} from the working tree ({real}), not from "
                         f"{mapping.label}'s tree ({where[1]}): imported before the harness mapped {mapping.label}'s "
                         "imports (by a plugin or a .pth file) or by its file's path; import it by name, after pytest "
                         "starts")
    return found


def installed_copies(mapping: Mapping) -> list[str]:
    """A line for each distribution installed into site-packages from a working tree without -e whose modules this
    process imported: REF's run and the head's ran the same installed code."""
    tops = {name.partition(".")[0] for name in sys.modules if not _harness(name)}
    owners = importlib.metadata.packages_distributions()
    lines = []
    for dist in sorted({d for top in tops for d in owners.get(top, ())}):
        try:
            url = json.loads(importlib.metadata.distribution(dist).read_text("direct_url.json") or "{}")
        except (importlib.metadata.PackageNotFoundError, ValueError):
            continue
        source = os.path.realpath(unquote(urlparse(url.get("url", "")).path)) if url.get("url", "").startswith(
            "file://") else None
        if source and not url.get("dir_info", {}).get("editable") and any(_under(source, w) for w in mapping.worktrees):
            lines.append(f"{dist} is installed into site-packages from the working tree ({source}) without -e: "
                         f"{mapping.label}'s run and the head's ran the same installed code, so they were not compared; "
                         f"install it with `pip install -e {source}`, or put its folder on PYTHONPATH")
    return lines


def write_said(mapping: Mapping, kind: str, line: str) -> None:
    """A line for the session that runs REF (read_said): an error or a note, appended to the file SAID names."""
    if mapping.said:
        with open(mapping.said, "a") as f:
            f.write(f"{kind}\t{line}\n")


def read_said(path) -> tuple[list[str], list[str]]:
    """(errors, notes) a process running REF's code wrote to `path` (SAID), each once, in order."""
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return [], []
    kinds = {"error": [], "note": []}
    for line in dict.fromkeys(lines):
        kind, _, text = line.partition("\t")
        kinds.get(kind, kinds["error"]).append(text)
    return kinds["error"], kinds["note"]


def finish() -> tuple[list[str], list[str]]:
    """At the end of a process that ran REF's code: its leaks and installed copies written to SAID; returns (errors,
    notes) of this process and of those it started (its counting process), or of this one alone without SAID."""
    finder = installed_finder()
    if finder is None:
        return [], []
    errors, notes = leaks(finder.mapping), installed_copies(finder.mapping)
    for kind, lines in (("error", errors), ("note", notes)):
        for line in lines:
            write_said(finder.mapping, kind, line)
    if finder.mapping.said:
        return read_said(finder.mapping.said)
    return [*finder.errors, *errors], notes
