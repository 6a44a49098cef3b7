"""Model strings, as in `llamacpp:default`, `openai:gpt-4o-mini` or `embed:default`, resolved to
what serves them: an LLM backend, or a scorer judge (embedding, cross-encoder) that labels pairs
itself.

Each prefix has a Provider: its options, declared once as a pydantic model (as simonw/llm's
`Options`), and how to build it. Unknown keys and bad values are errors naming the judge, with
the nearest known key ("did you mean 'concurrency'?"). Third-party packages add prefixes through
the `judgeblender.backends` entry-point group, each entry naming a Provider (or, as before, a
plain factory `factory(model, **options)` whose options nobody checks).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ArgumentError, JudgeblenderError
from .base import Backend

Factory = Callable[..., Backend]

# Settings the command line gives every judge of a panel (--threads, --base-url, --concurrency
# ...): `command_options` keeps those a judge's provider declares. A judge's own options are
# checked whole: any key its provider does not declare is an error.
COMMAND_WIDE = frozenset({"n_threads", "base_url", "api_key_env", "concurrency", "timeout_s", "context_tokens"})


class BackendOptions(BaseModel):
    """The base of every provider's options: unknown keys are refused, values are checked."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Provider:
    """What a model prefix names: its options, declared once, and how to build it. `backend`
    builds an LLM backend from (the model after the prefix, the checked options); `judge` builds
    a scorer judge from its JudgeSpec (it checks the spec's options with `check_options`)."""

    prefix: str
    options: type[BackendOptions] | None = None
    backend: Callable[[str, Any], Backend] | None = None
    judge: Callable[[Any], Any] | None = None

    def check(self, options: Mapping[str, Any], owner: str) -> Any:
        """The options as this provider's model; errors say which judge and which option."""
        if self.options is None:
            return dict(options)
        fields = self.options.model_fields
        given = dict(options)
        for key in given:
            if key not in fields:
                near = difflib.get_close_matches(key, list(fields), n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise JudgeblenderError(f"judge {owner}: unknown option {key!r}{hint}; "
                                        f"{self.prefix}: takes {', '.join(sorted(fields)) or 'no options'}")
        try:
            return self.options(**given)
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(map(str, err["loc"]))
            raise JudgeblenderError(f"judge {owner}: option {key!r}: {err['msg']} (got {err.get('input')!r})") from None

    def create(self, model: str, owner: str | None = None, **options: Any) -> Backend:
        """Build the backend for `model` (the part after the prefix) from unchecked options."""
        if self.backend is None:
            raise JudgeblenderError(f"{self.prefix}:{model} is a scorer judge, not an LLM backend; "
                                    "use it as a judge (judges.build_judge)")
        checked = self.check(options, owner or f"{self.prefix}:{model}")
        return self.backend(model, checked) if self.options is not None else self.backend(model, **checked)


# prefix -> "module:attribute" of its Provider, imported only when used so optional extras stay
# optional; scorer judges are registered here as LLM backends are.
_BUILTIN: dict[str, str] = {
    "llamacpp": "judgeblender.backends.llamacpp:PROVIDER",
    "openai": "judgeblender.backends.openai_compat:PROVIDER",
    "hf": "judgeblender.backends.hf:PROVIDER",
    "scripted": "judgeblender.backends.scripted:PROVIDER",
    "embed": "judgeblender.judges.embedding:EMBED",
    "cross": "judgeblender.judges.embedding:CROSS",
}
BUILTIN_SCORERS = ("embed", "cross")
_REGISTERED: dict[str, Provider] = {}


def _as_provider(prefix: str, found: Provider | Factory) -> Provider:
    return found if isinstance(found, Provider) else Provider(prefix, backend=found)


def register(prefix: str, factory: Provider | Factory) -> None:
    """Add a prefix: a Provider, or a plain factory(model, **options) (tests' in-memory models).
    A blank prefix or one with a colon could never be named in a model string PREFIX:MODEL."""
    if not isinstance(prefix, str) or not prefix.strip() or ":" in prefix:
        raise ArgumentError("prefix", "a non-blank name without ':' (the PREFIX of PREFIX:MODEL)", prefix)
    if not (isinstance(factory, Provider) or callable(factory)):
        raise ArgumentError("factory", "a Provider or a callable factory(model, **options)", factory)
    _REGISTERED[prefix] = _as_provider(prefix, factory)


def unregister(prefix: str) -> None:
    _REGISTERED.pop(prefix, None)


def known_prefixes() -> list[str]:
    plugin = [ep.name for ep in entry_points(group="judgeblender.backends")]
    return sorted(set(_BUILTIN) | set(_REGISTERED) | set(plugin))


def split_model_string(model: str) -> tuple[str, str]:
    if not isinstance(model, str):
        raise ArgumentError("model", "a model string PREFIX:MODEL", model)
    prefix, sep, rest = model.partition(":")
    if not sep or not prefix or not rest:
        raise JudgeblenderError(
            f"model string {model!r} should look like PREFIX:MODEL, with PREFIX one of {', '.join(known_prefixes())}"
        )
    return prefix, rest


def provider(prefix: str) -> Provider:
    if prefix in _REGISTERED:
        return _REGISTERED[prefix]
    if prefix in _BUILTIN:
        module, attr = _BUILTIN[prefix].split(":")
        return getattr(import_module(module), attr)
    for ep in entry_points(group="judgeblender.backends"):
        if ep.name == prefix:
            return _as_provider(prefix, ep.load())
    raise JudgeblenderError(f"unknown model prefix {prefix!r}; known: {', '.join(known_prefixes())}")


def is_scorer(model: str) -> bool:
    """Whether a model string names a scorer judge (no prompt, no scoring mode)."""
    prefix = model.partition(":")[0]
    if prefix in BUILTIN_SCORERS and prefix not in _REGISTERED:
        return True  # without importing torch's side of the package
    if prefix not in _REGISTERED and prefix not in {ep.name for ep in entry_points(group="judgeblender.backends")}:
        return False
    return provider(prefix).judge is not None


def command_options(model: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Settings shared by every judge of a command or a jury, as they apply to this model: the
    COMMAND_WIDE ones its provider does not declare are left out (a served model has no
    threads); every other key stays, so a misspelt one is still an error when checked."""
    found = provider(split_model_string(model)[0])
    if found.options is None:  # a plain factory declares nothing: it gets them all, as before
        return dict(options)
    fields = found.options.model_fields
    return {k: v for k, v in options.items() if k in fields or k not in COMMAND_WIDE}


def check_options(model: str, options: Mapping[str, Any], owner: str | None = None) -> Any:
    """Check a judge's options against its provider's declaration, without building anything."""
    prefix, _ = split_model_string(model)
    return provider(prefix).check(options, owner or model)


def create_backend(model: str, owner: str | None = None, **options: Any) -> Backend:
    """Build the backend for a model string; `owner` names the judge in option errors."""
    prefix, rest = split_model_string(model)
    return provider(prefix).create(rest, owner, **options)
