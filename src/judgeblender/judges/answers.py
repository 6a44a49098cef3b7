"""Reading a step's answer: a label, a yes/no, a text or a JSON verdict, or invalid with the reason.

Never a label from a non-answer: this is where an answer's finish reason, its probability mass
on the label tokens, and the parsers' screens decide whether it counts. It reads one answer at a
time, from the model or the store alike, and knows nothing of how calls are made or stored.
"""

from __future__ import annotations

from typing import Any

from ..calls import FINISHED_NORMALLY, CallRequest, CallResult
from ..parse import parse_grade, parse_yesno
from ..parse.screen import non_answer
from ..parse.verdict import parse_verdict, template_examples
from ..prompts import PromptTemplate, Step
from .judgment import Judgment, StepOutcome


# words for the finish reasons (not on calls.FINISHED_NORMALLY) users meet most
NOT_FINISHED = {"length": "cut at the token limit", "content_filter": "withheld by the content filter",
                "tool_calls": "a tool call, not a text answer"}


def unfinished_reason(finish: str | None) -> str:
    """Why a generate-mode answer whose finish reason is not on the allow-list is invalid."""
    if finish is None:
        return "no finish reason: the server did not say that the answer ended normally"
    return f"answer {NOT_FINISHED.get(finish, 'did not end normally')} (finish_reason: {finish})"


def step_examples(template: PromptTemplate, step: Step) -> list[dict[str, Any]]:
    """The JSON objects the step's own prompt text shows (its example of a verdict), read from
    the template with every input and earlier step left blank, never from an item's values."""
    blanks = {name: "" for name in [*template.inputs, *(s.id for s in template.steps)]}
    system, user = template.render_step(step, blanks)
    return template_examples(system or "", user)


def interpret(step: Step, scale: list[int], request: CallRequest, result: CallResult,
              score_range: list[float] | None = None, min_choice_mass: float = 0.0,
              examples: list[dict[str, Any]] | None = None) -> StepOutcome:
    """Read a step's answer: a label, a yes/no (1/0), a text, or invalid with the reason.

    The answer is read on the step's own scale (its `labels`, else the template's `scale`);
    a JSON verdict equal to one of the template's `examples` (`step_examples`) is not a verdict.
    Never a label from a non-answer: an answer the backend refused to keep (too large) is
    invalid in either mode; an empty or degenerate answer ("1, 1, 1, ..." on and on: parse.screen)
    is invalid whatever the step asks, as every parser screens it; in logprobs mode the label tokens must hold at least
    `min_choice_mass` of the next-token probability; in generate mode an answer counts only
    when its finish_reason says it ended normally (calls.FINISHED_NORMALLY): cut at the token
    limit, filtered, ended any other way or without a finish reason, it is invalid."""
    levels = step.labels or scale
    refused = result.extra.get("refused")
    if refused:
        return StepOutcome(step.id, result.text, None, str(refused))
    if request.mode == "logprobs":
        if not result.probs or not result.choice_mass:
            return StepOutcome(step.id, result.text, None, "no probability on any answer token",
                               result.probs, result.choice_mass)
        if result.choice_mass < min_choice_mass:
            return StepOutcome(step.id, result.text, None,
                               f"the answer tokens hold {result.choice_mass:.2g} of the next-token probability, "
                               f"below min_choice_mass {min_choice_mass:g}", result.probs, result.choice_mass)
        best = max(result.probs, key=result.probs.get)
        value: int | None = (1 if best == "Yes" else 0) if step.output == "yesno" else int(best)
        return StepOutcome(step.id, result.text, value, None, result.probs, result.choice_mass)
    finish = result.extra.get("finish_reason")
    if finish not in FINISHED_NORMALLY:
        return StepOutcome(step.id, result.text, None, unfinished_reason(finish))
    if step.output == "text":  # screened as the parsers screen theirs: empty or degenerate is no answer
        refused = non_answer(result.text)
        return StepOutcome(step.id, result.text, None if refused else result.text.strip(), refused)
    if step.output == "json":
        verdict = parse_verdict(result.text, step.json_schema or {}, step.score_field, step.reason_field,
                                levels=levels, score_range=score_range, examples=examples or ())
        return StepOutcome(step.id, result.text, verdict.score, verdict.invalid_reason, reason=verdict.reason,
                           repaired=verdict.repaired or None)
    parsed = parse_yesno(result.text) if step.output == "yesno" else parse_grade(result.text, levels)
    return StepOutcome(step.id, result.text, parsed.label, parsed.invalid_reason)


def set_label(judgment: Judgment, template: PromptTemplate, outcome: StepOutcome) -> None:
    """Set the judgment's label (and distribution, in logprobs mode) from a final label step; a
    continuous rubric score (the template's score_range) sets the score and reason instead."""
    if template.score_range is not None:  # a continuous rubric score has no label
        judgment.score, judgment.reason = float(outcome.value), outcome.reason  # type: ignore[arg-type]
        return
    judgment.label = int(outcome.value)  # type: ignore[arg-type]
    if outcome.reason is not None:
        judgment.score, judgment.reason = float(judgment.label), outcome.reason
    if outcome.probs is not None:
        scale = template.scale
        judgment.probs = {str(level): float(outcome.probs.get(str(level), 0.0)) for level in scale}
        judgment.expected = sum(level * judgment.probs[str(level)] for level in scale)
