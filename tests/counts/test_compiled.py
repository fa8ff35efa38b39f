"""torch.compile counted (compiled.py): graphs, graph breaks with their line and reason, recompilations with the
failed guard; on the CPU, with torch's own compiler."""

from pathlib import Path

import pytest
import torch
from torch._inductor.utils import fresh_cache

from torch_perf_suite.counts import compiled

HERE = f"tests/counts/{Path(__file__).name}"


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test compiles afresh: dynamo's caches would otherwise carry over between tests (and between runs of the
    same tests in one process, as a mutation run does)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def line_of(marker: str) -> int:
    return next(n for n, text in enumerate(Path(__file__).read_text().splitlines(), 1) if text.endswith(marker))


def with_a_break(x):
    y = x * 2
    torch._dynamo.graph_break()  # break:here
    return y.relu()


def without_a_break(x):
    return (x * 2).relu()


def test_a_graph_break_is_counted_with_its_line_and_reason():
    with compiled.watch() as count:
        torch.compile(with_a_break)(torch.randn(4))
    assert len(count.graph_breaks) == 1 and count.graphs == 2 and count.compile_s > 0
    event = count.graph_breaks[0]
    assert event.where == f"{HERE}:{line_of('# break:here')}"
    assert "graph break" in event.reason.lower()
    assert count.as_entry() == {"graphs": 2, "graph_breaks": 1, "recompilations": 0, "compile_s": round(count.compile_s, 2)}


def test_the_backward_compiled_at_the_first_backward_counts_as_compile_time():
    from torch._dynamo import utils

    def seconds(name_is) -> float:  # the process's totals so far
        return sum(sum(t) for name, t in utils.compilation_time_metrics.items() if name_is(name))

    forward, backward = (lambda n: n.endswith("compile_inner")), (lambda n: n == compiled.LAZY_BACKWARD)
    before = seconds(forward), seconds(backward)
    model = torch.compile(torch.nn.Linear(4, 4))
    with compiled.watch() as count, fresh_cache():  # a cache would hand both back at once
        model(torch.randn(2, 4)).sum().backward()  # the forward compiled here, the backward at .backward()
    grew = seconds(forward) - before[0], seconds(backward) - before[1]
    assert grew[1] > 0 and count.compile_s == pytest.approx(sum(grew))


def test_a_recompilation_names_the_guard_that_failed():
    f = torch.compile(without_a_break, dynamic=False)
    with compiled.watch() as count:
        f(torch.randn(4))
        f(torch.randn(4))  # the same shapes: no recompilation
        f(torch.randn(5))
    assert count.graph_breaks == [] and len(count.recompilations) == 1
    event = count.recompilations[0]
    assert event.where.startswith(f"{HERE}:") and event.where.endswith("in without_a_break")
    assert "size mismatch" in event.reason and "expected 4, actual 5" in event.reason


def test_nothing_compiled_counts_nothing_and_logging_is_put_back():
    import logging

    breaks = logging.getLogger("torch._dynamo.symbolic_convert.__graph_breaks")
    before = breaks.propagate, list(breaks.handlers)
    with compiled.watch() as count:
        without_a_break(torch.randn(4))
    assert not count.compiled and count.as_entry() == {"graphs": 0, "graph_breaks": 0, "recompilations": 0, "compile_s": 0.0}
    assert (breaks.propagate, list(breaks.handlers)) == before


def test_dynamos_messages_parsed():
    """As torch 2.11 on an H200 wrote them (graph_breaks and recompiles artifacts)."""
    message = ("Graph break in user code at /work/main/fixtures/recipes.py:197\nGraph Break Reason: Encountered graph break "
               "when attempting to trace CALL: a function call, e.g. f(x, y):\n\n  Explanation: User-inserted graph "
               "break. Message: None\n  Hint: Remove the `torch._dynamo.graph_break()` call.")
    event = compiled.parse("graph break", message)
    assert event.reason == ("Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y): "
                            "Explanation: User-inserted graph break. Message: None")
    assert event.where.endswith("fixtures/recipes.py:197")
    recompiled = compiled.parse("recompilation", "Recompiling function forward in /m/model.py:41\n    triggered by the "
                                                 "following guard failure(s):\n    - 0/0: ___check_global_state()")
    assert recompiled == compiled.Event("recompilation", "0/0: ___check_global_state()", "/m/model.py:41 in forward")


def test_a_break_inside_a_call_is_given_its_innermost_reason_and_last_explanation():
    message = ("Graph break in user code at /work/main/fixtures/recipes.py:197\n"
               "Graph Break Reason: Encountered graph break when attempting to trace CALL: a function call\n"
               "  Explanation: Dynamo does not know how to trace the call.\n"
               "Reason: Data-dependent branching\n  Explanation: Dynamo cannot trace a branch on a tensor's value.")
    assert compiled.parse("graph break", message).reason == (
        "Data-dependent branching Explanation: Dynamo cannot trace a branch on a tensor's value.")


def test_a_break_without_a_reason_or_a_line_keeps_its_first_line():
    event = compiled.parse("graph break", "Graph break: torch.* op returned non-Tensor\ncall stack follows")
    assert event == compiled.Event("graph break", "Graph break: torch.* op returned non-Tensor", "")
    assert event.describe() == "graph break at (line not given): Graph break: torch.* op returned non-Tensor"


def test_a_long_reason_is_cut_at_300_characters():
    event = compiled.parse("graph break", "Reason: " + "x" * 400)
    assert event.reason == "x" * 300


def test_recompilations_parsed_when_dynamo_says_less():
    guard_first = compiled.parse("recompilation", "Recompiling function f in /m/model.py:3\n    - 0/0: x.size()[0] == 8")
    assert guard_first == compiled.Event("recompilation", "0/0: x.size()[0] == 8", "/m/model.py:3 in f")
    no_guard = compiled.parse("recompilation", "Recompiling function f in /m/model.py:3")
    assert no_guard == compiled.Event("recompilation", "Recompiling function f in /m/model.py:3", "/m/model.py:3 in f")
    no_head = compiled.parse("recompilation", "Recompiling: cache size limit hit\n    - 0/7: ___check_type_id(x)")
    assert no_head == compiled.Event("recompilation", "0/7: ___check_type_id(x)", "")
    assert compiled.parse("recompilation", "") == compiled.Event("recompilation", "", "")


def test_the_recompiles_artifact_counts_only_its_recompiling_records():
    import logging

    count = compiled.CompileCount()
    handler = compiled._Catch(count, "recompilation")
    handler.emit(logging.makeLogRecord({"msg": "Not recompiling: the cache was reset"}))
    handler.emit(logging.makeLogRecord({"msg": "Recompiling function f in /m/model.py:3\n    - 0/0: guard"}))
    assert count.recompilations == [compiled.Event("recompilation", "0/0: guard", "/m/model.py:3 in f")]
    compiled._Catch(count, "graph break").emit(logging.makeLogRecord({"msg": "Graph break in user code at /m/a.py:1"}))
    assert count.graph_breaks == [compiled.Event("graph break", "Graph break in user code at /m/a.py:1", "/m/a.py:1")]


def test_a_graph_the_cache_answers_is_counted_as_a_cache_hit():
    def train_once():
        torch.manual_seed(0)
        torch.compile(torch.nn.Linear(3, 3))(torch.randn(2, 3)).sum().backward()
        torch._dynamo.reset()

    with fresh_cache():
        with compiled.watch() as first:
            train_once()
        with compiled.watch() as again:
            train_once()
    assert (first.graphs, first.cache_hits) == (1, 0)
    assert again.graphs == 1 and again.cache_hits > 0
