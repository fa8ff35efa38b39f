# The suite's pytest plugin: options, the `perf` fixture, baselines and the session report.
pytest_plugins = ["perf_tests.harness.plugin"]
