"""The package's shape: folders by concern in layers, its import graph without a circle and at most 9 modules high, and
plugin.py holding hooks only. The graph is grimp's (the engine of import-linter): every import, at module level, inside
a function or under TYPE_CHECKING, is an arrow."""

import ast
import functools
import re
from pathlib import Path

import grimp

PACKAGE = Path(__file__).parent.parent / "torch_perf_suite"

# The folders (and the top-level modules) from the top layer down; a layer imports only from the layers below it, and
# the members of a layer of several import nothing from one another. docs/developing.md draws it.
L = grimp.Layer
LAYERS = ("plugin",  # the hooks
          # one pytest session (its options' use, sharding, pytest-benchmark, what it writes); the nightly (its command,
          # history, creeps and change points, GitHub client, alerts' bisection, and its history as a static site)
          L("session", "nightly"),
          "fixture",  # the `perf` fixture: a workload measured, then judged against its references
          "against",  # another commit: REF measured (its state in one object), --perf-bisect
          "records",  # the baselines file, the tests' durations
          L("loader", "report", "frameworks"),  # the loader's cost and settings; the report; Lightning's and HF's loops
          L("throughput", "syncs"),  # timed rounds, parts and gates; a step's syncs and host reads
          L("settings", "workload", "counts"),  # the options; what the fixture measures; the step's counts
          L("machine", "findings", "store", "ref_imports", "hooks"))  # the machine; a verdict's value; files; REF's imports
MOST_LAYERS = 9  # modules: the longest chain of imports
MOST_TOP_MODULES = 15


@functools.cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("torch_perf_suite", include_external_packages=False, exclude_type_checking_imports=False)


def imported_by(module: str) -> set[str]:
    return graph().find_modules_directly_imported_by(module) - {module}


def test_the_folders_import_down_their_layers_only():
    illegal = graph().find_illegal_dependencies_for_layers(layers=LAYERS, containers={"torch_perf_suite"})
    assert not illegal, "\n".join(f"{d.importer} imports {d.imported}: " + "; ".join(
        " -> ".join([r.heads.pop(), *r.middle, r.tails.pop()]) for r in d.routes) for d in illegal)
    named = {m for layer in LAYERS for m in ([layer] if isinstance(layer, str) else layer.module_tails)}
    present = {p.stem if p.suffix else p.name for p in PACKAGE.iterdir()
               if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()}
    assert named == present, f"in no layer: {sorted(present - named)}; gone: {sorted(named - present)}"


def test_the_modules_import_one_another_without_a_cycle_at_most_9_high():
    @functools.cache
    def height(module: str, path: tuple = ()) -> int:
        assert module not in path, "import cycle: " + " -> ".join([*path[path.index(module):], module])
        return 1 + max((height(d, (*path, module)) for d in imported_by(module)), default=0)

    highest = max(graph().modules, key=height)
    assert height(highest) <= MOST_LAYERS, f"{highest} stands {height(highest)} modules high"
    top = [p.name for p in PACKAGE.glob("*.py")]
    assert len(top) <= MOST_TOP_MODULES, f"{len(top)} modules at the package's top level: {sorted(top)}"
    assert imported_by("torch_perf_suite.plugin") >= {"torch_perf_suite.session.core", "torch_perf_suite.session.sharding"}


def test_each_concerns_verdicts_live_in_its_folder_and_only_the_pytest_layer_turns_them_into_failures():
    """Changing the syncs' verdict (syncs/checks.py) means opening syncs/ and the fixture, which calls it; so for
    each concern's checks.py."""
    for path in PACKAGE.glob("*/checks.py"):
        module = f"torch_perf_suite.{path.parent.name}.checks"
        importers = graph().find_modules_that_directly_import(module)
        outside = {m for m in importers if not m.startswith(f"torch_perf_suite.{path.parent.name}.")}
        assert outside and {m.split(".")[1] for m in outside} <= {"fixture", "session"}, (module, sorted(outside))


def test_the_plugin_holds_hooks_that_hand_over_in_a_few_lines():
    tree = ast.parse((PACKAGE / "plugin.py").read_text())
    assert not [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    long = {n.name: n.end_lineno - n.lineno + 1 for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert long and not {name: lines for name, lines in long.items() if lines > 15}


LONGEST = {"module": 400, "class": 200, "function": 50}  # lines
ROOM = 0.9  # none stands at its limit: the longest of each kind at most this share of it, room for the next change


def lengths(root: Path):
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root.parent).as_posix()
        tree = ast.parse(path.read_text())
        yield "module", name, len(path.read_text().splitlines())
        for node in ast.walk(tree):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                yield kind, f"{name}:{node.name}", node.end_lineno - node.lineno + 1


def test_no_module_class_or_function_is_longer_than_its_limit_with_room_to_spare():
    found = [*lengths(PACKAGE), *lengths(PACKAGE.parent / "fixtures")]
    too_long = {name: n for kind, name, n in found if n > ROOM * LONGEST[kind]}
    assert not too_long, f"longer than {ROOM:.0%} of {LONGEST}: {too_long}"


# the names several modules' functions share on purpose, each one interface: what a concern counts (count), its
# verdict and the failed findings it is made of (verdict, failure, counted: a count's verdict), a record's entry and
# key (entry, key), a worker's loop (serve), a command (main) and pytest's hooks
INTERFACE = {"count", "verdict", "failure", "counted", "entry", "key", "serve", "main"}


def test_one_name_one_thing_no_two_classes_and_no_two_functions_share_a_name_but_an_interfaces():
    classes, functions = {}, {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            module = path.relative_to(PACKAGE).as_posix()
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, []).append(module)
            elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                functions.setdefault(node.name, []).append(module)
    assert not {name: at for name, at in classes.items() if len(at) > 1}
    shared = {name: at for name, at in functions.items() if len(at) > 1}
    assert shared and not {name: at for name, at in shared.items() if name not in INTERFACE and not name.startswith("pytest_")}


# where a finding becomes a test's failure or a usage error: the hooks and what they start before the session (early),
# the session and a test's call, the sharding, pytest-benchmark's side, the fixture, the options, and the runs of another
# commit (against/: REF's state and steps, REF's pytest and its bad input, the bisection). Measuring, the verdicts and
# the stores import no pytest.
PYTEST_LAYER = {"plugin", "session/options", "session/core", "session/calls", "session/early", "session/sharding",
                "session/benchmark", "fixture/perf", "against/ref", "against/state", "against/bisecting", "against/ref_select"}


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
VERDICTS = ("syncs.checks", "counts.checks", "throughput.checks", "against.checks", "throughput.gates", "throughput.stats",
            "findings", "fixture.ranks", "loader.described", "loader.cost", "loader.turns", "loader.instructions")


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
    described = {"checks:host_scope"}  # what a claim's scope says, not a verdict
    assert len(returns) > 20 and {k for k, r in returns.items() if "Finding" not in r and "Verdict" not in r} == described


def test_a_failures_first_line_is_rendered_from_the_findings_and_no_verdict_text_is_read_back():
    """Each failed finding carries its brief and where (findings.Finding); report/causes.py renders them, and imports
    no regular expressions to read a text back with."""
    tree = ast.parse((PACKAGE / "report" / "causes.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "re" not in imported and "findings" in imported


def test_measuring_judging_and_the_fixture_read_only_what_the_session_view_names_and_the_session_has_it():
    import inspect

    from torch_perf_suite.fixture.view import SessionView
    from torch_perf_suite.session.core import PerfSession

    named = {n for n in vars(SessionView) if not n.startswith("_")} | set(SessionView.__annotations__)
    for module in ("judging", "measuring", "perf"):
        source = (PACKAGE / "fixture" / f"{module}.py").read_text()
        read = set(re.findall(r"self\._?session\.(\w+)|\bsession = self\._session\b", source)) - {""}
        read |= set(re.findall(r"\bsession\.(\w+)", source)) if "session = self._session" in source else set()
        assert read <= named, f"{module}.py reads {read - named} of the session, which SessionView does not name"
    source = inspect.getsource(PerfSession)
    missing = {n for n in named if not hasattr(PerfSession, n) and not re.search(rf"self\.{n}(: [^=]+)? = ", source)}
    assert not missing, f"PerfSession has no {missing}"


def test_refs_steps_read_only_what_their_view_of_the_session_names_and_the_session_has_it():
    import inspect

    from torch_perf_suite.against.state import SessionForRef
    from torch_perf_suite.session.core import PerfSession

    named = {n for n in vars(SessionForRef) if not n.startswith("_")} | set(SessionForRef.__annotations__)
    read = set(re.findall(r"\bsession\.(\w+)", (PACKAGE / "against" / "state.py").read_text()))
    assert read and read <= named, f"against/state.py reads {read - named} of the session, which SessionForRef does not name"
    source = inspect.getsource(PerfSession)
    missing = {n for n in named if not hasattr(PerfSession, n) and not re.search(rf"self\.{n}(: [^=]+)? = ", source)}
    assert not missing, f"PerfSession has no {missing}"


# The suite's own scenarios use the public API (torch_perf_suite.__all__) and, where it has no way yet, these internal
# modules: the workers' memory and CPU time of a recipe's loader (machine.host), the ranks of a multi-GPU job measured
# in processes of their own (machine.device, syncs, throughput.timing, and each rank's host side: counts.host_side),
# and the worker sweep's core count (settings). A new reach is a decision: make what it needs public, or add it here.
INTERNAL_REACH = {"fixtures/training.py": {"machine.host"},
                  "fixtures/multi_gpu.py": {"counts.host_side", "machine.device", "syncs", "syncs.recording",
                                            "throughput.timing"},
                  "perf_tests/conftest.py": {"machine.host", "machine.environment"},
                  "perf_tests/test_worker_sweep.py": {"settings"}}


def test_the_scenarios_use_the_public_api_and_only_the_internals_declared():
    import torch_perf_suite

    found = {}
    for path in [*(PACKAGE.parent / "fixtures").glob("*.py"), *(PACKAGE.parent / "perf_tests").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "torch_perf_suite":
                inside = node.module.partition(".")[2]  # the module below torch_perf_suite, or "" for the package
                names = {a.name for a in node.names} if not inside else \
                    {f"{inside}.{a.name}" for a in node.names} if (PACKAGE / inside).is_dir() else {inside}
                internal = names - set(torch_perf_suite.__all__)
                if internal:
                    found.setdefault(path.relative_to(PACKAGE.parent).as_posix(), set()).update(internal)
    assert found == INTERNAL_REACH


def test_each_test_file_that_takes_pytester_loads_it_itself():
    """A file run alone (`pytest tests/counts/test_x.py`) finds `pytester` only if it declares the plugin."""
    tests = Path(__file__).parent
    lacking = [path.relative_to(tests).as_posix() for path in sorted(tests.rglob("test_*.py"))
               if re.search(r"def \w+\([^)]*\bpytester\b", path.read_text())
               and 'pytest_plugins = ["pytester"]' not in path.read_text()]
    assert lacking == []
