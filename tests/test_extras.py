"""The extras match the docs: each example's imports are installed by the extras its page names.

A researcher who ran `pip install 'judgeblender[pyterrier]'` and then docs/pyterrier.md's first
block got `ModuleNotFoundError: pyterrier_pisa`: the PISA package sat in a separate test-only
extra. So every page with code (docs/*.md python blocks, the README's, docs/examples/*.py and
*.ipynb) is read here: each module its code imports (and each judgeblender module that
`require`s an extra) must come with the core install or from an extra the page names as
`[extra]`, and that extra must install it. The distributions are looked up in the environment
the tests run in (`make test` installs every extra), so a module no extra installs fails here.
`make test` installs every extra (opik has its own venv).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from importlib import metadata
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
SRC = ROOT / "src"


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(requirements: list[str]) -> set[str]:
    return {normal(re.match(r"[A-Za-z0-9._-]+", r).group()) for r in requirements}


CORE = requirement_names(PROJECT["dependencies"])
EXTRAS = {extra: requirement_names(reqs) for extra, reqs in PROJECT["optional-dependencies"].items()}


def code_of(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    if page.suffix == ".md":
        return "\n".join(re.findall(r"```python\n(.*?)```", text, flags=re.S))
    if page.suffix == ".ipynb":
        return "\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "code")
    return text


def imported(code: str) -> set[str]:
    """Every module the code imports, by its full dotted name."""
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def required_extras(module: str) -> set[str]:
    """The extras a judgeblender module asks for as it is imported: its module-level
    `require("module", "extra", ...)` calls (errors.require)."""
    path = SRC / Path(*module.split(".")).with_suffix(".py")
    if not path.is_file():
        return set()
    extras = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "require" and len(call.args) >= 2:
                extras.add(call.args[1].value)
    return extras


def needs(page: Path) -> tuple[set[str], set[str]]:
    """(third-party distributions the page's code imports, extras its judgeblender imports need)."""
    installed = metadata.packages_distributions()
    distributions, extras = set(), set()
    for module in imported(code_of(page)):
        top = module.partition(".")[0]
        if top == "judgeblender":
            extras |= required_extras(module)
        elif top not in sys.stdlib_module_names and top not in ("__future__", "openai_server"):
            assert top in installed, f"{page.name} imports {top}, which no installed distribution provides"
            distributions |= {normal(d) for d in installed[top]}
    return distributions, extras


PAGES = [p for p in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"] +
         sorted((ROOT / "docs" / "examples").glob("*.py")) + sorted((ROOT / "docs" / "examples").glob("*.ipynb"))
         if code_of(p).strip()]


def test_every_page_names_the_extras_its_examples_import():
    checked = []
    for page in PAGES:
        named = {e for spec in re.findall(r"\[([a-z][a-z,-]*)\]", page.read_text(encoding="utf-8"))
                 for e in spec.split(",") if e in EXTRAS}
        distributions, extras = needs(page)
        missing = [d for d in sorted(distributions - CORE) if not any(d in EXTRAS[e] for e in named)]
        assert not missing, f"{page.relative_to(ROOT)} imports {missing}: no extra it names ({sorted(named)}) installs it"
        assert extras <= named, f"{page.relative_to(ROOT)} needs the extras {sorted(extras - named)} and does not say so"
        checked.append(page.name)
    assert {"pyterrier.md", "api.md", "dl19.ipynb"} <= set(checked)


def test_the_pyterrier_extra_installs_what_docs_pyterrier_md_imports():
    distributions, extras = needs(ROOT / "docs" / "pyterrier.md")
    assert {"pyterrier", "pyterrier-pisa"} <= distributions and extras == {"pyterrier"}
    assert distributions - CORE <= EXTRAS["pyterrier"]
    assert "pyterrier-test" not in EXTRAS  # folded into [pyterrier]: one extra for the page


def test_the_notebook_extra_brings_a_kernel_widgets_and_nbclient():
    assert {"ipykernel", "ipywidgets", "nbclient", "nbformat"} <= EXTRAS["notebook"]
    distributions, _ = needs(ROOT / "docs" / "examples" / "dl19.ipynb")
    assert distributions - CORE <= EXTRAS["pyterrier"]


# The front ends a user opens a notebook with, and the distribution that installs each command.
FRONT_ENDS = {"jupyter-lab": "jupyterlab", "jupyter-notebook": "notebook", "jupyter-nbconvert": "nbconvert"}


def test_the_notebook_extra_brings_a_jupyter_front_end():
    """After `pip install -e ".[pyterrier,notebook]"`, `jupyter lab` answered "Jupyter command
    `jupyter-lab` not found": the extra gave a kernel and nothing to open a notebook with. Each
    command is a console script of a distribution the extra names, installed beside this Python
    (where `jupyter`, which runs `jupyter-lab` for `jupyter lab`, looks first)."""
    assert set(FRONT_ENDS.values()) <= EXTRAS["notebook"]
    scripts = {ep.name: ep for ep in metadata.entry_points(group="console_scripts")}
    for command, distribution in FRONT_ENDS.items():
        assert command in scripts, f"no distribution installs `{command}`: pip install -e '.[notebook]'"
        assert normal(scripts[command].dist.name) == distribution
        assert (Path(sys.executable).parent / command).is_file(), f"`{command}` is not beside {sys.executable}"


def test_make_test_installs_every_extra_but_opiks_own():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    extras = re.search(r"^EXTRAS := (.*)$", makefile, flags=re.M).group(1).split(",")
    assert sorted(extras) == sorted(set(EXTRAS) - {"opik"})
    assert "opik" in re.search(r"^test-opik:\n(?:\t.*\n)+", makefile, flags=re.M).group()
