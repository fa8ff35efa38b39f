"""What one sample costs: in the workers (`Timer`: each batch's items and collate, with the thread's blocks), alone
before any window (`solo`, with yardsticks); the loader observed for a test (`observe`). checks.py judges it
(`unit_verdict`)."""

from __future__ import annotations

import os
import statistics
import struct
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .described import LOST_PARALLELISM, Undescribable, _name, _short, describe
from .instructions import STRIDE  # the same spread of indices as the instructions are counted over

RECORD = struct.Struct("<qi6q")  # end (monotonic ns), samples, items wall ns, items CPU ns, collate wall ns,
# collate CPU ns, the thread's voluntary context switches during the items and the collate, tensors in the batch


def _switches() -> int:
    import resource

    return resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)).ru_nvcsw


class _Sink:
    """Where each process that makes batches appends its records: a file per process id in `folder`."""

    def __init__(self, folder: str):
        self.folder, self.pid, self.fd, self.pending = folder, None, None, (0, 0, 0, 0)

    def __getstate__(self):  # a spawned worker opens its own file
        return {"folder": self.folder}

    def __setstate__(self, state):
        self.__init__(state["folder"])

    def write(self, *fields) -> None:
        if self.pid != os.getpid():  # a forked worker: a file of its own
            self.pid = os.getpid()
            self.fd = os.open(os.path.join(self.folder, f"{self.pid}.bin"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(self.fd, RECORD.pack(*fields))


class _TimedItems:
    """Set as the dataset's `__getitems__` (torch's fetcher calls it for a batch's indices where it exists): the items
    made as the dataset makes them, timed."""

    def __init__(self, dataset, original, sink: _Sink):
        self.dataset, self.original, self.sink = dataset, original, sink

    def __call__(self, indices):
        switches, cpu, wall = _switches(), time.thread_time_ns(), time.perf_counter_ns()
        items = self.original(indices) if self.original else [self.dataset[i] for i in indices]
        self.sink.pending = (len(indices), time.perf_counter_ns() - wall, time.thread_time_ns() - cpu,
                             _switches() - switches)
        return items


class _TimedCollate:
    """Set as the loader's `collate_fn`: the batch collated as before, timed, and the batch's record written."""

    def __init__(self, original, sink: _Sink):
        self.original, self.sink = original, sink

    def __call__(self, items):
        switches, cpu, wall = _switches(), time.thread_time_ns(), time.perf_counter_ns()
        batch = self.original(items)
        collate_wall, collate_cpu = time.perf_counter_ns() - wall, time.thread_time_ns() - cpu
        n, items_wall, items_cpu, items_switches = self.sink.pending
        self.sink.pending = (0, 0, 0, 0)
        if n:
            self.sink.write(time.monotonic_ns(), n, items_wall, items_cpu, collate_wall, collate_cpu,
                            items_switches + _switches() - switches, _tensors(batch))
        return batch


def _tensors(batch) -> int:
    """The tensors a batch holds (in lists, tuples and dicts): a worker's queue moves each into shared memory."""
    import torch

    if isinstance(batch, torch.Tensor):
        return 1
    if isinstance(batch, dict):
        return sum(_tensors(b) for b in batch.values())
    return sum(_tensors(b) for b in batch) if isinstance(batch, (list, tuple)) else 0


@dataclass(frozen=True)
class UnitCost:
    """One sample's cost. Alone (`solo`: the dataset's items and the collate made one after the other on one thread, no
    worker alive): wall, CPU and waiting microseconds over `samples`, and the CPU time in yardsticks (`cpu_ratio`);
    the waiting and the ratio are judged. Inside 16 busy workers a sample's CPU time moves with its neighbours
    (docs/measurements/loader.md), so only these come from the workers, over the window's `batches`: the thread's
    voluntary context switches per sample (`blocks`, a count, judged), a sample's wall time there (`crowd_us`, for
    `parallelism`) and the tensors a sample its batches hold (`shared`: the worker's queue moves each into shared memory
    on its feeder thread, while the worker makes the next batch and may wait for the interpreter's lock). The samples
    made alone count their blocks too (`alone_blocks`, judged): no worker, no queue."""

    samples: int
    wall_us: float
    cpu_us: float
    wait_us: float
    cpu_ratio: float
    batches: int  # 0: a smoke run's, whose blocks are of the samples made alone
    blocks: float
    crowd_us: float
    shared: float = 0.0
    alone_blocks: float = 0.0

    def entry(self) -> dict:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}

    def line(self) -> str:
        alone = (f"a sample alone: {self.wall_us:,.0f} µs ({self.cpu_us:,.0f} µs CPU = {self.cpu_ratio:.3f} yardsticks, "
                 f"{self.wait_us:,.0f} µs waiting)")
        if not self.batches:  # a smoke run's
            return f"{alone}, {self.blocks:.2f} blocks"
        return (f"{alone}, {self.alone_blocks:.2f} blocks; in the workers: {self.crowd_us:,.0f} µs, {self.blocks:.2f} "
                f"blocks ({self.batches} batches, {self.shared:.2f} tensors a sample)")


def in_workers(records: list[tuple]) -> tuple[int, float, float, float] | None:
    """(batches, blocks per sample, median wall µs a sample, tensors per sample) of RECORD's fields; None where there
    are none."""
    if not records:
        return None
    samples = sum(r[1] for r in records)
    return (len(records), sum(r[6] for r in records) / samples,
            statistics.median((r[2] + r[4]) / r[1] / 1e3 for r in records), sum(r[7] for r in records) / samples)


SOLO_S = 2.0  # seconds of samples and yardsticks timed alone, at least SOLO_LEAST samples
SOLO_LEAST, SOLO_MOST, CHUNK = 64, 8000, 32  # samples; timed and collated CHUNK at a time


class Yardstick:
    """A fixed piece of CPU work of a loader's kind: a 64x64 RGB image resized to 224x224 (PIL, bilinear) and made a
    normalised float tensor. Timed on the same thread between chunks of samples, it moves as they do with what the
    host does to that thread (clock, a busy sibling core), so a sample's CPU time over its is a figure of the work."""

    def __init__(self):
        import numpy as np
        from PIL import Image

        self.image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8))

    def __call__(self):
        import numpy as np
        import torch
        from PIL import Image

        pixels = np.array(self.image.resize((224, 224), Image.BILINEAR))
        return torch.from_numpy(pixels).permute(2, 0, 1).float().div_(255).sub_(0.5)


def _cpu_ns(work, times: int) -> int:
    cpu = time.thread_time_ns()
    for _ in range(times):
        work()
    return time.thread_time_ns() - cpu


def solo(dataset, collate, seconds: float) -> tuple[int, float, float, float, float, float]:
    """(samples, wall, CPU, waiting µs, CPU in yardsticks, blocks) of one sample made alone on this thread, torch on one
    thread as in a worker: the median over chunks of CHUNK fixed indices of each chunk's items and collate per
    sample, each chunk followed by CHUNK yardsticks (`Yardstick`), the ratio the median of each chunk's CPU time over
    its yardsticks'. A chunk's mean, not a sample's median: one sample in twenty made twice is 5% more work, which a
    median of samples would not see. Blocks: the thread's voluntary context switches a sample, over all chunks."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    chunks, yardstick = [], Yardstick()
    try:
        size = len(dataset)
        for i in range(4):
            dataset[i * STRIDE % size]
            yardstick()
        deadline, i, blocks = time.perf_counter() + seconds, 0, 0
        while (i < SOLO_LEAST or time.perf_counter() < deadline) and i < SOLO_MOST:
            switches, cpu, wall = _switches(), time.thread_time_ns(), time.perf_counter_ns()
            collate([dataset[(i + k) * STRIDE % size] for k in range(CHUNK)])
            wall, cpu = time.perf_counter_ns() - wall, time.thread_time_ns() - cpu
            blocks += _switches() - switches
            chunks.append((wall / CHUNK / 1e3, cpu / CHUNK / 1e3, cpu / max(_cpu_ns(yardstick, CHUNK), 1)))
            i += CHUNK
    finally:
        torch.set_num_threads(threads)
    return (i, statistics.median(w for w, _, _ in chunks), statistics.median(c for _, c, _ in chunks),
            statistics.median(w - c for w, c, _ in chunks), statistics.median(r for _, _, r in chunks), blocks / i)


class Timer:
    """Times a DataLoader's batches in whichever process makes them: `attach(loader)` before its workers start,
    `cost(since_ns, until_ns)` for the batches finished in that window (time.monotonic_ns), `detach()` after."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.sink = _Sink(str(folder))
        self.loader = None
        self.why_not = ""
        self.alone: tuple | None = None  # solo()'s figures, taken by time_alone()

    def attach(self, loader) -> bool:
        """False, with `why_not` said, where this loader cannot be timed per sample."""
        from torch.utils.data import IterableDataset

        dataset = loader.dataset
        if isinstance(dataset, IterableDataset) or getattr(loader, "batch_sampler", None) is None:  # a batch a sample
            self.why_not = ("an iterable dataset, or no batches (batch_size=None): torch's fetcher has no per-batch hook "
                            "to time")
        elif not hasattr(dataset, "__dict__"):
            self.why_not = f"{_name(dataset)} has no __dict__ (__slots__): its items cannot be timed"
        if self.why_not:
            return False
        self.folder.mkdir(parents=True, exist_ok=True)
        original = dataset.__getitems__ if getattr(dataset, "__getitems__", None) else None
        dataset.__dict__["__getitems__"] = _TimedItems(dataset, original, self.sink)
        loader.collate_fn = _TimedCollate(loader.collate_fn, self.sink)
        self.loader = loader
        return True

    def detach(self) -> None:
        loader, self.loader = self.loader, None
        if loader is not None:
            loader.dataset.__dict__.pop("__getitems__", None)
            loader.collate_fn = loader.collate_fn.original

    def records(self, since_ns: int, until_ns: int) -> list[tuple]:
        found = []
        for f in self.folder.glob("*.bin"):
            data = f.read_bytes()
            whole = len(data) - len(data) % RECORD.size  # a record being written as this reads: left for the next read
            found += [r for r in RECORD.iter_unpack(data[:whole]) if since_ns <= r[0] <= until_ns]
        return found

    def time_alone(self) -> None:
        """Samples made alone on this thread (`solo`), before any window: once the loader has run, its workers refill
        their prefetch queues for seconds after, and a sample 'alone' timed then waits on them by an amount that
        differs from one run to the next (docs/measurements/loader.md)."""
        collate = self.loader.collate_fn
        self.alone = solo(self.loader.dataset, getattr(collate, "original", collate), SOLO_S)

    def cost(self, since_ns: int, until_ns: int, alone_only: bool = False) -> UnitCost | None:
        """The samples made alone, with the batches made in the workers in that window; None where no batch was.
        `alone_only` (a smoke run, whose workers make a few small batches): the samples made alone, their blocks."""
        if self.alone is None:
            return None
        samples, wall, cpu, wait, ratio, blocks = self.alone
        if alone_only:
            return UnitCost(samples, wall, cpu, wait, ratio, 0, blocks, 0.0, alone_blocks=blocks)
        crowd = in_workers(self.records(since_ns, until_ns))
        return None if crowd is None else UnitCost(samples, wall, cpu, wait, ratio, *crowd, alone_blocks=blocks)


def cpu_rise_pct(now: dict, recorded: dict) -> float | None:
    """How much more CPU time a sample takes alone, in yardsticks, in percent; None where either side has no ratio."""
    if not now.get("cpu_ratio") or not recorded.get("cpu_ratio"):
        return None
    return 100 * (now["cpu_ratio"] / recorded["cpu_ratio"] - 1)


def cpu_line(now: dict, recorded: dict, compared_with: str) -> str:
    """A sample's CPU time alone against the recorded one, in microseconds and yardsticks: reported, not judged."""
    rise = cpu_rise_pct(now, recorded)
    ratio = "no yardsticks recorded" if rise is None else f"{now['cpu_ratio']:.3f} yardsticks, {rise:+.1f}%"
    return (f"loader CPU time a sample alone {now['cpu_us']:,.0f} µs, {recorded['cpu_us']:,.0f} at {compared_with} "
            f"({100 * (now['cpu_us'] / recorded['cpu_us'] - 1):+.1f}%; {ratio})")


def parallelism(unit: dict, workers: int, delivered: float) -> str:
    """The rate `workers` processes could reach at a sample's cost alone, beside what the loader delivered."""
    could = max(workers, 1) * 1e6 / unit["wall_us"]
    share = delivered / could
    line = (f"{max(workers, 1)} worker(s) at {unit['wall_us']:,.0f} µs a sample could make {could:,.0f} samples/s; "
            f"the loader delivered {delivered:,.0f} ({100 * share:.0f}%)")
    if share < LOST_PARALLELISM:
        slower = unit["crowd_us"] / unit["wall_us"]
        held = (f"CPU contention (a sample takes {slower:.2f}x as long in the workers as alone)" if slower > 1 / LOST_PARALLELISM
                else "the main process (collecting, pinning and moving batches)")
        line += f": parallelism lost to {held}"
    return line


def observe(members, folder: Path | None, what: str) -> tuple[dict | None, Timer | None, str | None]:
    """(settings, timer, note) of a workload's loader: described (Undescribable where it cannot be), and timed per
    sample where `folder` is given (not in a smoke run) and the loader allows it; the note says why it is not timed."""
    if members.loader is None:
        if members.loader_step is not None:
            raise Undescribable(f"{what} has a loader_step but no `loader`: give it the DataLoader its batches come "
                                "from, so that the loader's settings are compared and its samples timed")
        return None, None, None
    settings = describe(members.loader, f"{what}'s loader")
    if folder is None:
        return settings, None, None
    timer = Timer(folder)
    if not timer.attach(members.loader):
        return settings, None, f"loader cost per sample not timed: {timer.why_not}"
    timer.time_alone()
    return settings, timer, None


def timer_folder(base: str | os.PathLike, test_id: str) -> Path:
    """A test's records, under the session's folder: one folder a test (its name made safe for the file system)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in test_id)[-150:]
    return Path(base) / safe


def validate_unit(unit) -> str | None:
    """A baseline entry's 'loader_unit' (UnitCost.entry), or None where it is sound."""
    if unit is None:
        return None
    if not isinstance(unit, dict):
        return f"'loader_unit' is {_short(unit, 60)}, expected an object"
    for name in ("wall_us", "cpu_us", "blocks", "crowd_us", "cpu_ratio", "shared", "alone_blocks"):
        value = unit.get(name, 0.0)  # the last three: absent from a record made before they were measured
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e12:
            return f"'loader_unit' {name!r} is {_short(value, 60)}, expected a non-negative number"
    if unit["wall_us"] <= 0 or not isinstance(unit.get("wait_us"), (int, float)) or isinstance(unit.get("wait_us"), bool):
        return f"'loader_unit' is {_short(unit, 80)}, expected a positive 'wall_us' and a number 'wait_us'"
    return None
