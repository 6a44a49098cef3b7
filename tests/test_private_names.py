"""No module of the package or of bench/ uses another module's private name (issue 30 part 1),
and no module of the package uses another module's private attributes (issue 40 part 1).

A name with a leading underscore is its module's own: what another module needs of it is part of
that module's API and is named without one (the engine's `run_judge` and `build_request`, not
`_run_judge` and `_request`). Private names used across modules became the real API unseen, and
a rename broke callers that no test of the owner covered. Read from the source with `ast`:
`from X import _name`, `import X` then `X._name`, and `from P import module` then `module._name`,
wherever they occur (inside functions too). Another package's private parts (the openai SDK's)
are not judgeblender's modules; tests/test_openai_sdk.py guards those.

The same holds for attributes (`private_attributes`): `obj._x`, read or written, on anything but
`self` or `cls`, is another module's private attribute unless the module itself owns `_x`: it
defines it (a `def _x` or `class _x`, or `_x = ...`, at module level or in a class body), or sets
it on `self`, `cls`, or a function or class it defines (`run._checked = True`). The store's write
side reaching into CallStore's `_db`, `_lock` and `_texts` was the case that made the rule. An
attribute that no judgeblender module owns cannot be one of its objects' attributes: it is
another package's (llama_cpp's `llm._ctx`, the openai SDK's `client._platform`), guarded where it
is used (tests/test_openai_sdk.py). Where another package's private attribute has a name a
judgeblender module owns too, the line says whose it is, `# private of PACKAGE`, and the module
must import that package: a judgeblender object is never exempted.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import judgeblender

PACKAGE_ROOT = Path(judgeblender.__file__).resolve().parent
REPO = PACKAGE_ROOT.parents[1]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p) for p in PACKAGE_ROOT.rglob("*.py")}


def _resolve(module: str | None, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom reads from (`module` is the importer's; None in bench/)."""
    if node.level == 0 or module is None:
        return node.module or ""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_uses(path: Path, module: str | None) -> list[str]:
    """Every use in `path` of a private name of another judgeblender module, as 'line: what'."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    modules: dict[str, str] = {}  # a local name bound to a judgeblender module -> that module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _resolve(module, path, node)
            for alias in node.names:
                if source in MODULES and _private(alias.name) and source != module:
                    found.append(f"{node.lineno}: from {source} import {alias.name}")
                if f"{source}.{alias.name}" in MODULES:  # `from package import module`
                    modules[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:  # `import a.b.c` binds a; `import a.b.c as m` binds m to a.b.c
                    modules[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in modules:
                target = ".".join([modules[value.id], *reversed(chain)])
                if target in MODULES and target != module:
                    found.append(f"{node.lineno}: {target}.{node.attr}")
    return found


def uses_in(path: Path, module: str | None) -> list[str]:
    return [f"{path.relative_to(REPO)}:{use}" for use in private_uses(path, module)]


def test_no_module_uses_another_modules_private_names():
    offenders = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        offenders += uses_in(path, _module_name(path))
    for path in sorted((REPO / "bench").rglob("*.py")):
        offenders += uses_in(path, None)
    assert offenders == [], "private names used across modules:\n" + "\n".join(offenders)


def test_the_scan_finds_each_form_of_private_use(tmp_path):
    """The three forms are found (so an empty list above means none is there), and a module's
    own private names, dunder names and other packages' private names are not."""
    planted = tmp_path / "planted.py"  # read as if it were judgeblender/judges/planted.py
    planted.write_text(
        "import judgeblender.judges.run\n"
        "from judgeblender.judges import run\n"
        "from .run import _size\n"
        "from . import answers as reading\n"
        "import openai\n"
        "import judgeblender.store.compact as layout\n"
        "def f():\n"
        "    from ..store.calls import _DAMAGE\n"
        "    return (judgeblender.judges.run._size, run._size, reading._private, openai._constants,\n"
        "            run.__doc__, _own, layout._deflate, layout.Texts._pack)\n"
        "_own = 1\n", encoding="utf-8")
    found = private_uses(planted, "judgeblender.judges.planted")
    assert sorted(found) == sorted([
        "3: from judgeblender.judges.run import _size",
        "8: from judgeblender.store.calls import _DAMAGE",
        "9: judgeblender.judges.run._size",
        "9: judgeblender.judges.run._size",
        "9: judgeblender.judges.answers._private",
        "10: judgeblender.store.compact._deflate",
    ]), found


SELF = frozenset({"self", "cls"})
FOREIGN = re.compile(r"#.*\bprivate of ([A-Za-z_][A-Za-z0-9_]*)")


def owned(tree: ast.AST) -> set[str]:
    """The private attribute names a module owns (see the module's docstring)."""
    names: set[str] = set()
    made = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    bodies = [tree.body] + [n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]  # type: ignore[attr-defined]
    for body in bodies:
        for statement in body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(statement.name)
            elif isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name)
                and (node.value.id in SELF or node.value.id in made)):
            names.add(node.attr)
    return {n for n in names if _private(n)}


def imported_packages(tree: ast.AST) -> set[str]:
    """The top-level packages a module imports, wherever the import is (inside functions too)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def private_attributes(source: str, owners: dict[str, set[str]], module: str) -> list[str]:
    """Every use in `source` (module `module`) of a private attribute another judgeblender module
    owns (`owners`: name -> the modules owning it), as 'line: expression'."""
    tree = ast.parse(source)
    mine, packages, lines = owned(tree), imported_packages(tree) - {"judgeblender"}, source.splitlines()
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)) or node.attr in mine:
            continue
        if isinstance(node.value, ast.Name) and node.value.id in SELF:
            continue
        if not owners.get(node.attr, set()) - {module}:  # no judgeblender object has it: another package's
            continue
        whose = FOREIGN.search(lines[node.lineno - 1])
        if whose is not None and whose.group(1) in packages:
            continue
        found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def package_owners() -> dict[str, set[str]]:
    owners: dict[str, set[str]] = {}
    for path in PACKAGE_ROOT.rglob("*.py"):
        for name in owned(ast.parse(path.read_text(encoding="utf-8"))):
            owners.setdefault(name, set()).add(_module_name(path))
    return owners


def test_no_module_uses_another_modules_private_attributes():
    owners = package_owners()
    offenders = [f"{path.relative_to(REPO)}:{use}" for path in sorted(PACKAGE_ROOT.rglob("*.py"))
                 for use in private_attributes(path.read_text(encoding="utf-8"), owners, _module_name(path))]
    assert offenders == [], "private attributes used across modules:\n" + "\n".join(offenders)


def test_the_attribute_scan_finds_each_form_and_spares_what_a_module_owns():
    """A planted module: what it reads or writes of another module's private attributes is
    found; its own attributes, `self`'s and `cls`'s, a marker it sets on its own function, names
    no judgeblender module owns and a collision marked with a package it imports are not; a mark
    naming a package it does not import, or judgeblender, exempts nothing."""
    owners = {"_db": {"judgeblender.store.calls"}, "_lock": {"judgeblender.store.calls"},
              "_model": {"judgeblender.judges.embedding"}, "_seen": {"judgeblender.planted"}}
    planted = (
        "import llama_cpp\n"
        "_seen = set()\n"
        "class Sink:\n"
        "    _limit = 3\n"
        "    def __init__(self, store):\n"
        "        self._store = store\n"
        "    def commit(self, store, other):\n"
        "        with store._lock:\n"
        "            store._db.execute('BEGIN')\n"
        "        other._store, other._limit = self._store, self._limit\n"
        "        store._db = None\n"
        "        return other.__class__, cls_like._seen\n"
        "def wrap(f):\n"
        "    def run():\n"
        "        return f()\n"
        "    run._checked = True\n"
        "    return run, llama_cpp.Llama()._ctx\n"
        "def vocab(llm, m):\n"
        "    a = llm._model.vocab  # private of llama_cpp\n"
        "    b = m._model  # private of ir_datasets\n"
        "    c = m._model  # private of judgeblender\n"
        "    return a, b, c\n")
    assert sorted(private_attributes(planted, owners, "judgeblender.planted"), key=lambda u: int(u.split(":")[0])) == [
        "8: store._lock", "9: store._db", "11: store._db", "20: m._model", "21: m._model"]
    assert private_attributes("def f(x):\n    return x._lock\n", owners, "judgeblender.store.calls") == []
