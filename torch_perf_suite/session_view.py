"""What measuring, judging and the `perf` fixture read of the session (session.PerfSession), as a type: they take the
session without importing it, which would bring the pytest layer (and a circle) below them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .against import Ref
    from .charts import Chart
    from .device import Device
    from .records import Records
    from .result import Result
    from .settings import SessionSettings
    from .timing import Laps
    from .turns import Turns


class SessionView(Protocol):
    settings: SessionSettings
    device: Device
    records: Records  # the baselines, instruction counts and loader records compared with and recorded into
    ref: Ref | None  # --perf-against REF, once measured
    as_ref: bool  # this process is REF's run, for another session
    turns: Turns | None  # the processes that time the loaders by turns
    shared: dict  # one measurement of each part, loader or GPU step, a session
    results: dict[str, Result]  # test id -> its result, of this run
    sections: dict[str, list[dict]]  # the report's tables of their own (Perf.add_row)
    charts: dict[str, Chart]  # section title -> how to draw it

    @property
    def reference(self) -> str: ...

    @property
    def against_label(self) -> str: ...

    @property
    def sharded(self) -> bool: ...

    def laps_of(self, test_id: str) -> Laps: ...

    def loader_folder(self, test_id: str) -> Path: ...
