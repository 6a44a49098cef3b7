"""A judge: one model, one prompt template, one scoring mode."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol


from .. import arguments
from ..backends.base import Backend
from ..calls import Mode
from ..backends.registry import check_options, create_backend, is_scorer
from ..errors import ArgumentError, JudgeblenderError, TemplateError
from ..prompts import PromptTemplate, get_template

MODES = ("generate", "logprobs")
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


# -- judge ids --------------------------------------------------------------------------------
# A judge declared without an id is called MODEL/PROMPT/MODE, PROMPT the template's own name, and a
# scorer (embed:, cross:: no prompt, no scoring mode) by its model string alone. Built here only
# (`judge_id`), for every kind of judge: six places built it before, the judge itself from the
# template's name and panels, `jb.judge`'s lists and cascades from the prompt as written; and a
# scorer was `embed:default` to the judge, `judge --judge`, cascades and `jb.panel([...])` but
# `embed:default/umbrela/generate` to a panel file, which gave it the prompt and mode it ignores.
# Where the prompt is a file (`my/umbrela-v2.toml`, or a user library file named otherwise than
# its `name`) the template's name wins: it was the id of the single judge of `judge`, `grade` and
# every jury (and stays so), it does not change with the folder the file sits in or the working
# folder, and it holds no slash, so `judge_id_fields` reads the id back. A scorer keeps its model
# string, the id every command but the panel file gave it and the one its stored judgments mostly
# carry. The ids those panels, lists, cascades and panel files gave are `former_ids`, which is how
# files written with them still find their judges (`blend --panel`, a panel's tie-breaker,
# calibrate's panel).

def _joined(model: str, prompt: str, mode: str) -> str:
    return f"{model}/{prompt}/{mode}"


def judge_id(model: str, prompt: str, mode: str, template: PromptTemplate | None = None) -> str:
    """The id of a judge of `model` with `prompt` (a name or a file; `template` when it is read
    already), scoring by `mode`: MODEL/PROMPT/MODE, or MODEL for a scorer."""
    if is_scorer(model):
        return model
    return _joined(model, prompt_name(prompt, template), mode)


def prompt_name(prompt: str, template: PromptTemplate | None = None) -> str:
    """What a judge id calls a prompt: its template's own name. A prompt that cannot be read here
    (a panel file blended from label files, its prompts elsewhere) is called as it is written."""
    if template is not None:
        return template.name
    try:
        return get_template(prompt).name
    except (TemplateError, OSError, ValueError):
        return prompt


def spec_id(spec: JudgeSpec, template: PromptTemplate | None = None) -> str:
    """The judge's id: the one its declaration gives, else `judge_id`."""
    return spec.id or judge_id(spec.model, spec.prompt, spec.mode, template)


def former_ids(model: str, prompt: str, mode: str) -> tuple[str, ...]:
    """The ids a judge declared without one had before `judge_id` named every judge, where they
    differ from today's: the prompt as written (panels, `jb.judge`'s lists and cascades), and a
    scorer's MODEL/PROMPT/MODE (panel files)."""
    today = judge_id(model, prompt, mode)
    olds = (_joined(model, prompt, mode), _joined(model, prompt_name(prompt), mode))
    return tuple(old for old in dict.fromkeys(olds) if old != today)


# -- checks of a declaration ------------------------------------------------------------------

def check_mode(mode: object) -> str:
    """A scoring mode: generate (parse the text) or logprobs (score the label tokens)."""
    if mode not in MODES:
        raise ArgumentError("mode", "generate or logprobs", described=f"unknown scoring mode {mode!r}")
    return mode  # type: ignore[return-value]


def check_invalid_policy(policy: object) -> str:
    """What happens to an invalid answer: retry-once (then unjudged) or no-retry."""
    if policy not in INVALID_POLICIES:
        raise ArgumentError("invalid_policy", f"one of {', '.join(INVALID_POLICIES)}",
                            described=f"unknown invalid-output policy {policy!r}")
    return policy  # type: ignore[return-value]


def check_min_choice_mass(mass: object) -> float:
    """logprobs mode's least share of the next-token mass on the label tokens: 0 to 1."""
    return arguments.bounded("min_choice_mass", mass)


def check_spec(spec: JudgeSpec, template: PromptTemplate | None = None) -> PromptTemplate:
    """Everything in a judge's declaration that can be checked without building its model: the
    mode, the invalid-answer policy, min_choice_mass, the prompt template, the model string's
    prefix and the options its provider declares. A judge whose model is built elsewhere (Ray
    workers) is checked with this before any of that starts. Returns the template."""
    template = _checked_template(spec, template)
    check_options(spec.model, spec.options, spec.id or spec.model)
    return template


def _checked_template(spec: JudgeSpec, template: PromptTemplate | None) -> PromptTemplate:
    check_mode(spec.mode)
    check_invalid_policy(spec.invalid_policy)
    check_min_choice_mass(spec.min_choice_mass)
    return template or get_template(spec.prompt)


class Judge:
    def __init__(self, spec: JudgeSpec, backend: Backend | None = None, template: PromptTemplate | None = None):
        self.spec = spec
        self.template = _checked_template(spec, template)
        self.backend = backend or create_backend(spec.model, spec.id or spec.model, **spec.options)
        self.id = spec_id(spec, self.template)
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
                "pass allow_fallback=True to generate instead (the fallback is recorded)"
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
