"""The report's files, their one owner: PATH.json (the document of the measured tests' rows that render() draws and a
sharded run's controller merges) and, drawn from it, PATH.md and a PATH.<section>.png for each charted section."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

from ..store import write_atomic
from ..syncs.advice import UNKNOWN_FIX
from ..throughput.parts import PARTS
from ..throughput.timing import session_line
from .charts import Chart, png
from .markdown import markdown


def _source(s) -> dict:
    advice = s.advice
    return {"call": s.call, "ops": s.ops, "user": s.user_line, "library": s.library_line,
            "kind": advice and advice.kind, "fix": advice.fix if advice else UNKNOWN_FIX, "more": advice and advice.more}


def _part(t) -> dict | None:
    if t is None:
        return None
    spread = t.spread_pct
    return {"samples_per_s": round(t.median, 1), "rounds": [round(x, 1) for x in t.rounds],
            "spread_pct": None if spread is None else round(spread, 2), "ci_pct": round(t.ci_pct, 2), "added_rounds": t.extended,
            "window_s": round(t.window_s, 2), "watts": None if t.watts is None else round(t.watts),
            "util": None if t.util is None else t.util.as_json()}


def _verdict(v) -> dict:
    c = v.comparison
    return {"compared": v.compared, "baseline_samples_per_s": v.baseline_sps,
            "change_pct": None if v.change_pct is None else round(v.change_pct, 1) + 0.0,  # no "-0.0"
            "allowed_pct": None if c is None else round(100 * (c.factor - 1), 1),
            "method": None if c is None else c.method, "failed": v.failed,
            "confirmed_change_pct": None if v.confirmation is None else round(100 * (v.confirmation.ratio - 1), 1),
            "why_not": v.why_not or None}


def _syncs_per_step(r) -> float | None:
    """The host's waits a step; over several GPUs, the most of any rank (each rank's are in the details)."""
    counted = [r.syncs] if r.syncs is not None else [s for s in (r.ranks or {}).values() if s is not None]
    return round(max(s.per_step for s in counted), 3) if counted else None


def rows(results) -> list[dict]:
    out = []
    for r in results:
        p = r.parts
        out.append({
            "test": r.test_id,
            "samples_per_s": round(r.samples_per_s, 1),
            "parts": {name: _part(p.get(name)) for name in PARTS},
            "loader_measured_in": p.loader_from,
            "gpu_measured_in": p.measured_in.get("gpu"),
            "bottleneck": p.bottleneck,
            "efficiency": None if p.efficiency is None else round(p.efficiency, 3),
            "gpu_busy_pct": None if p.gpu_busy_pct is None else round(p.gpu_busy_pct, 1),
            "baseline": {part: _verdict(v) for part, v in r.verdicts.items()},
            "syncs_per_step": _syncs_per_step(r),
            "sync_sources": [] if r.syncs is None else [
                {"per_step": n / r.syncs.steps, **_source(s)} for s, n in r.syncs.sources.most_common()
            ],
            "periodic_syncs": [] if r.syncs is None else [
                {"phase": phase, "count": n, "runs": r.syncs.periodic_runs[phase], **_source(s)}
                for (phase, s), n in r.syncs.periodic.most_common()
            ],
            "kernels": None if r.syncs is None or r.syncs.kernels is None else r.syncs.kernels.as_json(),
            "peak_mem_gb": None if r.peak_mem_gb is None else round(r.peak_mem_gb, 2),
            "mfu": r.mfu,
            "host": None if r.host is None else {k: v for k, v in r.host.entry().items() if k.endswith("_per_step")},
            "counts": r.counts(),  # each count as the baseline entry keeps it (counts/registry.py)
            "extra": {k: round(v, 3) if isinstance(v, float) else v for k, v in r.extra.items()},
            "outcome": r.outcome,
            **({"failure": r.failure} if r.failure else {}),
            "notes": r.notes,
            "seconds": None if getattr(r, "seconds", None) is None else {k: round(s, 2) for k, s in r.seconds.items()},
        })
    return out


def document(results, env: dict, sections: dict | None = None, smoke: bool = False, charts: dict | None = None,
             worker: dict | None = None, ref_description: str | None = None, seconds: dict | None = None) -> dict:
    """The report as PATH.json holds it: what render() draws and merge() joins. It carries how each section is
    charted, so that a sharded run's controller can draw the workers' sections; `worker` (an xdist worker's:
    its id and the CUDA_VISIBLE_DEVICES it was given) says where a partial report was measured; `ref_description`,
    what --perf-against compared with; `seconds`, where the session's time went ({"total": ..., "imports": ..., "REF": ...,
    "tests": ...})."""
    doc = {"env": env, "smoke": smoke, "tests": rows(results), "sections": sections or {},
           "charts": {title: asdict(chart) for title, chart in (charts or {}).items()}}
    return {**doc, **({"worker": worker} if worker else {}), **({"against": ref_description} if ref_description else {}),
            **({"seconds": seconds} if seconds is not None else {})}


def _charts(doc: dict) -> dict[str, Chart]:
    return {title: Chart(**{k: tuple(v) if isinstance(v, list) else v for k, v in spec.items()})
            for title, spec in doc.get("charts", {}).items()}


def render(doc: dict) -> str:
    """The Markdown of a document (document()'s or merge()'s)."""
    text = markdown(doc["tests"], doc["env"], doc["sections"], doc["smoke"], _charts(doc), doc.get("workers"))
    text = f"Compared {doc['against']}\n\n{text}" if doc.get("against") else text
    return (text + f"\n{session_line(doc['seconds'], len(doc.get('workers') or {}))}\n") if doc.get("seconds") else text


def write(path: Path, doc: dict, images: bool = True) -> list[Path]:
    """PATH.md, PATH.json and, if `images` and matplotlib is installed, a PATH.<section>.png for each charted section."""
    path.parent.mkdir(parents=True, exist_ok=True)
    md, js = Path(f"{path}.md"), Path(f"{path}.json")
    write_atomic(md, render(doc))
    write_atomic(js, json.dumps(doc, indent=1) + "\n")
    charts = _charts(doc)
    drawn = []
    for title, table in doc["sections"].items() if images else ():
        image = Path(f"{path}.{re.sub(r'[^a-z0-9]+', '_', title.lower()).strip('_')}.png")
        if title in charts and table and png(image, title, table, charts[title]):
            drawn.append(image)
    return [md, js, *drawn]
