"""Where judgeblender keeps files it was not told where to put: caches and the default store.

One root for every cache (JUDGEBLENDER_CACHE, else $XDG_CACHE_HOME/judgeblender, else
~/.cache/judgeblender), so tests and benchmarks can redirect all of them with one variable.
Imports nothing of the project.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The folder every cache lives under."""
    base = os.environ.get("JUDGEBLENDER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "judgeblender"
    )
    return Path(base)


def models_cache_dir() -> Path:
    """Assembled packaged models (GGUF files and their `.verified` markers)."""
    return cache_root() / "models"


def runs_cache_dir() -> Path:
    """Parsed TREC runs (.npz), keyed by the run file's path, size and mtime."""
    return cache_root() / "runs"


def demo_store_path() -> Path:
    """The store `judgeblender demo` uses unless told otherwise."""
    return cache_root() / "demo.sqlite"

