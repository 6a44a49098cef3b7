"""Fit long passages into the model's context, recording what was cut.

A cut costs at most two tokenizer calls, whatever the passage's size: the passage is first cut
by characters to (budget + 1) x the most characters one token can cover (a prefix that fits has
at most budget tokens, so nothing that could fit is lost, and the head always holds more than
the budget), that head is tokenized once, cut where the first token beyond the budget starts,
and the kept text is tokenized once more to check it fits and to record its size. Cutting by
binary search over prefixes made ~25 tokenizations of the whole passage (104 s for 2 pairs of a
22 MB passage); bench/hostile_sizes.py measures both.

Backends that can only count tokens (no `token_prefix`) are still cut by binary search, as is
the rare passage whose kept text, tokenized afresh, merges differently at the cut and exceeds
the budget: correctness first, then the two-call bound.
"""

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


def _record(passage: str, kept_chars: int, kept_tokens: int, passage_tokens: int | None) -> dict[str, int | None]:
    # passage_tokens is None when only a head of the passage was tokenized (it holds more than fits)
    return {"passage_tokens": passage_tokens, "kept_tokens": kept_tokens, "kept_chars": kept_chars,
            "passage_chars": len(passage)}


def _cut_by_counting(passage: str, budget: int, backend: Backend,
                     passage_tokens: int | None = None) -> tuple[str, dict[str, int | None] | None]:
    """The longest prefix whose token count fits, by binary search (log2(chars) counts)."""
    n = backend.count_tokens(passage) if passage_tokens is None else passage_tokens
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
    return kept, _record(passage, lo, backend.count_tokens(kept) or 0, n)


def truncate_passage(passage: str, budget: int | None,
                     backend: Backend) -> tuple[str, dict[str, int | None] | None]:
    """Return the passage cut to `budget` tokens (at a character boundary) and a record of the cut."""
    if budget is None:
        return passage, None
    # a token covers at least one character, so a passage this short is its own head
    per_token = backend.max_token_chars() if len(passage) > budget + 1 else None
    head = passage if per_token is None else passage[: (budget + 1) * per_token]
    found = backend.token_prefix(head, budget)
    if found is not None and found[0] <= budget and len(head) < len(passage):
        head = passage  # the bound was wrong (the head fits): tokenize the whole passage
        found = backend.token_prefix(head, budget)
    if found is None:
        return _cut_by_counting(passage, budget, backend)
    tokens, covered = found
    if tokens <= budget:
        return passage, None
    kept = passage[:covered]
    kept_tokens = backend.count_tokens(kept) or 0
    if kept_tokens > budget:  # the kept text tokenizes differently on its own: search within it
        kept, cut = _cut_by_counting(kept, budget, backend, kept_tokens)
        covered, kept_tokens = len(kept), cut["kept_tokens"] if cut else kept_tokens
    return kept, _record(passage, covered, kept_tokens, tokens if len(head) == len(passage) else None)
