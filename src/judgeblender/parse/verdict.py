"""Read a JSON verdict such as {"score": 0.8, "reason": "..."} from model text.

Safe repairs only: a verdict wrapped in prose or a ``` fence is cut out (the first balanced
{...} object), trailing commas before } or ] are dropped, and raw control characters (a
newline, a tab) inside a string are read as themselves (llama-cpp-python's JSON grammar lets
a model write them). The object is then validated
against the step's JSON schema (types of the declared properties, required fields) with a
pydantic model built from it, and the score must lie on the template's scale. Types are
checked strictly, as JSON Schema defines them: a score of true or "0.8" is the wrong type, not
1.0 or 0.8 (only an integral number such as 2.0 counts as an integer). Anything else is an
invalid verdict with its reason, never a score.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, ValidationError, create_model

_TRAILING_COMMA = re.compile(r",\s*([}\]])")
# JSON Schema calls 2.0 an integer; pydantic's strict int would not.
_JSON_INT = Annotated[int, BeforeValidator(lambda v: int(v) if isinstance(v, float) and v.is_integer() else v)]
_TYPES: dict[str, Any] = {"number": float, "integer": _JSON_INT, "string": str, "boolean": bool, "array": list,
                          "object": dict}


@dataclass(frozen=True)
class Verdict:
    score: float | None
    reason: str | None = None
    data: dict[str, Any] | None = None
    invalid_reason: str | None = None
    repaired: bool = False

    @property
    def valid(self) -> bool:
        return self.score is not None


def _first_object(text: str) -> str | None:
    start = text.find("{")
    while start != -1:
        depth, in_str, esc = 0, False, False
        for i in range(start, len(text)):
            c = text[i]
            if in_str:
                esc = (c == "\\") and not esc
                if c == '"' and not esc:
                    in_str = False
                continue
            if c == '"':
                in_str = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i + 1]
        start = text.find("{", start + 1)
    return None


def _decode_error(text: str) -> str:
    """What json says about the text from its first '{' on."""
    fragment = text[text.find("{"):]
    try:
        json.loads(fragment)
    except json.JSONDecodeError as exc:
        return f"{exc.msg}, column {exc.colno}"
    return "unbalanced braces"


def _model_for(schema: dict[str, Any]):
    props = schema.get("properties", {})
    required = set(schema.get("required", props))
    fields = {}
    for name, spec in props.items():
        typ = _TYPES.get(spec.get("type", "string"), Any)
        fields[name] = (typ, ...) if name in required else (typ | None, None)
    return create_model("Verdict", **fields)


def parse_verdict(text: str | None, schema: dict[str, Any], score_field: str = "score",
                  reason_field: str | None = "reason", levels: list[int] | None = None,
                  score_range: list[float] | None = None) -> Verdict:
    if text is None or not text.strip():
        return Verdict(None, invalid_reason="empty output")
    repaired = False
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        block = _first_object(text)
        if block is None:
            if "{" in text:  # an object that never closes: most often output cut off at max_tokens
                return Verdict(None, invalid_reason=f"broken JSON: the object never closes ({_decode_error(text)})")
            return Verdict(None, invalid_reason="no JSON object found")
        cleaned = _TRAILING_COMMA.sub(r"\1", block)
        try:
            data = json.loads(cleaned, strict=False)  # strict=False: raw newlines/tabs inside a string
        except json.JSONDecodeError as exc:
            return Verdict(None, invalid_reason=f"broken JSON: {exc.msg} at column {exc.colno}")
        repaired = True
    if not isinstance(data, dict):
        return Verdict(None, invalid_reason=f"expected a JSON object, got {type(data).__name__}")
    try:
        checked = _model_for(schema).model_validate(data, strict=True).model_dump()
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return Verdict(None, data=data, invalid_reason=f"does not match the schema: {problems}")
    raw_score = checked.get(score_field, data.get(score_field))
    if isinstance(raw_score, bool) or not isinstance(raw_score, (int, float)) or not math.isfinite(raw_score):
        return Verdict(None, data=data, invalid_reason=f"field {score_field!r} is not a number: {raw_score!r}")
    score = float(raw_score)
    if score_range is not None and not (score_range[0] <= score <= score_range[1]):
        return Verdict(None, data=data, invalid_reason=f"score {score} outside {score_range}")
    if score_range is None and levels is not None and score not in levels:
        return Verdict(None, data=data, invalid_reason=f"score {raw_score} is not a level in {levels}")
    reason = checked.get(reason_field) if reason_field else None
    return Verdict(score, reason if isinstance(reason, str) else None, data, None, repaired)
