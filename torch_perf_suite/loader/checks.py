"""The loader's instruction count judged against its record (instructions.py counts it)."""

from __future__ import annotations

from ..findings import FAILED, Finding

INSTRUCTIONS_FLOOR = 2_000  # per sample: a light loader's count moves by hundreds between processes (docs/counted-gates.md)


def instructions(per_sample: float, recorded: float, margin_pct: float) -> list[Finding]:
    """The loader's instructions per sample no more than `margin_pct` over the record, or INSTRUCTIONS_FLOOR for a
    loader so light that a percent of it is the interpreter's own noise (a raw uint8 tensor a sample)."""
    if per_sample <= max(recorded * (1 + margin_pct / 100), recorded + INSTRUCTIONS_FLOOR):
        return []
    return [Finding(FAILED, f"the loader runs {per_sample:,.0f} instructions per sample (dataset item, transforms, "
                            f"collate; callgrind), {recorded:,.0f} recorded ({100 * (per_sample / recorded - 1):+.1f}%; "
                            f"allowed +{margin_pct:g}%): more CPU work per sample in the dataset, its transforms or the "
                            "collate")]
