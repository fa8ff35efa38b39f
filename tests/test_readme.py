"""The README's three commands are the ones CI runs (.ci/run reads them from the README's first bash block): each is
there, and the main job's command parses with the plugin's options."""

import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
pytest_plugins = ["pytester"]


def ci_function(call: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`call` run with .ci/run's own shell functions (`readme`, `runs_pytest_tests`) defined, in `cwd`."""
    script = f'source <(sed -n "/^[a-z_]*() {{/,/^}}/p" {shlex.quote(str(ROOT / ".ci" / "run"))}); {call}'
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True)


def readme(heading: str) -> str:
    """The command under `# heading` in the README, as .ci/run's own `readme` function reads it."""
    done = ci_function(f"readme {shlex.quote(heading)}")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def commands(script: Path) -> list[str]:
    """The lines of a shell script that are neither blank nor comments."""
    return [line for line in script.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_three_commands_are_in_the_readme():
    assert readme("set-up").startswith("python3 -m venv .venv && .venv/bin/pip install -e '.[test]'")
    assert readme("the test command") == "bash .ci/test"
    assert readme("the main job").startswith(".venv/bin/python -m pytest perf_tests")
    assert readme("no such heading") == ""


def test_the_test_script_runs_the_suites_tests_then_the_scenarios_then_the_examples():
    # the suite's own tests over two processes (docs/inputs.md: faster on a 2-core machine), then the scenarios, over
    # two processes too (docs/cost.md)
    assert commands(ROOT / ".ci" / "test") == [
        "set -euo pipefail",
        'cd "$(dirname "$0")/.."',
        ".venv/bin/python -m pytest tests -n 2 --maxschedchunk 1 --durations=25",
        ".venv/bin/python -m pytest perf_tests --perf-smoke -n 2",
        ".venv/bin/python -m pytest examples/guard_your_step --perf-smoke",
        ".venv/bin/python -m pytest examples/lightning_step --perf-smoke",
        ".venv/bin/python -m pytest examples/hf_trainer_step --perf-smoke",
    ]
    assert sorted(p.name for p in (ROOT / "examples").iterdir() if (p / "pyproject.toml").exists()) == [
        "guard_your_step", "hf_trainer_step", "lightning_step"]  # every example project is run


def test_ci_refuses_a_test_command_that_does_not_run_the_suites_tests_or_only_collects_them(tmp_path):
    assert ci_function(f"runs_pytest_tests {shlex.quote(readme('the test command'))}").returncode == 0
    assert ci_function("runs_pytest_tests '.venv/bin/python -m pytest tests -n 2'").returncode == 0
    (tmp_path / "dropped").write_text((ROOT / ".ci" / "test").read_text().replace(
        ".venv/bin/python -m pytest tests -n 2 --maxschedchunk 1 --durations=25\n", ""))
    (tmp_path / "commented").write_text((ROOT / ".ci" / "test").read_text().replace(
        ".venv/bin/python -m pytest tests -n 2 --maxschedchunk 1 --durations=25\n", "# .venv/bin/python -m pytest tests -n 2\n"))
    (tmp_path / "collects").write_text((ROOT / ".ci" / "test").read_text().replace(" -m pytest tests -n 2 ",
                                                                                    " -m pytest tests -n 2 --co "))
    for command in ("bash dropped", "bash commented", "bash missing", "bash collects", ".venv/bin/python -m pytest perf_tests",
                    "pytest tests --collect-only -q", "pytest tests --setup-plan", "pytest tests --fixtures"):
        assert ci_function(f"runs_pytest_tests {shlex.quote(command)}", cwd=tmp_path).returncode == 1, command


def test_ci_stops_on_a_test_script_without_the_suites_tests(tmp_path):
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_text((ROOT / ".ci" / "run").read_text().replace("apt-get", "true"))
    (tmp_path / ".ci" / "test").write_text((ROOT / ".ci" / "test").read_text().replace(" -m pytest tests ", " -m pytest "))
    (tmp_path / "README.md").write_text((ROOT / "README.md").read_text())
    done = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "README.md: its test command does not run `pytest tests`: bash .ci/test" in done.stderr


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
