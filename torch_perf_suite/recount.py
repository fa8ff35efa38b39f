"""The loader instruction counts of this environment, recorded again where the loader's code changed, without a GPU:

    python -m torch_perf_suite.recount [PATH] [--data-root DIR]   (PATH: baselines/instructions.json; from the rootdir)

Each recorded entry names its loader (`source`, instructions.describe_source). Where the digest of the code that
loader runs (instructions.content) is not the one recorded, the loader is counted again under callgrind, one process
for all, and the entry replaced; each change is printed against the count it replaces. An environment with no entries
yet (a new torch) takes its tests and loaders from the environment with the most. An entry whose loader reads a data
directory names it only (the path is the machine's): it is counted where DIR holds a directory of that name, and else
left to a recording run (--perf-update-baselines).

An edit of `fixtures/data.py` or `fixtures/recipes.py` changes the digest of every suite loader, and a GPU run then
counts each loader afresh (about 90 s on an H100 host) until the counts are recorded again; this records them on
the machine whose environment they are for, in about a minute."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from . import instructions


def parse_source(described: str) -> tuple[str, dict]:
    """The (factory, keyword arguments) that `instructions.describe_source` wrote as one line."""
    factory, paren, args = described.partition("(")
    if not paren or not args.endswith(")"):
        raise ValueError(f"not a loader source: {described!r}")
    return factory, json.loads(args[:-1])


def planned(file: instructions.InstructionsFile, env_key: str) -> dict[str, str]:
    """test id -> the source its count is recorded for: this environment's entries, or the fullest other's."""
    envs = file.environments
    chosen = envs.get(env_key) or max(envs.values(), key=len, default={})
    return {test: e["source"] for test, e in chosen.items()}


def recount(path: Path, root: Path, counter, say=print, data_root: Path | None = None) -> dict[str, dict]:
    """Count again each loader of `path`'s environment entries whose code changed; record and return the new
    entries (test id -> entry). A data directory named in a source is looked for under `data_root`."""
    file = instructions.InstructionsFile.load(path)
    env_key = instructions.key()
    recorded = file.environments.get(env_key, {})
    updates: dict[str, dict] = {}
    digests: dict[str, str] = {}
    unchanged = 0
    for test, described in sorted(planned(file, env_key).items()):
        factory, kwargs = parse_source(described)
        if kwargs.get("data_dir"):
            found = data_root / kwargs["data_dir"] if data_root is not None else None
            if found is None or not found.is_dir():
                say(f"{test}: left as recorded: its loader reads {kwargs['data_dir']}, not found under "
                    f"{data_root or '(no --data-root)'}")
                continue
            kwargs["data_dir"] = str(found)
        if described not in digests:
            digests[described] = instructions.content((factory, kwargs), root)
        digest = digests[described]
        old = recorded.get(test)
        if old is not None and old.get("source") == described and old.get("content") == digest:
            unchanged += 1
            continue
        counted = replace(counter.count((factory, kwargs)), content=digest)
        updates[test] = instructions.entry(counted)
        was = f"{old['per_sample']:,.0f} recorded, {100 * (counted.per_sample / old['per_sample'] - 1):+.2f}%" \
            if old is not None else "none recorded"
        say(f"{test}: {counted.per_sample:,.0f} instructions per sample ({was}); code {digest}")
    if updates:
        file.save(env_key, updates)
    say(f"{path} ({env_key}): {len(updates)} entries recorded again, {unchanged} unchanged")
    return updates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_perf_suite.recount", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", type=Path, default=Path("baselines/instructions.json"))
    parser.add_argument("--data-root", type=Path, help="where the data directories that sources name are")
    args = parser.parse_args(argv)
    if not args.path.is_file():
        print(f"{args.path}: no such file; run from the rootdir or name the instructions file", file=sys.stderr)
        return 2
    counter = instructions.Counter()
    try:
        recount(args.path, Path.cwd(), counter, data_root=args.data_root)
    except (instructions.InstructionsError, instructions.Unavailable, ValueError) as e:
        print(f"recount: {e}", file=sys.stderr)
        return 2
    finally:
        counter.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
