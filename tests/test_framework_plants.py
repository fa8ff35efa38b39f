"""The framework examples as a user has them, each a git repository of its own, run as CI's job against the base runs
on a CPU (`--perf-smoke --perf-against HEAD --perf-strict`): unchanged, each passes; with per-step Python and a tensor
read on the host planted in Lightning's training_step or in a Hugging Face Trainer callback, each fails naming the
function and the line. The loop runs on a thread of its own: its host side and host reads are counted there."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
LOOP = "        total = 0\n        for i in range(150):  # PLANTED LINES\n            total += i\n"  # 302 lines a step

# the file planted, where, what, and the planted function as the host side names it (its path from its sys.path folder:
# pytest puts tests/ on the path for a test module) and as the host read names it
PLANTS = {
    "lightning_step": ("lit.py", "        images, labels = batch\n",
                       "        images, labels = batch\n" + LOOP + "        float(images.sum())  # PLANTED READ\n",
                       "lit.py:training_step", "lit.py:{} in training_step"),
    "hf_trainer_step": ("tests/test_speed.py", "    loop = hf_train(",
                        "    trainer.add_callback(Planted())\n    loop = hf_train(", "test_speed.py:on_step_end",
                        "tests/test_speed.py:{} in on_step_end"),
}
CALLBACK = ("\n\nclass Planted(transformers.TrainerCallback):\n    def on_step_end(self, args, state, control, model=None, "
            "**kwargs):\n" + LOOP + "        model.classifier.weight.sum().item()  # PLANTED READ\n")


def git(path: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(path), "-c", "user.email=perf@example.com", "-c", "user.name=perf", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def run(project: Path, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "--perf-smoke", "--perf-against", "HEAD", "--perf-strict",
                           f"--perf-against-cache={cache}", "-p", "no:warnings"],
                          cwd=project, capture_output=True, text=True, timeout=900)


def line_of(path: Path, marker: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.rstrip().endswith(marker))


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(PLANTS))
def test_a_framework_loops_planted_python_and_host_read_fail_against_head_and_the_clean_copy_passes(tmp_path, example):
    project = tmp_path / example
    shutil.copytree(EXAMPLES / example, project, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "commit", "-qm", "the example")
    cache = tmp_path / "ref-cache"
    clean = run(project, cache)
    assert clean.returncode == 0, clean.stdout[-3000:]
    assert "Python lines" in clean.stdout and "host side not counted" not in clean.stdout  # in the loop's own thread

    path, anchor, planted, function, read_at = PLANTS[example]
    text = (project / path).read_text()
    assert anchor in text
    (project / path).write_text(text.replace(anchor, planted, 1) + (CALLBACK if example == "hf_trainer_step" else ""))
    failed = run(project, cache)
    assert failed.returncode == 1, failed.stdout[-3000:]
    out = failed.stdout
    lines = line_of(project / path, "# PLANTED LINES")
    grown = re.search(r"the host runs ([\d,]+) Python lines a step to issue it, ([\d,]+) at REF HEAD", out)
    assert grown and int(grown[1].replace(",", "")) - int(grown[2].replace(",", "")) >= 300, out[-3000:]
    named = function.rsplit(":", 1)[0]
    assert re.search(rf"\+30\d\.00 {re.escape(function)} .*its busiest lines now: {re.escape(named)}:({lines}|{lines + 1}) ",
                     out), out[-3000:]
    assert f"user code: {read_at.format(line_of(project / path, '# PLANTED READ'))}" in out, out[-3000:]
    assert "loader instructions: what it reads unchanged since counted" in out  # the model's edit: the loader not counted
