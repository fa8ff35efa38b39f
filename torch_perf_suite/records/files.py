"""The files a session compares with and records into: this GPU model's baselines (baselines.py), the loaders'
settings (loader.SettingsFile) and the loader's instruction counts (instructions.InstructionsFile), all in one folder
(`baselines/`, or REF's under --perf-against), and what this process recorded into them."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

from .. import loader
from ..against import smoke_counts
from ..loader import digest as loader_code
from ..loader import instructions
from . import baselines


class Records:
    def __init__(self, settings, device, rootdir: Path, counter: instructions.Counter | None = None):
        """`counter`: a counting process started before the session, where one was (early.count_early)."""
        self.settings, self.device, self.rootdir = settings, device, rootdir
        self.baseline_file: baselines.BaselineFile | None = None
        self.baseline_note: str | None = None  # a corrupt file moved aside, an old schema
        self.save_error: str | None = None
        self.updates: dict[str, dict] = {}  # test id -> the baseline entry recorded for it
        self.loaders_file: loader.SettingsFile | None = None  # the loaders' recorded settings (loaders.json)
        self.loaders_recorded = 0
        self.instructions_file: instructions.InstructionsFile | None = None
        self.instructions_key = ""
        self.committed_instructions: instructions.InstructionsFile | None = None  # reusable counts, under --perf-against
        self.instructions_recorded = 0
        self.counter = counter or instructions.Counter()  # the loader's instructions, counted in a callgrind process
        self.smoke_file: smoke_counts.SmokeFile | None = None  # a smoke run's counts, where REF's smoke run keeps them
        self.as_ref = False  # this process is REF's run (session.PerfSession): only it records a smoke run's counts
        self.code: dict[str, tuple] = {}  # a loader's source -> the files of the code it runs, with their hashes (read once
        # a session); its digest is derived from them (loader_code.digest_of)

    def load(self, folder: Path) -> None:
        """This GPU model's baseline file, the loader instruction counts and the loaders' settings in `folder`; a file
        that cannot be used raises its store's error (store.Unusable), naming it."""
        self.loaders_file = loader.SettingsFile.load(folder / "loaders.json")
        if self.settings.instructions and (self.device.is_gpu or self.settings.smoke):
            self._load_instructions(folder)
        if self.settings.smoke:
            self.smoke_file = smoke_counts.SmokeFile.load(folder / smoke_counts.FILE)
        if self.device.is_gpu and not self.settings.smoke:
            self._load_baseline_file(folder / f"{baselines.gpu_slug(self.device.env['gpu'])}.json")

    def _load_instructions(self, folder: Path) -> None:
        self.instructions_file = instructions.InstructionsFile.load(folder / "instructions.json")
        self.instructions_key = instructions.key()
        committed = Path(self.rootdir) / "baselines" / "instructions.json"
        if committed != folder / "instructions.json" and committed.is_file():  # REF's folder: the committed counts too
            with contextlib.suppress(instructions.InstructionsError):  # a broken one is said where it is the run's own
                self.committed_instructions = instructions.InstructionsFile.load(committed)

    def prestart_counter(self, folder: Path, runs_tests: bool = True) -> list[str]:
        """At the session's start, before the tests are collected or REF is measured: where this process runs tests
        and a count recorded in `folder` ran code that changed since (`changed_code`), a loader will be counted, and
        the counting process's slow start (valgrind starting Python and torch) begins now rather than at that test's
        build; where none will be, one started before the session (early.count_early) is stopped. Returns the
        changed files."""
        counts = runs_tests and self.settings.instructions and (self.device.is_gpu or self.settings.smoke)
        changed = changed_code(folder, Path(self.rootdir), instructions.key()) if counts else []
        if changed:
            self.counter.prestart()
        else:
            self.counter.close()
        return changed

    def _load_baseline_file(self, path: Path) -> None:
        gpu = self.device.env["gpu"]
        try:
            if self.settings.update_baselines:
                self.baseline_file, self.baseline_note = baselines.BaselineFile.load_for_update(path, gpu)
            else:
                self.baseline_file = baselines.BaselineFile.load(path, gpu)
        except OSError as e:
            raise baselines.BaselineError(str(e)) from None
        if self.baseline_file.old_schema and not self.settings.update_baselines:
            self.baseline_note = (
                f"{path} is an old baseline file (schema 1): it holds one pipeline number per test and no host, so "
                "GPU-side and loader numbers are not checked and pipeline numbers are not comparable. "
                + baselines.RERECORD[0].upper() + baselines.RERECORD[1:]
            )

    def baseline(self, test_id: str) -> dict | None:
        return self.baseline_file.get(test_id) if self.baseline_file else None

    def loader_record(self, test_id: str) -> dict | None:
        return self.loaders_file.get(test_id) if self.loaders_file else None

    def count_instructions(self, source: tuple[str, dict]) -> instructions.Counted:
        """The loader's instructions per sample: a count recorded for the same code, environment and loader (in this
        run's instructions file, or the committed one) where there is one; else counted now, under callgrind. A run
        recording into the committed file (--perf-update-baselines) counts afresh: it records what it measured; one
        recording into another folder (REF's, under --perf-against) takes the committed count of unchanged code."""
        described, digest, found = self._recorded(source)
        if found is not None:
            return instructions.Counted(found["per_sample"], found["samples"], described, digest, reused=True)
        return replace(self.counter.count(source), content=digest, files=self.code[described])

    def begin_count(self, source: tuple[str, dict]) -> None:
        """Where `count_instructions` will count `source` under callgrind, start it now (Counter.begin): the count
        runs beside the test's timed windows and is collected when the test asks for it."""
        if self._recorded(source)[2] is None:
            self.counter.begin(source)

    def _recorded(self, source: tuple[str, dict]) -> tuple[str, str, dict | None]:
        """(the source described, the digest of the code it runs, a count recorded for both in this environment)."""
        described = instructions.describe_source(source)
        if described not in self.code:
            self.code[described] = tuple(sorted(loader_code.content_files(source, Path(self.rootdir)).items()))
        digest = loader_code.digest_of(dict(self.code[described]))
        files = [self.committed_instructions] if self.settings.update_baselines else [self.instructions_file,
                                                                                        self.committed_instructions]
        found = next((e for f in files if f is not None and (e := f.reusable(self.instructions_key, described, digest))), None)
        return described, digest, found

    def record(self, test_id: str, result) -> None:
        """Save one passed test's baseline entry, loader settings and instruction count at once (atomic): an
        interrupted run keeps what it recorded. A file that cannot be written is said (`save_error`), not raised."""
        if self.baseline_file is not None:
            key = result.baseline_key
            entry = self.updates[key] = result.baseline_entry(self.device.env)
            try:
                self.baseline_file.save({key: entry})
            except (OSError, baselines.BaselineError) as e:
                self.save_error = f"baselines NOT recorded into {self.baseline_file.path}: {e}"
        if result.loader_settings is not None and self.loaders_file is not None:
            try:
                unit = result.unit if self.settings.smoke else None  # a measured run's is in its baseline entry
                self.loaders_file.save({test_id: loader.entry(result.loader_settings, self.settings.workers, unit)})
                self.loaders_recorded += 1
            except (OSError, loader.SettingsError) as e:
                self.save_error = f"loader settings NOT recorded into {self.loaders_file.path}: {e}"
        if self.as_ref and self.smoke_file is not None:
            try:
                self.smoke_file.save({result.baseline_key: smoke_counts.entry(result)})
            except (OSError, smoke_counts.SmokeCountsError) as e:
                self.save_error = f"smoke counts NOT recorded into {self.smoke_file.path}: {e}"
        if result.instructions is not None and self.instructions_file is not None:
            try:
                self.instructions_file.save(self.instructions_key, {test_id: instructions.entry(result.instructions)})
                self.instructions_recorded += 1
            except (OSError, instructions.InstructionsError) as e:
                self.save_error = f"loader instruction counts NOT recorded into {self.instructions_file.path}: {e}"

    def recorded(self) -> dict[str, int]:
        """The files this process recorded into -> how many entries; empty where it recorded none."""
        found = {str(self.baseline_file.path): len(self.updates)} if self.updates and not self.save_error else {}
        if self.instructions_recorded and not self.save_error:
            found[f"{self.instructions_file.path} ({self.instructions_key})"] = self.instructions_recorded
        if self.loaders_recorded and not self.save_error:
            found[str(self.loaders_file.path)] = self.loaders_recorded
        return found


def changed_code(folder: Path, rootdir: Path, env_key: str | None) -> list[str]:
    """The files that a count recorded in `folder` for `env_key` ran, changed since or gone
    (`loader_code.changed_files`); with None, for the environments that may be this one, told without importing torch
    (instructions.installed_keys). Empty where the file cannot be used: the session says so where it loads it."""
    try:
        file = instructions.InstructionsFile.load(folder / "instructions.json")
    except instructions.InstructionsError:
        return []
    keys = [env_key] if env_key is not None else instructions.installed_keys(file.environments)
    return loader_code.changed_files(file, keys, rootdir)
