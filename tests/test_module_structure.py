"""The package's import structure: no module imports `judgeblender.cli` except the CLI itself,
and no two modules import each other, directly or round a longer circle, counting the imports
written inside functions (deferred, they close the circle at their first call).

Import circles work by accident of import order (a name used before its module has finished
loading breaks them), and a library that imports its CLI drags typer and rich into every
notebook. Both are read from the source with `ast`, so this test needs no imports of its own
and guards the structure in CI: it fails naming the offending modules.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import judgeblender

PACKAGE_ROOT = Path(judgeblender.__file__).resolve().parent
PACKAGE = "judgeblender"


def _module_name(path: Path, root: Path = PACKAGE_ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`): its imports never run."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_time_imports(tree: ast.AST):
    """Every import statement that can run: at module level and inside functions, methods and
    branches alike (an import deferred into a function closes a circle as surely, only later, at
    the first call), but not under `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if _is_type_checking(node):
            stack.extend(node.orelse)  # the `else:` branch does run
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph(root: Path = PACKAGE_ROOT) -> dict[str, set[str]]:
    """Module -> the project modules it imports, wherever in it the import is written."""
    package = root.name
    paths = sorted(root.rglob("*.py"))
    modules = {_module_name(p, root): p for p in paths}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found: set[str] = set()
        for node in _run_time_imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = _resolve(name, path.name == "__init__.py", node)
                # `from . import x` imports the submodule x when there is one
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target.startswith(package) and target != name:
                    found.add(target)
                    # importing a.b.c first runs a.b's __init__, unless the importer is inside a.b
                    parent = target.rpartition(".")[0]
                    while parent.count(".") >= 1 and not (name == parent or name.startswith(parent + ".")):
                        if parent in modules:
                            found.add(parent)
                        parent = parent.rpartition(".")[0]
        graph[name] = found
    return graph


def all_imports() -> dict[str, set[str]]:
    """Every project import anywhere in a module (functions included), for the cli/ rule."""
    result: dict[str, set[str]] = {}
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        name = _module_name(path)
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, path.name == "__init__.py", node)
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
        result[name] = found
    return result


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_cycle_finder_finds_a_planted_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_graph_sees_relative_imports():
    graph = import_graph()
    assert "judgeblender.errors" in graph["judgeblender.store.calls"]


def test_graph_sees_imports_inside_functions_and_not_under_type_checking(tmp_path):
    """A circle closed by an import deferred into a function (engine <-> factory and corpus <->
    passage_index were two) is found; an import only a type checker reads is not an edge."""
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    if True:\n        from .a import x\n    return x\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n"
                              "else:\n    from . import d\n")
    (pkg / "d.py").write_text("")
    graph = import_graph(pkg)
    assert graph["planted.b"] == {"planted.a"}
    assert graph["planted.c"] == {"planted.d"}
    assert find_cycle(graph) == ["planted.a", "planted.b", "planted.a"]


def test_no_import_circle_between_modules():
    assert find_cycle(import_graph()) is None


def test_no_import_circle_between_sub_packages():
    """Stronger than the module rule: store and backends, say, may not use each other at all,
    even through different modules; shared ground goes in the ground-floor modules."""
    def package(module: str) -> str:
        return module.split(".")[1] if module.count(".") else module

    packages: dict[str, set[str]] = {}
    for name, imports in import_graph().items():
        packages.setdefault(package(name), set()).update(
            package(i) for i in imports if package(i) not in (package(name), PACKAGE))
    assert find_cycle(packages) is None
    assert "store" not in packages["backends"] and "backends" not in packages["store"]


def test_no_library_module_imports_the_cli():
    offenders = {name: sorted(i for i in imports if i == f"{PACKAGE}.cli" or i.startswith(f"{PACKAGE}.cli."))
                 for name, imports in all_imports().items()
                 if not (name == f"{PACKAGE}.cli" or name.startswith(f"{PACKAGE}.cli.") or name == f"{PACKAGE}.__main__")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_scripts_benchmarks_and_doc_examples_use_the_library_not_the_cli():
    """What they need from a command belongs in the library; only the CLI's tests import cli/."""
    repo = Path(__file__).resolve().parent.parent
    offenders = []
    for folder in ("bench", "scripts", "docs"):
        for path in sorted((repo / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                offenders += [f"{path.relative_to(repo)}: {n}" for n in names if n.startswith(f"{PACKAGE}.cli")]
    assert offenders == []


def test_importing_the_package_loads_no_cli_module():
    code = ("import judgeblender, sys; "
            "print([m for m in sys.modules if m.startswith('judgeblender.cli')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


GROUND_FLOOR = {f"{PACKAGE}.{name}" for name in ("calls", "hashing", "fileio", "paths", "kappa", "errors", "masking")}


def test_ground_floor_modules_import_only_each_other():
    graph = import_graph()
    for name in sorted(GROUND_FLOOR):
        assert graph[name] <= GROUND_FLOOR, name


ARCHITECTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def allowed_imports() -> dict[str, set[str]]:
    """docs/architecture.md's table: package -> the packages it may import ({"*"}: any)."""
    rows: dict[str, set[str]] = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        rows[cells[0].strip("`")] = {c.strip().strip("`") for c in cells[2].split(",") if c.strip()}
    return rows


def package_graph() -> dict[str, set[str]]:
    """Sub-package (or top-level module) -> the others it imports, counting deferred imports."""
    def package(module: str) -> str:
        return module.split(".")[1] if module.count(".") else module

    graph: dict[str, set[str]] = {}
    for name, imports in import_graph().items():
        if name == PACKAGE:  # the package's own __init__ exports names lazily, by string
            continue
        graph.setdefault(package(name), set()).update(
            package(i) for i in imports if package(i) not in (package(name), PACKAGE))
    return graph


def test_the_allowed_imports_in_docs_architecture_md_hold():
    """The table is the rule: every package has a row, imports only what its row allows, and the
    rows themselves draw no circle (a package listed as allowed cannot allow its importer back)."""
    allowed = allowed_imports()
    graph = package_graph()
    assert set(graph) - set(allowed) == set(), "packages the table does not describe"
    assert set(allowed) - set(graph) == set(), "rows for packages that do not exist"
    breaches = {p: sorted(found - allowed[p]) for p, found in graph.items()
                if "*" not in allowed[p] and found - allowed[p]}
    assert breaches == {}
    assert find_cycle({p: a - {"*"} for p, a in allowed.items()}) is None


def test_the_table_reader_sees_a_breach():
    """A check that cannot fail proves nothing: drop one allowed import and it must fail."""
    allowed, graph = allowed_imports(), package_graph()
    judges = set(allowed["judges"])
    allowed["judges"] = judges - {"store"}
    assert "store" in graph["judges"] and not graph["judges"] <= allowed["judges"]
