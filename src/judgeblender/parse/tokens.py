"""Which answer a single next token stands for, in logprobs mode: read by the parser that reads
the same step's answer in generate mode.

Logprobs mode asks for one token and reads the model's top alternatives (or, in process, the
vocabulary entries) as votes for the step's choices. A token counts for a choice exactly when
generate mode, given that token as the whole answer, would read that choice: "2", " 2", "2.",
"**2" and full-width "２", Arabic-Indic "٢", Devanagari "२" (any script's digit, as
`parse_grade` reads digits) all stand for label 2; "10" on the 0-3 scale, "2/4" or "Score"
stand for nothing. A yes/no step's tokens are read by `parse_yesno` ("yes", " Yes", "NO").
So there is one reading of a digit, not one per mode: a model that writes "３" has its mass on
label 3 in either mode, never dropped in one and read in the other.

Choices that are neither a scale's labels nor Yes/No (a caller's own) keep the plain rule: the
token, stripped of whitespace, equals the choice.
"""

from __future__ import annotations

import functools
import re

from .labels import parse_grade
from .yesno import NO, YES, parse_yesno

_DIGIT = re.compile(r"\d")  # parse_grade finds a label only where a digit is
_YES_NO = re.compile(r"yes|no", re.I)  # parse_yesno finds an answer only where one of these is
_ASCII_INTEGER = re.compile(r"(?:0|[1-9][0-9]*)\Z")


@functools.lru_cache(maxsize=64)
def _reader(choices: tuple[str, ...]) -> tuple[str, tuple[int, ...]]:
    """How tokens are read for these choices: ("grade", scale), ("yesno", ()) or ("exact", ())."""
    if choices and sorted(choices) == ["No", "Yes"]:
        return "yesno", ()
    if choices and all(_ASCII_INTEGER.match(c) for c in choices):
        return "grade", tuple(int(c) for c in choices)
    return "exact", ()


@functools.lru_cache(maxsize=8192)
def token_choice(token: str, choices: tuple[str, ...]) -> str | None:
    """The choice in `choices` that `token` stands for, read as generate mode reads an answer
    (see the module doc), or None. Cached: a model's top tokens are few distinct strings."""
    return read_token(token, choices)


def read_token(token: str, choices: tuple[str, ...]) -> str | None:
    """token_choice without its cache, for a pass over a whole vocabulary (each entry once)."""
    plain = token.strip()
    if plain in choices:  # what either parser reads a bare choice as, without running it
        return plain
    kind, scale = _reader(choices)
    if kind == "grade":
        if not _DIGIT.search(token):
            return None
        label = parse_grade(token, scale).label
        return None if label is None else str(label)
    if kind == "yesno":
        if not _YES_NO.search(token):
            return None
        label = parse_yesno(token).label
        return {YES: "Yes", NO: "No"}.get(label) if label is not None else None
    return None
