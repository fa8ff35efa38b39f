"""How stable is a step's host time across processes on one host, with the main thread pinned to a core or not; what
plants add. Run on a GPU machine from the repository root: bash docs/probes/host_time.sh (docs/host-side.md)."""

import json
import os
import statistics
import sys
import time
from dataclasses import replace

import torch

sys.path.insert(0, os.getcwd())
from fixtures.losses import LossStep
from fixtures.recipes import BASELINE
from fixtures.training import build

mode, tag = sys.argv[1], sys.argv[2]  # mode: free|pinned ; tag: label
plants = sys.argv[3].split(",") if len(sys.argv) > 3 and sys.argv[3] else []
ncpu = os.cpu_count()
if mode == "pinned":
    os.sched_setaffinity(0, {ncpu - 1})


def host_window(step, n=80):
    walls, cpus = [], []
    for _ in range(n):
        torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.thread_time()
        step()
        c1, t1 = time.thread_time(), time.perf_counter()
        walls.append(t1 - t0)
        cpus.append(c1 - c0)
    torch.cuda.synchronize()
    return statistics.median(walls) * 1e6, statistics.median(cpus) * 1e6


def gpu_rounds(step, bs, rounds=5, round_s=0.4):
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < 0.2:
        step()
        n += 1
    torch.cuda.synchronize()
    per = (time.perf_counter() - t0) / n
    steps = max(5, int(round_s / per))
    out = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        out.append(steps * bs / (time.perf_counter() - t0))
    return statistics.median(out)


def free_run_host(step, n=60):
    # no sync between steps: host issue wall per step while GPU runs (queue may fill)
    torch.cuda.synchronize()
    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(n):
        step()
    t1, c1 = time.perf_counter(), time.thread_time()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / n * 1e6, (c1 - c0) / n * 1e6, (t2 - t0) / n * 1e6


res = {"tag": tag, "mode": mode, "plants": plants, "cpu": sorted(os.sched_getaffinity(0))[:3]}
w = build(replace(BASELINE, pin_memory=True, non_blocking=True), "cuda")
model_holder = {}
step = w.gpu_step
if "hooks" in plants:
    import gc

    mods = [o for o in gc.get_objects() if isinstance(o, torch.nn.Module)]
    for m in mods:
        m.register_forward_hook(lambda mod, i, o: None if mod.training is None else None)
    res["hooked"] = len(mods)
if "sleep" in plants:
    inner = step

    def step():
        time.sleep(0.005)
        return inner()


if "py50" in plants:
    inner2 = step
    import gc

    params = [p for o in gc.get_objects() if isinstance(o, torch.nn.Module) for p in o.parameters()]

    def step():
        for _ in range(4):
            for p in params:
                p.shape
        return inner2()


for _ in range(20):
    step()
torch.cuda.synchronize()
res["h2d_host_wall_us"], res["h2d_host_cpu_us"] = host_window(step)
res["h2d_gpu_sps"] = gpu_rounds(step, 32)
res["h2d_free"] = free_run_host(step)
res["h2d_host_wall_us_2"], res["h2d_host_cpu_us_2"] = host_window(step)

ls = LossStep("vectorized", "cuda")
lstep = ls.step
if "py50" in plants:
    ps = list(range(160))

    def lstep():
        for _ in range(4):
            for p in ps:
                p.bit_length()
        return ls.step()


for _ in range(50):
    lstep()
res["loss_host_wall_us"], res["loss_host_cpu_us"] = host_window(lstep, 200)
res["loss_gpu_sps"] = gpu_rounds(lstep, 256)
res["loss_free"] = free_run_host(lstep, 300)
res["loss_host_wall_us_2"], res["loss_host_cpu_us_2"] = host_window(lstep, 200)
print(json.dumps(res))
