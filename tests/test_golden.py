"""The report of recorded results, rendered again: the same data gives the same text (tests/golden/README.md)."""

import json
import os
from pathlib import Path

import pytest

from torch_perf_suite import report

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("name", ["gate", "multi_gpu"])
def test_a_recorded_run_renders_as_its_golden_report(name):
    rendered = report.render(json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8")))
    golden = GOLDEN / f"{name}.md"
    if os.environ.get("PERF_UPDATE_GOLDEN"):
        golden.write_text(rendered, encoding="utf-8")
    assert rendered.splitlines() == golden.read_text(encoding="utf-8").splitlines()
