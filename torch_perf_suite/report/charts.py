"""A section of the report as a table, and drawn: in Mermaid's xychart (which GitHub renders in a job summary, an
issue or a Markdown file) and, where matplotlib is installed, as a PNG."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"
    return str(value)


@dataclass(frozen=True)
class Chart:
    """How to draw a section's table: one bar or point per row, labelled by column `x`."""

    x: str  # the label column ("step")
    bars: tuple[str, ...] = ()  # columns drawn as bars
    lines: tuple[str, ...] = ()  # columns drawn as lines
    ceiling: str | None = None  # a column whose best value is drawn as a flat line
    note: str | None = None  # a column shown beside each label ("bottleneck")
    unit: str = "samples/s"  # the y axis
    decimals: int = 0  # of the values drawn

    def labels(self, table: list[dict]) -> list[str]:
        return [f"{row.get(self.x)}" + (f" ({row[self.note]})" if self.note and row.get(self.note) else "") for row in table]

    def series(self, table: list[dict]) -> list[tuple[str, str, list[float]]]:
        """(kind, name, values) to draw; a missing value is 0."""
        out = [(kind, c, [float(row.get(c) or 0) for row in table]) for kind, cols in (("bar", self.bars), ("line", self.lines))
               for c in cols]
        if self.ceiling:
            best = max(float(row.get(self.ceiling) or 0) for row in table)
            out.append(("line", f"ceiling (best {self.ceiling}, {best:,.0f})", [best] * len(table)))
        return out


def mermaid(title: str, table: list[dict], chart: Chart) -> str:
    """The chart as Mermaid's xychart, which GitHub draws in a job summary, an issue or a Markdown file."""
    series = chart.series(table)
    lines = ["```mermaid", "xychart-beta", f"    title {json.dumps(title)}",
             "    x-axis [" + ", ".join(json.dumps(label) for label in chart.labels(table)) + "]",
             f"    y-axis {json.dumps(chart.unit)}"]
    lines += [f"    {kind} [" + ", ".join(f"{v:.{chart.decimals}f}" for v in values) + "]" for kind, _, values in series]
    legend = [f"bars: {name}" for kind, name, _ in series if kind == "bar"]
    legend += [f"line {i}: {name}" for i, name in enumerate((n for kind, n, _ in series if kind == "line"), start=1)]
    return "\n".join(lines + ["```", "", "; ".join(legend)]) + "\n"


def png(path: Path, title: str, table: list[dict], chart: Chart) -> bool:
    """Draw the chart with matplotlib, if it is installed (pip install -e '.[charts]'); False if not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    labels = [label.replace(" (", "\n(", 1) for label in chart.labels(table)]  # the note under the label
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(labels)), 4.5))
    for kind, name, values in chart.series(table):
        if kind == "bar":
            ax.bar(labels, values, label=name, color="#9ecae1")
        else:
            ax.plot(labels, values, marker="" if name.startswith("ceiling") else "o", label=name,
                    linestyle="--" if name.startswith("ceiling") else "-")
    ax.set_title(title)
    ax.set_ylabel(chart.unit)
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right", fontsize=8)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def section(title: str, table: list[dict], chart: Chart | None = None) -> str:
    columns = list(dict.fromkeys(k for row in table for k in row))
    lines = [f"### {title}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in table]
    return "\n".join(lines) + "\n" + ("\n" + mermaid(title, table, chart) if chart and table else "")
