"""The creep's cases over many seeds, each history replayed night by night as the nightly decides it (the histories of
tests/nightly/test_creep.py), and, with --otava, Apache Otava's E-divisive means on each whole series beside them.
Run from the repository root: python docs/probes/creep_cases.py SEEDS [--otava PYTHON] (docs/measurements/creep.md)."""

import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.getcwd())
from tests.nightly.test_creep import INSTRUCTIONS, TEST, alerts_night_by_night, nights_of, noisy, stepped  # noqa: E402

OTAVA = """import json, sys
from otava.analysis import compute_change_points
for values in json.load(sys.stdin):
    points, _ = compute_change_points(values, window_len=50, max_pvalue=0.001, min_magnitude=0.0)
    print(json.dumps([int(p.index) for p in points]))
"""


def cases(seeds: int):
    """(name, the nights of each seed, the night of its step or None)."""
    for number, short in (("gpu samples/s", "1% GPU-side step, 0.10% noise"),
                          (INSTRUCTIONS, "+0.5% instructions a sample, 0.02% noise")):
        for nights, at in ((40, 20), (120, 20), (365, 20), (120, 100), (365, 345)):
            yield f"{short}, night {at} of {nights}", [stepped(nights, s, at, number) for s in range(seeds)], at
    half = []
    for s in range(seeds):
        values = noisy(120, 300 + s)
        values[20:] *= 0.995
        half.append(nights_of(list(values)))
    yield "0.5% GPU-side step, 0.10% noise, night 20 of 120", half, 20
    yield "noise only, 0.5%, 365 nights", [nights_of(list(noisy(365, 500 + s, 0.005))) for s in range(seeds)], None
    yield "noise only, 0.10%, 365 nights", [nights_of(list(noisy(365, 900 + s))) for s in range(seeds)], None
    outliers = []
    for s in range(seeds):
        values = noisy(40, 700 + s)
        values[20] *= 0.92
        outliers.append(nights_of(list(values)))
    yield "one night 8% slow at night 20 of 40", outliers, None
    drifts = []
    for s in range(seeds):
        values = noisy(70, 40 + s)
        values[20:] *= 1 - 0.001 * np.arange(1, 51)
        drifts.append(nights_of(list(values)))
    yield "drift -0.1% a night from night 20 of 70", drifts, "drift"


def series(nights) -> list[float]:
    """The one series a case moves: the instructions where they were given, else the GPU-side samples/s."""
    if INSTRUCTIONS in nights[0].numbers[TEST]:
        return [n.numbers[TEST][INSTRUCTIONS] for n in nights]
    return [n.samples[TEST]["gpu"] for n in nights]


def main() -> None:
    seeds = int(sys.argv[1])
    otava = sys.argv[sys.argv.index("--otava") + 1] if "--otava" in sys.argv else None
    print("| case | seeds | alerted (histories) | within 8 nights, GOOD..BAD right | alerts in all | Otava, whole series |")
    print("|---|---:|---:|---:|---:|---|")
    for name, histories, at in cases(seeds):
        began = time.perf_counter()
        filed = [alerts_night_by_night(h) for h in histories]
        right = sum(bool(f) and f[0][0] - at < 8 and (f[0][1].good, f[0][1].bad) == (f"{at - 1:040x}", f"{at:040x}")
                    for f in filed) if isinstance(at, int) else None
        drifts = sum(sum("drifts" in a.body for _, a in f) == 1 for f in filed) if at == "drift" else None
        found = "" if otava is None else otava_says(otava, [series(h) for h in histories], at)
        cell = f"{right}/{seeds}" if right is not None else (f"drift said once: {drifts}/{seeds}" if drifts is not None else "")
        print(f"| {name} | {seeds} | {sum(bool(f) for f in filed)} | {cell} | {sum(len(f) for f in filed)} | {found} |",
              f"<!-- {time.perf_counter() - began:.1f} s -->")


def otava_says(python: str, values: list[list[float]], at) -> str:
    out = subprocess.run([python, "-c", OTAVA], input=json.dumps(values), capture_output=True, text=True, check=True)
    points = [json.loads(line) for line in out.stdout.splitlines()]
    with_any = sum(bool(p) for p in points)
    if isinstance(at, int):
        return f"right night {sum(at in p for p in points)}/{len(points)}, any other {sum(bool(set(p) - {at}) for p in points)}"
    return f"a change in {with_any}/{len(points)}"


if __name__ == "__main__":
    main()
