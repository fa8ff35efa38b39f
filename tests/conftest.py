import os
from pathlib import Path

import pytest
import torchvision  # noqa: F401
from hypothesis import HealthCheck, settings

# the plugin's end-to-end tests, in several folders, share one pytester suite with a fake GPU: its fixture from here,
# its asserts rewritten as a test file's are
pytest.register_assert_rewrite("tests.plugin_suite")
from tests.plugin_suite import suite  # noqa: E402, F401

# Hypothesis (tests/test_inputs.py): in CI a fixed seed and few examples, so that a run is repeatable and quick; here
# more examples, a new seed each run. HYPOTHESIS_PROFILE picks one by name; CI (set by GitHub Actions and .ci/run)
# picks "ci".
settings.register_profile("ci", max_examples=40, derandomize=True, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# once in a while, to find the next broken input: HYPOTHESIS_PROFILE=thorough pytest tests/test_inputs.py
settings.register_profile("thorough", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


# torchvision imported here, once: the plugin no longer imports it, and a pytester session run in this process drops
# the modules it imported when it ends, torchvision's and Triton's among them, whose extension cannot be imported a
# second time (nanobind aborts the process: "refusing to add duplicate key")

# Hypothesis's pytest plugin imports Hypothesis at the end of every session (2.4 s a process on the 2-core machine);
# the sessions these tests start, and the processes those start in turn (REF's run, a bisected commit's, xdist's
# workers), run no Hypothesis test
WITHOUT_HYPOTHESIS = "-p no:hypothesispytest"


@pytest.fixture
def pytester(pytester, monkeypatch):
    """pytester (which empties PYTEST_ADDOPTS), its sessions and their processes started without Hypothesis's plugin."""
    monkeypatch.setenv("PYTEST_ADDOPTS", WITHOUT_HYPOTHESIS)
    return pytester


@pytest.fixture
def fake_proc(tmp_path, monkeypatch):
    """fake_proc(module, "/proc/...", text): `module`'s Path reads `text` at that path (None: no such file)."""
    def use(module, proc_path: str, text: str | None) -> None:
        fake = tmp_path / Path(proc_path).name
        if text is not None:
            fake.write_text(text)
        monkeypatch.setattr(module, "Path", lambda p: fake if p == proc_path else Path(p))
    return use


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: starts processes that import torch (a REF run, a bisected commit, the "
                                       "turns, callgrind, xdist workers); collected first")


def pytest_collection_modifyitems(items):
    """The slow tests first, in their order: under -n 2 the two workers share them and the short ones fill in after,
    rather than one worker running a minute-long test alone at the end (docs/cost.md)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
