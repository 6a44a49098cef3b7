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


def data_cache_dir() -> Path:
    """Example data bundles built from their public sources (`jb.load_dataset`), laid out as
    JUDGEBLENDER_DATA's folder is."""
    return cache_root() / "data"


def demo_store_path() -> Path:
    """The store `judgeblender demo` uses unless told otherwise."""
    return cache_root() / "demo.sqlite"



# Files a command writes beside an output it was given, by that output's name: commands and the
# up-front output checks (cli/checks.py) derive them here, so both name the same files.
def details_path(out: Path) -> Path:
    """The per-pair details JSONL beside a qrels `--out` (`judge`, `cascade`)."""
    return out.with_name(out.name + ".details.jsonl")


def journal_path(out: Path) -> Path:
    """The labeling page's append-only journal beside its qrels `--out` (`label`)."""
    return out.with_name(out.name + ".journal.jsonl")


def lock_path(out: Path) -> Path:
    """The lock file of a labeling page's `--out` (`label`)."""
    return out.with_name(out.name + ".lock")


def provenance_path(out: Path) -> Path:
    """The provenance TSV beside a filled qrels `--out` (`fill`)."""
    return out.with_name(out.stem + ".provenance.tsv")
