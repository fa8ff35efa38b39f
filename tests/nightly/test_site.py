"""The history site (nightly/site.py, `nightly publish`): a generated history of noise, a step, an improvement, a GPU
model's change, two failures in a row, one failure, a corrupt night file and a missing one, published and read back;
a year of 60 tests published in seconds; the index and a test's page opened in headless Chromium without a script
error (CI installs it; PERF_REQUIRE_CHROMIUM=1 makes its absence a failure)."""

import hashlib
import json
import os
import random
import re
import shutil
import time
from dataclasses import asdict
from html.parser import HTMLParser
from pathlib import Path

import pytest

from torch_perf_suite.nightly import command
from torch_perf_suite.nightly.creep import kept
from torch_perf_suite.nightly.nights import Night, load_history, save_night
from torch_perf_suite.nightly.site import STATES, page_name, state

pytest.importorskip("plotly", reason="pip install -e '.[site]'")

ROOT = Path(__file__).resolve().parents[2]
REPO = "https://github.com/owner/suite"
LADDER = "perf_tests/test_ladder.py::test_ladder[set_to_none]"  # noise only
COPY = "perf_tests/test_h2d_copy.py::test_h2d_copy[pageable]"  # gpu samples/s 4% lower from night 18: a creep
METRICS = "perf_tests/test_metrics.py::test_metrics[naive]"  # loader instructions 3% fewer from night 14
STORAGE = "perf_tests/test_storage.py::test_storage[disk]"  # failed on the last night only
RESNET = "perf_tests/test_resnet50.py::test_resnet50"  # failed on the last two nights
TESTS = (LADDER, COPY, METRICS, STORAGE, RESNET)
GPU_CHANGE = 6  # nights 0-5 on an H100, the rest on an H200, every samples/s 40% higher there


def night_of(i: int, rng: random.Random, tests=TESTS, nights: int = 30) -> Night:
    """Night `i` of the generated history (its `said` is left to the nightly's own `decide`)."""
    gpu = "NVIDIA H100 80GB HBM3" if i < GPU_CHANGE else "NVIDIA H200"
    speed = 1.0 if i < GPU_CHANGE else 1.4
    samples, numbers, failed = {}, {}, {}
    for k, test in enumerate(tests):
        gpu_side = 5000 * (1 + k / 10) * speed * (0.96 if test == COPY and i >= 18 else 1.0)
        samples[test] = {part: round(v * rng.gauss(1, 0.003), 1)
                         for part, v in (("pipeline", 0.9 * gpu_side), ("gpu", gpu_side), ("loader", 3 * gpu_side))}
        numbers[test] = {"host-device syncs a step": 0.0, "kernel launches a step": 390.0 + k,
                         "GPU kernel ms a step": round(184 / speed * rng.gauss(1, 0.001), 3),
                         "bytes copied a step": 154148864.0, "peak GPU memory GB": 23.52, "Python lines a step": 5661.0,
                         "loader instructions a sample": 6352460.0 * (0.97 if test == METRICS and i >= 14 else 1.0)}
        if (test == STORAGE and i == nights - 1) or (test == RESNET and i >= nights - 2):
            failed[test] = f"samples/s: gpu {samples[test]['gpu']:,.0f}; efficiency 0.61 (bottleneck: loader)"
    commit = hashlib.sha1(str(i).encode()).hexdigest()
    return Night(date=f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}", commit=commit, gpu=gpu, failed=failed,
                         run_url=f"{REPO}/actions/runs/{1000 + i}", samples=samples, numbers=numbers)


def make_history(folder: Path, nights: int = 30) -> list[Night]:
    """The generated history recorded night by night as the nightly records it (its change points said by `decide`),
    and a corrupt night file and a missing one (a link to nothing) beside it."""
    rng, history = random.Random(7), []
    for i in range(nights):
        tonight = night_of(i, rng, nights=nights)
        command.decide(history, tonight, REPO)
        save_night(folder, tonight)
        history.append(tonight)
    (folder / "2026-01-09-0000000000aa-nvidia-h200.json").write_text('{"date": "2026-01-09", "commit": ')
    (folder / "2026-01-10-0000000000bb-nvidia-h200.json").symlink_to(folder / "gone.json")
    return history


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("history")
    make_history(folder / "nights")
    assert command.main(["publish", "--history", str(folder / "nights"), "--out", str(folder / "site")]) == 0
    return folder / "site"


class Page(HTMLParser):
    """A page read back: its text, links, table rows (their cells' text and id) and the JSON it draws from."""

    def __init__(self, path: Path):
        super().__init__()
        self.text, self.links, self.rows, self.data, self._in = [], [], [], None, None
        self.feed(path.read_text(encoding="utf-8"))

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a":
            self.links.append(attrs["href"])
        if tag == "tr":
            self.rows.append({"id": attrs.get("id"), "class": attrs.get("class"), "cells": []})
        if tag in ("td", "th") and self.rows:
            self.rows[-1]["cells"].append("")
        self._in = attrs.get("id") if tag == "script" else self._in

    def handle_data(self, data):
        if self._in == "data":
            self.data = json.loads(data)
        self.text.append(data)
        if self.rows and self.rows[-1]["cells"]:
            self.rows[-1]["cells"][-1] += data

    def handle_endtag(self, tag):
        self._in = None if tag == "script" else self._in


def test_the_index_lists_every_test_worst_first_and_names_the_skipped_night_files(site):
    page = Page(site / "index.html")
    text = "".join(page.text)
    tests = [r for r in page.rows if r["class"] in STATES]
    states = {r["cells"][1]: r["class"] for r in tests}
    assert states == {RESNET: "alerted", COPY: "alerted", STORAGE: "suspicious", METRICS: "improved",
                      LADDER: "passing"}
    assert [r["class"] for r in tests] == sorted((r["class"] for r in tests), key=STATES.index)
    assert re.search(r"gpu samples/s -[34]\.\d\d% from 2026-01-19", text)  # the creep's why, with its size
    assert "loader instructions a sample -3.00% from 2026-01-15" in text
    assert "2026-01-09-0000000000aa-nvidia-h200.json" in text and "2026-01-10-0000000000bb-nvidia-h200.json" in text
    assert "No such file or directory" in text and str(site.parent) not in text  # the missing one's problem, its name once
    assert "GPU: NVIDIA H100 80GB HBM3 → NVIDIA H200" in text and "a step there is the GPU's, not a commit's" in text
    nights = [r for r in page.rows if (r["id"] or "").startswith("night-")]
    assert [r["cells"][1] for r in nights] == sorted((r["cells"][1] for r in nights), reverse=True)  # newest first
    assert len(nights) == 30 and f"{REPO}/commit/{hashlib.sha1(b'29').hexdigest()}" in page.links
    assert f"{REPO}/actions/runs/1029" in page.links
    assert len(page.data["sparks"]) == 5 and all(len(s) == 30 - GPU_CHANGE for s in page.data["sparks"])  # the H200's


def test_a_tests_page_holds_each_number_its_change_points_alerts_and_the_gpu_change(site):
    page = Page(site / page_name(COPY))
    charts = {c["name"]: c for c in page.data["charts"]}
    assert list(charts) == ["pipeline samples/s", "gpu samples/s", "loader samples/s", *kept()]
    assert {c["unit"] for c in charts.values()} == {"samples/s", "syncs / step", "launches / step", "ms / step",
                                                    "bytes / step", "GB", "lines / step", "instructions / sample"}
    gpu = charts["gpu samples/s"]
    assert [line["gpu"] for line in gpu["lines"]] == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert [c[0] for c in gpu["changes"]] == [18]  # the step, not the GPU model's change at night 6
    assert re.fullmatch(r"-[34]\.\d\d%", gpu["changes"][0][1])
    alerts = [m for m in gpu["marks"] if m[2] == "alert"]
    assert [m[0] for m in alerts] == [18] and alerts[0][3].startswith("change -")
    assert page.data["changes"] == [[GPU_CHANGE, "GPU: NVIDIA H100 80GB HBM3 → NVIDIA H200"]]
    assert not charts["host-device syncs a step"]["changes"]  # a number that never moves: one level a GPU model
    text = "".join(page.text)
    assert "gpu samples/s -" in text and "(change point, alert)" in text
    rows = {r["id"]: r["cells"] for r in page.rows if r["id"]}
    assert "GPU: NVIDIA H100 80GB HBM3 → NVIDIA H200" in rows[f"night-{GPU_CHANGE}"][0]
    assert rows["night-29"][4].strip() == "passed" and list(rows)[0] == "night-29"


def test_an_improvement_and_the_failed_nights_are_marked(site):
    metrics = Page(site / page_name(METRICS)).data["charts"]
    [loader] = [c for c in metrics if c["name"] == "loader instructions a sample"]
    assert [m[2] for m in loader["marks"]] == ["improvement"] and loader["marks"][0][0] == 14
    resnet = Page(site / page_name(RESNET))
    [gpu] = [c for c in resnet.data["charts"] if c["name"] == "gpu samples/s"]
    assert [m[0] for m in gpu["marks"] if m[2] == "failed"] == [28, 29]
    assert "failed on 2026-02-01 and 2026-02-02" in "".join(resnet.text)


def test_the_site_opens_from_disk_without_the_network(site):
    """Every script and style is a file of the site: nothing is fetched."""
    for path in site.rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        for ref in re.findall(r'(?:src|href)="([^"]+)"', text):
            if not ref.startswith(("https://github.com/owner/suite/", "#")):
                assert (path.parent / ref.split("#")[0]).is_file(), f"{path.name}: {ref}"
    assert {p.name for p in site.iterdir()} == {"index.html", "plotly.min.js", "site.js", "site.css", "tests"}


def test_publish_says_what_is_wrong_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        command.main(["publish", "--history", str(tmp_path / "none"), "--out", str(tmp_path / "site")])
    assert "--history" in capsys.readouterr().err.splitlines()[-1]
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit):
        command.main(["publish", "--history", str(tmp_path), "--out", str(tmp_path / "file")])
    assert "--out" in capsys.readouterr().err.splitlines()[-1]
    assert command.main(["publish", "--history", str(tmp_path), "--out", str(tmp_path / "site")]) == 0
    assert "no night recorded yet" in (tmp_path / "site" / "index.html").read_text()


def test_the_nightly_still_stops_at_a_corrupt_night(tmp_path):
    (tmp_path / "2026-01-01-x.json").write_text("[]")
    with pytest.raises(SystemExit, match="2026-01-01-x.json: not a night recorded by this tool"):
        load_history(tmp_path)


def year(folder: Path, nights: int = 365, tests: int = 60) -> None:
    """A year of nights of `tests` tests, each with every number, a step in a few of them."""
    rng = random.Random(1)
    names = tuple(f"perf_tests/test_t{k:02d}.py::test_t{k:02d}[case]" for k in range(tests))
    folder.mkdir()
    for i in range(nights):
        night = night_of(i, rng, names, nights)
        if i == 200:
            night.said = [{"test": names[1], "number": "gpu samples/s", "date": night.date, "commit": night.commit,
                           "change_pct": -4.0, "drift": False}]
        (folder / f"{night.date}-{i:03d}.json").write_text(json.dumps(asdict(night)))


def test_a_year_of_sixty_tests_publishes_in_seconds_and_the_site_stays_small(tmp_path):
    """docs/measurements/site.md: the figures of this test on the 2-core machine."""
    year(tmp_path / "nights")
    start = time.perf_counter()
    command.main(["publish", "--history", str(tmp_path / "nights"), "--out", str(tmp_path / "site")])
    seconds = time.perf_counter() - start
    size = sum(p.stat().st_size for p in (tmp_path / "site").rglob("*") if p.is_file())
    print(f"published 365 nights x 60 tests in {seconds:.2f} s, {size:,} bytes")
    assert seconds < 30 and size < 30e6


# --- a real browser -------------------------------------------------------------------------------------------------

def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("PERF_REQUIRE_CHROMIUM"):
            pytest.fail("chromium not found, and PERF_REQUIRE_CHROMIUM is set: apt-get install chromium")
        pytest.skip("chromium not found: apt-get install chromium")
    return found


def screenshots(site: Path, out: Path, width: int = 1200, full_page: bool = True) -> dict[str, list[str]]:
    """The index and one test's page opened in headless Chromium (Playwright drives the system's): each page's script
    errors and console errors, and a screenshot of each."""
    from playwright.sync_api import sync_playwright

    errors: dict[str, list[str]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        for name, path in (("index", site / "index.html"), ("test", site / page_name(COPY))):
            page, found = browser.new_page(viewport={"width": width, "height": 900}), errors.setdefault(name, [])
            page.on("pageerror", lambda e, found=found: found.append(str(e)))
            page.on("console", lambda m, found=found: found.append(m.text) if m.type == "error" else None)
            page.goto(path.as_uri())
            page.wait_for_selector(".main-svg")  # Plotly drew
            page.screenshot(path=str(out / f"site-{name}.png"), full_page=full_page and name == "index")
            page.close()
        browser.close()
    return errors


def test_the_index_and_a_tests_page_open_in_chromium_without_a_script_error(site, tmp_path):
    chromium()
    pytest.importorskip("playwright", reason="pip install -e '.[test]'")
    errors = screenshots(site, tmp_path)
    assert errors == {"index": [], "test": []}
    for name in ("index", "test"):
        shot = tmp_path / f"site-{name}.png"
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


if __name__ == "__main__":  # docs/site.md's screenshots: python -m tests.nightly.test_site docs
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        make_history(Path(scratch) / "nights")
        command.main(["publish", "--history", f"{scratch}/nights", "--out", f"{scratch}/site", "--repo-url", REPO])
        print(screenshots(Path(scratch) / "site", Path(sys.argv[1]), width=1200, full_page=False))
    for name in ("index", "test"):  # small: a palette of 64 colours
        from PIL import Image

        shot = Path(sys.argv[1]) / f"site-{name}.png"
        Image.open(shot).convert("RGB").quantize(64).save(shot, optimize=True)


def test_a_test_failed_on_two_nights_with_one_between_that_did_not_run_it_is_suspicious_as_the_nightly_says():
    """The nightly compares tonight with the night before on the same GPU model, which did not run the test: no
    alert was filed, and the index said "alerted"."""
    nights = [Night(date=f"2026-01-0{i + 1}", commit=f"{i:040x}", gpu="NVIDIA H200",
                            samples={} if i == 1 else {"t": {"gpu": 1.0}}, failed={} if i == 1 else {"t": "slow"})
              for i in range(3)]
    assert state(nights, "t")[:2] == ("suspicious", "failed on 2026-01-03 only")
