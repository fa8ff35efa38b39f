"""The project's own code that a loader runs, and its digest (instructions.py): a count recorded for the same digest,
environment and loader is the answer, and a recorded file whose content changed means a count will follow."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .instructions import SAMPLES, STRIDE, load_factory

if TYPE_CHECKING:
    from .instructions import InstructionsFile


def content(source: tuple[str, dict], root: Path | None = None) -> str:
    """A digest of the project's own code that the loader runs (`content_files`)."""
    return digest_of(content_files(source, root))


COUNTED_AS = 2  # how count_worker takes a count: 2 since its warm-up makes the counted samples once. A count taken
# another way is counted again (docs/counted-gates.md)


def digest_of(files: dict[str, str]) -> str:
    """The digest of `content_files`' files: each path (in the order of its parts) and its content's hash, and how the
    count is taken (COUNTED_AS)."""
    digest = hashlib.sha256(f"counted as {COUNTED_AS}\0".encode())
    for path in sorted(files, key=lambda p: p.split("/")):
        digest.update(f"{path}\0".encode() + bytes.fromhex(files[path]))
    return digest.hexdigest()[:16]


def content_files(source: tuple[str, dict], root: Path | None = None) -> dict[str, str]:
    """The project's own code that the loader runs, path (from `root`) -> the SHA-256 of its content: the files (under
    `root`, the current folder, and outside the interpreter's and its packages' folders) of every Python function
    called while the factory builds the loader and its samples are made and collated, and of every project module whose
    names those functions read (a constant imported from a module whose functions never run), each file whole.
    Packages are named by their versions in `key()`; this names the rest. Equal digests, keys and sources: the same
    instructions, so a recorded count is the answer."""
    root = (root or Path.cwd()).resolve()
    called: set[str] = set()
    read: dict[str, set[str]] = {}  # file -> the global and attribute names its called functions read

    def profile(frame, event, arg):  # a function's call; a module's body, run by an import, is not the loader's code
        if event == "call" and frame.f_code.co_name != "<module>":
            called.add(frame.f_code.co_filename)
            read.setdefault(frame.f_code.co_filename, set()).update(frame.f_code.co_names)

    factory, kwargs = source
    build = load_factory(factory)  # before the profile: the harness's own code is not the loader's
    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        dataset, collate = build(**kwargs)
        collate([dataset[i * STRIDE % len(dataset)] for i in range(SAMPLES)])
    finally:
        sys.setprofile(previous)
    called.add(sys.modules[factory.partition(":")[0]].__file__)
    # the interpreter's folders, and the harness's own: on Python 3.11 the comprehension above is a call into this file
    outside = {Path(p).resolve() for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(__file__)}}

    def projects(path: Path) -> bool:
        return path.is_file() and root in path.parents and "site-packages" not in path.parts \
            and not any(o == path or o in path.parents for o in outside)

    files = {p for p in (Path(name).resolve() for name in called) if projects(p)}
    files |= {p for f in sorted(files) for p in _modules_read(f, read.get(str(f), set())) if projects(p)}
    return {p.relative_to(root).as_posix(): code_hash(p) for p in sorted(files)}


def code_hash(path: Path) -> str:
    """The SHA-256 of a file's code: a Python file's syntax tree without its docstrings (comments never reach it), so
    that an edit of a comment or a docstring counts no loader again; another file, or one that does not parse, by its
    bytes."""
    data = path.read_bytes()
    if path.suffix != ".py":
        return hashlib.sha256(data).hexdigest()
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return hashlib.sha256(data).hexdigest()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


def changed_files(file: "InstructionsFile", env_keys, root: Path) -> list[str]:
    """The files that a count recorded for one of `env_keys` (this environment's) ran (its entry's `files`) whose
    content is no longer what was counted, or that are gone: where there are any, a loader will be counted again, and
    its counting process can start with the session."""
    changed = set()
    for e in (e for key in env_keys for e in file.environments.get(key, {}).values()):
        for path, recorded in (e.get("files") or {}).items():
            found = root / path
            if not found.is_file() or not code_hash(found).startswith(recorded):
                changed.add(path)
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
