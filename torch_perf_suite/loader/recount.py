"""The loader instruction counts of this environment, recorded again where the loader's code changed, without a GPU:

    python -m torch_perf_suite.loader.recount [PATH] [--data-root DIR]   (PATH: baselines/instructions.json; from the rootdir)

Each recorded entry of this environment names its loader (`source`, instructions.describe_source). Where the digest
of the code that loader runs (loader_code.content, its files named from the rootdir: by default the folder that
holds PATH's folder) is not the one recorded, the loader is counted again under callgrind, one process for all, and the
entry replaced; each change is printed against the count it replaces, each loader that cannot be built in one line,
and what was counted is written at the end, atomically (exit 1 where a loader failed). An entry whose loader reads a
data directory names it only (the path is the machine's): it is counted where DIR holds a directory of that name,
and else left to a recording run. An environment with no entries yet is recorded by a run (--perf-update-baselines):
its test ids are the machine's (a worker sweep's counts follow its cores). Each entry also names its code's files and
their hashes (`files`), which a session compares with the tree at its start (Records.prestart_counter); an unchanged
entry recorded without them, of this environment or of another whose recorded digest is this tree's, is given them.

An edit of `fixtures/data.py` or `fixtures/recipes.py` changes the digest of every suite loader, and a GPU run then
counts each loader afresh (about a minute each) until the counts are recorded again; this records them on
the machine whose environment they are for, once (what it took: docs/measurements/counted-gates.md)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path

from . import digest as loader_code
from . import instructions


def parse_source(described: str) -> tuple[str, dict]:
    """The (factory, keyword arguments) that `instructions.describe_source` wrote as one line."""
    factory, paren, args = described.partition("(")
    if not paren or not args.endswith(")"):
        raise ValueError(f"not a loader source: {described!r}")
    return factory, json.loads(args[:-1])


def recount(path: Path, root: Path, counter, say=print, data_root: Path | None = None) -> tuple[dict[str, dict], int]:
    """Count again each loader of `path`'s entries for this environment whose code changed; record the new entries
    and return them (test id -> entry) with the number of loaders that could not be counted."""
    file = instructions.InstructionsFile.load(path)
    env_key = instructions.key()
    recorded = file.environments.get(env_key, {})
    if not recorded:
        say(f"{path}: no entries for {env_key}; record them with a run: pytest --perf-update-baselines (on a GPU), "
            "or pytest --perf-smoke --perf-update-baselines")
        return {}, 1
    updates, code = {}, {}  # test id -> its new entry; a loader's source -> its code's files and their hashes
    unchanged = failed = noted = 0
    for test, old in sorted(recorded.items()):
        described = old["source"]
        factory, kwargs = parse_source(described)
        if (kwargs := _located(test, kwargs, data_root, say)) is None:
            continue
        try:
            if described not in code:
                code[described] = loader_code.read((factory, kwargs), root)
            read = code[described]
            if old.get("content") in (read.digest, read.whole):
                unchanged += 1
                if old.get("content") != read.digest or "ran" not in old:  # keyed before what it reads was kept
                    updates[test] = {**old, "content": read.digest, **instructions.read_entry(read)}
                    noted += 1
                continue
            counted = replace(counter.count((factory, kwargs)), content=read.digest, read=read)
        except instructions.CountUnavailable as e:
            say(f"{test}: not counted: {e}")
            failed += 1
            continue
        except Exception as e:  # the project's factory, run in this process for the digest: its error, said once
            say(f"{test}: not counted: {factory}(**{kwargs}) raised {type(e).__name__}: {e}")
            failed += 1
            continue
        updates[test] = instructions.entry(counted)
        say(f"{test}: {counted.per_sample:,.0f} instructions per sample ({old['per_sample']:,.0f} recorded, "
            f"{100 * (counted.per_sample / old['per_sample'] - 1):+.2f}%); code {counted.content}")
    if updates:
        file.save(env_key, updates)
    say(f"{path} ({env_key}): {len(updates) - noted} entries recorded again, {unchanged} unchanged"
        f"{f' ({noted} given what their loader reads)' if noted else ''}, {failed} not counted")
    name_files_elsewhere(file, env_key, root, code, say)
    return updates, failed


def _located(test: str, kwargs: dict, data_root: Path | None, say) -> dict | None:
    """The loader's arguments with its `data_dir` found under `data_root`; None, said, where it is not there."""
    if not kwargs.get("data_dir"):
        return kwargs
    found = data_root / kwargs["data_dir"] if data_root is not None else None
    if found is None or not found.is_dir():
        say(f"{test}: left as recorded: its loader reads {kwargs['data_dir']}, not found under "
            f"{data_root or '(no --data-root)'}")
        return None
    return {**kwargs, "data_dir": str(found)}


def name_files_elsewhere(file: instructions.InstructionsFile, env_key: str, root: Path, code: dict, say=print) -> None:
    """Each entry of another environment recorded without its files, keyed by its code's files whole (as counts were
    keyed before what a loader reads was kept: digest.Read.whole) and whose digest is the one this tree gives, given
    those files: they name the same files and contents on any machine, so a session there can tell at its start that a
    loader's code changed (Records.prestart_counter), and a recording run there keys it by what it reads. Nothing is
    counted; `code` holds what was already read (source -> Read, None where the factory failed) and gains what is read
    here."""
    for key, tests in sorted(file.environments.items()):
        updates = {}
        for test, old in sorted(tests.items()):
            factory, kwargs = parse_source(old["source"])
            if key == env_key or "files" in old or kwargs.get("data_dir") or "content" not in old:
                continue
            if old["source"] not in code:
                try:
                    code[old["source"]] = loader_code.read((factory, kwargs), root)
                except Exception as e:  # the project's factory: said once, the entry left as it was
                    say(f"{key} / {test}: its files not named: {factory}(**{kwargs}) raised {type(e).__name__}: {e}")
                    code[old["source"]] = None
            read = code[old["source"]]
            if read is not None and read.whole == old["content"]:
                updates[test] = {**old, "files": {p: h[:instructions.FILE_HASH] for p, h in read.whole_files.items()}}
        if updates:
            file.save(key, updates)
            say(f"{file.path} ({key}): {len(updates)} entries given their files (their digest is this tree's)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_perf_suite.loader.recount", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", type=Path, default=Path("baselines/instructions.json"))
    parser.add_argument("--rootdir", type=Path, help="the project's pytest rootdir (default: the folder holding PATH's)")
    parser.add_argument("--data-root", type=Path, help="where the data directories that sources name are")
    args = parser.parse_args(argv)
    if not args.path.is_file():
        print(f"{args.path}: no such file; run from the rootdir or name the instructions file", file=sys.stderr)
        return 2
    if shutil.which("valgrind") is None:
        print(f"recount: valgrind not found; {instructions.INSTALL}", file=sys.stderr)
        return 2
    path = args.path.resolve()
    data_root = args.data_root.resolve() if args.data_root else None
    root = (args.rootdir or path.parent.parent).resolve()
    os.chdir(root)  # the counting process imports the loader's factory from here, as pytest's run does
    sys.path.insert(0, str(root))
    counter = instructions.Counter()
    try:
        _, failed = recount(path, root, counter, data_root=data_root)
    except (instructions.InstructionsError, ValueError) as e:
        print(f"recount: {e}", file=sys.stderr)
        return 2
    finally:
        counter.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
