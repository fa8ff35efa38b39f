"""What the loader is: its DataLoader settings, sampler, collate function and dataset described as plain values, and
those compared with REF's or the recorded ones (`settings_verdict`)."""

from __future__ import annotations

from pathlib import Path

from ..findings import FAILED, NOT_COMPARED, PASSED, Finding, briefly

SCALARS = (bool, int, float, str, type(None))
BLOCKS_MARGIN = 0.05  # blocks per sample that may appear before it counts as a new wait (a count, not a timing)
LOST_PARALLELISM = 0.8  # below this share of what its workers could make, the loader says what holds it back


class Undescribable(ValueError):
    """A workload's loader that cannot be described; the message is one line naming what is missing."""


def _name(obj) -> str:
    kind = obj if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', type(kind).__name__)}"


def _value(v) -> str:
    if isinstance(v, Path):
        return repr(v.name)  # a folder by its name: its path is the machine's
    if isinstance(v, float):
        return f"{v:g}"
    return repr(v)


def _object(obj) -> str:
    """An object as `module.Class(field=value, ...)`, its plain public fields only (numbers, strings, paths)."""
    if obj is None:
        return "None"
    if type(obj).__repr__ is not object.__repr__ and not isinstance(obj, type):
        text = " ".join(repr(obj).split())  # torchvision's Compose: each transform with its parameters
        if " at 0x" not in text:
            return text
    fields = {k: v for k, v in sorted(getattr(obj, "__dict__", {}).items())
              if not k.startswith("_") and isinstance(v, SCALARS + (Path,))}
    return f"{_name(obj)}(" + ", ".join(f"{k}={_value(v)}" for k, v in fields.items()) + ")"


def _dataset(dataset) -> str:
    try:
        size = f"len={len(dataset)}"
    except TypeError:
        size = "iterable"
    fields = {k: v for k, v in sorted(vars(dataset).items()) if not k.startswith("_")} if hasattr(dataset, "__dict__") else {}
    shown = [size] + [f"{k}={_value(v)}" for k, v in fields.items() if isinstance(v, SCALARS + (Path,))]
    shown += [f"{k}={_object(v)}" for k, v in fields.items() if "transform" in k and v is not None]
    return f"{_name(dataset)}({', '.join(shown)})"


def _start_method(loader) -> str | None:
    if not loader.num_workers:
        return None
    ctx = loader.multiprocessing_context
    if ctx is not None:
        return ctx if isinstance(ctx, str) else ctx.get_start_method()
    import torch.multiprocessing as mp

    return mp.get_start_method(allow_none=True) or mp.get_all_start_methods()[0]  # the default, not fixed by asking


def describe(loader, what: str = "the workload's loader") -> dict:
    """The loader's settings as compared: one flat dict of strings, numbers and booleans. A subclass of DataLoader
    (Accelerate's, say) is described by DataLoader's settings and its class; anything else is Undescribable."""
    from torch.utils.data import DataLoader

    if not isinstance(loader, DataLoader):
        raise Undescribable(f"{what} is {_name(loader)}, not a torch.utils.data.DataLoader: its settings (workers, batch "
                            "size, pinning, prefetch) cannot be read; give the workload the DataLoader its batches come from")
    batch_sampler = loader.batch_sampler
    sampler = batch_sampler.sampler if batch_sampler is not None and hasattr(batch_sampler, "sampler") else loader.sampler
    found = {
        "class": _name(loader),
        "num_workers": loader.num_workers,
        "batch_size": loader.batch_size,
        "drop_last": loader.drop_last,
        "pin_memory": loader.pin_memory,
        "prefetch_factor": loader.prefetch_factor if loader.num_workers else None,
        "persistent_workers": loader.persistent_workers,
        "start_method": _start_method(loader),
        "timeout": loader.timeout,
        "sampler": _object(sampler),
        "batch_sampler": _name(batch_sampler) if batch_sampler is not None else None,
        "collate_fn": _name(getattr(loader.collate_fn, "original", loader.collate_fn)),
        "worker_init_fn": None if loader.worker_init_fn is None else _name(loader.worker_init_fn),
        "dataset": _dataset(loader.dataset),
    }
    if hasattr(loader, "in_order"):  # torch 2.6 and later
        found["in_order"] = loader.in_order
    return found


def changes(now: dict, recorded: dict, workers: tuple[int | None, int],
            worker_start: str | None = None) -> list[tuple[str, object, object]]:
    """(field, recorded value, value now) of each setting that differs. `workers` is (the --perf-workers the record was
    made with, this run's): a num_workers equal to it on both sides follows the host's cores, and is no change. A start
    method chosen on the command line (`worker_start`, --perf-worker-start) is the user's choice, not compared."""
    then_workers, now_workers = workers
    found = []
    for name in sorted(set(now) & set(recorded)):  # a field one torch has and another lacks is no change of the loader
        old, new = recorded[name], now[name]
        if name == "num_workers" and then_workers is not None and old == then_workers and new == now_workers:
            continue
        if name == "start_method" and worker_start is not None and new == worker_start:
            continue
        if old != new:
            found.append((name, old, new))
    return found


def settings_failure(found: list[tuple[str, object, object]], expected: tuple[str, ...], compared_with: str) -> list[Finding]:
    """A failed finding naming each changed setting that the test does not declare expected; none where all are
    declared."""
    unexpected = [c for c in found if c[0] not in expected]
    if not unexpected:
        return []
    lines = "\n".join(f"  {name} {_short(old)} -> {_short(new)}" for name, old, new in unexpected)
    names = ", ".join(repr(name) for name, _, _ in unexpected)
    return [Finding(FAILED, f"the loader's settings changed against {compared_with}:\n{lines}\n  a change made on purpose: "
                            f"declare it (perf.assert_baseline(result, loader_changes=({names},))) and re-record the "
                            f"baseline", f"the loader's settings changed against {briefly(compared_with)}: {unexpected[0][0]} "
                                         f"{_short(unexpected[0][1])} -> {_short(unexpected[0][2])}")]


def settings_verdict(now: dict | None, recorded: dict | None, *, workers: int, worker_start: str | None,
                     expected: tuple[str, ...], compared_with: str, rerecord: str = "") -> list[Finding]:
    """The loader's settings against the `recorded` entry (SettingsFile's): failed, naming each undeclared change;
    passed, saying the declared ones; not compared where nothing was recorded for this test (no loaders.json, an
    empty one, or one without this test: `rerecord` says how to record it), which --perf-strict fails on."""
    if now is None:
        return []
    if recorded is None:
        return [Finding(NOT_COMPARED, f"loader settings not compared: {compared_with} recorded none for this test"
                                      + (f"; {rerecord}" if rerecord else ""))]
    found = changes(now, recorded["settings"], (recorded.get("workers"), workers), worker_start)
    declared = [f"{name} {_short(old)} -> {_short(new)}" for name, old, new in found if name in expected]
    return settings_failure(found, expected, compared_with) + (
        [Finding(PASSED, "loader changed as declared: " + "; ".join(declared))] if declared else [])


def _short(value, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."

