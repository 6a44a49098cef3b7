"""Fit long passages into the model's context, recording what was cut.

A cut costs what the kept text costs, whatever the passage's size. The passage is first cut by
characters to a head: (budget + 1 + HEAD_MARGIN) x TYPICAL_TOKEN_CHARS characters, grown only while it holds
no more than the budget (plus a margin), never past (budget + 1) x the most characters one
token can cover (a prefix that fits has at most budget tokens, so nothing that could fit is
lost). For ordinary text that head is tokenized once, cut where the first token beyond the
budget starts, and the kept text is tokenized once more to check it fits and to record its
size: two tokenizer calls, each a few times the kept text. Cutting by binary search over
prefixes made ~25 tokenizations of the whole passage (104 s for 2 pairs of a 22 MB passage);
tokenizing the bound's head read (budget + 1) x 256 characters for Qwen's longest token, ~50
times the cut. bench/hostile_sizes.py and bench/long_passage.py measure them.

Backends that can only count tokens (no `token_prefix`), and passages whose token pieces do not
spell them, are cut by counting prefixes, galloping from the budget so no count reads more than
twice the kept text; so is the rare passage whose kept text, tokenized afresh, merges
differently at the cut and exceeds the budget: correctness first, then the call bound.
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


# A passage counted whole before its prefixes are (by a backend that can only count): up to this
# many characters a token of the budget (the longest tokens of the packaged models' vocabularies
# are 128 bytes), so its cut and record are as they always were; a longer one is counted from
# its head.
COUNTED_WHOLE = 256


def _cut_by_counting(passage: str, budget: int, backend: Backend,
                     passage_tokens: int | None = None) -> tuple[str, dict[str, int | None] | None]:
    """The longest prefix whose token count fits, by counting prefixes. A passage of up to
    COUNTED_WHOLE characters a token of the budget is counted whole, then searched by halves, as
    always (its cut and record are as they were). A longer one: a prefix of budget + 1
    characters, doubled until it holds more than the budget (galloping), then searched by halves
    below it, so no count reads more than twice the kept text and a 22 MB passage costs what
    its cut costs (searched whole, it was counted ~25 times, 22 MB each). It is counted whole
    only when no shorter prefix overflows (it may then fit as it is)."""
    lo, hi, size, n = 0, None, budget + 1, passage_tokens
    if len(passage) <= (budget + 1) * COUNTED_WHOLE:
        size = len(passage)
    while n is None and size < len(passage):
        count = backend.count_tokens(passage[:size])
        if count is None:
            return passage, None
        if count > budget:
            hi = size
            break
        lo, size = size, size * 2
    if hi is None:
        n = backend.count_tokens(passage) if n is None else n
        if n is None or n <= budget:
            return passage, None
        hi = len(passage)
    hi -= 1  # the prefix of `hi` characters does not fit; of `lo`, it does
    while lo < hi:  # longest prefix whose token count fits
        mid = (lo + hi + 1) // 2
        if (backend.count_tokens(passage[:mid]) or 0) <= budget:
            lo = mid
        else:
            hi = mid - 1
    kept = passage[:lo]
    return kept, _record(passage, lo, backend.count_tokens(kept) or 0, n)


# Characters a token covers on ordinary text, generously (English averages about 4): the first
# head tokenized is this many per token of the budget and the margin, then it grows by HEAD_GROWTH until it holds
# HEAD_MARGIN tokens beyond the budget, or reaches the bound of the longest token.
TYPICAL_TOKEN_CHARS = 8
HEAD_GROWTH = 4
# Tokens a head must hold beyond the budget for its cut to be the passage's: the last words of a
# head may be tokenized otherwise once the text goes on, never the ones this far before its end.
HEAD_MARGIN = 64


def truncate_passage(passage: str, budget: int | None,
                     backend: Backend) -> tuple[str, dict[str, int | None] | None]:
    """Return the passage cut to `budget` tokens (at a character boundary) and a record of the cut.

    What is tokenized grows with the cut, not with the passage: a passage longer than (budget + 1)
    x the longest token (the head a cut could ever need) is cut from a head of TYPICAL_TOKEN_CHARS
    characters a token (of the budget and the margin) first: one tokenization for ordinary text, grown HEAD_GROWTH-fold while it
    holds no more than the budget and a margin, up to that bound. A shorter one is tokenized
    whole. A bound read wrongly (its head fits) tokenizes the whole passage."""
    if budget is None:
        return passage, None
    # a token covers at least one character, so a passage this short is its own head
    per_token = backend.max_token_chars() if len(passage) > budget + 1 else None
    bound = len(passage) if per_token is None else min(len(passage), (budget + 1) * per_token)
    # within the bound the passage is tokenized whole, as before, so its record keeps its token
    # count (stored bytes unchanged); only a passage longer than any cut could need is cut from
    # a growing head (its record, as before, says it was not counted whole)
    size = bound if bound == len(passage) else min(bound, (budget + 1 + HEAD_MARGIN) * TYPICAL_TOKEN_CHARS)
    while True:
        head = passage[:size]
        found = backend.token_prefix(head, budget)
        if found is None or size >= bound or found[0] > budget + HEAD_MARGIN:
            break
        size = min(bound, size * HEAD_GROWTH)
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
