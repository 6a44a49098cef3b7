"""No module of the package or of bench/ uses another module's private name (issue 30 part 1).

A name with a leading underscore is its module's own: what another module needs of it is part of
that module's API and is named without one (the engine's `run_judge` and `build_request`, not
`_run_judge` and `_request`). Private names used across modules became the real API unseen, and
a rename broke callers that no test of the owner covered. Read from the source with `ast`:
`from X import _name`, `import X` then `X._name`, and `from P import module` then `module._name`,
wherever they occur (inside functions too). Another package's private parts (the openai SDK's)
are not judgeblender's modules; tests/test_openai_sdk.py guards those.
"""

from __future__ import annotations

import ast
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
