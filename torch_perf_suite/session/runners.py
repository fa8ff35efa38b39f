"""The suite over several processes: a matrix of GPU runners, each running one part of the selected tests, with a job
after them that merges the parts' reports into one; and the merge of a sharded run's xdist workers' reports.

    pytest perf_tests --perf-split 1/2 --perf-report reports/perf        # runner 1 (its own cache and report)
    pytest perf_tests --perf-split 2/2 --perf-report reports/perf        # runner 2
    python -m torch_perf_suite.session.runners merge part1/perf.json part2/perf.json --out reports/perf \
        --durations baselines/durations.json                              # after both: one report, the seconds kept
    python -m torch_perf_suite.session.runners merge-baselines part1/baselines part2/baselines --into baselines
                                                                          # after a recording in parts: one folder

`--perf-split I/N` keeps the I-th of N parts. A part is made of whole test files, as `--dist loadfile` hands them out:
a ladder step is compared with its predecessor, measured in the same process. The files are dealt longest first,
each to the part with the fewest seconds so far (longest-processing-time-first, within 4/3 of the best split), by
the seconds each test took as the durations file (`--perf-durations`) records them; a test it does not name counts
the mean of those it does, and without the file every test counts one second. Every runner computes the split from
the same selection and the same file, so each test runs in exactly one part; `merge` fails where a test ran in two.

Not pytest-split: its groups cut a file wherever the seconds fall (a ladder step would land apart from its
predecessor), and it keeps its durations in a file of its own format; this one is the merged report's seconds.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from ..report.saved import write
from ..store import write_json


def deal(test_ids: list[str], seconds: Mapping[str, float], n: int) -> list[list[str]]:
    """The tests in `n` parts of whole files (the part before '::'), longest file first to the lightest part; a tie
    goes to the lower part, and files of equal cost keep their order, so every runner deals the same."""
    mean = sum(seconds.values()) / len(seconds) if seconds else 1.0
    files: dict[str, list[str]] = {}
    for t in test_ids:
        files.setdefault(t.split("::", 1)[0], []).append(t)
    cost = {f: sum(seconds.get(t, mean) for t in tests) for f, tests in files.items()}
    dealt: list[list[str]] = [[] for _ in range(n)]
    load = [0.0] * n
    for f in sorted(files, key=lambda f: -cost[f]):  # sorted() is stable: equal costs keep the collection's order
        lightest = min(range(n), key=lambda i: load[i])
        dealt[lightest] += files[f]
        load[lightest] += cost[f]
    return dealt


def split(items: list, split: tuple[int, int] | None, durations: Path) -> tuple[list, list]:
    """--perf-split I/N: (this runner's part of `items`, the rest), items being anything with a pytest `nodeid`;
    all kept where there is no split. A durations file that cannot be read is a ValueError (`load_seconds`)."""
    if split is None:
        return items, []
    part, n = split
    mine = set(deal([item.nodeid for item in items], load_seconds(durations), n)[part - 1])
    return [item for item in items if item.nodeid in mine], [item for item in items if item.nodeid not in mine]


def load_seconds(path: Path) -> dict[str, float]:
    """The durations file (test id -> seconds); a missing file is none. One that cannot be read is a ValueError
    naming it and what to do."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"--perf-durations {path}: not readable JSON ({e}); restore it from git or write it again with "
                         "`python -m torch_perf_suite.session.runners merge ... --durations`") from None
    if not isinstance(data, dict) or not all(isinstance(s, (int, float)) and s >= 0 for s in data.values()):
        raise ValueError(f"--perf-durations {path}: expected an object of test id -> seconds; restore it from git")
    return {t: float(s) for t, s in data.items()}


def seconds_of(doc: dict) -> dict[str, float]:
    """Each test's seconds in a report (the phases its row gives, which add up to its time)."""
    return {row["test"]: round(sum((row.get("seconds") or {}).values()), 1) for row in doc["tests"]}


def merged(docs: dict[str, dict]) -> dict:
    """The parts' reports (name -> document) as one, each row naming its part; ValueError where a test is in two."""
    seen: dict[str, str] = {}
    for name, doc in docs.items():
        for row in doc["tests"]:
            if row["test"] in seen:
                raise ValueError(f"{row['test']} ran in both {seen[row['test']]} and {name}: the runners' splits "
                                 "differ; give every runner the same selection and the same --perf-durations file")
            seen[row["test"]] = name
    return merge(docs)


def merge(docs: dict[str, dict]) -> dict:
    """The partial reports of a sharded run's workers, or of a matrix's runners (name -> its document), as one
    document. Each row names the worker it ran on (a sharded runner's row, runner/worker); rows are grouped by test
    file (with --dist loadfile a file runs on one worker), each file's in the order they ran; sections with one title
    are joined, in worker order; "workers" names each worker's GPU (model, UUID, the CUDA_VISIBLE_DEVICES it was given)
    and how many tests it ran; "env" is the first worker's; "seconds", where the workers' time went: the longest
    "total" (they ran side by side), the sum of each other phase ("tests", "REF"); "against" (--perf-against), each
    worker's, named."""
    order = sorted(docs, key=lambda wid: (len(wid), wid))  # gw2 before gw10
    tests = sorted(({**row, "worker": f"{wid}/{row['worker']}" if row.get("worker") else wid}
                    for wid in order for row in docs[wid]["tests"]),
                   key=lambda row: row["test"].split("::")[0])
    sections: dict[str, list] = {}
    charts: dict[str, dict] = {}
    for wid in order:
        for title, table in docs[wid]["sections"].items():
            sections.setdefault(title, []).extend(table)
        charts.update(docs[wid].get("charts", {}))
    workers = {wid: {"gpu": docs[wid]["env"].get("gpu"), "gpu_uuid": docs[wid]["env"].get("gpu_uuid"),
                     "cuda_visible_devices": (docs[wid].get("worker") or {}).get("cuda_visible_devices"),
                     "cores": (docs[wid].get("worker") or {}).get("cores"),
                     "tests": len(docs[wid]["tests"])}
               for wid in order}
    seconds: dict[str, float] = {}
    for s in (docs[wid]["seconds"] for wid in order if docs[wid].get("seconds")):
        for phase, n in s.items():
            seconds[phase] = max(seconds.get(phase, 0.0), n) if phase == "total" else round(seconds.get(phase, 0.0) + n, 2)
    ref_description = "; ".join(f"{wid}: {docs[wid]['against']}" for wid in order if docs[wid].get("against"))
    return {"env": docs[order[0]]["env"] if order else {}, "smoke": any(d["smoke"] for d in docs.values()), "tests": tests,
            "sections": sections, "charts": charts, "workers": workers,
            **({"against": ref_description} if ref_description else {}), **({"seconds": seconds} if seconds else {})}


def unusable(doc) -> str | None:
    """What a report to merge lacks of what `merge` reads, or None: its tests' rows, each naming its test, its
    sections' tables, its environment."""
    if not isinstance(doc, dict) or not isinstance(doc.get("tests"), list):
        return "no 'tests' list"
    bad = next((i for i, row in enumerate(doc["tests"]) if not isinstance(row, dict) or not isinstance(row.get("test"), str)
                or not isinstance(row.get("seconds") or {}, dict)), None)
    if bad is not None:
        return f"row {bad} of 'tests' names no test (its 'test' is not a string) or its 'seconds' are not an object"
    if not isinstance(doc.get("sections"), dict) or not all(isinstance(t, list) for t in doc["sections"].values()):
        return "no 'sections' object of tables"
    if not isinstance(doc.get("env"), dict):
        return "no 'env' object"
    return None


def partial_reports(path: Path) -> dict[str, list[Path]]:
    """The xdist workers' reports beside --perf-report PATH: worker id -> its PATH.<id>.md and PATH.<id>.json."""
    found: dict[str, list[Path]] = {}
    if path.parent.is_dir():
        for f in sorted(path.parent.iterdir()):
            m = re.fullmatch(re.escape(path.name) + r"\.(gw\d+)\.(md|json)", f.name)
            if m:
                found.setdefault(m[1], []).append(f)
    return found


def merge_baselines(parts: list[Path], into: Path) -> list[str]:
    """Each part's recorded files (the GPU models' baselines, the loaders' settings, the instruction counts) joined into
    the files of `into`, entry by entry through each store (locked, read-merge-write, atomic); a part's entry replaces
    the one of the same test. What was joined, a line a file; a file that cannot be used raises its store's error."""
    from ..loader.instructions import InstructionsFile
    from ..loader.recorded import SettingsFile
    from ..records.baselines import BaselineFile

    said = []
    for part in parts:
        for path in sorted(part.glob("*.json")):
            target = into / path.name
            if path.name == "instructions.json":
                envs = InstructionsFile.load(path).environments
                for key, tests in envs.items():
                    InstructionsFile.load(target).save(key, tests)
                n = sum(map(len, envs.values()))
            elif path.name == "loaders.json":
                tests = SettingsFile.load(path).tests
                SettingsFile.load(target).save(tests)
                n = len(tests)
            elif path.name != "durations.json":
                try:
                    gpu = json.loads(path.read_text(encoding="utf-8")).get("gpu")
                except (ValueError, AttributeError) as e:
                    raise ValueError(f"{path}: not a baseline file ({e}); record that part again") from None
                tests = BaselineFile.load(path, gpu).tests
                BaselineFile.load(target, gpu).save(tests)
                n = len(tests)
            else:
                continue
            said.append(f"{path}: {n} entries into {target}")
    return said


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_perf_suite.session.runners", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="the parts' reports (--perf-report's JSON) as one report")
    m.add_argument("reports", type=Path, nargs="+", help="each part's PATH.json, as --perf-report wrote it")
    m.add_argument("--out", type=Path, required=True, help="the merged report's PATH (PATH.md, PATH.json)")
    m.add_argument("--durations", type=Path, help="where to write each test's seconds, for the next split")
    b = sub.add_parser("merge-baselines", help="the parts' recorded baseline folders joined into one")
    b.add_argument("parts", type=Path, nargs="+", help="each part's baselines folder")
    b.add_argument("--into", type=Path, required=True, help="the folder to join them into (the checkout's baselines)")
    args = parser.parse_args(argv)
    if args.command == "merge-baselines":
        from ..loader.instructions import InstructionsError
        from ..loader.recorded import SettingsError
        from ..records.baselines import BaselineError

        try:
            print("\n".join(merge_baselines(args.parts, args.into)))
        except (BaselineError, InstructionsError, SettingsError, OSError, ValueError) as e:
            parser.error(str(e))
        return 0
    docs = {}
    named_by_folder = len({p.parent.name for p in args.reports}) == len(args.reports)  # part1/perf.json, part2/...
    for path in args.reports:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if problem := unusable(doc):
                raise ValueError(problem)
        except (OSError, ValueError) as e:
            parser.error(f"{path}: not a report that --perf-report wrote ({e})")
        docs[path.parent.name if named_by_folder else str(path)] = doc
    try:
        doc = merged(docs)
    except ValueError as e:
        parser.error(str(e))
    written = write(args.out, doc)
    if args.durations:
        write_json(args.durations, dict(sorted({t: s for d in docs.values() for t, s in seconds_of(d).items()}.items())))
        written.append(args.durations)
    print(f"merged {len(doc['tests'])} tests of {len(docs)} parts: " + ", ".join(map(str, written)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
