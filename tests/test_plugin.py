"""The plugin as any project gets it, end to end in pytester sessions: installed, through its entry point, and its
own hooks (pytest_perf_sync_sources, pytest_perf_update_environment) in a project's conftest.py.

The suite's other end-to-end tests are beside what they test: tests/*/test_plugin_*.py (their pytester suite and
fake GPU: tests/plugin_suite.py).
"""

import json
import os

import pytest

from tests.plugin_suite import CONFTEST, FakeGPU

pytest_plugins = ["pytester"]


def test_an_installed_package_gives_any_project_the_plugin(pytester):
    """No conftest: pytest loads the plugin through the package's pytest11 entry point."""
    import importlib.metadata

    if not [e for e in importlib.metadata.entry_points(group="pytest11") if e.value == "torch_perf_suite.plugin"]:
        pytest.skip("the package is not installed: pip install -e .")
    pytester.makepyfile(test_mine="def test_mine(perf):\n    assert perf.smoke\n")
    result = pytester.runpytest("--perf-smoke", "-p", "no:randomly")
    result.assert_outcomes(passed=1)


def test_a_project_whose_torchvision_does_not_load_with_its_torch_runs_the_plugin(pytester, tmp_path, monkeypatch):
    """A CPU torch beside PyPI's CUDA torchvision: `import torchvision` raises. The plugin imports nothing a project does
    not use (torchvision's version is read from its version.py), so a project that needs no torchvision runs, its
    loader counted and its environment named; before, the plugin's configure imported it and pytest stopped with an
    internal error."""
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(  # found where it is installed, failing as it runs, as a mismatched one does
        "import importlib.abc, importlib.machinery, sys\n"
        "class Fails(importlib.abc.Loader):\n"
        "    def create_module(self, spec):\n"
        "        return None\n"
        "    def exec_module(self, module):\n"
        "        raise RuntimeError('operator torchvision::nms does not exist')\n"
        "class Broken(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name != 'torchvision':\n"
        "            return None\n"
        "        spec = importlib.machinery.PathFinder.find_spec(name, path)\n"
        "        if spec is not None:\n"
        "            spec.loader = Fails()\n"
        "        return spec\n"
        "sys.meta_path.insert(0, Broken())\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_mine="""
import torch
from torch_perf_suite import TrainingStep

class Items(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.ones(2), torch.zeros(1)

def test_mine(perf):
    model = torch.nn.Linear(2, 1)
    loader = torch.utils.data.DataLoader(Items(), batch_size=4)
    perf.measure(TrainingStep(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.functional.mse_loss, loader,
                              torch.device("cpu")))
""")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(blocker), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    result = pytester.runpytest_subprocess("--perf-smoke", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["SMOKE RUN (--perf-smoke): * torchvision * | host *"])


def test_the_installed_plugin_registers_its_markers_in_a_project_of_its_own(pytester, monkeypatch):
    """No conftest naming the plugin: pytest finds it through the package's entry point; --strict-markers passes."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    pytester.makepyfile(test_mine="""
        import pytest

        @pytest.mark.perf(rounds=3)
        @pytest.mark.gate
        def test_step():
            pass
    """)
    result = pytester.runpytest("--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    shown = pytester.runpytest("--markers").stdout.str()
    assert "@pytest.mark.perf(**settings): per-test measurement settings by name (warmup, rounds," in shown
    assert "count_margin" in shown


HOOKS = '''
from torch_perf_suite import Advice

def pytest_perf_sync_sources():
    return [Advice("our scaler", "use ourlib.Scaler(check_every=100)", "https://ourlib/scaler", library="torch/amp/")]

def pytest_perf_update_environment(env):
    env["cluster"] = "rack-7"
'''


def test_a_users_sync_source_carries_the_users_fix(suite, pytester):
    pytester.makeconftest(CONFTEST + HOOKS)
    suite.gpu(FakeGPU(case="grad_scaler"))  # GradScaler's sync: torch/amp/grad_scaler.py
    result = suite.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*fix:       use ourlib.Scaler(check_every=100) (more: https://ourlib/scaler)"])


def test_a_users_environment_fields_are_recorded(suite, pytester):
    pytester.makeconftest(CONFTEST + HOOKS)
    suite.run("--perf-update-baselines", "--perf-report=out/perf").assert_outcomes(passed=1)
    assert suite.entry()["env"]["cluster"] == "rack-7"
    assert json.loads((suite.path / "out" / "perf.json").read_text())["env"]["cluster"] == "rack-7"


def test_a_sync_source_that_is_not_advice_is_a_usage_error(suite, pytester):
    pytester.makeconftest(CONFTEST + "def pytest_perf_sync_sources():\n    return ['pin your memory']\n")
    result = suite.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pytest_perf_sync_sources returned 'pin your memory'; return a list of "
                                 "torch_perf_suite.Advice"])
