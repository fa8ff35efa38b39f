"""How long each test took, kept in pytest's cache, and a sharded run's files handed out longest first.

pytest-xdist's `--dist loadfile` hands out whole files, the file with the most tests first. A file's count of tests says
little about its time (docs/measurements/multi-gpu.md: one worker busy while the other idled). With the seconds each
test took in the last run on this GPU model (pytest's cache, `.pytest_cache/v/perf/seconds/<gpu-slug>`), the controller
hands out the file with the most seconds left in it first: longest-processing-time-first list scheduling, whose wall
time is within 4/3 of the best split. Files it has no seconds for count the mean of the tests it has; where it has none
(a first run, or `-p no:cacheprovider`), xdist's own order stands.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..machine.environment import gpu_slug

PREFIX = "perf/seconds/"
REF_S = "perf_ref_s"  # a test's user property: what its setup spent measuring REF (a sharded run's worker)


def key(gpu: str | None) -> str:
    """One table a GPU model ('smoke' for a smoke run): a smoke run's seconds say nothing of a GPU run's."""
    return PREFIX + (gpu_slug(gpu) if gpu else "smoke")


def load(cache, gpu: str | None) -> dict[str, float]:
    """Test id -> seconds (setup, call and teardown) as last run on this GPU model; empty without a cache."""
    seen = cache.get(key(gpu), {}) if cache is not None else {}
    if not isinstance(seen, dict):  # another tool's, or a hand edit: ordering is a nicety, not worth an error
        return {}
    return {t: float(s) for t, s in seen.items() if isinstance(s, (int, float)) and s >= 0}


def save(cache, gpu: str | None, seconds: Mapping[str, float]) -> None:
    """This run's seconds over the last ones: tests this run did not run keep theirs."""
    if cache is not None and seconds:
        cache.set(key(gpu), {**load(cache, gpu), **{t: round(s, 2) for t, s in seconds.items()}})


def cost(tests: Iterable[str], seconds: Mapping[str, float]) -> float:
    """The seconds these tests take, a test without a record at the mean of those with one."""
    mean = sum(seconds.values()) / len(seconds) if seconds else 0.0
    return sum(seconds.get(t, mean) for t in tests)


def longest_file_first(config, log, seconds: Mapping[str, float]):
    """xdist's LoadFileScheduling, handing a worker that needs work the file that costs the most (`cost`). It
    reorders xdist's queue of files (workqueue: file -> {test id: done}) before xdist takes its first; a test file
    of this suite (tests/session/test_xdist.py) sees the order a real run takes. The first files go to gw0, gw1, ...
    in that order, not in the order the workers happened to start: run after run, the costliest file lands on the
    same worker (its GPU, its cores), where REF's results for it are kept (against/ref.py, cache_folder)."""
    from xdist.scheduler import LoadFileScheduling

    class LongestFileFirst(LoadFileScheduling):
        def schedule(self):
            if self.collection is None:  # the first dealing: xdist deals to its nodes in the order they came up
                self.assigned_work = dict(sorted(self.assigned_work.items(), key=lambda item: worker_order(item[0])))
            super().schedule()

        def _assign_work_unit(self, node):
            if seconds:
                longest = max(self.workqueue, key=lambda scope: cost(self.workqueue[scope], seconds))
                self.workqueue.move_to_end(longest, last=False)
            super()._assign_work_unit(node)

    return LongestFileFirst(config, log)


def worker_order(node) -> tuple[int, str]:
    """gw0, gw1, ..., gw10: by number."""
    name = node.gateway.id
    return (int(name[2:]) if name[2:].isdigit() else -1, name)
