"""A judge: one model, one prompt template, one scoring mode."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..backends.base import Backend
from ..calls import Mode
from ..backends.registry import check_options, create_backend
from ..errors import JudgeblenderError
from ..prompts import PromptTemplate, get_template

if TYPE_CHECKING:
    from ..pairs import Pair
    from ..store import CallStore
    from .judgment import Judgment
    from .stats import JudgeStats, Reporter

INVALID_POLICIES = ("retry-once", "no-retry")

# logprobs mode: the least share of the model's whole next-token probability that must fall on
# the label tokens for the answer to count. Below it the model wanted to say something else
# ("Sorry", "The"), and the argmax over the label tokens is noise: the answer is invalid.
# Chosen from the distribution measured by bench/choice_mass.py (docs/reliability.md).
DEFAULT_MIN_CHOICE_MASS = 0.01


@dataclass
class JudgeSpec:
    """How a judge is declared (CLI flags or a panel file)."""

    model: str
    prompt: str = "umbrela"
    mode: Mode = "generate"
    options: dict[str, Any] = field(default_factory=dict)
    weight: float = 1.0
    id: str | None = None
    # Allow falling back from logprobs to generate when the model cannot score choices.
    allow_fallback: bool = False
    invalid_policy: str = "retry-once"
    seed: int = 0
    # logprobs mode: an answer whose label tokens hold less of the next-token mass is invalid
    min_choice_mass: float = DEFAULT_MIN_CHOICE_MASS


def check_spec(spec: JudgeSpec, template: PromptTemplate | None = None) -> PromptTemplate:
    """Everything in a judge's declaration that can be checked without building its model: the
    mode, the invalid-answer policy, min_choice_mass, the prompt template, the model string's
    prefix and the options its provider declares. A judge whose model is built elsewhere (Ray
    workers) is checked with this before any of that starts. Returns the template."""
    template = _checked_template(spec, template)
    check_options(spec.model, spec.options, spec.id or spec.model)
    return template


def _checked_template(spec: JudgeSpec, template: PromptTemplate | None) -> PromptTemplate:
    if spec.mode not in ("generate", "logprobs"):
        raise JudgeblenderError(f"unknown scoring mode {spec.mode!r}; use generate or logprobs")
    if spec.invalid_policy not in INVALID_POLICIES:
        raise JudgeblenderError(f"unknown invalid-output policy {spec.invalid_policy!r}; use {INVALID_POLICIES}")
    mass = spec.min_choice_mass
    if isinstance(mass, bool) or not isinstance(mass, (int, float)) or not 0.0 <= mass <= 1.0:
        raise JudgeblenderError(f"min_choice_mass must be a number from 0 to 1, got {mass!r}")
    return template or get_template(spec.prompt)


class Judge:
    def __init__(self, spec: JudgeSpec, backend: Backend | None = None, template: PromptTemplate | None = None):
        self.spec = spec
        self.template = _checked_template(spec, template)
        self.backend = backend or create_backend(spec.model, spec.id or spec.model, **spec.options)
        self.id = spec.id or f"{spec.model}/{self.template.name}/{spec.mode}"
        self.mode: Mode = spec.mode
        self.fallback: str | None = None
        if spec.mode == "logprobs":
            if any(step.output == "json" for step in self.template.steps):
                self.fall_back(f"prompt {self.template.name!r} asks for a JSON verdict, which must be generated")
            elif not self.template.supports_logprobs:
                self.fall_back(f"prompt {self.template.name!r} must generate an explanation before its label")
            elif not self.backend.supports_logprobs:
                self.fall_back(f"backend {self.backend.kind!r} cannot score label tokens")

    def fall_back(self, reason: str) -> None:
        """Switch to generate mode, but only if the user allowed it; always recorded. Called here
        when the judge cannot score at all, and by the engine when the server says so mid-run."""
        if not self.spec.allow_fallback:
            raise JudgeblenderError(
                f"judge {self.id}: logprobs scoring is not possible ({reason}); "
                "pass --allow-fallback to generate instead (the fallback is recorded)"
            )
        self.mode = "generate"
        self.fallback = f"logprobs -> generate: {reason}"

    def close(self) -> None:
        self.backend.close()


class PairJudge(Protocol):
    """A judge that is not a prompt sent to an LLM (an embedding or cross-encoder scorer).

    It labels all items itself; the engine only collects its judgments and stats."""

    id: str

    async def run(self, items: list[tuple[Pair, dict[str, str]]], store: CallStore | None,
                  reporter: Reporter) -> tuple[dict[Pair, Judgment], JudgeStats]: ...
