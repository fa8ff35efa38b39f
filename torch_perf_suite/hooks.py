"""The plugin's own hooks: implement them in a conftest.py or a plugin of your own.

    def pytest_perf_sync_sources():
        return [Advice("mylib's flush", "call mylib.flush(sync=False)", "https://mylib/docs", library="mylib/")]

    def pytest_perf_update_environment(env):
        env["cluster"] = os.environ.get("CLUSTER", "")
"""

from pluggy import HookspecMarker

hookspec = HookspecMarker("pytest")  # pytest's hooks are pluggy hooks of the project "pytest"


@hookspec
def pytest_perf_sync_sources():
    """Return known sync sources (a list of `torch_perf_suite.Advice`) whose fix a failure should name. They are
    matched before the built-in ones, so a source of your own library can carry your advice."""


@hookspec
def pytest_perf_update_environment(env: dict):
    """Add fields to the environment recorded with every baseline entry and report (as pytest-benchmark's
    pytest_benchmark_update_machine_info does). Called once a session, after the GPU and host were read."""
