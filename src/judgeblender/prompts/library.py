"""Where templates come from: the built-in files, then a user's own file or folder."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ArgumentError, TemplateError
from .template import PromptTemplate, load_template

BUILTIN_DIR = Path(__file__).parent / "builtin"
LICENSES_DIR = Path(__file__).parent / "licenses"
# Extra folders of *.toml templates, separated like PATH.
PATH_ENV = "JUDGEBLENDER_PROMPTS"


def _dirs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get(PATH_ENV, "").split(os.pathsep) if p]
    return [BUILTIN_DIR, *extra]


def template_paths() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder in _dirs():
        if folder.is_dir():
            for path in sorted(folder.glob("*.toml")):
                found[path.stem] = path
    return found


def get_template(name_or_path: str) -> PromptTemplate:
    """A template by name (built-in or in $JUDGEBLENDER_PROMPTS) or by path to a .toml file."""
    if isinstance(name_or_path, os.PathLike):
        name_or_path = os.fspath(name_or_path)
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise ArgumentError("name_or_path", "a prompt's name or a .toml file's path", name_or_path)
    if name_or_path.endswith(".toml") or os.sep in name_or_path:
        return load_template(name_or_path)
    paths = template_paths()
    if name_or_path not in paths:
        raise TemplateError(f"unknown prompt {name_or_path!r}; available: {', '.join(sorted(paths))}")
    return load_template(paths[name_or_path])


def list_templates() -> list[PromptTemplate]:
    return [load_template(p) for p in template_paths().values()]


def license_text(template: PromptTemplate) -> str | None:
    if not template.license_file:
        return None
    return (LICENSES_DIR / template.license_file).read_text(encoding="utf-8")
