"""Fit long passages into the model's context, recording what was cut."""

from __future__ import annotations

from ..backends.base import Backend
from ..prompts import PromptTemplate

# Tokens kept free beyond the step's own answer budget, for chat-template markup.
SAFETY_TOKENS = 32


def passage_budget(template: PromptTemplate, backend: Backend, values: dict[str, str]) -> int | None:
    """Largest length in tokens of the template's `truncate` input that fits every step, or None if unknown."""
    ctx = backend.context_tokens()
    if ctx is None:
        return None
    budget = None
    earlier_text = 0  # explanation tokens a later step embeds
    for step in template.steps:
        blank = {**values, template.truncate or "passage": ""}
        blank.update({s.id: "" for s in template.steps})
        system, user = template.render_step(step, blank)
        overhead = backend.count_tokens((system or "") + "\n" + user + (step.answer_prefix or "")) or 0
        room = ctx - overhead - step.max_tokens - earlier_text - SAFETY_TOKENS
        budget = room if budget is None else min(budget, room)
        if step.output == "text":
            earlier_text += step.max_tokens
    return max(budget or 0, 0)


def truncate_passage(passage: str, budget: int | None, backend: Backend) -> tuple[str, dict[str, int] | None]:
    """Return the passage cut to `budget` tokens (at a character boundary) and a record of the cut."""
    if budget is None:
        return passage, None
    n = backend.count_tokens(passage)
    if n is None or n <= budget:
        return passage, None
    lo, hi = 0, len(passage)
    while lo < hi:  # longest prefix whose token count fits
        mid = (lo + hi + 1) // 2
        if (backend.count_tokens(passage[:mid]) or 0) <= budget:
            lo = mid
        else:
            hi = mid - 1
    kept = passage[:lo]
    return kept, {"passage_tokens": n, "kept_tokens": backend.count_tokens(kept) or 0, "kept_chars": lo,
                  "passage_chars": len(passage)}
