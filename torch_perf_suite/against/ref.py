"""--perf-against REF: the selected tests measured at REF and at the working tree, on the same GPU in one job.

REF's files are written out of git (`git archive`) into the cache folder and its tests run there first, in a pytest
process of their own that records their results as a baseline of this chip (`--perf-update-baselines` into a folder of
the cache, never into the committed baselines). The working tree's tests then compare with it as with a baseline
recorded on this chip: GPU-side numbers at `tolerance`, counts exactly. Loader and pipeline numbers move between rounds
on one host by more than a regression to catch (docs/seed-000-ladder.md, "A loader regression of 15%"), so they are
reported against REF, not gated (gates.part_verdict); the loader is judged by its settings, its blocks and waiting per sample,
and a sample's CPU time timed by turns with REF's (loader/turns.py), for which REF's files are kept beside its results.

All of REF first, then all of the head: GPU-side numbers on one chip barely move between rounds
(docs/seed-000-ladder.md) and hold against a baseline recorded on the same chip hours before, so nothing is
gained by alternating them. A sharded run's worker (`-n N --dist loadfile`) measures REF file by file instead, before
the head's first test of each file, on its own GPU and cores: a file runs whole on one worker, so REF's tests of it are
measured where the head's run.

REF's results are kept per (commit, chip, versions, settings, cores; the xdist worker where there is no GPU UUID)
under pytest's cache folder (or `--perf-against-cache DIR`): a merge queue testing many changes against one base
measures the base once per runner, and only the tests not measured there before.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .. import ref_imports, settings
from ..machine import host

FLAGS = {o.flag for o in settings.OPTIONS if o.args.get("action") == "store_true"}  # options that take no value
STATUS = "ref-status.json"  # test id -> "passed", or why REF did not record it
COLLECTED = "ref-collected.json"  # every test id REF's suite collected in the files its run took
SAID = "ref-imports.txt"  # what REF's processes said of their imports (ref_imports.py): errors, notes
REF_CACHE = "ref-pytest-cache"  # pytest's cache of every REF's run, beside the commits' folders (compiled models kept)
# set in REF's run: its loader-fed pipelines are host-bound readings the head never gates against REF, so it times them
# only enough to warm the profiled steps (parts.Windows); a REF from before this variable times them whole. Not read
# from PERF_AGAINST_WANTED, which any head sets: a head from before it would find REF's pipelines missing
AS_REF = "TORCH_PERF_SUITE_AS_REF"


@dataclass
class Ref:
    """REF as this session compares with it: its results in `folder` (a baseline folder), and each test's status."""

    name: str
    sha: str
    folder: Path
    root: Path  # REF's files: the rootdir's counterpart in REF's tree
    status: dict[str, str] = field(default_factory=dict)
    measured: list[str] = field(default_factory=list)  # of this session's tests, those measured at REF in this job
    cached: list[str] = field(default_factory=list)  # and those whose REF results came from the cache
    wanted: list[str] = field(default_factory=list)  # and those still to be measured (`run`)
    args: list[str] = field(default_factory=list)  # the perf options REF's run takes (`forwarded`)
    collected: set[str] = field(default_factory=set)  # REF's test ids in the files its runs took (COLLECTED)
    seconds: float = 0.0  # how long measuring REF took in this job: a cold REF's cost beside the head's run
    worktree: Path | None = None  # the working tree's top, which REF's processes map onto REF's tree (ref_imports)
    notes: list[str] = field(default_factory=list)  # what REF's run said of its imports (the code under test installed)

    @property
    def label(self) -> str:
        return f"{self.name} ({self.sha[:12]})"

    def describe(self) -> str:
        """The report's line: what was compared with what, and where REF's numbers came from."""
        how = f"{len(self.measured)} test(s) measured at REF in this job" + (
            f" ({self.seconds:.0f} s)" if self.measured else "") + (
            f", {len(self.cached)} from the cache ({self.folder})" if self.cached else "")
        return f"against {self.label} on this device: {how}" + "".join(f"; {n}" for n in self.notes)

    def wanted_in(self, files: set[str] | None) -> list[str]:
        """The tests still to be measured, of `files` only where given."""
        return [t for t in self.wanted if files is None or t.split("::")[0] in files]

    def why_missing(self, test_id: str, head_ids: set[str]) -> tuple[str, str]:
        """Why `test_id` has nothing at REF to be compared with, in a few words and whole; for a test new in this
        change, REF's tests of the same function that this suite no longer has (`head_ids`: the head's collected
        tests), where one may be its old id."""
        status = self.status.get(test_id)
        if status is not None:
            return f"not compared: at {self.name} it {status}", f"not compared: at {self.label} it {status}"
        function = test_id.split("[", 1)[0]
        gone = sorted(t for t in self.collected if t.split("[", 1)[0] == function and t not in head_ids)
        renamed = f"; {self.label} has {', '.join(gone)}, which this suite does not: renamed?" if gone else ""
        return "new in this change", f"new in this change: not in {self.label}'s suite, not compared{renamed}"


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise pytest.UsageError("--perf-against needs git, and git is not on PATH: install it (apt-get install git)") from None


def resolve(ref: str, rootdir: Path, option: str = "--perf-against") -> tuple[Path, str]:
    """The repository's top folder and REF's commit; a usage error naming what is wrong and what to do."""
    top = _git(rootdir, "rev-parse", "--show-toplevel")
    if top.returncode:
        raise pytest.UsageError(f"{option} {ref}: {rootdir} is not in a git repository; run from a clone of the "
                                "repository under test")
    found = _git(rootdir, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if found.returncode:
        shallow = _git(rootdir, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
        how = ("this clone is shallow: fetch it (git fetch --unshallow, or git fetch origin " + ref + ")" if shallow
               else "fetch it (git fetch origin " + ref + "), or name a commit, branch or tag that exists")
        raise pytest.UsageError(f"{option} {ref}: no such commit, branch or tag in {top.stdout.strip()}; {how}")
    return Path(top.stdout.strip()), found.stdout.strip()


def cache_folder(base: Path, sha: str, env: dict, args: list[str], worker: str | None = None,
                 cores: str | None = None) -> Path:
    """REF's results for this commit on this chip with these versions and settings, on these `cores`: another chip,
    another torch or other settings is another folder (and the old one is not used), and REF measured on 32 cores is
    not compared with a head on 16. Without a GPU UUID (a smoke run on a CPU) the xdist `worker` tells the folders
    apart, so that two workers never write one at once."""
    what = {k: env.get(k) for k in ("gpu", "gpu_uuid", "driver", "cuda", "torch", "torchvision")}
    what.update(worker=None if env.get("gpu_uuid") else worker, cores=cores)  # a GPU's own UUID tells workers apart
    # and what else changes a verdict: the interpreter, every installed package's version (torchmetrics, numpy, Pillow,
    # lightning, this plugin...) and the options pytest reads from the environment (a smoke run's results never serve a
    # full one)
    what.update(python=sys.version, installed=distributions(), addopts=os.environ.get("PYTEST_ADDOPTS", ""))
    digest = hashlib.sha256(json.dumps([what, args], sort_keys=True, default=str).encode()).hexdigest()[:16]
    return base / f"{sha[:12]}-{digest}"


@functools.cache
def distributions() -> list[str]:
    """Every distribution installed in this interpreter, as name==version, sorted."""
    return sorted({f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()})


def keyed(config, args: list[str]) -> list[str]:
    """`args` and the ini values the command line overrides (-o), which REF's cache folder is keyed by."""
    return [*args, *(f"-o{o}" for o in (getattr(config.option, "override_ini", None) or []))]


def forwarded(config) -> list[str]:
    """The options of this run that REF's run takes too: the perf settings given on the command line (not where
    results go, nor --perf-against itself)."""
    own = {"--perf-against", "--perf-against-cache", "--perf-bisect", "--perf-update-baselines", "--perf-baseline-dir",
           "--perf-report", "--perf-trace-dir", "--perf-strict"}
    out, args = [], list(config.invocation_params.args)
    for i, a in enumerate(args):
        name = a.split("=", 1)[0]
        if name.startswith("--perf-") and name not in own:
            takes_value = "=" not in a and i + 1 < len(args) and not args[i + 1].startswith("-")
            out += [a, args[i + 1]] if takes_value and name not in FLAGS else [a]
    return out


def prepare(ref: str, config, test_ids: list[str], env: dict, cache_base: Path) -> Ref:
    """REF's files written out and its cached results read: `Ref.wanted` are the tests still to be measured (`run`)."""
    rootdir = Path(config.rootpath)
    top, sha = resolve(ref, rootdir)
    args = forwarded(config)
    worker = getattr(config, "workerinput", {}).get("workerid")
    cores = host.cpu_list(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else None
    folder = cache_folder(cache_base, sha, env, keyed(config, args), worker, cores)
    folder.mkdir(parents=True, exist_ok=True)
    status_file = folder / STATUS
    status = json.loads(status_file.read_text()) if status_file.exists() else {}
    collected = set(json.loads((folder / COLLECTED).read_text())) if (folder / COLLECTED).exists() else set()
    root = written_out(sha, top, folder) / rootdir.relative_to(top)
    return Ref(ref, sha, folder, root, status, cached=[t for t in test_ids if t in status],
               wanted=[t for t in test_ids if t not in status], args=args, collected=collected, worktree=top)


def run(ref: Ref, files: set[str] | None = None) -> None:
    """The tests `ref.wanted` measured in REF's files, their statuses kept in its cache folder; only those of `files`
    where given (a sharded run's worker measures REF file by file)."""
    tests = ref.wanted_in(files)
    if not tests:
        return
    start = time.perf_counter()
    ref.status.update(_run_at(ref.sha, ref.root, tests, ref.folder, ref.args,
                              **({"worktree": ref.worktree} if ref.worktree else {})))
    ref.notes += [n for n in ref_imports.read_said(ref.folder / SAID)[1] if n not in ref.notes]
    run_collected = ref.folder / "collected.json"  # this run's, which ref_select wrote
    if run_collected.exists():
        ref.collected |= set(json.loads(run_collected.read_text()))
    _write_whole(ref.folder / COLLECTED, sorted(ref.collected))
    ref.measured += tests
    ref.wanted = [t for t in ref.wanted if t not in tests]
    ref.seconds += time.perf_counter() - start
    _write_whole(ref.folder / STATUS, ref.status)


def _write_whole(path: Path, data) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)  # whole, or not at all


def written_out(sha: str, top: Path, folder: Path) -> Path:
    """REF's tracked files under `folder`/tree, written once (`git archive`) and kept with REF's results: its tests run
    there, and its loaders are built there to be timed by turns (loader/turns.py) while the working tree's tests run."""
    tree = folder / "tree"
    if (folder / "tree.complete").exists():
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(top), "archive", "--format=tar", sha], capture_output=True)
    unpacked = archive.returncode or subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout,
                                                    capture_output=True).returncode
    if unpacked:
        shutil.rmtree(tree, ignore_errors=True)
        why = (archive.stderr if archive.returncode else b"tar could not unpack it").decode(errors="replace").strip()
        raise pytest.UsageError(f"--perf-against: could not write {sha[:12]}'s files into {tree}: {why}")
    (folder / "tree.complete").touch()  # whole, or written again next time
    return tree


def _run_at(sha: str, cwd: Path, test_ids: list[str], folder: Path, args: list[str],
            worktree: Path | None = None) -> dict[str, str]:
    """Run `test_ids` in REF's files (`cwd`), recording into `folder`; each test's status there. Those REF lacks (a test
    new in this change) are left out by `ref_select`, in the same pytest process: none is collected beforehand. Its
    processes import the project's code from REF's tree where an install points at the working tree `worktree`
    (ref_imports.py); one that cannot is a usage error in its one line."""
    files = sorted({t.split("::")[0] for t in test_ids if (cwd / t.split("::")[0]).exists()})
    if not files:
        return {}
    plugin, wanted, kept, collected = folder / "plugin", folder / "wanted.json", folder / "kept.json", folder / "collected.json"
    plugin.mkdir(exist_ok=True)
    shutil.copyfile(Path(__file__).with_name("ref_select.py"), plugin / "perf_against_select.py")
    wanted.write_text(json.dumps(test_ids))
    kept.unlink(missing_ok=True)
    report, said = folder / "ref-report", folder / SAID
    said.unlink(missing_ok=True)
    # the rootdir named, and no conftest.py above it: REF's files lie inside the cache folder, which may be inside the
    # working tree's rootdir, and pytest takes the folders given as options' values into the rootdir's search too
    # pytest's cache one for every REF (beside their folders), not REF's tree's: compiled models are kept from one REF
    # to the next where their code did not change (perf_tests/conftest.py), so a cold REF does not compile them again
    proc = subprocess.run([sys.executable, "-m", "pytest", *files, "-o", f"cache_dir={folder.parent / REF_CACHE}",
                           "-p", "perf_against_select",
                           "-q", "-rfE", f"--rootdir={cwd}", f"--confcutdir={cwd}",
                           "--perf-update-baselines", f"--perf-baseline-dir={folder}", f"--perf-report={report}",
                           *args], cwd=cwd, capture_output=True, text=True,
                          # not an xdist worker's variables: REF's run is a plain pytest run (on the worker's GPU and cores)
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")},
                               "COLUMNS": "1000",  # pytest's summary lines whole, not cut at 80
                               "PYTHONPATH": os.pathsep.join(filter(None, [str(plugin), os.environ.get("PYTHONPATH")])),
                               "PERF_AGAINST_WANTED": str(wanted), "PERF_AGAINST_KEPT": str(kept),
                               "PERF_AGAINST_COLLECTED": str(collected), AS_REF: "1",
                               **ref_imports.child_env(worktree, folder / "tree", f"REF ({sha[:12]})", said)})
    errors = ref_imports.read_said(said)[0]
    if errors:
        more = f" (and {len(errors) - 1} more in {said})" if len(errors) > 1 else ""
        raise pytest.UsageError(f"--perf-against: {errors[0]}{more}")
    if proc.returncode not in (0, 1, 5) or not kept.exists():  # 5: none of them is in REF's suite
        raise pytest.UsageError(f"--perf-against: REF's tests did not run at {sha[:12]} (pytest exit {proc.returncode}):\n"
                                + _tail(proc))
    run = json.loads(kept.read_text())
    if not run:
        return {}
    rows = {r["test"]: r for r in json.loads(report.with_suffix(".json").read_text())["tests"]}
    return {t: _status(t, rows, proc) for t in run}


def is_ref_run(update_baselines: bool) -> bool:
    """Whether this process is REF's run under --perf-against (it records, always): see AS_REF."""
    return update_baselines and os.environ.get(AS_REF) == "1"


def _status(test_id: str, rows: dict, proc: subprocess.CompletedProcess) -> str:
    """What REF's run did with one test: "passed" where it recorded it, else what happened, in pytest's own words."""
    for line in proc.stdout.splitlines():
        head, _, why = line.partition(" - ")
        if head in (f"FAILED {test_id}", f"ERROR {test_id}"):
            return "failed, so it recorded nothing" + (f": {why}" if why else "")
    if test_id not in rows:
        return "was not measured (skipped, or it measured nothing)"
    return "passed"


def _tail(proc: subprocess.CompletedProcess, lines: int = 15) -> str:
    return "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-lines:])
