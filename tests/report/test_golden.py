"""The report of recorded results, rendered again: the same data gives the same text (tests/golden/README.md)."""

import json
import os
from pathlib import Path

import pytest

from torch_perf_suite.report import saved

GOLDEN = Path(__file__).parents[1] / "golden"


@pytest.mark.parametrize("name", ["gate", "multi_gpu"])
def test_a_recorded_run_renders_as_its_golden_report(name):
    rendered = saved.render(json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8")))
    golden = GOLDEN / f"{name}.md"
    if os.environ.get("PERF_UPDATE_GOLDEN"):
        golden.write_text(rendered, encoding="utf-8")
    assert rendered.splitlines() == golden.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("name", ["gate", "multi_gpu"])
def test_the_terminal_shows_the_same_report_in_plain_text(name):
    """What the terminal shows (plain.py): the golden report's content without Markdown or HTML, in `<name>.txt`."""
    from torch_perf_suite.report import plain

    shown = plain.text(saved.render(json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))))
    golden = GOLDEN / f"{name}.txt"
    if os.environ.get("PERF_UPDATE_GOLDEN"):
        golden.write_text(shown, encoding="utf-8")
    assert shown.splitlines() == golden.read_text(encoding="utf-8").splitlines()
    marks = [line for line in shown.splitlines() if line.startswith(("|", "#", "```", "<details", "</details"))
             or "<summary>" in line or "`" in line or "**" in line]
    assert not marks, marks[:3]
