"""The package's shape: its modules import one another without a cycle, and plugin.py holds hooks only."""

import ast
import re
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


LONGEST = {"module": 400, "class": 200, "function": 50}  # lines


def lengths(root: Path):
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root.parent).as_posix()
        tree = ast.parse(path.read_text())
        yield "module", name, len(path.read_text().splitlines())
        for node in ast.walk(tree):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                yield kind, f"{name}:{node.name}", node.end_lineno - node.lineno + 1


def test_no_module_class_or_function_is_longer_than_its_limit():
    found = [*lengths(PACKAGE), *lengths(PACKAGE.parent / "fixtures")]
    too_long = {name: n for kind, name, n in found if n > LONGEST[kind]}
    assert not too_long, f"longer than {LONGEST}: {too_long}"


# where a finding becomes a test's failure or a usage error: the hooks and what they start before the session (early),
# the session and its REF and bisect steps, the sharding, pytest-benchmark's side, the fixture and its Judge, the
# options, and the runs of another commit (against, bisecting, ref_select: REF's pytest and its bad input). Measuring,
# the verdicts and the stores import no pytest.
PYTEST_LAYER = {"plugin", "early", "session", "session_ref", "sharding", "benchmark", "fixture", "judging", "settings",
                "against", "bisecting", "ref_select"}


def test_only_the_pytest_layer_imports_pytest():
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):  # imports inside functions too
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n.split(".")[0] in ("pytest", "_pytest") for n in names):
                found.add(path.relative_to(PACKAGE).with_suffix("").as_posix())
    assert found == PYTEST_LAYER, f"import pytest outside the pytest layer: {sorted(found - PYTEST_LAYER)}; " \
                                  f"no longer: {sorted(PYTEST_LAYER - found)}"


# the verdicts: measured data in, findings out (findings.Finding)
VERDICTS = ("checks", "gates", "stats", "findings", "ranks", "loader.described", "turns", "instructions")


def test_the_verdicts_import_neither_torch_nor_pytest_and_return_findings():
    import subprocess
    import sys

    imports = "; ".join(f"import torch_perf_suite.{m}" for m in VERDICTS)
    listed = subprocess.run([sys.executable, "-c", f"{imports}; import sys; print(*sorted(sys.modules))"],
                            capture_output=True, text=True, check=True, cwd=PACKAGE.parent).stdout.split()
    assert not {m for m in listed if m.split(".")[0] in ("torch", "pytest", "_pytest")}
    # one verdict convention: a check (checks.py) or a failure's verdict elsewhere returns findings, not a text or None
    returns = {f"{path.stem}:{node.name}": ast.unparse(node.returns) for path in PACKAGE.rglob("*.py")
               for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef) and node.returns
               and not node.name.startswith("_")
               and (path.stem == "checks" or node.name in ("failure", "verdict") or node.name.endswith("_verdict"))}
    described = {"checks:host_scope", "checks:parts_line"}  # what a claim's scope or the parts say, not a verdict
    assert len(returns) > 20 and {k for k, r in returns.items() if "Finding" not in r and "Verdict" not in r} == described


def test_measuring_judging_and_the_fixture_read_only_what_the_session_view_names_and_the_session_has_it():
    import inspect

    from torch_perf_suite.fixture.view import SessionView
    from torch_perf_suite.session.core import PerfSession

    named = {n for n in vars(SessionView) if not n.startswith("_")} | set(SessionView.__annotations__)
    for module in ("judging", "measuring", "fixture"):
        source = (PACKAGE / f"{module}.py").read_text()
        read = set(re.findall(r"self\._?session\.(\w+)|\bsession = self\._session\b", source)) - {""}
        read |= set(re.findall(r"\bsession\.(\w+)", source)) if "session = self._session" in source else set()
        assert read <= named, f"{module}.py reads {read - named} of the session, which SessionView does not name"
    source = inspect.getsource(PerfSession)
    missing = {n for n in named if not hasattr(PerfSession, n) and not re.search(rf"self\.{n}(: [^=]+)? = ", source)}
    assert not missing, f"PerfSession has no {missing}"


# The suite's own scenarios use the public API (torch_perf_suite.__all__) and, where it has no way yet, these internal
# modules: the workers' memory and CPU time of a recipe's loader (host), the ranks of a multi-GPU job measured in
# processes of their own (device, syncs, timing), and the worker sweep's core count (settings). A new reach is a
# decision: make what it needs public, or add it here.
INTERNAL_REACH = {"fixtures/training.py": {"host"}, "fixtures/multi_gpu.py": {"device", "syncs", "timing"},
                  "perf_tests/conftest.py": {"host"}, "perf_tests/test_worker_sweep.py": {"settings"}}


def test_the_scenarios_use_the_public_api_and_only_the_internals_declared():
    import torch_perf_suite

    found = {}
    for path in [*(PACKAGE.parent / "fixtures").glob("*.py"), *(PACKAGE.parent / "perf_tests").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "torch_perf_suite":
                names = {node.module.split(".")[1]} if "." in node.module else {a.name for a in node.names}
                internal = names - set(torch_perf_suite.__all__)
                if internal:
                    found.setdefault(path.relative_to(PACKAGE.parent).as_posix(), set()).update(internal)
    assert found == INTERNAL_REACH


def test_each_test_file_that_takes_pytester_loads_it_itself():
    """A file run alone (`pytest tests/test_x.py`) finds `pytester` only if it declares the plugin."""
    tests = Path(__file__).parent
    lacking = [path.name for path in sorted(tests.glob("test_*.py"))
               if re.search(r"def \w+\([^)]*\bpytester\b", path.read_text())
               and 'pytest_plugins = ["pytester"]' not in path.read_text()]
    assert lacking == []
