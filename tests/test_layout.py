"""The package's shape: its modules import one another without a cycle, and plugin.py holds hooks only."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "torch_perf_suite"


def imports(path: Path) -> set[str]:
    """The package's modules that `path` imports at module level (imports inside functions are deferred)."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
    return found


def test_the_modules_import_one_another_without_a_cycle():
    graph = {p.stem: imports(p) for p in PACKAGE.glob("*.py")}
    done: set[str] = set()

    def visit(module, path):
        assert module not in path, "import cycle: " + " -> ".join([*path[path.index(module):], module])
        if module in done or module not in graph:
            return
        for dep in graph[module]:
            visit(dep, [*path, module])
        done.add(module)

    for module in graph:
        visit(module, [])
    assert {"plugin", "session", "sharding"} <= set(graph) and graph["plugin"] >= {"session", "sharding"}


def test_the_plugin_holds_hooks_that_hand_over_in_a_few_lines():
    tree = ast.parse((PACKAGE / "plugin.py").read_text())
    assert not [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    long = {n.name: n.end_lineno - n.lineno + 1 for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert long and not {name: lines for name, lines in long.items() if lines > 15}
