"""What torch.compile did while a workload was measured: graphs, graph breaks with their reasons and lines,
recompilations with the guard that failed, and the seconds spent compiling.

Counted from dynamo itself, so the counts are exact on any machine: `unique_graphs` from its counters, each
graph break and recompilation from the records of its `graph_breaks` and `recompiles` log artifacts (which
carry the user's file and line, and the failed guard), compile seconds from its compilation metrics. The
artifacts are switched on only inside `watch()`, and their records are caught there, not printed; on the
way out torch's logging is set back from TORCH_LOGS (a `torch._logging.set_logs()` call made before is not
kept).
"""

from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass, field

ARTIFACTS = ("graph_breaks", "recompiles")
BREAK_AT = re.compile(r"in user code at (\S+:\d+)")
REASON = re.compile(r"(?:Graph Break Reason|Reason):\s*(.+)")


@dataclass(frozen=True)
class Event:
    kind: str  # "graph break" or "recompilation"
    reason: str  # dynamo's reason, first line; for a recompilation the failed guard
    where: str  # "fixtures/recipes.py:213": the user's line (graph break) or the recompiled function's

    def describe(self) -> str:
        return f"{self.kind} at {self.where or '(line not given)'}: {self.reason}"


@dataclass
class CompileCount:
    graphs: int = 0  # graphs dynamo compiled
    compile_s: float = 0.0  # seconds in dynamo's compile (tracing, AOT autograd, Inductor) and the lazy backward's
    cache_hits: int = 0  # lookups Inductor's FX graph cache or AOTAutograd's answered (a forward and its backward apart)
    events: list[Event] = field(default_factory=list)

    @property
    def graph_breaks(self) -> list[Event]:
        """Each break once: dynamo logs a break again where a recompilation traces the frame again."""
        return list(dict.fromkeys(e for e in self.events if e.kind == "graph break"))

    @property
    def recompilations(self) -> list[Event]:
        return [e for e in self.events if e.kind == "recompilation"]

    @property
    def compiled(self) -> bool:
        return bool(self.graphs or self.events)

    def as_entry(self) -> dict:
        return {"graphs": self.graphs, "graph_breaks": len(self.graph_breaks), "recompilations": len(self.recompilations),
                "compile_s": round(self.compile_s, 2)}


def parse(kind: str, message: str) -> Event:
    """An Event from one record of the `graph_breaks` or `recompiles` artifact."""
    lines = message.splitlines()
    if kind == "graph break":  # the innermost reason (a break inside a call names the call first), and its explanation
        where = BREAK_AT.search(message)
        reasons = [m.group(1).strip() for line in lines if (m := REASON.search(line))] or lines[:1]
        explained = [line.strip() for line in lines if line.strip().startswith("Explanation:")]
        reason = " ".join([*reasons[-1:], *explained[-1:]])[:300]
        return Event(kind, reason, _short(where.group(1)) if where else "")
    # "Recompiling function forward in /path/model.py:41\n    triggered by ...:\n    - 0/0: tensor 'x' size mismatch ..."
    head = re.search(r"Recompiling function (\S+) in (\S+:\d+)", message)
    guard = next((line.strip().lstrip("- ").strip() for line in lines[1:] if line.strip().startswith("-")), "")
    where = f"{_short(head.group(2))} in {head.group(1)}" if head else ""
    return Event(kind, guard or (lines[0] if lines else ""), where)


def _short(where: str) -> str:
    from .files import _short as short

    return short(where)


class _Catch(logging.Handler):
    def __init__(self, count: CompileCount, kind: str):
        super().__init__(logging.DEBUG)
        self.count, self.kind = count, kind

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if self.kind == "recompilation" and not message.startswith("Recompiling"):
            return
        self.count.events.append(parse(self.kind, message))


# AOTAutograd compiles a training graph's backward lazily, at the first backward, outside dynamo's compile: seconds of a
# compiled step's first step (docs/measurements/cost.md), which the report otherwise gave to the warm-up
LAZY_BACKWARD = "backward._backward_impl"


def _compile_seconds() -> float:
    from torch._dynamo import utils

    return sum(sum(times) for name, times in utils.compilation_time_metrics.items()
               if name.endswith("compile_inner") or name == LAZY_BACKWARD)


def _cache_hits() -> int:
    from torch._dynamo.utils import counters

    return counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"]["autograd_cache_hit"]


@contextlib.contextmanager
def watch():
    """Count what torch.compile does inside the block; yields a CompileCount, filled on the way out."""
    count = CompileCount()
    import torch
    import torch._dynamo  # registers the artifacts' loggers
    import torch._dynamo.utils as dynamo_utils
    from torch._logging import _internal

    graphs0, seconds0, hits0 = dynamo_utils.counters["stats"]["unique_graphs"], _compile_seconds(), _cache_hits()
    torch._logging.set_logs(graph_breaks=True, recompiles=True)
    caught = []
    for qname in _internal.log_registry.get_artifact_log_qnames():
        artifact = qname.rsplit(".__", 1)[-1]
        if artifact in ARTIFACTS:
            log = logging.getLogger(qname)
            handler = _Catch(count, "graph break" if artifact == "graph_breaks" else "recompilation")
            caught.append((log, handler, log.propagate))
            log.addHandler(handler)
            log.propagate = False  # caught here, not printed
    try:
        yield count
    finally:
        for log, handler, propagate in caught:
            log.removeHandler(handler)
            log.propagate = propagate
        _internal._init_logs()  # back to what TORCH_LOGS says
        count.graphs = dynamo_utils.counters["stats"]["unique_graphs"] - graphs0
        count.compile_s = _compile_seconds() - seconds0
        count.cache_hits = _cache_hits() - hits0
