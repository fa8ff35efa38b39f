"""What the plugin does before the session starts: the loader's counting process started as the plugin is registered,
before the conftest.py files below the rootdir import torch (count_early), from the command line's perf options as
pytest will read them (KnownArgs); and the line that says, as the session starts, which loader will be counted again
(recount_line)."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

import pytest

from .. import settings
from ..against.ref import is_ref_run
from ..fixture import references
from ..loader import instructions
from ..machine import device
from . import options

COUNTER = pytest.StashKey[instructions.Counter]()  # the counting process, as count_early left it


def count_early(config) -> None:
    """As the plugin is registered, before the conftest.py files below the rootdir are imported (torch, often): where
    this process will run tests and a count recorded for an environment that may be this one ran code changed since,
    the counting process starts now. The session's start tells it exactly, and keeps or stops it
    (Records.prestart_counter). Nothing here imports torch; a setting that is not valid is said at the session's start."""
    known = config.known_args_namespace
    if COUNTER in config.stash or known.collectonly or known.help or known.version:
        return
    counter = config.stash[COUNTER] = instructions.Counter()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a pytest-xdist worker: confined to its cores at its configure
    try:
        s = options.read_settings(KnownArgs(config))
    except (pytest.UsageError, argparse.ArgumentError):
        return
    if s.bisect or is_ref_run(s.update_baselines) or not (s.instructions and (s.smoke or device.gpu_visible())):
        return
    if references.changed_code(s.baseline_dir, Path(config.rootpath), None):
        counter.prestart()


class KnownArgs:
    """The command line's perf options, read before pytest reads them (a plugin registered by a conftest.py is added
    after that) from what pytest will read: ini addopts, PYTEST_ADDOPTS and the arguments. Asked as `config.getoption`
    is once the session starts: options.read_settings(KnownArgs(config)) before it. A value that is not valid
    raises argparse.ArgumentError, said at the session's start by pytest."""

    def __init__(self, config):
        self.rootpath, self.getini = config.rootpath, config.getini
        parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
        for o in settings.OPTIONS:
            parser.add_argument(o.flag, **{"default": None, **o.args})
        line = [*config.getini("addopts"), *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
                *map(str, config.invocation_params.args)]
        self._known = parser.parse_known_args(line)[0]

    def getoption(self, name: str, default=None):
        return getattr(self._known, name.lstrip("-").replace("-", "_"), default)


FEW = 3  # the tests a recount line names, at most


def recount_line(folder: Path, changed: list[str], env_key: str) -> str:
    """What a run that counts a loader again says as it starts (its header): which tests' loaders, the files changed
    since their counts were recorded in `folder` for `env_key`, and that it takes valgrind's start with Python and torch
    and the count; the counts carry no duration, so the time is the session line's to say at the end ("of them loader
    counted again"). "" where nothing changed."""
    if not changed:
        return ""
    try:
        entries = instructions.InstructionsFile.load(folder / "instructions.json").environments.get(env_key, {})
    except instructions.InstructionsError:
        entries = {}
    tests = [t for t, e in entries.items() if set(e.get("files") or {}) & set(changed)]
    named = ", ".join(tests[:FEW]) + (f" and {len(tests) - FEW} more" if len(tests) > FEW else "")
    files = ", ".join(changed[:FEW]) + (f" and {len(changed) - FEW} more" if len(changed) > FEW else "")
    return (f"perf: loader instructions counted again under valgrind (callgrind) for {named or 'a test'}: {files} "
            "changed since counted. Valgrind starts Python and torch, then counts the loader: slow (the counts carry no "
            "duration; the session line at the end says what it took, as 'of them loader counted again')")
