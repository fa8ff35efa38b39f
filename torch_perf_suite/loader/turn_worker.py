"""One side of `turns`: run as a script (`python turn_worker.py CORE STRIDE CHUNK [MODULE ...]`), never imported by
the harness, so that nothing of the harness's own package is imported from ROOT's tree by this file.

It imports the MODULEs first (torch and torchvision: turns.PRELOAD), before it knows its side: the session starts it
before REF's tree is written out. Its first request names ROOT, its side's tree, and OTHER, the other side's; ROOT
then goes first on the path (this file's folder is never on it) and becomes the working folder: the loader's factory
is imported from that tree (REF's, or the working tree's), and a loader that imports any of the project's own files
from OTHER (the other side's tree: an editable install, a `src/` folder on the path) is refused, not timed against
itself. Torch runs on one thread, and once a loader is built, the process on core CORE alone, as in a DataLoader
worker. Its stdout is the parent's pipe alone: whatever else prints goes to stderr.

Lines in: a request `{"root": ROOT, "other": OTHER, "factory": "module:function", "kwargs": {...}}`, then chunk
numbers, then "end" (or EOF); every request of a process names the same ROOT.
Lines out: "started"; "ready" or "error <json string>" for a request; "<wall ns> <CPU ns>" for a chunk, which makes
the samples (i * CHUNK + k) * STRIDE mod len(dataset) for k < CHUNK and collates them.
"""

import importlib
import importlib.util
import json
import os
import sys
import time

PROTOCOL = sys.stdout  # the parent's pipe (the main block moves a loader's prints to stderr)
AIMED = None  # the tree this process builds loaders from, named by its first request
ME = os.path.realpath(__file__)  # this script, which lies in the working tree where the harness is the project's own
HERE = os.path.dirname(ME)


def say(line: str) -> None:
    PROTOCOL.write(line + "\n")
    PROTOCOL.flush()


def _under(path: str, folder: str) -> bool:
    return path.startswith(os.path.realpath(folder) + os.sep)


def aim(root: str) -> None:
    """ROOT first on the path and the working folder, at the first request; a request for another tree is refused (its
    modules would be those imported from the first)."""
    global AIMED
    if AIMED is None:
        sys.path.insert(0, root)
        importlib.invalidate_caches()  # REF's tree was written out after this process started
        os.chdir(root)
        AIMED = root
    elif AIMED != root:
        raise ValueError(f"asked for the tree {root}, but this process builds {AIMED}'s loaders")


def mapped(request: dict) -> None:
    """REF's side (a request with "map"): its code imported from REF's tree where an install points at the working
    tree (ref_imports.py, loaded by its path: nothing of the harness's package is imported here)."""
    if request.get("map"):
        path = os.path.join(os.path.dirname(HERE), "ref_imports.py")  # the package's top level, above loader/
        spec = importlib.util.spec_from_file_location("_perf_ref_imports", path)
        module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
        if not hasattr(module, "install"):
            spec.loader.exec_module(module)
        module.install(module.Mapping(tuple(request["map"]["worktrees"]), request["map"]["ref_tree"],
                                      request["map"].get("label", "REF")))


def build(request: dict):
    """The loader's (dataset, collate), from ROOT's tree; ValueError where the factory's module is not ROOT's, or where
    a module of the project's own comes from OTHER's tree (outside the interpreter's folders)."""
    root, other = request["root"], request["other"]
    aim(root)
    mapped(request)
    module, _, name = request["factory"].partition(":")
    found = importlib.import_module(module)
    where = os.path.realpath(getattr(found, "__file__", None) or "?")
    if not _under(where, root):
        raise ValueError(f"{module} is imported from {where}, not from the tree {root} (an editable install of it "
                         "shadows the tree?)")
    parts = getattr(found, name)(**request["kwargs"])
    interpreter = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for loaded in list(sys.modules.values()):
        path = os.path.realpath(getattr(loaded, "__file__", None) or "/?")
        if _under(path, other) and not _under(path, root) and "site-packages" not in path and path != ME \
                and not any(_under(path, p) for p in interpreter):
            raise ValueError(f"{loaded.__name__} is imported from {path}, the other side's tree, not from {root} (an "
                             "editable install or a folder on the path shadows the tree?)")
    return parts


def serve(core: int, stride: int, chunk: int, preload: list[str]) -> None:
    for name in preload:  # most loaders' modules (turns.PRELOAD): imported now, while the session starts
        if importlib.util.find_spec(name):
            importlib.import_module(name)
    if "torch" in sys.modules:  # a loader's torch imported later reads OMP_NUM_THREADS=1 (turns._spawn)
        sys.modules["torch"].set_num_threads(1)
    cores = os.sched_getaffinity(0)
    say("started")
    while line := sys.stdin.readline():
        try:
            # built on any core, the two processes side by side (importing a loader's modules on one core takes
            # seconds); then on the one core, as in a DataLoader worker, for the warm turns and the timed
            os.sched_setaffinity(0, cores)
            dataset, collate = build(json.loads(line))
            os.sched_setaffinity(0, {core})
            size = len(dataset)
            for i in range(-2, 0):  # warm: first calls, lazy imports, the allocator's first blocks
                collate([dataset[(i * chunk + k) * stride % size] for k in range(chunk)])
        except Exception as e:  # the parent says it as the reason nothing was timed
            say("error " + json.dumps(f"{type(e).__name__}: {e}"))
            continue
        say("ready")
        while (line := sys.stdin.readline().strip()) and line != "end":
            i = int(line)
            wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
            collate([dataset[(i * chunk + k) * stride % size] for k in range(chunk)])
            say(f"{time.perf_counter_ns() - wall} {time.thread_time_ns() - cpu}")


if __name__ == "__main__":
    core_, stride_, chunk_ = map(int, sys.argv[1:4])
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != HERE]  # the harness's package: not on the path
    PROTOCOL = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(core_, stride_, chunk_, sys.argv[4:])
