"""What a loader reads (`Read`), and its digest (instructions.py): a count recorded for the same digest, environment and
loader is the answer; where what it read changed since, a count follows.

What a loader reads, found by building it and making its samples once under a profile and an audit hook (`read`):
- the project's functions that run (its dataset's methods, its collate function, its transforms and what they call),
  each file's code kept only for them: a model's `training_step` in the file that holds the dataset is not the loader's
  code, and an edit of it counts no loader again (`code_hash`);
- the files of the project it opens (a config, a data index, a tokenizer's files), by their bytes;
- the packages whose code runs (an augmentation library, OpenCV, a tokenizer), by their versions: an upgrade counts
  the loader again, and its count is judged against the one recorded. Python, torch, torchvision, Pillow and numpy are
  in the environment's key instead (instructions.key): a count of another is another environment's.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..counts.host_side import short_path
from .instructions import SAMPLES, STRIDE, load_factory

if TYPE_CHECKING:
    from .instructions import InstructionsFile

COUNTED_AS = 3  # how count_worker takes a count and what the digest holds: 3 since it holds what the loader reads
# (2: its warm-up makes the counted samples once, the files of its code whole). A count taken another way is counted
# again (docs/counted-gates.md); one of 2 whose files are unchanged whole is this one (`Read.whole`)
IN_KEY = frozenset({"torch", "torchvision", "pillow", "numpy"})  # the packages instructions.key names
HARNESS = "torch-perf-suite"
IMPORT_SYSTEM = "<frozen importlib._bootstrap>"


@dataclass(frozen=True)
class Read:
    """What a loader reads: `files`, path (from the rootdir) -> the SHA-256 of what of it the loader runs (a Python
    file's code without the functions that never ran, another file's bytes); `ran`, a Python file -> the functions of it
    that ran (qualified names: what `code_hash` keeps); `packages`, distribution -> version, of the code outside the
    project that ran. `whole_files`: the same Python files hashed whole, as a count of COUNTED_AS 2 was keyed."""

    files: dict[str, str]
    ran: dict[str, tuple[str, ...]] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    whole_files: dict[str, str] = field(default_factory=dict)
    functions: dict[str, dict[str, tuple[str, int]]] = field(default_factory=dict)  # a Python file -> each function
    # that ran -> (its code's hash, its first line): where a count that grew names what changed
    # (loader/checks.py)

    @property
    def digest(self) -> str:
        return digest_of(self.files, self.packages)

    @property
    def whole(self) -> str:
        """The digest a count of COUNTED_AS 2 was keyed by: its Python files whole."""
        return digest_of(self.whole_files, counted_as=2)

    def describe(self) -> str:
        """What the count is keyed by, in a line: "Images.__getitem__, Images.__init__ and loader_parts of lit.py;
        aug.json; albumentations 1.4.0"."""
        code = [f"{_names(self.ran[p])} of {p}" for p in sorted(self.ran) if self.ran[p]]
        data = [p for p in sorted(self.files) if p not in self.ran]
        return "; ".join([*code, *data, *(f"{n} {v}" for n, v in sorted(self.packages.items()))]) or "no code of its own"


def _names(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def digest_of(files: dict[str, str], packages: dict[str, str] | None = None, counted_as: int = COUNTED_AS) -> str:
    """The digest of what a loader reads: how the count is taken (COUNTED_AS), each file's path (in the order of its
    parts) and hash, each package and its version."""
    digest = hashlib.sha256(f"counted as {counted_as}\0".encode())
    for path in sorted(files, key=lambda p: p.split("/")):
        digest.update(f"{path}\0".encode() + bytes.fromhex(files[path]))
    for name, version in sorted((packages or {}).items()):
        digest.update(f"{name}=={version}\0".encode())
    return digest.hexdigest()[:16]


def content(source: tuple[str, dict], root: Path | None = None) -> str:
    """The digest of what the loader of `source` reads (`read`)."""
    return read(source, root).digest


_opening: list[set[str]] = []  # the files opened while a loader is read: the audit hook's, installed once a process


def _audit(event: str, args: tuple) -> None:
    if _opening and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)) \
            and not any(c in (args[1] or "r") for c in "wax+"):
        _opening[-1].add(os.fsdecode(args[0]))


@functools.cache
def _install_audit() -> None:
    sys.addaudithook(_audit)  # an audit hook cannot be removed: it records only while `_opening` holds a set


def read(source: tuple[str, dict], root: Path | None = None) -> Read:
    """What the loader of `source` reads, as the project's files (under `root`, the current folder, and outside the
    interpreter's and its packages' folders) and the packages' versions: every Python function called while the
    factory builds the loader and its samples are made and collated (its file's code kept for the functions that ran,
    `code_hash`), the project modules whose names those functions read (a constant imported from a module whose
    functions never run), the project's other files opened meanwhile, and the distributions whose code ran. Equal
    digests, keys and sources: the same instructions, so a recorded count is the answer."""
    root = (root or Path.cwd()).resolve()
    factory, kwargs = source
    called, read_names, modules, opened = _run(load_factory(factory), kwargs)  # imported before: not the loader's code
    module_file = sys.modules[factory.partition(":")[0]].__file__
    called.setdefault(module_file, set())
    # the interpreter's folders, and the harness's own: on Python 3.11 the comprehension in _run is a call into this file
    outside = {Path(p).resolve() for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(__file__)}}

    def projects(path: Path) -> bool:
        return path.is_file() and root in path.parents and "site-packages" not in path.parts \
            and not any(o == path or o in path.parents for o in outside)

    lines: dict[Path, set[int]] = {}
    for name, firsts in called.items():
        if projects(path := Path(name).resolve()):
            lines.setdefault(path, set()).update(firsts)
    for f in sorted(lines):
        for p in _modules_read(f, read_names.get(str(f), set())):
            if projects(p):
                lines.setdefault(p, set())
    ran = {p: _outermost(p, firsts) for p, firsts in lines.items()}
    data = {p for p in (Path(name).resolve() for name in opened) if projects(p) and p not in ran and p.suffix != ".pyc"}
    name = lambda p: p.relative_to(root).as_posix()  # noqa: E731
    files = {name(p): code_hash(p, kept) for p, kept in ran.items()} | {name(p): code_hash(p) for p in data}
    functions = {name(p): {n: (hashlib.sha256(ast.dump(node).encode()).hexdigest()[:12], start)
                           for n, node, start in _defs(p) if n in kept} for p, kept in ran.items() if kept}
    return Read(files, {name(p): kept for p, kept in sorted(ran.items())},
                _packages([n for n in called if not projects(Path(n).resolve())], modules),
                whole_files={name(p): code_hash(p) for p in ran}, functions=functions)


def _run(build, kwargs: dict) -> tuple[dict[str, set[int]], dict[str, set[str]], set[str], set[str]]:
    """The loader built by its factory and its samples made and collated once, under a profile and an audit hook: (file
    -> the first lines of its code objects that ran, file -> the global and attribute names they read, the modules of
    the C functions called, the files opened to read)."""
    called: dict[str, set[int]] = {}
    read_names: dict[str, set[str]] = {}
    modules: set[str] = set()
    importing = [0]  # imports under way: what they run (finders, module bodies) is not the loader's code

    def profile(frame, event, arg):
        code = frame.f_code
        if code.co_name == "_find_and_load" and code.co_filename == IMPORT_SYSTEM and event in ("call", "return"):
            importing[0] += 1 if event == "call" else -1
        elif importing[0] or code.co_name == "<module>":
            return
        elif event == "call":
            called.setdefault(code.co_filename, set()).add(code.co_firstlineno)
            read_names.setdefault(code.co_filename, set()).update(code.co_names)
        elif event == "c_call":
            modules.add(getattr(arg, "__module__", None) or type(getattr(arg, "__self__", None)).__module__ or "")

    _install_audit()
    opened: set[str] = set()
    _opening.append(opened)
    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        dataset, collate = build(**kwargs)
        collate([dataset[i * STRIDE % len(dataset)] for i in range(SAMPLES)])
    finally:
        sys.setprofile(previous)
        _opening.remove(opened)
    return called, read_names, modules, opened


def _outermost(path: Path, firsts: set[int]) -> tuple[str, ...]:
    """The qualified names of the functions of `path` that hold a line of `firsts` (where a code object that ran
    starts: a function, a method, a lambda or a comprehension in one), each the outermost function around it."""
    spans = {name: (start, node.end_lineno) for name, node, start in _defs(path)}
    return tuple(sorted(n for n, (start, end) in spans.items() if any(start <= line <= end for line in firsts)))


def _defs(path: Path) -> list[tuple[str, ast.AST, int]]:
    """(qualified name, node, first line with its decorators) of each function of a file not inside another function:
    its module's and its classes' (nested classes included); none where it does not parse."""
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return []
    found = []

    def visit(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                found.append((prefix + child.name, child, start))
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif not isinstance(child, ast.Lambda):
                visit(child, prefix)  # an if, a try, a with at the module's or a class's level

    visit(tree, "")
    return found


@functools.cache
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _packages(files: list[str], modules: set[str]) -> dict[str, str]:
    """The distributions (and their versions) of the code outside the project that ran: the Python files called, the
    modules of the C functions called; not the interpreter's own, nor those in the environment's key (IN_KEY)."""
    tops = {m.partition(".")[0] for m in modules if m} | {t for f in files if (t := _top_level(f))}
    found = {}
    for top in tops:
        for dist in _distributions().get(top, []):
            if dist.lower() not in IN_KEY and dist != HARNESS:
                try:
                    found[dist] = importlib.metadata.version(dist)
                except importlib.metadata.PackageNotFoundError:
                    continue
    return dict(sorted(found.items()))


def _top_level(filename: str) -> str | None:
    """The top-level module a file belongs to, named from the sys.path folder that holds it (host_side.short_path)."""
    named = short_path(filename)
    if named == filename:  # in no folder of the path
        return None
    first = named.split(os.sep, 1)[0]
    return first.removesuffix(".py") if first.isidentifier() or first.endswith(".py") else None


def code_hash(path: Path, kept: tuple[str, ...] | None = None) -> str:
    """The SHA-256 of a file's code: a Python file's syntax tree without its docstrings (comments never reach it), so
    that an edit of a comment or a docstring counts no loader again, and, where `kept` names the functions that ran,
    without the others (a module's and its classes' functions, `_defs`); another file, or one that does not parse, by
    its bytes."""
    data = path.read_bytes()
    if path.suffix != ".py":
        return hashlib.sha256(data).hexdigest()
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return hashlib.sha256(data).hexdigest()
    if kept is not None:
        _prune(tree, "", set(kept))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


def _prune(node, prefix: str, kept: set[str]) -> None:
    """Remove from `node` the functions (not inside another function) whose qualified names `kept` lacks."""
    for name, body in ast.iter_fields(node):
        if not isinstance(body, list):
            continue
        left = []
        for child in body:
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if prefix + child.name in kept:
                    left.append(child)
                continue
            if isinstance(child, ast.ClassDef):
                _prune(child, f"{prefix}{child.name}.", kept)
            elif isinstance(child, ast.AST) and not isinstance(child, ast.Lambda):
                _prune(child, prefix, kept)
            left.append(child)
        setattr(node, name, left)


def changed_files(file: "InstructionsFile", env_keys, root: Path) -> list[str]:
    """What a count recorded for one of `env_keys` (this environment's) read (its entry's `files`, `ran` and
    `packages`) that is no longer what was counted: a file changed or gone, a package of another version. Where there
    is any, a loader will be counted again, and its counting process can start with the session."""
    changed = set()
    for e in (e for key in env_keys for e in file.environments.get(key, {}).values()):
        ran = e.get("ran")  # none in an entry keyed by whole files (COUNTED_AS 2)
        for path, recorded in (e.get("files") or {}).items():
            found = root / path
            kept = tuple(ran[path]) if ran is not None and path in ran else None
            if not found.is_file() or not code_hash(found, kept).startswith(recorded):
                changed.add(path)
        for dist, version in (e.get("packages") or {}).items():
            try:
                now = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                now = "none"
            if now != version:
                changed.add(f"{dist} {version} -> {now}")
    return sorted(changed)


def _modules_read(path: Path, names: set[str]) -> set[Path]:
    """The files of the modules that `path` imports and whose name, or a name taken from them, is in `names` (what its
    called functions read): `import m` then `m.X`, or `from m import X` then `X`."""

    module = next((n for n, m in list(sys.modules.items()) if getattr(m, "__file__", None) and
                   Path(m.__file__).resolve() == path), "")
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError):
        return set()
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            used |= {a.name for a in node.names if (a.asname or a.name.partition(".")[0]) in names}
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level \
                else node.module or ""
            taken = [a.name for a in node.names if (a.asname or a.name) in names]
            used |= {f"{base}.{n}" if f"{base}.{n}" in sys.modules else base for n in taken}  # a module, or a name
    found = (getattr(sys.modules.get(name), "__file__", None) for name in used)
    return {Path(f).resolve() for f in found if f}
