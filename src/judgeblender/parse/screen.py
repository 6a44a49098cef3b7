"""What no parser reads as an answer, whatever the step asks for (a label, a yes/no, a JSON
verdict or free text): an empty answer, and a degenerate one.

A model caught in a loop writes the same number again and again ("1, 1, 1, ...", "3 3 3 ...",
one a line) until the token limit cuts it or, often enough, until it stops with a normal
finish_reason "stop". Each parser on its own would read such a text as an answer (the lone
number, the last line, the score of a verdict whose list of scores repeats), and the finish
reason cannot tell it apart either. The text is a failure of generation, not a judgment, so
every parser screens the answer here first and calls it invalid ("degenerate answer") before
any of its rules look for a label.

The same number is one value however it is written ("3", "3.0", "03", full-width "３":
digits of any script, as the parsers read them); "in a row" means nothing but whitespace and
punctuation between the occurrences: a word or another number ends the run. Linear in the
answer's length: one pass over its numbers, each gap looked at once.
"""

from __future__ import annotations

import re
from decimal import Decimal

from ..errors import shown

# An answer repeating one number this many times in a row is degenerate. No rubric asks for a
# list of twenty equal numbers; a judge asked for one label that gives twenty is looping.
DEGENERATE_REPEATS = 20

_NUMBER = re.compile(r"\d+(?:\.\d+)?")  # \d: digits of any script, as the label parser reads them
_WORD = re.compile(r"\w")  # a letter (or a digit, or "_") in the gap ends a run


def _value(number: str) -> int | Decimal:
    """A number's value, for comparing: int and Decimal both read every script's digits and
    compare equal across types (3 == Decimal("3.0")); int is the quicker, Decimal takes any
    length (int refuses strings of over 4,300 digits)."""
    return int(number) if len(number) <= 100 and "." not in number else Decimal(number)


def degenerate(text: str) -> str | None:
    """Why `text` is a degenerate answer (one number DEGENERATE_REPEATS or more times in a row),
    or None."""
    run, last, gap_from = 0, None, 0
    for m in _NUMBER.finditer(text):
        value = _value(m.group())
        if run and value == last and not _WORD.search(text, gap_from, m.start()):
            run += 1
            if run >= DEGENERATE_REPEATS:
                return f"degenerate answer: {shown(m.group(), 24)} repeated {DEGENERATE_REPEATS} or more times in a row"
        else:
            run, last = 1, value
        gap_from = m.end()
    return None


def non_answer(text: str | None) -> str | None:
    """Why `text` is no answer at all, for any step (empty, or degenerate), or None. Every
    parser asks this first, so each kind of answer refuses these the same way."""
    if text is None or not text.strip():
        return "empty output"
    return degenerate(text)
