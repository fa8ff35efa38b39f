"""A perf test's call, as the session sees it: its seconds lapped from its start (PerfSession.laps_of), and its end,
where it fails with every check that failed in it (Judge.fail keeps them until then), the holes --perf-strict fails
on and, where the test then raised, what it raised. plugin.py's pytest_runtest_call wraps each test's call in `call`."""

from __future__ import annotations

import contextlib
import traceback
from pathlib import Path

import pytest

from ..against import checks as ref_checks
from ..findings import FAILED, Finding, failures
from ..report import causes
from ..throughput import timing


@contextlib.contextmanager
def call(session, item):
    """The test's call: lapped where it is a perf test (its seconds from here, the rest of it lapped as checks); it
    fails as `ended` says when it returns, as `raised` says when it raises."""
    perf = "perf" in getattr(item, "fixturenames", ())
    if perf:
        session.laps[item.nodeid] = timing.Laps()
    try:
        yield
    except (Exception, pytest.fail.Exception, pytest.skip.Exception, pytest.xfail.Exception) as error:  # the test's own:
        # said with its checks that failed before it (a skip or an xfail after a failed check fails)
        raised(session, item, error)
        raise
    finally:
        if perf:
            session.laps[item.nodeid].lap("checks")
    ended(session, item)


def ended(session, item) -> None:
    """A test's call returned: it fails with every check that failed in it (Judge.fail), and, under --perf-strict (the
    merge gate against REF, the nightly against the baseline files, a smoke run against the loader's records), with what
    it left uncompared that nothing else judged (Result.holes), naming each. A recording run compares nothing."""
    failed = session.failed.pop(item.nodeid, [])
    result = session.results.get(item.nodeid)
    if session.settings.strict and result is not None and not session.settings.update_baselines:
        found = ref_checks.holes(result.holes(), session.compared_with)
        if failure := failures(found):
            failed.append((f"{item.nodeid}: {failure}", [f for f in found if f.outcome == FAILED]))
    if failed:
        pytest.fail(causes.together(item.nodeid, failed), pytrace=False)


def raised(session, item, error: BaseException) -> None:
    """A test's call raised `error` (its own assertion, a failure, skip or xfail it asked for, an error) after some of
    its checks had failed: it fails with all of them and the error, in a line (its type, where, its message's first
    line); none failed, the error stands as it was."""
    failed = session.failed.pop(item.nodeid, [])
    if not failed:
        return
    # where the test raised it: its last frame outside pytest's own (pytest.skip's is in _pytest/outcomes.py)
    where = next((f for f in reversed(traceback.extract_tb(error.__traceback__)) if "_pytest" not in Path(f.filename).parts),
                 None)
    said = (str(error).strip().splitlines() or [""])[0]
    at = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
    what = Finding(FAILED, type(error).__name__ + at + (f": {said}" if said else ""), brief=type(error).__name__ + at)
    raise pytest.fail.Exception(causes.together(item.nodeid, failed, what), pytrace=False) from error
