"""The README's three commands are the ones CI runs (.ci/run reads them from the README's first bash block): each is
there, and the main job's command parses with the plugin's options."""

import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
pytest_plugins = ["pytester"]


def readme(heading: str) -> str:
    """The command under `# heading` in the README, as .ci/run's own `readme` function reads it."""
    script = f'source <(sed -n "/^readme()/,/^}}/p" .ci/run); readme {shlex.quote(heading)}'
    return subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def test_the_three_commands_are_in_the_readme():
    assert readme("set-up").startswith("python3 -m venv .venv && .venv/bin/pip install -e '.[test]'")
    # the suite's own tests over two processes (docs/inputs.md: faster on a 2-core machine), then the scenarios
    assert readme("the test command").startswith(".venv/bin/python -m pytest tests -n 2 && "
                                                  ".venv/bin/python -m pytest perf_tests --perf-smoke")
    assert readme("the main job").startswith(".venv/bin/python -m pytest perf_tests")
    assert readme("no such heading") == ""


def test_the_main_jobs_command_parses(pytester, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    args = shlex.split(readme("the main job"))
    assert args[:3] == [".venv/bin/python", "-m", "pytest"]
    config = pytester.parseconfig(*args[3:])  # a bad option is a UsageError here
    assert config.getoption("benchmark_autosave") and config.getoption("--perf-smoke") is False


def test_ci_runs_the_readmes_commands():
    run = (ROOT / ".ci" / "run").read_text()
    assert 'eval "$setup"' in run and 'eval "$test_command"' in run


@pytest.mark.parametrize("heading", ["set-up", "the test command"])
def test_a_missing_command_stops_ci_saying_so(tmp_path, heading):
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_text((ROOT / ".ci" / "run").read_text().replace("apt-get", "true"))
    text = (ROOT / "README.md").read_text()
    (tmp_path / "README.md").write_text(text.replace(f"# {heading}", "# (removed)", 1))
    done = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "README.md: its three-command block has no set-up or no test command" in done.stderr


def test_the_options_table_is_the_one_settings_declares():
    """README.md's "## Options" table is settings.options_table(), so that --help and the README say the same."""
    from torch_perf_suite import settings

    section = (ROOT / "README.md").read_text().split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    assert table == settings.options_table(), (
        "README.md's options table differs from torch_perf_suite/settings.py's declarations; regenerate it with "
        "`python -m torch_perf_suite.settings` and paste the output over the table in README.md's \"## Options\"")
