"""torch.compile counted (compiled.py): graphs, graph breaks with their line and reason, recompilations with the
failed guard; on the CPU, with torch's own compiler."""

from pathlib import Path

import torch

from torch_perf_suite import compiled

HERE = f"tests/{Path(__file__).name}"


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
