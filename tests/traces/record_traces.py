"""Record the small real traces that tests/syncs/test_syncs.py reads on a CPU-only machine.

Run on a CUDA GPU:  python tests/traces/record_traces.py [OUT_DIR]   (default: tests/traces)

Each case is a tiny training step run for 3 profiled steps by the harness's own profile_steps().
A line that syncs carries a `# sync:<case>` comment: the tests find the expected user line by that
comment, not by what the counter reported.
"""

import gzip
import json
import os
import shutil
import sys
from pathlib import Path

import torch

from torch_perf_suite.machine.environment import environment
from torch_perf_suite.syncs import profile_steps

STEPS = 3


def make_case(name: str):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Flatten(), torch.nn.LazyLinear(10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    pinned = name != "pageable_blocking" and name != "pageable_nonblocking"
    images = torch.randn(16, 3, 8, 8)
    labels = torch.randint(0, 10, (16,))
    if pinned:
        images, labels = images.pin_memory(), labels.pin_memory()
    scaler = torch.amp.GradScaler("cuda") if name == "grad_scaler" else None
    metric = None
    if name == "mean_metric":
        import torchmetrics

        metric = torchmetrics.MeanMetric().cuda()
    model(images.cuda())  # materialize the lazy layer outside the profile

    def step():
        if name == "pageable_blocking":
            x, y = images.cuda(), labels.cuda()  # sync:pageable_blocking
        else:
            x, y = images.cuda(non_blocking=True), labels.cuda(non_blocking=True)  # sync:pageable_nonblocking
        with torch.autocast("cuda", dtype=torch.float16, enabled=scaler is not None):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)  # sync:grad_scaler
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        if name == "item":
            print(f"loss {loss.item():.3f}", end="\r")  # sync:item
        if metric is not None:
            metric.update(loss)  # sync:mean_metric

    return step


CASES = ["clean", "item", "pageable_blocking", "pageable_nonblocking", "grad_scaler", "mean_metric"]


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        step = make_case(case)
        for _ in range(3):
            step()  # warm-up
        raw = out / f"{case}.json"
        counted = profile_steps(step, STEPS, raw)
        with open(raw, "rb") as src, gzip.open(out / f"{case}.json.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.unlink(raw)
        print(f"\n{case}: {counted.per_step:.2f}/step\n{counted.describe()}")
    (out / "environment.json").write_text(json.dumps(environment(), indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
