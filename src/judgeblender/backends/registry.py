"""Model strings, as in `llamacpp:default` or `openai:gpt-4o-mini`, resolved to backends.

Backends register a factory for their prefix; third-party packages can add more through
the `judgeblender.backends` entry-point group, each entry naming such a factory.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from ..errors import JudgeblenderError
from .base import Backend

Factory = Callable[..., Backend]

# prefix -> "module:function", imported only when used so optional extras stay optional.
_BUILTIN: dict[str, str] = {
    "llamacpp": "judgeblender.backends.llamacpp:create",
    "openai": "judgeblender.backends.openai_compat:create",
    "hf": "judgeblender.backends.hf:create",
    "scripted": "judgeblender.backends.scripted:create",
}
_REGISTERED: dict[str, Factory] = {}


def register(prefix: str, factory: Factory) -> None:
    """Add a backend (tests use this for in-memory scripted models)."""
    _REGISTERED[prefix] = factory


def unregister(prefix: str) -> None:
    _REGISTERED.pop(prefix, None)


def known_prefixes() -> list[str]:
    plugin = [ep.name for ep in entry_points(group="judgeblender.backends")]
    return sorted(set(_BUILTIN) | set(_REGISTERED) | set(plugin))


def split_model_string(model: str) -> tuple[str, str]:
    prefix, sep, rest = model.partition(":")
    if not sep or not prefix or not rest:
        raise JudgeblenderError(
            f"model string {model!r} should look like PREFIX:MODEL, with PREFIX one of {', '.join(known_prefixes())}"
        )
    return prefix, rest


def _factory(prefix: str) -> Factory:
    if prefix in _REGISTERED:
        return _REGISTERED[prefix]
    if prefix in _BUILTIN:
        module, func = _BUILTIN[prefix].split(":")
        return getattr(import_module(module), func)
    for ep in entry_points(group="judgeblender.backends"):
        if ep.name == prefix:
            return ep.load()
    raise JudgeblenderError(f"unknown model prefix {prefix!r}; known: {', '.join(known_prefixes())}")


def create_backend(model: str, **options: Any) -> Backend:
    """Build the backend for a model string. Options not meant for it are ignored by it."""
    prefix, rest = split_model_string(model)
    return _factory(prefix)(rest, **options)
