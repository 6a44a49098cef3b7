"""Prompt templates as data: one TOML file per judge method, with one or more steps.

A step is one LLM call. Its text may use {query}, {passage}, variables the template declares,
and the output of any earlier step by its id (a label as its digit, yes/no as "Yes"/"No",
free text as is). Literal braces are written {{ and }}. A step's `output` says what it asks
for: a `label` from `labels`, a `yesno` answer (with optional `stop`, e.g. {no = 0}: end the
judgment there with that label), or free `text` (an explanation fed to a later step). The
judgment's label is the last label step's label, unless a stop rule ended it earlier.
"""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import TemplateError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
BASE_VARIABLES = ("query", "passage")


def placeholders(text: str) -> list[str]:
    names = []
    for m in _PLACEHOLDER.finditer(text):
        if m.group(0) in ("{{", "}}"):
            continue
        name = m.group(1)
        if not _NAME.match(name):
            raise TemplateError(f"placeholder {{{name}}} is not a valid name (write literal braces as {{{{ and }}}})")
        names.append(name)
    return names


@functools.lru_cache(maxsize=256)
def _pieces(text: str) -> tuple[tuple[str, bool], ...]:
    """A template text split once into (literal, False) and (placeholder name, True) pieces,
    braces unescaped: rendering joins them, with no regular expression per prompt (a served run
    renders hundreds of prompts a second)."""
    pieces, pos = [], 0
    for m in _PLACEHOLDER.finditer(text):
        pieces.append((text[pos:m.start()], False))
        token = m.group(0)
        pieces.append(("{", False) if token == "{{" else ("}", False) if token == "}}" else (m.group(1), True))
        pos = m.end()
    pieces.append((text[pos:], False))
    return tuple(pieces)


def render_text(text: str, values: dict[str, str]) -> str:
    out = []
    for piece, is_name in _pieces(text):
        if is_name:
            if piece not in values:
                raise TemplateError(f"no value for placeholder {{{piece}}}")
            piece = values[piece]
        out.append(piece)
    return "".join(out)


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str
    output: Literal["label", "yesno", "text", "json"] = "label"
    system: str | None = None
    user: str
    labels: list[int] | None = None
    # logprobs mode: the assistant's answer starts with this, then the label token is scored.
    # None means the step cannot be scored without generating (e.g. explanation-first prompts).
    answer_prefix: str | None = ""
    # false marks explanation-first prompts that cannot be scored by one forward pass.
    logprobs: bool = True
    max_tokens: int = 128
    stop: dict[Literal["yes", "no"], int] = Field(default_factory=dict)
    # json steps: the verdict's JSON schema, and which fields hold the score and the reason.
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    score_field: str = "score"
    reason_field: str | None = "reason"

    @model_validator(mode="after")
    def _check(self) -> "Step":
        if not _NAME.match(self.id):
            raise ValueError(f"step id {self.id!r} must be a name (letters, digits, _)")
        if self.output != "yesno" and self.stop:
            raise ValueError(f"step {self.id!r}: stop rules apply to yesno steps only")
        if self.output in ("text", "json") or not self.logprobs:
            self.answer_prefix = None
        if self.output == "json" and not self.json_schema:
            raise ValueError(f"step {self.id!r}: a json step needs a schema")
        if self.json_schema is not None and self.output != "json":
            raise ValueError(f"step {self.id!r}: only json steps take a schema")
        return self

    def choices(self, scale: list[int]) -> tuple[str, ...]:
        if self.output == "yesno":
            return ("Yes", "No")
        if self.output == "label":
            return tuple(str(x) for x in (self.labels or scale))
        return ()


class PromptTemplate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    title: str = ""
    description: str = ""
    scale: list[int] = Field(default_factory=lambda: [0, 1, 2, 3])
    # rubric judges: a continuous score range [min, max] instead of integer levels.
    score_range: list[float] | None = None
    # the item fields the prompt is filled from; relevance judging uses query and passage.
    inputs: list[str] = Field(default_factory=lambda: list(BASE_VARIABLES))
    # the input that is cut to fit the model's context when too long (none: never cut).
    truncate: str | None = "passage"
    citation: str = ""
    license: str = ""
    source: str = ""
    license_file: str | None = None
    variables: dict[str, str] = Field(default_factory=dict)
    steps: list[Step]
    path: str | None = None

    @model_validator(mode="after")
    def _check(self) -> "PromptTemplate":
        if not self.steps:
            raise ValueError("a template needs at least one step")
        known = set(self.inputs) | set(self.variables)
        if self.truncate is not None and self.truncate not in self.inputs:
            self.truncate = None
        if self.score_range is not None and (len(self.score_range) != 2 or self.score_range[0] >= self.score_range[1]):
            raise ValueError(f"score_range must be [min, max] with min < max, got {self.score_range}")
        seen: set[str] = set()
        for step in self.steps:
            if step.id in seen or step.id in known:
                raise ValueError(f"step id {step.id!r} is used twice or shadows a variable")
            for field in (step.system or "", step.user, step.answer_prefix or ""):
                for name in placeholders(field):
                    if name not in known and name not in seen:
                        later = " (it is a later step)" if any(s.id == name for s in self.steps) else ""
                        raise ValueError(
                            f"step {step.id!r} uses unknown placeholder {{{name}}}{later}; "
                            f"known here: {', '.join(sorted(known | seen))}"
                        )
            for label in step.labels or []:
                if label not in self.scale:
                    raise ValueError(f"step {step.id!r}: label {label} is not in the scale {self.scale}")
            for label in step.stop.values():
                if label not in self.scale:
                    raise ValueError(f"step {step.id!r}: stop label {label} is not in the scale {self.scale}")
            seen.add(step.id)
        if not any(s.output in ("label", "json") for s in self.steps):
            raise ValueError("a template needs at least one label or json step")
        return self

    @property
    def supports_logprobs(self) -> bool:
        """Scoring without generation needs every label/yesno step to have an answer prefix;
        a JSON verdict is always generated."""
        if any(s.output == "json" for s in self.steps):
            return False
        return all(s.answer_prefix is not None for s in self.steps if s.output in ("label", "yesno"))

    def render_step(self, step: Step, values: dict[str, str]) -> tuple[str | None, str]:
        merged = {**self.variables, **values}
        system = render_text(step.system, merged) if step.system else None
        return system, render_text(step.user, merged)


def load_template(path: str | Path) -> PromptTemplate:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TemplateError(f"{path}: no such template file") from None
    except tomllib.TOMLDecodeError as exc:
        raise TemplateError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise TemplateError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return PromptTemplate(**data, path=str(path))
    except TemplateError as exc:
        raise TemplateError(f"{path}: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'template'}: {err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors()
        )
        raise TemplateError(f"{path}: {problems}") from None
