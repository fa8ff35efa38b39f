"""The nightly's history as a static site that opens from disk: an index of every test with its state, worst first,
and a page a test with each number it keeps over the nights, the change points and their levels, the alerts and
improvements said, each night's commit and run, and where the GPU model changed.

    python -m torch_perf_suite.nightly publish --history DIR --out SITE [--repo-url https://github.com/OWNER/REPO]

The charts are drawn by Plotly's JavaScript (plotly.min.js, shipped inside the plotly wheel), copied once beside the
pages; each page holds its numbers as JSON and a few lines of site.js hand them to Plotly. Not matplotlib's SVG
(already a dependency): it took 56 ms and 18 KB a chart of 365 nights on the 2-core machine, and a year of 60 tests
is 600 charts, 34 s and 11 MB, where this writes JSON and publishes the same in seconds with one 4.8 MB copy of the
library (docs/measurements/site.md). Plotly rather than Bokeh or Vega-Altair (not measured): its whole bundle is one
file of its wheel, and the pages hand it plain JSON, so no figure object is built in Python; no server, no network.

A test's state is read at its newest night: "alerted" where it failed that night and its night before on the same
GPU model, or where the last change point said of one of its numbers (on any GPU model) made it worse; "suspicious"
where it failed that night only; "improved" where the last change point said of one of its numbers made it better;
else "passing". Change points are found per GPU model (a new model's level is no commit's change), over the whole
series in windows of the nightly's LAST_NIGHTS, and marked with their levels.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

from . import changes
from .creep import SAMPLES, is_worse, kept, series

STATES = ("alerted", "suspicious", "improved", "passing")  # worst first
PARTS = ("pipeline", "gpu", "loader")
UNITS = {"host-device syncs a step": "syncs / step", "kernel launches a step": "launches / step",
         "GPU kernel ms a step": "ms / step", "bytes copied a step": "bytes / step", "peak GPU memory GB": "GB",
         "Python lines a step": "lines / step", "loader instructions a sample": "instructions / sample"}
SPARK_NIGHTS = 90  # the index's trend line: the last nights of the test's first samples/s on its GPU model
TABLE_NIGHTS = 60  # a test page lists its last nights, and every older one where something happened
ASSETS = Path(__file__).with_name("site_assets")  # site.js and site.css


def unit(number: str) -> str:
    """The y axis of a number's chart."""
    return "samples/s" if number.endswith(SAMPLES) else UNITS.get(number, number)


def _order(number: str) -> tuple[int, str]:
    names = [f"{p}{SAMPLES}" for p in PARTS] + list(kept())
    return (names.index(number), "") if number in names else (len(names), number)


@dataclass
class Test:
    """What the index says of one test."""

    name: str
    page: str  # its page, relative to the site's folder
    state: str
    why: str
    last: int  # the index of its newest night
    spark: list[float]


def page_name(test: str) -> str:
    """A test's page: its id made a file name, with a hash so that two ids that read alike stay apart."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", test).strip("-")[:80]
    return f"tests/{slug}-{hashlib.sha1(test.encode()).hexdigest()[:8]}.html"


def _edges(values: list[float]) -> list[int]:
    """The change points of a whole series: `changes.change_points` reads the last LAST_NIGHTS nights, so a longer
    series is read in windows of that many, each half over the next, a change point kept from the window it lies in the
    middle half of."""
    width, n = changes.LAST_NIGHTS, len(values)
    starts = list(range(0, max(n - width, 0) + 1, width // 2))
    if starts[-1] + width < n:
        starts.append(n - width)
    found, low = [], 0
    for k, start in enumerate(starts):
        high = n if k == len(starts) - 1 else start + 3 * width // 4
        found += [start + c.at for c in changes.change_points(values[start:start + width]) if low <= start + c.at < high]
        low = high
    return found


def levels(values: list[float]) -> list[changes.Change]:
    """The series' change points, each with the medians of the levels on its two sides."""
    edges = [0, *_edges(values), len(values)]
    noise = changes.noise_pct(values) if len(values) > 2 else 0.0
    median = [sorted(values[a:b])[(b - a) // 2] for a, b in zip(edges, edges[1:])]
    return [changes.Change(at=edges[i], before=median[i - 1], after=median[i], noise_pct=noise)
            for i in range(1, len(edges) - 1)]


def charts(nights: list, test: str, said: list[dict]) -> list[dict]:
    """Each number of `test` as a chart's data: a line a GPU model (night indices and values), its levels, change
    points, the change points said (alerts and improvements) and the failed nights."""
    found: dict[str, dict] = {}
    for gpu in dict.fromkeys(n.gpu for n in nights):
        index = [i for i, n in enumerate(nights) if n.gpu == gpu]
        for name, points in series([nights[i] for i in index], test).items():
            chart = found.setdefault(name, {"name": name, "unit": unit(name), "lines": [], "levels": [[], []],
                                            "changes": [], "marks": []})
            at, values = [index[i] for i, _ in points], [v for _, v in points]
            chart["lines"].append({"gpu": gpu, "x": at, "y": values})
            found_here = levels(values)
            edges = [0, *(c.at for c in found_here), len(values)]
            for a, b in zip(edges, edges[1:]):
                level = sorted(values[a:b])[(b - a) // 2]
                chart["levels"][0] += [at[a], at[b - 1], None]
                chart["levels"][1] += [level, level, None]
            chart["changes"] += [[at[c.at], f"{c.change_pct:+.2f}%"] for c in found_here]
            value = dict(zip(at, values))
            chart["marks"] += [[i, value[i], "failed", nights[i].failed[test]] for i in at if test in nights[i].failed]
    place = {(n.date, n.commit): i for i, n in enumerate(nights)}
    for s in said:
        chart, i = found.get(s["number"]), place.get((s["date"], s["commit"]))
        if chart and i is not None:
            value = next((y for line in chart["lines"] for x, y in zip(line["x"], line["y"]) if x == i), None)
            kind = "alert" if is_worse(s["number"], s["change_pct"]) else "improvement"
            chart["marks"].append([i, value, kind, f"{'drift' if s['drift'] else 'change'} {s['change_pct']:+.2f}%"])
    return sorted(found.values(), key=lambda c: _order(c["name"]))


def state(nights: list, test: str) -> tuple[str, str, int]:
    """The test's state at its newest night, why, and that night's index."""
    ran = [i for i, n in enumerate(nights) if test in n.samples or test in n.failed]
    last = ran[-1]
    gpu = nights[last].gpu
    before = next((i for i in reversed(range(last)) if nights[i].gpu == gpu), None)  # the night before, as the nightly
    failed = test in nights[last].failed
    if failed and before is not None and test in nights[before].failed:
        return "alerted", f"failed on {nights[before].date} and {nights[last].date}", last
    latest: dict[str, dict] = {}  # number -> the last change point said of it (an alert stands across a GPU change)
    for n in nights:
        latest.update({s["number"]: s for s in n.said if s["test"] == test})
    worse = [s for s in latest.values() if is_worse(s["number"], s["change_pct"])]
    better = [s for s in latest.values() if not is_worse(s["number"], s["change_pct"])]

    def said(found: list[dict]) -> str:
        return "; ".join(f"{s['number']} {s['change_pct']:+.2f}% from {s['date']}" for s in found)

    if worse:
        return "alerted", said(worse), last
    if failed:
        return "suspicious", f"failed on {nights[last].date} only", last
    return ("improved", said(better), last) if better else ("passing", "", last)


def tests(nights: list) -> list[Test]:
    """Every test of the history, worst first, then the newest first, then by name."""
    names = dict.fromkeys(t for n in nights for t in [*n.samples, *n.failed])
    found = []
    for name in names:
        kind, why, last = state(nights, name)
        numbers = series([n for n in nights if n.gpu == nights[last].gpu], name)  # its newest GPU model's nights
        spark = next((points for part in PARTS if (points := numbers.get(f"{part}{SAMPLES}"))), [])
        found.append(Test(name, page_name(name), kind, why, last, [v for _, v in spark[-SPARK_NIGHTS:]]))
    return sorted(found, key=lambda t: (STATES.index(t.state), -t.last, t.name))


# --- HTML ---------------------------------------------------------------------------------------------------------

e = html.escape


def _link(url: str, text: str) -> str:
    return f'<a href="{e(url)}">{e(text)}</a>' if re.match(r"https?://", url) else e(text)


def repo_of(nights: list, repo_url: str) -> str:
    """The repository that a night's commit is linked into: --repo-url, else read from a night's run URL."""
    found = (re.match(r"(https?://[^/]+/[^/]+/[^/]+)/actions/runs/", n.run_url) for n in reversed(nights))
    return repo_url.rstrip("/") or next((m.group(1) for m in found if m), "")


def _night_cells(night, repo: str) -> str:
    commit = _link(f"{repo}/commit/{night.commit}", night.commit[:12]) if repo else e(night.commit[:12])
    return f"<td>{e(night.date)}<td>{commit}<td>{_link(night.run_url, 'run') if night.run_url else '-'}"


def gpu_changes(nights: list) -> list[tuple[int, str]]:
    """Where the GPU model changed from one night to the next: (index of the first night on it, what changed)."""
    return [(i, f"GPU: {a.gpu} → {b.gpu}") for i, (a, b) in enumerate(zip(nights, nights[1:]), start=1) if a.gpu != b.gpu]


def _page(title: str, body: str, depth: int, data: dict | None = None) -> str:
    up = "../" * depth
    blob = json.dumps(data, separators=(",", ":")).replace("</", "<\\/") if data is not None else "null"
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>'
            f'<link rel="stylesheet" href="{up}site.css"><script src="{up}plotly.min.js"></script>'
            f'<script src="{up}site.js"></script></head>\n<body>\n{body}\n'
            f'<script type="application/json" id="data">{blob}</script>\n<script>draw()</script>\n</body></html>\n')


def index(nights: list, found: list[Test], skipped: list[tuple[Path, str]], repo: str) -> str:
    """The index: the skipped files named, the GPU models' changes, every test worst first, every night newest first."""
    span = f"{len(nights)} night(s), {nights[0].date} to {nights[-1].date}" if nights else "no night recorded yet"
    parts = [f"<h1>Perf history</h1>\n<p>{e(span)}; {len(found)} test(s); states, worst first: "
             + ", ".join(f'<span class="{s}">{s}</span> {sum(t.state == s for t in found)}' for s in STATES) + "</p>"]
    if skipped:
        parts.append('<h2>Skipped night files</h2>\n<ul class="skipped">' + "".join(
            f"<li><code>{e(path.name)}</code>: {e(problem)}</li>" for path, problem in skipped) + "</ul>")
    if changed := gpu_changes(nights):
        parts.append("<h2>GPU model changes</h2>\n<ul>" + "".join(
            f"<li>{e(nights[i].date)} ({e(nights[i].commit[:12])}): {e(text)}; a step there is the GPU's, not a "
            "commit's</li>" for i, text in changed) + "</ul>")
    rows = "".join(f'<tr class="{t.state}"><td><span class="{t.state}">{t.state}</span><td><a href="{t.page}">'
                   f'{e(t.name)}</a><td><div class="spark" id="spark-{k}"></div><td class="why">{e(t.why)}'
                   f'<td>{e(nights[t.last].gpu)}{_night_cells(nights[t.last], repo)}' for k, t in enumerate(found))
    parts.append(f"<h2>Tests</h2>\n<table><tr><th>state<th>test<th>trend (samples/s, last {SPARK_NIGHTS} nights)"
                 f"<th>why<th>GPU<th>newest night<th>commit<th>run\n{rows}</table>")
    rows = "".join(f'<tr id="night-{i}"><td>{e(n.gpu)}{_night_cells(n, repo)}<td>{len(n.failed)}'
                   for i, n in reversed(list(enumerate(nights))))
    parts.append("<h2>Nights, newest first</h2>\n<table><tr><th>GPU<th>date<th>commit<th>run<th>failed tests\n"
                 f"{rows}</table>")
    return _page("Perf history", "\n".join(parts), 0, {"sparks": [t.spark for t in found]})


def test_page(nights: list, test: Test, repo: str) -> str:
    """A test's page: its state, a chart a number, its nights newest first (the last TABLE_NIGHTS, and older ones
    where it failed, a change point was said or the GPU model changed)."""
    said = [s for n in nights for s in n.said if s["test"] == test.name]
    data = {"charts": charts(nights, test.name, said), "changes": gpu_changes(nights),
            "nights": [[n.date, n.commit[:12], n.gpu] for n in nights]}
    changed = dict(data["changes"])
    noted = {i for i, n in enumerate(nights) if test.name in n.failed} | set(changed)
    noted |= {i for i, n in enumerate(nights) for s in said if (s["date"], s["commit"]) == (n.date, n.commit)}
    rows = []
    for i in reversed(range(len(nights))):
        n = nights[i]
        if i < len(nights) - TABLE_NIGHTS and i not in noted:
            continue
        what = [f"failed: {n.failed[test.name]}" if test.name in n.failed else
                "passed" if test.name in n.samples else "not run"]
        what += [f"{s['number']} {s['change_pct']:+.2f}% ({'drift' if s['drift'] else 'change point'}, "
                 f"{'alert' if is_worse(s['number'], s['change_pct']) else 'improvement'})"
                 for s in said if (s["date"], s["commit"]) == (n.date, n.commit)]
        gpu = f'{e(n.gpu)} <span class="gpu-change">{e(changed[i])}</span>' if i in changed else e(n.gpu)
        rows.append(f'<tr id="night-{i}"><td>{gpu}{_night_cells(n, repo)}<td>{e("; ".join(what))}')
    body = (f'<p><a href="../index.html">← every test</a></p>\n<h1>{e(test.name)}</h1>\n'
            f'<p><span class="{test.state}">{test.state}</span> {e(test.why)}</p>\n'
            + "".join(f'<h2>{e(c["name"])}</h2><div class="chart" id="chart-{k}"></div>\n'
                      for k, c in enumerate(data["charts"]))
            + "<h2>Nights, newest first</h2>\n<table><tr><th>GPU<th>date<th>commit<th>run<th>this test\n"
            + "\n".join(rows) + "</table>")
    return _page(test.name, body, 1, data)


def write_site(nights: list, skipped: list[tuple[Path, str]], out: Path, repo_url: str = "") -> str:
    """Write the site into `out` (the index, a page a test, Plotly's JavaScript, site.js and site.css); returns what
    was written, one line. Pages of tests no longer in the history are removed."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise SystemExit("error: publish draws with plotly, which is not installed: pip install -e '.[site]'") from None
    repo, found = repo_of(nights, repo_url), tests(nights)
    (out / "tests").mkdir(parents=True, exist_ok=True)
    files = {"index.html": index(nights, found, skipped, repo), "plotly.min.js": get_plotlyjs(),
             "site.js": (ASSETS / "site.js").read_text(encoding="utf-8"),
             "site.css": (ASSETS / "site.css").read_text(encoding="utf-8")}
    files.update({t.page: test_page(nights, t, repo) for t in found})
    for old in (out / "tests").glob("*.html"):
        if f"tests/{old.name}" not in files:
            old.unlink()
    size = 0
    for name, text in files.items():
        size += (out / name).write_bytes(text.encode("utf-8"))
    return (f"wrote {out / 'index.html'}: {len(found)} test(s), {len(nights)} night(s), {len(skipped)} night file(s) "
            f"skipped, {len(files)} files, {size:,} bytes")
