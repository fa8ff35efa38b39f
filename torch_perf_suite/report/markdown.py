"""The session report: one row per measured test, as Markdown (PATH.md, the job summary; the terminal shows it in plain
text, plain.py); saved.py writes it and its JSON."""

from __future__ import annotations

import html

from ..machine.nvml import shown
from ..throughput.timing import seconds_line
from .charts import section
from .rows import outcome, own_notes


def _fmt(value, spec: str, empty: str = "-") -> str:
    return empty if value is None else format(value, spec)


def _sps(part: dict | None) -> str:
    return "-" if part is None else f"{part['samples_per_s']:,.0f}"


def _spread(row: dict) -> str:
    spreads = [f"{part['spread_pct']:.1f}" for part in row["parts"].values() if part and part["spread_pct"] is not None]
    return "/".join(spreads) + "%" if spreads else "-"


def _gpu_util(row: dict) -> tuple[str, str]:
    """(GPU-Util of the pipeline / GPU-side windows, memory, power and clock of the last of them),
    as nvidia-smi shows them."""
    seen = [part["util"] for name in ("pipeline", "gpu") if (part := row["parts"][name]) and part.get("util")]
    if not seen:
        return "-", "-"
    if seen[-1]["unavailable"]:
        return f"unavailable: {seen[-1]['unavailable']}", "-"
    sm = "/".join("-" if u["gpu_util_pct"] is None else f"{u['gpu_util_pct']:.0f}" for u in seen) + "%"
    return sm, shown(seen[-1]) or "-"


WIDEST = 120  # no table cell is wider: a terminal of 120 columns shows a typical row on one line
FEW = 5  # a note shared by at most this many tests names them


def fit(text: str, width: int = WIDEST) -> str:
    """`text`, cut to `width` characters with "…" where longer (the whole text is in the test's details)."""
    return text if len(text) <= width else text[:width - 1] + "…"


def short_id(test_id: str) -> str:
    """perf_tests/test_ladder.py::test_ladder[pin_memory] -> ladder[pin_memory]: no path, no leading "test_"."""
    name = test_id.rsplit("::", 1)[-1]
    return name[5:] if name.startswith("test_") and len(name) > 5 else name


def shared_notes(table_rows: list[dict]) -> dict[str, list[str]]:
    """The notes that two or more rows carry verbatim -> the short ids of those rows, the most shared first."""
    seen: dict[str, list[str]] = {}
    for row in table_rows:
        for note in dict.fromkeys(own_notes(row)):
            seen.setdefault(note, []).append(short_id(row["test"]))
    return dict(sorted(((n, t) for n, t in seen.items() if len(t) > 1), key=lambda item: -len(item[1])))


REASON = "not comparable: "  # where a note says why a number or a claim was not compared: one reason for many numbers


def by_reason(shared: dict[str, list[str]]) -> dict[str, list[tuple[str, list[str]]]]:
    """The shared notes grouped by what they say after REASON ("recorded on machine A, this is machine B"), each as
    (what was not compared, its tests); a note without REASON is a group of its own, with no head."""
    groups: dict[str, list[tuple[str, list[str]]]] = {}
    for note, tests in shared.items():
        at = note.find(REASON)
        head, reason = (note[:at].rstrip(": "), note[at:]) if at > 0 else ("", note)
        groups.setdefault(reason, []).append((head, tests))
    return groups


def _said_once(shared: dict[str, list[str]], n_rows: int) -> str:
    def who(tests: list[str]) -> str:
        if len(tests) == n_rows:
            return f"all {n_rows} tests"
        return f"{len(tests)} tests" + (f" ({', '.join(tests)})" if len(tests) <= FEW else "")

    if not shared:
        return ""
    lines = []
    for reason, heads in by_reason(shared).items():
        if heads == [("", heads[0][1])]:  # a note of its own
            lines.append(f"- {who(heads[0][1])}: {reason}")
        else:  # the reason once, what it kept from being compared under it
            lines += [f"- {reason}:"] + [f"  - {who(tests)}: {head}" if head else f"  - {who(tests)}" for head, tests in heads]
    return "Notes shared by several tests, said once here:\n\n" + "\n".join(lines) + "\n\n"


def _table(head: list[str], table: list[list[str]], right: tuple[int, ...] = ()) -> str:
    """A Markdown table whose columns are padded to one width, so that it reads as a table in a terminal too."""
    table = [[fit(cell) for cell in line] for line in table]
    widths = [max(len(line[i]) for line in [head, *table]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" if i in right else "-" * (w + 2) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(head), rule, *map(line, table)]) + "\n"


def _change(v: dict | None) -> str:
    if not v or not v["compared"]:
        return ""
    return f" {v['change_pct']:+.1f}%" + (" FAILED" if v["failed"] else "")


def _part_cells(table_rows: list[dict], name: str, header: str) -> list[str]:
    """Each row's samples/s of the part, then its change against the baseline where compared: the numbers aligned
    on their right, the changes on their left, the cells as wide as `header` at least."""
    numbers = [_sps(row["parts"][name]) for row in table_rows]
    changes = [_change(row["baseline"].get(name)) for row in table_rows]
    wn, wc = max(map(len, numbers), default=0), max(map(len, changes), default=0)
    return [(n.rjust(wn) + c.ljust(wc)).rjust(len(header)) for n, c in zip(numbers, changes)]


def _pairs(pairs: list[tuple[str, str]]) -> str:
    return "; ".join(f"{k} {v}".strip() for k, v in pairs if v != "-")


def _details(table_rows: list[dict], shared: dict, items, workers: dict | None) -> str:
    """A collapsed block per test (GitHub draws <details>): its full id and `items(row)`, the notes that rows share
    left out (they are said once above the table)."""
    blocks = []
    for row in table_rows:
        said = [f"- {item}" for item in items(row) if item]
        said += [f"- {note}" for note in own_notes(row) if note not in shared]
        said += [f"- {line}" for line in (seconds_line(row.get("seconds")), _ran_on(row, workers)) if line]
        v = outcome(row)
        summary = html.escape(short_id(row["test"]) + ("" if v == "-" else f": {v}"))
        blocks.append(f"<details><summary>{summary}</summary>\n\n`{row['test']}`\n\n"
                      + ("\n".join(said) + "\n\n" if said else "") + "</details>\n")
    return "\n".join(blocks)


PART_HEADS = {"pipeline": "pipeline", "gpu": "GPU-side", "loader": "loader"}  # the parts in the table, their headers
LEGEND = ("pipeline, GPU-side, loader: samples/s of each part (as trained; the batch already on the GPU; the loader alone, "
          "to the GPU), then its change against the baseline (REF's, under --perf-against) where compared, FAILED where "
          "that failed the test; syncs/step: the host's waits on the GPU per step (over several GPUs, the most of any "
          "rank). Each test's details (bottleneck, efficiency, spread, GPU-Util, MFU, its notes) are at the end\n\n")
DETAILS = ("### Details\n\nloader/CPU s = the loader's samples per CPU second of its workers; efficiency = pipeline / "
           "slowest part; spread = between rounds, per part in this order; GPU-Util = nvidia-smi's GPU-Util over the "
           "pipeline / GPU-side rounds (NVML), with the memory used, power and SM clock of the last\n\n")


def _measured(row: dict) -> list[str]:
    """What a measured test's details say besides its notes."""
    sm, mem = _gpu_util(row)
    peak = "-" if row["peak_mem_gb"] is None else f"{row['peak_mem_gb']:.2f} GB"
    return [_pairs([("bottleneck", row["bottleneck"] or "-"), ("efficiency", _fmt(row["efficiency"], ".2f")),
                    ("spread", _spread(row)), ("loader/CPU s", _sps(row["parts"].get("loader_cpu")))]),
            _pairs([("GPU-Util", sm), ("", mem), ("peak mem", peak)]), _host(row.get("host")), _extra(row["extra"]),
            _mfu(row.get("mfu"))]


def _host(host: dict | None) -> str:
    """The step's host side, as host_side counted it."""
    if not host:
        return ""
    return f"host side {host['lines_per_step']:,.0f} Python lines, {host['blocks_per_step']:.2f} blocks a step"


def markdown(table_rows: list[dict], env: dict, sections: dict | None = None, smoke: bool = False, charts: dict | None = None,
             workers: dict | None = None) -> str:
    """The report from its JSON rows (rows()), so that one process's report and a sharded run's merged one are drawn
    alike; `workers` (merge()'s) names the GPU of each pytest-xdist worker, and each row the worker it ran on. One
    line a test, the notes several tests share said once above the table, each test's whole story in its details
    at the end."""
    if smoke:
        return _smoke(table_rows, env, workers)
    host = env.get("host") or {}
    head = (
        f"GPU: {env.get('gpu')} | driver {env.get('driver')} | CUDA {env.get('cuda')} | torch {env.get('torch')} | "
        f"torchvision {env.get('torchvision')} | torchmetrics {env.get('torchmetrics')} | "
        f"host {host.get('cpu')} x {host.get('cores')} cores | {env.get('date')}"
        + (f" | GPU topology (nvidia-smi topo -m): {env['topology']}" if env.get("topology") else "") + "\n\n" + LEGEND
    )
    shared = shared_notes(table_rows)
    head += _sharded(workers) + _said_once(shared, len(table_rows))
    columns = [[short_id(row["test"]) for row in table_rows], [outcome(row) for row in table_rows],
               *(_part_cells(table_rows, name, header) for name, header in PART_HEADS.items()),
               [_fmt(row["syncs_per_step"], ".2f") for row in table_rows]]
    text = head + _table(["test", "verdict", *PART_HEADS.values(), "syncs/step"],
                         [list(line) for line in zip(*columns)], right=(5,))
    drawn = [section(t, table, (charts or {}).get(t)) for t, table in (sections or {}).items()]
    details = [DETAILS + _details(table_rows, shared, _measured, workers)] if table_rows else []
    return "\n".join([text, *_sync_sources(table_rows), *drawn, *details])


def _extra(extra: dict) -> str:
    """The test's own columns: a float as a ratio (1.50x), anything else as it is."""
    return ", ".join(f"{k} {v:.2f}x" if isinstance(v, float) else f"{k} {v}" for k, v in extra.items())


def _ran_on(row: dict, workers: dict | None) -> str:
    """The xdist worker a row ran on, with its GPU's UUID; "" outside a sharded run."""
    if not row.get("worker"):
        return ""
    uuid = ((workers or {}).get(row["worker"]) or {}).get("gpu_uuid")
    return f"ran on {row['worker']}" + (f" ({uuid})" if uuid else "")


def _mfu(m: dict | None) -> str:
    """MFU and achieved TFLOP/s of the pipeline and the GPU-side step, the model FLOPs and the peak they are shares of."""
    if not m:
        return ""
    model = f"model {m['gflops_per_sample']:,.2f} GFLOP/sample"
    if "pipeline_tflops" not in m and "gpu_tflops" not in m:  # a smoke run: counted, not timed
        return f"{model} ({m['dtype']})"
    parts = [(name, m[f"{part}_tflops"], m[f"{part}_mfu"]) for part, name in (("pipeline", "pipeline"), ("gpu", "GPU-side"))
             if f"{part}_tflops" in m]
    shown = ", ".join(f"{name} {tflops:,.1f} TFLOP/s" + ("" if mfu is None else f" ({mfu:.1%})") for name, tflops, mfu in parts)
    peak = f"of {m['peak_tflops']:,.1f} {m['dtype']} ({m['peak_source']})" if m["peak_tflops"] else \
        f"{m['dtype']}, no peak: {m['peak_source']}"
    return f"MFU: {shown} {peak}; {model}"


def _sharded(workers: dict | None) -> str:
    if not workers:
        return ""
    how = "Sharded (pytest-xdist)" if all(wid.startswith("gw") for wid in workers) else "In parts (--perf-split runners)"
    return f"{how}: " + "; ".join(f"{wid} on {_worker_device(w)}, {w['tests']} test(s)"
                                  for wid, w in workers.items()) + "\n\n"


def _counted(row: dict) -> str:
    """What a smoke run counted of a test: the loader's instructions per sample, the model's FLOPs, the host side."""
    return "; ".join(filter(None, [_extra({k: v for k, v in row["extra"].items() if k == "loader instructions/sample"}),
                                   _mfu(row.get("mfu")), _host(row.get("host"))]))


NOT_WITHOUT_GPU = ("Without a GPU: syncs were checked by the host reads each step makes (`.item()`, `bool(t)`, a "
                   "boolean mask), not by copies or explicit synchronizes (torch-perf-suite's docs/host-reads.md); "
                   "throughput, kernels, bytes copied and peak memory need a GPU and were not checked.")


def _smoke(table_rows: list[dict], env: dict, workers: dict | None) -> str:
    """A smoke run's report: which scenarios were built and trained, and what was counted (the loader's instructions);
    no throughput, bottleneck or efficiency, since nothing was timed that means anything."""
    host = env.get("host") or {}
    shared = shared_notes(table_rows)
    head = (f"SMOKE RUN (--perf-smoke): {len(table_rows)} scenario(s) built and trained for 2 steps on "
            f"{env.get('gpu')}; nothing was timed. torch {env.get('torch')} | torchvision {env.get('torchvision')} | "
            f"host {host.get('cpu')} x {host.get('cores')} cores | {env.get('date')}\n\n") + _sharded(workers)
    if env.get("gpu") == "cpu":  # said once, here: what a run without a GPU could not check
        head += NOT_WITHOUT_GPU + "\n\n"
    head += _said_once(shared, len(table_rows))
    text = head + _table(["test", "verdict", "counted"],
                         [[short_id(row["test"]), outcome(row), _counted(row) or "-"] for row in table_rows])
    details = ["### Details\n\n" + _details(table_rows, shared, lambda row: [], workers)] if table_rows else []
    return "\n".join([text, *details])


def _sync_sources(table_rows: list[dict]) -> list[str]:
    """Where each test's syncs come from, with the fix, as a list under the table (empty when no test synced)."""
    items = []
    for row in table_rows:
        found = [(f"{s['per_step']:.2f}/step", s) for s in row["sync_sources"]]
        found += [(f"{s['count']}x in {s['phase']} ({s['runs']} runs)", s) for s in row["periodic_syncs"]]
        for how_often, s in found:
            more = f" ([more]({s['more']}))" if s["more"] else ""
            lib = f"; library `{s['library']}`" if s["library"] else ""
            items.append(f"- **{row['test']}**: {how_often} `{s['call']}`" + (f" in `{s['ops']}`" if s["ops"] else "")
                         + f" at `{s['user'] or '(not seen)'}`{lib}. Fix: {s['fix']}{more}")
    return ["### Where the syncs come from\n\n" + "\n".join(items) + "\n"] if items else []


def _worker_device(w: dict) -> str:
    cores = f", cores {w['cores']}" if w.get("cores") else ""
    if not w.get("gpu") or w["gpu"] == "cpu":
        return "the CPU" + cores
    visible = f", CUDA_VISIBLE_DEVICES={w['cuda_visible_devices']}" if w.get("cuda_visible_devices") else ""
    return f"{w['gpu']} ({w.get('gpu_uuid') or 'no UUID'}{visible}){cores}"
