"""A pytest plugin for REF's run under --perf-against, copied beside REF's results and loaded there with
`-p perf_against_select`: of the tests collected in REF's files it keeps those this session selected (the ids in the
JSON file named by $PERF_AGAINST_WANTED), deselects the rest, and writes the ids it kept to $PERF_AGAINST_KEPT and
every id it collected to $PERF_AGAINST_COLLECTED (where the head's test is not in REF's suite: was one renamed?).

One pytest process for REF, not a `--collect-only` one first to learn which ids exist there (a test new in this
change, a parameter REF lacks): on a GPU host each process pays for importing torch and CUDA (its seconds:
docs/measurements/cost.md).
"""

import json
import os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    with open(os.environ["PERF_AGAINST_WANTED"]) as f:
        wanted = set(json.load(f))
    kept = [item for item in items if item.nodeid in wanted]
    deselected = [item for item in items if item.nodeid not in wanted]
    config.hook.pytest_deselected(items=deselected)
    items[:] = kept
    with open(os.environ["PERF_AGAINST_COLLECTED"], "w") as f:
        json.dump([item.nodeid for item in items + deselected], f)
    with open(os.environ["PERF_AGAINST_KEPT"], "w") as f:
        json.dump([item.nodeid for item in kept], f)
