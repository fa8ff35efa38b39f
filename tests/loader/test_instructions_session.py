"""When the loader's count starts in a session (instructions.py with the measuring, the records and the plugin's early
start): after the timed windows where the step is launch-bound, at once where the recorded loader's code changed, and
before the conftest files below the root are imported."""

import json
from types import SimpleNamespace

import pytest

from torch_perf_suite.loader import digest as loader_code
from torch_perf_suite.loader import instructions
from torch_perf_suite.loader.instructions import Counter

pytest_plugins = ["pytester"]


class _Stop(Exception):
    """Raised where the order under test is known: nothing after the timed windows is wanted."""


@pytest.mark.parametrize("gpu_busy_pct, order", [(95.0, ["count begun", "timed"]), (60.0, ["timed", "count begun"]),
                                                  (None, ["count begun", "timed"])])
def test_the_count_starts_after_the_timed_windows_where_the_gpu_side_step_is_launch_bound(monkeypatch, gpu_busy_pct,
                                                                                          order):
    """A count beside a launch-bound GPU-side window takes the host's time from the launches it waits on: where the
    entry compared with (REF's, or the baseline) says the step is launch-bound, the count waits for the windows."""
    from types import SimpleNamespace as NS

    from torch_perf_suite.fixture import measuring
    from torch_perf_suite.throughput.timing import Laps

    events = []
    entry = None if gpu_busy_pct is None else {"gpu_busy_pct": gpu_busy_pct}
    session = NS(laps_of=lambda test_id: Laps(), device=NS(is_gpu=True), as_ref=False, ref_state=NS(ref=None),
                 records=NS(baseline=lambda test_id: entry))
    monkeypatch.setattr(measuring, "Windows", lambda *args: NS(members=NS(loader_source=("m:parts", {})), wanted=("gpu",)))
    m = measuring.Measuring(session, "t", settings=None, smoke=False, pedantic=None, tmp_path=None, info={})
    m._begin_instructions = lambda source: events.append("count begun")
    m._shared_keys, m._observe, m._by_turns = (lambda w: {}), (lambda w, k: (None, None)), (lambda w, k: (None, None))
    m._turns_settled = lambda: None
    m._time = lambda w, wanted, keys: events.append("timed") or ({}, {})

    def stop(*args):
        raise _Stop

    m._parts = stop
    with pytest.raises(_Stop):
        m.run(NS(), parts=("gpu",))
    assert events == order


def test_a_session_whose_recorded_loader_code_changed_starts_its_counting_process_at_once(tmp_path, monkeypatch):
    from torch_perf_suite.fixture import references as records

    monkeypatch.setattr(instructions, "key", lambda: "k")
    started, closed = [], []
    monkeypatch.setattr(Counter, "prestart", lambda self: started.append(self))
    monkeypatch.setattr(Counter, "close", lambda self: closed.append(self))
    (tmp_path / "baselines").mkdir()
    (tmp_path / "mydata.py").write_text("X = 1\n")
    entry = {"per_sample": 5.0, "samples": 16, "source": "s", "content": "c",
             "files": {"mydata.py": loader_code.code_hash(tmp_path / "mydata.py")[:instructions.FILE_HASH]}}
    (tmp_path / "baselines" / "instructions.json").write_text(json.dumps({"schema": 1, "environments": {"k": {"t": entry}}}))
    settings = SimpleNamespace(instructions=True, smoke=True, update_baselines=False)
    device = SimpleNamespace(is_gpu=False)

    def session(runs_tests=True) -> tuple[records.Records, list[str]]:
        r = records.Records(settings, device, tmp_path, Counter())  # one started before the session, or not
        return r, r.prestart_counter(tmp_path / "baselines", runs_tests)

    r, changed = session()
    assert changed == [] and started == [] and closed == [r.counter]  # the code counted is the code here: stopped
    (tmp_path / "mydata.py").write_text("X = 5\n")
    r, changed = session()
    assert changed == ["mydata.py"] and started == [r.counter] and closed == [closed[0]]  # kept
    r, changed = session(runs_tests=False)  # a sharded run's controller: its workers count
    assert changed == [] and closed[-1] is r.counter
    settings.instructions = False  # --perf-instructions off: nothing is counted, nothing started
    r, changed = session()
    assert changed == [] and len(started) == 1 and closed[-1] is r.counter


@pytest.mark.parametrize("registered", ["by its entry point", "by conftest.py"])
def test_a_changed_loaders_count_starts_before_the_conftest_files_below_the_root_are_imported(pytester, monkeypatch,
                                                                                               registered):
    """They often import torch: the counting process starts first (early.count_early), where the count recorded for
    an environment that may be this one ran code changed since; the session's start, which tells it exactly, keeps it."""
    events = []
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this test's own, where it runs in one
    monkeypatch.setattr(instructions, "EVENTS", events, raising=False)
    monkeypatch.setattr(Counter, "prestart", lambda self: events.append("counter started"))
    if registered == "by conftest.py":
        monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        pytester.makeconftest('pytest_plugins = ["pytest_benchmark.plugin", "torch_perf_suite.plugin"]\n')
    (pytester.path / "mydata.py").write_text("X = 1\n")
    (pytester.path / "sub").mkdir()
    (pytester.path / "sub" / "conftest.py").write_text(
        "from torch_perf_suite.loader import instructions\ninstructions.EVENTS.append('sub/conftest.py imported')\n")
    (pytester.path / "sub" / "test_x.py").write_text("def test_x():\n    pass\n")
    entry = {"per_sample": 5.0, "samples": 16, "source": "s", "content": "c",
             "files": {"mydata.py": loader_code.code_hash(pytester.path / "mydata.py")[:instructions.FILE_HASH]}}
    (pytester.path / "baselines").mkdir()
    (pytester.path / "baselines" / "instructions.json").write_text(
        json.dumps({"schema": 1, "environments": {instructions.key(): {"t": entry}}}))

    assert pytester.runpytest_inprocess("--perf-smoke", "sub").ret == 0
    assert events == ["sub/conftest.py imported"]  # the code counted is the code here: nothing started
    events.clear()
    (pytester.path / "mydata.py").write_text("X = 5\n")
    assert pytester.runpytest_inprocess("--perf-smoke", "sub").ret == 0
    assert events == ["counter started", "sub/conftest.py imported", "counter started"]  # then kept at the start
    events.clear()
    assert pytester.runpytest_inprocess("--perf-smoke", "--perf-instructions", "off", "sub").ret == 0
    assert events == ["sub/conftest.py imported"]
    events.clear()  # a value that is not valid: said at the session's start, nothing started before it
    assert pytester.runpytest_inprocess("--perf-smoke", "--perf-rounds", "none", "sub").ret == pytest.ExitCode.USAGE_ERROR
    assert "counter started" not in events
