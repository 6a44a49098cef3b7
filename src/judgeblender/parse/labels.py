"""Read a graded label (e.g. TREC 0-3) out of free model text, on the step's own scale.

Rules, strongest first; within a rule the LAST match wins, because models restate the
instructions before answering:
  1. "final score" (with "##", "(O)", ":" or "=" variants, markdown or quotes around the
     key): the format UMBRELA asks for;
  2. the UMBRELA component "O: X" / "O = X" (overall), which beats M and T;
  3. an explicit answer key: "score", "relevance", "category", "label", "grade", "answer",
     "rating" (a parenthesised note may follow the key: "Score (0-3): 2"); then
     "X out of N" / "X/N";
  4. the last non-empty line holding only a number (markdown and punctuation allowed),
     or "N: X" on that line (a numbered answer: X is the value);
  5. any lone in-scale number left after removing scale descriptions such as "0 to 3",
     "0-3", "0, 1, 2 or 3", "out of 3" and "3 = ..." definitions, provided exactly one
     value remains.

The scale is the step's own, passed by the caller: 0-3 for the relevance prompts, 1-3 for
the second step of sun-two-step. The number a rule finds must state ONE integer of that
scale. It is invalid, with the reason, and never read as its numerator or first digit, when
  - it is a fraction or "X out of N" whose N is not the scale's top ("2/3" and "2 out of 3"
    read as 2 on 0-3; "2/4", "3 out of 5", "1/10" are invalid);
  - it is a range or a choice ("2-3", "2 to 3", "2 or 3"), has a decimal part ("2.5", or
    "2,5" with a decimal comma; "2.0" reads as 2) or is a percentage;
  - its clause (its line, up to a sentence end, at most 160 characters each side) names
    another scale: "1 (on a 1-5 scale)", "2 on a scale of 1-10", "Score (1-5): 2", "on a
    5-point scale", "out of 10"; naming the step's own scale ("2 (on a 0-3 scale)") is fine.
Digits of any script read as their value (Python's \\d and float: "٢" is 2). A number
outside the scale, several conflicting candidates, or no candidate at all gives an invalid
result with the reason. Nothing ever defaults to 0. Before any rule, the answer is screened
as every parser's is (`screen.non_answer`): empty, or one number 20 or more times in a row
("1, 1, 1, ..."), it is invalid, not the repeated number. Logprobs mode reads each top token
with this parser too (`tokens.token_choice`), so both modes read one digit the same way.

The work is linear in the answer's length: in the patterns run over the whole answer no two
repeated parts can match the same characters (so a long run of spaces or digits cannot make
the regex engine backtrack over it again and again; the patterns that look at what follows a
number see at most 160 characters),
and the scales an answer names and its sentence ends are found once per answer, not once per
number (bench/parse_cost.py times degenerate 40 KB answers).
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .screen import non_answer

NUM = r"(-?\d+(?:\.\d+)?)"
# A pattern that begins with a number begins where a run of digits begins: tried inside a run,
# it would scan the rest of the run again at every digit (quadratic in a 300-digit run).
_AT_RUN_START = r"(?<!\d)"
_DASH = r"(?:-|–|—|‐|−|~|\.\.|to|through)"
_RANGE = r"(\d+)\s*" + _DASH + r"\s*(\d+)"
_WORDS = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten".split())}
_NUMBER_WORD = r"(\d+|(?:zero|one|two|three|four|five|six|seven|eight|nine|ten)\b)"
# Between a key and its value: markdown or quotes, an optional note in parentheses ("Final
# score (O): 3", "Score (0-3): 2"), "is"/"of", a colon or equals sign. Each run of marks
# follows a token it needs, so no two runs compete for the same characters (no backtracking
# blow-up on long runs of spaces).
_MARKS = r"[\s*_`\"']*"
_SEP = (_MARKS + r"(?:\([^()\n]{0,40}\)" + _MARKS + r")?(?:(?:is|of|was)\b" + _MARKS + r")?(?:[:=]" + _MARKS
        + r")?\[?")

_FINAL = re.compile(r"final[\s_-]*score" + _SEP + NUM, re.I)
_OVERALL = re.compile(r"(?<![a-z0-9])o\s*[:=][\s*]*" + NUM, re.I)
# "Confidence score: 1" is the model's confidence, not its answer
_KEYED = re.compile(r"(?<!confidence\s)(?<!certainty\s)(?<!confidence_)(?<!certainty_)"
                    r"(?:relevance\s+)?(?:score|relevance|category|label|grade|answer|rating)" + _SEP + NUM, re.I)
_OUT_OF = re.compile(_AT_RUN_START + NUM + r"\s*(?:out\s+of|/)\s*\d+", re.I)
_LINE_ONLY = re.compile(r"^[\s#*`\"'\[\(]*" + NUM + r"[\s*`\"'\]\).]*$")
_LINE_NUMBERED = re.compile(r"^[\s#*]*\d+\s*[:.)]\s*" + NUM + r"[\s*.]*$")
# Scale descriptions that mention every level and must not be read as the answer.
_SCALE_TEXT = [
    re.compile(_AT_RUN_START + r"\d+\s*(?:-|–|—|to|through)\s*\d+", re.I),
    re.compile(r"(?m)^[ \t]*[\"']?\d+[\"']?[ \t]*(?:=|:)[ \t]*[a-z].*$", re.I),
    re.compile(r"[\"']\d+[\"']\s+represents?", re.I),
    re.compile(r"(?:out\s+of|/)\s*\d+", re.I),  # "out of 3": the scale's top, not an answer
]
# "0, 1, 2 or 3": a run of comma-separated numbers (found in one linear pass) that ends in "or/and N"
_NUMBER_LIST = re.compile(_AT_RUN_START + r"\d+(?:\s*,\s*\d+)+")
_LIST_END = re.compile(r"\s*,?\s*(?:or|and)\s*\d+", re.I)
_LONE = re.compile(r"(?<![\w.])" + NUM + r"(?![\w.]|\.\d)")

# What follows the number itself (after closing markdown or quotes).
_CLOSING = re.compile(r"[*_`\"'\]]*")
_DECIMAL_COMMA = re.compile(r",\d")
_SPAN = re.compile(r"\s*(?:->|=>|→|⇒|⟶|-|–|—|‐|−|~|to\b|through\b|or\b|and\b)\s*[*_`\"']*-?\d", re.I)
_VULGAR = re.compile("[\u00bc-\u00be\u2150-\u215e]")  # ½, ⅓, ¾ ...: "1½" is not one label
_FRACTION = re.compile(r"\)?\s*\(?\s*(?:points?\s+)?(?:/|out\s+of\b|of\b)\s*"
                       r"(?:a\s+(?:possible|maximum(?:\s+of)?|total\s+of)\s+)?" + _NUMBER_WORD, re.I)
_PERCENT = re.compile(r"\s*(?:%|percent\b)", re.I)
# A scale named near the number: (kind, pattern); kinds: a range lo-hi, a top N, N levels.
_MENTIONS = [
    ("range", re.compile(r"scale(?:\s+(?:of|from))?[\s\"':=(\[]*" + _RANGE, re.I)),
    ("range", re.compile(_AT_RUN_START + _RANGE + r"[\s)\]\"']*(?:-?point\s+)?(?:scale|range|rubric)\b", re.I)),
    ("range", re.compile(r"likert\W{0,3}" + _RANGE, re.I)),
    ("range", re.compile(r"\[\s*" + _RANGE + r"\s*\]", re.I)),
    ("range", re.compile(r"\(\s*" + _RANGE + r"\s*\)", re.I)),
    ("levels", re.compile(_AT_RUN_START + _NUMBER_WORD + r"[\s-]*(?:point|level|star)\s+(?:scale|rating|likert)",
                          re.I)),
    ("top", re.compile(r"\bmax(?:imum)?\W{0,3}" + _NUMBER_WORD, re.I)),
    ("top", re.compile(r"scale\s+of\s+(\d+)\b(?!\s*" + _DASH + r"\s*\d)", re.I)),
    ("top", re.compile(r"out\s+of\s+(?:a\s+(?:possible|maximum(?:\s+of)?|total\s+of)\s+)?" + _NUMBER_WORD, re.I)),
]
def _whole(word: str) -> int:
    """A scale's number as written: digits, or a number word ("five")."""
    return int(word) if word.isdigit() else _WORDS[word.lower()]


_BOUNDARY = re.compile(r"\n|[.;!?](?=\s)")
_WINDOW = 160  # at most this many characters on each side of the number belong to its clause


@dataclass(frozen=True)
class ParseResult:
    label: int | None
    invalid_reason: str | None = None
    rule: str | None = None

    @property
    def valid(self) -> bool:
        return self.label is not None


def _scale_text(scale: tuple[int, ...]) -> str:
    return f"{min(scale)}-{max(scale)}"


def _level(raw: str, scale: tuple[int, ...]) -> int | None:
    value = float(raw)
    return int(value) if math.isfinite(value) and value == int(value) and int(value) in scale else None


class _Context:
    """What the checks need to know about the whole text, found once in linear passes: where
    its clauses end, and every scale it names (start, end, the step's own?, as written)."""

    def __init__(self, text: str, scale: tuple[int, ...]):
        self.text, self.scale = text, scale
        self.ends = [m.end() for m in _BOUNDARY.finditer(text)]  # a clause starts here
        self.stops = [m.start() for m in _BOUNDARY.finditer(text)]  # a clause ends here
        mentions = []
        for kind, pattern in _MENTIONS:
            for m in pattern.finditer(text):
                numbers = [_whole(g) for g in m.groups()]
                same = (numbers == [min(scale), max(scale)] if kind == "range" else
                        numbers[0] == max(scale) if kind == "top" else numbers[0] == len(scale))
                if not same:
                    mentions.append((m.start(), m.end(), m.group(0).strip()))
        mentions.sort()
        self.other_starts = [m[0] for m in mentions]
        self.other = mentions

    def other_scale(self, start: int, end: int) -> str | None:
        """Another scale named in the clause of text[start:end] (its line, up to a sentence end,
        at most _WINDOW characters each side), as written; else None."""
        i = bisect.bisect_right(self.ends, start)
        lo = max(self.ends[i - 1] if i else 0, start - _WINDOW)
        j = bisect.bisect_left(self.stops, end)
        hi = min(self.stops[j] if j < len(self.stops) else len(self.text), end + _WINDOW)
        k = bisect.bisect_left(self.other_starts, lo)
        while k < len(self.other) and self.other[k][0] < hi:
            if self.other[k][1] <= hi:
                return self.other[k][2]
            k += 1
        return None


def named_other_scale(text: str, scale: tuple[int, ...]) -> str | None:
    """The first scale `text` names that is not `scale` ("1-5", "five-point scale", "max 10"), as
    written; else None. For JSON verdicts, whose number has no clause of prose around it."""
    ctx = _Context(text, scale)
    return ctx.other[0][2] if ctx.other else None


def _off_scale(ctx: _Context, start: int, end: int) -> str | None:
    """Why the number ctx.text[start:end] is not one integer of the step's scale, or None."""
    text, scale = ctx.text, ctx.scale
    after = text[end:end + _WINDOW]
    after = after[_CLOSING.match(after).end():]
    number = text[start:end]
    if _DECIMAL_COMMA.match(after):
        return f"{number}{after[:2]} has a decimal comma, not one label"
    if start >= 2 and _DECIMAL_COMMA.match(text[start - 1:start + 1]) and text[start - 2].isdigit():
        return f"{text[start - 2:start]}{number} has a decimal comma, not one label"
    span = _SPAN.match(after)
    if span:
        return f"{number}{span.group(0)} is a range or a choice, not one label"
    if _PERCENT.match(after):
        return f"{number}% is a percentage, not a label on the scale {_scale_text(scale)}"
    if _VULGAR.match(after):
        return f"{number}{after[0]} is a fraction, not one label"
    fraction = _FRACTION.match(after)
    if fraction and _whole(fraction.group(1)) != max(scale):
        return f"{number} out of {_whole(fraction.group(1))} is not on the scale {_scale_text(scale)}"
    other = ctx.other_scale(start, end)
    if other is not None:
        return f"{number} is stated on another scale ({other!r}), not the scale {_scale_text(scale)}"
    return None


def _read(ctx: _Context, start: int, end: int, rule: str) -> ParseResult:
    raw, scale = ctx.text[start:end], ctx.scale
    try:
        value = float(raw)
    except ValueError:
        return ParseResult(None, f"{rule}: not a number ({raw!r})", rule)
    if not math.isfinite(value) or value != int(value) or int(value) not in scale:
        return ParseResult(None, f"{rule}: {raw[:20]}{'...' if len(raw) > 20 else ''} is not a label in {list(scale)}",
                           rule)
    reason = _off_scale(ctx, start, end)
    if reason is not None:
        return ParseResult(None, f"{rule}: {reason}", rule)
    return ParseResult(int(value), None, rule)


def _last(pattern: re.Pattern, text: str) -> re.Match | None:
    found = None
    for found in pattern.finditer(text):
        pass
    return found


# Answers of a format like UMBRELA's ("##final score: 2") repeat: of a run's answers, most are one
# of a few texts. A short answer's result is kept (ParseResult is immutable), so a repeat costs a
# lookup, not the rules' dozen regular-expression scans (a fifth of the driver's CPU per call
# under Ray, bench/driver.py); at most MEMO_ANSWERS of at most MEMO_CHARS characters each.
MEMO_ANSWERS, MEMO_CHARS = 4096, 256


def parse_grade(text: str | None, scale: Iterable[int] = (0, 1, 2, 3)) -> ParseResult:
    """The label `text` states on `scale` (the step's own levels), or invalid with the reason."""
    scale = tuple(scale)
    if text is not None and len(text) <= MEMO_CHARS:
        return _parse_short(str(text), scale)
    return _parse_grade(text, scale)


@functools.lru_cache(maxsize=MEMO_ANSWERS)
def _parse_short(text: str, scale: tuple[int, ...]) -> ParseResult:
    return _parse_grade(text, scale)


def _parse_grade(text: str | None, scale: tuple[int, ...]) -> ParseResult:
    refused = non_answer(text)
    if refused is not None:
        return ParseResult(None, refused, None)
    for rule, pattern in (("final score", _FINAL), ("O:", _OVERALL), ("keyed answer", _KEYED), ("out of", _OUT_OF)):
        m = _last(pattern, text)
        if m is not None:
            return _read(_Context(text, scale), m.start(1), m.end(1), rule)
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    last = lines[-1]
    for rule, pattern in (("last line", _LINE_ONLY), ("numbered last line", _LINE_NUMBERED)):
        m = pattern.match(last)
        if m:
            return _read(_Context(last, scale), m.start(1), m.end(1), rule)
    stripped = text  # blanked to the same length, so positions still point into `text`
    for pattern in _SCALE_TEXT:
        stripped = pattern.sub(lambda m: " " * len(m.group(0)), stripped)
    pieces, at = [], 0
    for m in _NUMBER_LIST.finditer(stripped):
        end = _LIST_END.match(stripped, m.end())
        if end:
            pieces += [stripped[at:m.start()], " " * (end.end() - m.start())]
            at = end.end()
    stripped = "".join(pieces) + stripped[at:]
    found = [(m, _level(m.group(1), scale)) for m in _LONE.finditer(stripped)]
    in_scale = sorted({level for _, level in found if level is not None})
    if len(in_scale) > 1:
        return ParseResult(None, f"ambiguous: several labels mentioned ({', '.join(map(str, in_scale))})", None)
    if not in_scale:
        return ParseResult(None, "no label found", None)
    ctx = _Context(text, scale)
    for m, level in found:
        if level is not None:
            reason = _off_scale(ctx, m.start(1), m.end(1))
            if reason is not None:
                return ParseResult(None, f"lone number: {reason}", "lone number")
    return ParseResult(in_scale[0], None, "lone number")
