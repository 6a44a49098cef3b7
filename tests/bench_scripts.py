"""What the docs tests need of bench/: a bench script loaded as a module (bench/ is no package,
and its scripts import each other by name), and a generated block of a docs page, so each test
compares the page with the script's own rendering of the results file it names."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def bench_script(name: str) -> ModuleType:
    """bench/NAME.py, loaded (its siblings importable by name, as when it runs as a script)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generated_block(page: Path, start: str, end: str) -> str:
    """The text of `page` between its `start` and `end` markers, stripped."""
    text = page.read_text()
    return text[text.index(start) + len(start):text.index(end)].strip()
