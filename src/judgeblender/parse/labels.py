"""Read a graded label (e.g. TREC 0-3) out of free model text.

Rules, strongest first; within a rule the LAST match wins, because models restate the
instructions before answering:
  1. "final score" (with "##", "(O)", ":" or "=" variants): the format UMBRELA asks for;
  2. the UMBRELA component "O: X" / "O = X" (overall), which beats M and T;
  3. an explicit answer key: "score", "relevance", "category", "label", "grade", "answer";
     then "X out of N" / "X/N";
  4. the last non-empty line holding only a number (markdown and punctuation allowed),
     or "N: X" on that line (a numbered answer: X is the value);
  5. any lone in-scale number left after removing scale descriptions such as "0 to 3",
     "0-3", "0, 1, 2 or 3" and "3 = ..." definitions, provided exactly one value remains.
A number outside the scale, several conflicting candidates, or no candidate at all gives
an invalid result with the reason. Nothing ever defaults to 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

NUM = r"(-?\d+(?:\.\d+)?)"

_FINAL = re.compile(r"final[\s_-]*score\s*(?:\(\s*o\s*\))?\s*(?:is|of)?\s*[:=]?\s*\**\s*" + NUM, re.I)
_OVERALL = re.compile(r"(?<![a-z0-9])o\s*[:=]\s*\**\s*" + NUM, re.I)
_KEYED = re.compile(
    r"(?:relevance\s+)?(?:score|relevance|category|label|grade|answer|rating)\s*(?:is|of)?\s*[:=]?\s*\**\s*\[?" + NUM,
    re.I,
)
# A match never starts inside a run of digits, nor inside a comma list, so that degenerate
# answers (long digit runs, "1, 1, 1, ...") cost time linear in their length: a match that
# could start there also starts where the run or list starts.
_OUT_OF = re.compile(r"(?<!\d)" + NUM + r"\s*(?:out\s+of|/)\s*\d+", re.I)
_LINE_ONLY = re.compile(r"^[\s#*`\"'\[\(]*" + NUM + r"[\s*`\"'\]\).]*$")
_LINE_NUMBERED = re.compile(r"^[\s#*]*\d+\s*[:.)]\s*" + NUM + r"[\s*.]*$")
# Scale descriptions that mention every level and must not be read as the answer.
_SCALE_TEXT = [
    re.compile(r"(?<!\d)\d+\s*(?:-|–|to|through)\s*\d+", re.I),
    re.compile(r"(?<!\d)(?<!\d,)(?<!\d\s,)(?<!\d,\s)(?<!\d\s,\s)(?:\d+\s*,\s*)+\d+\s*,?\s*(?:or|and)\s*\d+", re.I),
    re.compile(r"(?m)^\s*[\"']?\d+[\"']?\s*(?:=|:)\s*[a-z].*$", re.I),
    re.compile(r"[\"']\d+[\"']\s+represents?", re.I),
]
_LONE = re.compile(r"(?<![\w.])" + NUM + r"(?![\w.]|\.\d)")
# Whitespace runs become one space, or one line break when they hold one, before any rule is
# tried: no rule counts whitespace, and patterns with several \s* in a row would otherwise try
# every way of sharing a long run between them (time polynomial in its length).
_BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines splits on
_SPACE_RUN = re.compile(f"[^\\S{_BREAKS}]+")
_BREAK_RUN = re.compile(f" ?[{_BREAKS}]\\s*")


@dataclass(frozen=True)
class ParseResult:
    label: int | None
    invalid_reason: str | None = None
    rule: str | None = None

    @property
    def valid(self) -> bool:
        return self.label is not None


def _as_label(raw: str, scale: tuple[int, ...], rule: str) -> ParseResult:
    try:
        value = float(raw)
    except ValueError:
        return ParseResult(None, f"{rule}: not a number ({raw!r})", rule)
    if not math.isfinite(value) or value != int(value) or int(value) not in scale:
        return ParseResult(None, f"{rule}: {raw} is not a label in {list(scale)}", rule)
    return ParseResult(int(value), None, rule)


def _last(pattern: re.Pattern, text: str) -> str | None:
    found = pattern.findall(text)
    return found[-1] if found else None


def parse_grade(text: str | None, scale: Iterable[int] = (0, 1, 2, 3)) -> ParseResult:
    scale = tuple(scale)
    if text is None or not text.strip():
        return ParseResult(None, "empty output", None)
    text = _BREAK_RUN.sub("\n", _SPACE_RUN.sub(" ", text))
    for rule, pattern in (("final score", _FINAL), ("O:", _OVERALL), ("keyed answer", _KEYED), ("out of", _OUT_OF)):
        raw = _last(pattern, text)
        if raw is not None:
            return _as_label(raw, scale, rule)
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    last = lines[-1]
    for rule, pattern in (("last line", _LINE_ONLY), ("numbered last line", _LINE_NUMBERED)):
        m = pattern.match(last)
        if m:
            return _as_label(m.group(1), scale, rule)
    stripped = text
    for pattern in _SCALE_TEXT:
        stripped = pattern.sub(" ", stripped)
    values = {float(v) for v in _LONE.findall(stripped)}
    in_scale = sorted({int(v) for v in values if math.isfinite(v) and v == int(v) and int(v) in scale})
    if len(in_scale) == 1:
        return ParseResult(in_scale[0], None, "lone number")
    if len(in_scale) > 1:
        return ParseResult(None, f"ambiguous: several labels mentioned ({', '.join(map(str, in_scale))})", None)
    return ParseResult(None, "no label found", None)
