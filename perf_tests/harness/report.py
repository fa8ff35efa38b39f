"""The session report: one row per measured test, as Markdown (terminal, job summary) and JSON."""

from __future__ import annotations

import json
from pathlib import Path


def _fmt(value, spec: str, empty: str = "-") -> str:
    return empty if value is None else format(value, spec)


def _source(s) -> dict:
    return {"call": s.call, "ops": s.ops, "user": s.user_line, "library": s.library_line}


def rows(results) -> list[dict]:
    out = []
    for r in results:
        out.append({
            "test": r.test_id,
            "samples_per_s": round(r.samples_per_s, 1),
            "rounds": [round(x, 1) for x in r.throughput.rounds],
            "spread_pct": round(r.throughput.spread_pct, 2),
            "baseline_samples_per_s": r.baseline["samples_per_s"] if r.baseline else None,
            "change_pct": None if r.change_pct is None else round(r.change_pct, 1),
            "syncs_per_step": None if r.syncs is None else round(r.syncs.per_step, 3),
            "sync_sources": [] if r.syncs is None else [
                {"per_step": n / r.syncs.steps, **_source(s)} for s, n in r.syncs.sources.most_common()
            ],
            "periodic_syncs": [] if r.syncs is None else [
                {"phase": phase, "count": n, "runs": r.syncs.periodic_runs[phase], **_source(s)}
                for (phase, s), n in r.syncs.periodic.most_common()
            ],
            "peak_mem_gb": None if r.peak_mem_gb is None else round(r.peak_mem_gb, 2),
            "extra": {k: round(v, 3) if isinstance(v, float) else v for k, v in r.extra.items()},
            "notes": r.notes,
        })
    return out


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"
    return str(value)


def section(title: str, table: list[dict]) -> str:
    columns = list(dict.fromkeys(k for row in table for k in row))
    lines = [f"### {title}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in table]
    return "\n".join(lines) + "\n"


def markdown(results, env: dict, sections: dict | None = None, smoke: bool = False) -> str:
    results = list(results)
    head = "SMOKE RUN (--perf-smoke): 2 steps at 32x32, nothing here is a measurement.\n\n" if smoke else ""
    head += (
        f"GPU: {env.get('gpu')} | driver {env.get('driver')} | CUDA {env.get('cuda')} | torch {env.get('torch')} | "
        f"torchvision {env.get('torchvision')} | torchmetrics {env.get('torchmetrics')} | {env.get('date')}\n\n"
    )
    lines = [
        "| test | samples/s | vs baseline | spread | syncs/step | peak mem | notes |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows(results):
        extra = ", ".join(f"{k} {v:.2f}x" if isinstance(v, float) else f"{k} {v}" for k, v in row["extra"].items())
        notes = "; ".join(filter(None, [extra, *row["notes"]]))
        lines.append(
            f"| {row['test']} | {row['samples_per_s']:,.0f} | {_fmt(row['change_pct'], '+.1f')}% | "
            f"{row['spread_pct']:.2f}% | {_fmt(row['syncs_per_step'], '.2f')} | {_fmt(row['peak_mem_gb'], '.2f')} GB | {notes} |"
        )
    text = head + "\n".join(lines).replace("| -% |", "| - |").replace("| - GB |", "| - |") + "\n"
    return "\n".join([text, *(section(t, table) for t, table in (sections or {}).items())])


def write(path: Path, results, env: dict, sections: dict | None = None, smoke: bool = False) -> list[Path]:
    results = list(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    md, js = Path(f"{path}.md"), Path(f"{path}.json")
    md.write_text(markdown(results, env, sections, smoke))
    js.write_text(json.dumps({"env": env, "smoke": smoke, "tests": rows(results), "sections": sections or {}}, indent=1) + "\n")
    return [md, js]
