# The plugin: installed, pytest loads it through its entry point (pyproject.toml), under this same name, so
# naming it here registers nothing twice; not installed (the GPU image runs the repository as it is), this loads it.
pytest_plugins = ["torch_perf_suite.plugin"]
