"""Read a Yes/No answer (step 1 of Sun et al.'s two-step judge)."""

from __future__ import annotations

import re

from .labels import ParseResult
from .screen import non_answer

_WORD = re.compile(r"\b(yes|no)\b", re.I)
_LEAD = re.compile(r"^[\s#*`\"'‘’“”\[\(]*(?:answer\s*:\s*)?[\s*`\"'‘’“”]*(yes|no)\b", re.I)

YES, NO = 1, 0


def parse_yesno(text: str | None) -> ParseResult:
    """Yes -> label 1, No -> label 0. The leading word decides; otherwise a single kind of
    answer word must appear in the text, else the output is invalid (never a guess)."""
    refused = non_answer(text)
    if refused is not None:
        return ParseResult(None, refused, None)
    m = _LEAD.match(text)
    if m:
        return ParseResult(YES if m.group(1).lower() == "yes" else NO, None, "leading word")
    words = {w.lower() for w in _WORD.findall(text)}
    if words == {"yes"}:
        return ParseResult(YES, None, "only answer word")
    if words == {"no"}:
        return ParseResult(NO, None, "only answer word")
    if words:
        return ParseResult(None, "ambiguous: both yes and no appear", None)
    return ParseResult(None, "no yes/no answer found", None)
