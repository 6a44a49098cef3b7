"""Read a JSON verdict such as {"score": 0.8, "reason": "..."} from model text.

The verdict is the model's last word. The candidates are the JSON objects in the answer that
validate against the step's JSON schema (types of the declared properties, required fields,
checked with a pydantic model built from it); an object identical to the template's own
example (`template_examples`: the objects written in the step's prompt text) is dropped,
since a model that restates its instructions is not giving a verdict; the verdict is the last
remaining candidate, and its score must lie on the template's scale (no earlier object is
taken instead). An object that repeats a key with different values ({"score": 1, "score": 3})
contradicts itself: as the verdict it is invalid with the reason (an identical repeat is fine).

Finding the objects: one left-to-right pass pairs the braces (braces inside JSON strings are
skipped, an unclosed '{' pairs with nothing), so scanning is linear in the answer's length;
each outermost pair is parsed, and only a pair that is not JSON (prose in braces) is opened to
look for objects inside it, at most `_MAX_DEPTH` levels deep, so the parsing work is bounded
by that depth times the answer's length.

Safe repairs only: a verdict wrapped in prose or a ``` fence is cut out, trailing commas
before } or ] are dropped, and raw control characters (a newline, a tab) inside a string are
read as themselves (llama-cpp-python's JSON grammar lets a model write them). Types are
checked strictly, as JSON Schema defines them: a score of true or "0.8" is the wrong type, not
1.0 or 0.8 (only an integral number such as 2.0 counts as an integer). Anything else is an
invalid verdict with its reason, never a score. An empty or degenerate answer (a number
repeated 20 or more times in a row, in the object or around it) is screened out first, as
every parser does (`screen.non_answer`).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BeforeValidator, ValidationError, create_model

from .labels import named_other_scale
from .screen import non_answer

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


_SPECIAL = re.compile(r'[{}"\\]')
_MAX_DEPTH = 8  # levels of non-JSON braces opened to look for an object inside


@dataclass
class _Span:
    start: int
    end: int  # one past the closing brace
    children: list["_Span"] = field(default_factory=list)


def _brace_pairs(text: str) -> list[_Span]:
    """The outermost balanced {...} pairs in `text`, each with the pairs nested in it; one pass.

    Quotes count only inside an open brace (prose between objects may hold a stray quote); an
    unclosed '{' pairs with nothing and encloses nothing."""
    opened: list[int] = []
    closed: list[tuple[int, int]] = []
    in_str, escaped = False, -1  # escaped: the position a backslash in a string escapes
    for m in _SPECIAL.finditer(text):  # only braces, quotes and backslashes matter
        i, c = m.start(), m.group(0)
        if in_str:
            if i == escaped:
                continue
            if c == "\\":
                escaped = i + 1
            elif c == '"':
                in_str = False
        elif c == "{":
            opened.append(i)
        elif c == "}" and opened:
            closed.append((opened.pop(), i + 1))
        elif c == '"' and opened:
            in_str = True
    roots: list[_Span] = []
    stack: list[_Span] = []
    for start, end in sorted(closed):  # pairs nest properly: a sweep by start builds the tree
        while stack and stack[-1].end <= start:
            stack.pop()
        span = _Span(start, end)
        (stack[-1].children if stack else roots).append(span)
        stack.append(span)
    return roots


class _Object(dict):
    """A decoded JSON object that remembers the keys it (or an object inside it) repeats with
    different values."""

    conflicts: list[str]


def _conflicts_in(value: Any) -> list[str]:
    if isinstance(value, _Object):
        return value.conflicts
    if isinstance(value, list):
        return [c for item in value for c in _conflicts_in(item)]
    return []


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    """json's object_pairs_hook: the object, noting each key repeated with a different value
    (written differently: 1 and 1.0 differ); json itself would keep the last silently."""
    obj, conflicts = _Object(), []
    for key, value in pairs:
        conflicts += _conflicts_in(value)
        if key in obj and json.dumps(obj[key], sort_keys=True) != json.dumps(value, sort_keys=True):
            conflicts.append(f"key {key!r} appears twice with different values "
                             f"({json.dumps(obj[key])} and {json.dumps(value)})")
        obj[key] = value
    obj.conflicts = conflicts
    return obj


# one decoder each, built once (json.loads with a hook would build one per call)
_STRICT = json.JSONDecoder(object_pairs_hook=_object)
_LENIENT = json.JSONDecoder(object_pairs_hook=_object, strict=False)  # raw newlines/tabs in strings


@dataclass
class _Parsed:
    start: int
    data: Any
    conflicts: list[str]
    repaired: bool


def _loads(block: str, strict: bool = True) -> tuple[Any, list[str]]:
    data = (_STRICT if strict else _LENIENT).decode(block)
    return data, _conflicts_in(data)


def _objects(text: str) -> tuple[list[_Parsed], list[tuple[int, str]]]:
    """The JSON objects in the text, in order, and the brace pairs that are not JSON (where
    each starts, and what json said)."""
    found: list[_Parsed] = []
    broken: list[tuple[int, str]] = []

    def visit(span: _Span, depth: int) -> None:
        block = text[span.start:span.end]
        try:
            data, conflicts = _loads(block)
            repaired = False
        except (json.JSONDecodeError, RecursionError):
            try:
                data, conflicts = _loads(_TRAILING_COMMA.sub(r"\1", block), strict=False)
                repaired = True
            except json.JSONDecodeError as exc:
                broken.append((span.start, f"{exc.msg} at column {exc.colno}"))
                data = None
            except RecursionError:
                broken.append((span.start, "nested too deeply"))
                data = None
        if data is not None:
            found.append(_Parsed(span.start, data, conflicts, repaired))
        elif depth < _MAX_DEPTH:
            for child in span.children:
                visit(child, depth + 1)

    for root in _brace_pairs(text):
        visit(root, 0)
    found.sort(key=lambda p: p.start)
    broken.sort()
    return found, broken


def template_examples(*texts: str) -> list[dict[str, Any]]:
    """The JSON objects written in a step's prompt text (its example of the reply)."""
    examples = []
    for text in texts:
        examples += [p.data for p in _objects(text)[0] if isinstance(p.data, dict) and not p.conflicts]
    return examples


def _decode_error(text: str) -> str:
    """What json says about the text from its first '{' on."""
    fragment = text[text.find("{"):]
    try:
        json.loads(fragment)
    except json.JSONDecodeError as exc:
        return f"{exc.msg}, column {exc.colno}"
    except RecursionError:
        return "nested too deeply"
    return "unbalanced braces"


@functools.lru_cache(maxsize=64)
def _model_for_json(schema_json: str):
    schema = json.loads(schema_json)
    props = schema.get("properties", {})
    required = set(schema.get("required", props))
    fields = {}
    for name, spec in props.items():
        typ = _TYPES.get(spec.get("type", "string"), Any)
        fields[name] = (typ, ...) if name in required else (typ | None, None)
    return create_model("Verdict", **fields)


def _model_for(schema: dict[str, Any]):
    return _model_for_json(json.dumps(schema, sort_keys=True))


def _schema_problems(model, data: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The validated fields, or why `data` does not match the schema."""
    if not isinstance(data, dict):
        return None, f"expected a JSON object, got {type(data).__name__}"
    try:
        return model.model_validate(data, strict=True).model_dump(), None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return None, f"does not match the schema: {problems}"


def parse_verdict(text: str | None, schema: dict[str, Any], score_field: str = "score",
                  reason_field: str | None = "reason", levels: list[int] | None = None,
                  score_range: list[float] | None = None,
                  examples: Sequence[dict[str, Any]] = ()) -> Verdict:
    """The verdict in `text`: its last object that matches `schema` and is not one of the
    template's `examples`, with its score checked against `levels` or `score_range`."""
    refused = non_answer(text)
    if refused is not None:
        return Verdict(None, invalid_reason=refused)
    try:
        whole = _loads(text)
    except (json.JSONDecodeError, RecursionError):
        whole = None
    if whole is not None and not isinstance(whole[0], dict):
        return Verdict(None, invalid_reason=f"expected a JSON object, got {type(whole[0]).__name__}")
    if whole is not None:
        objects, broken = [_Parsed(0, whole[0], whole[1], False)], []
    else:
        objects, broken = _objects(text)
        if not objects:
            if broken:
                return Verdict(None, invalid_reason=f"broken JSON: {broken[-1][1]}")
            if "{" in text:  # an object that never closes: most often output cut off at max_tokens
                return Verdict(None, invalid_reason=f"broken JSON: the object never closes ({_decode_error(text)})")
            return Verdict(None, invalid_reason="no JSON object found")
    model = _model_for(schema)
    required = set(schema.get("required", schema.get("properties", {})))
    chosen = checked = last_failed = None
    was_example = False
    for parsed in reversed(objects):  # the last candidate is the verdict
        data = parsed.data
        if parsed.conflicts and isinstance(data, dict) and score_field in data:
            chosen = parsed  # it states the verdict's fields and contradicts itself
            break
        # a cheap look first: an answer of 20,000 '{}' must not cost 20,000 validations
        fields = (_schema_problems(model, data)[0]
                  if isinstance(data, dict) and required <= data.keys() else None)
        if fields is None:
            last_failed = last_failed or parsed
            continue
        if not parsed.conflicts and any(data == example for example in examples):
            was_example = True
            continue
        chosen, checked = parsed, fields
        break
    if chosen is None:
        if was_example:
            return Verdict(None, invalid_reason="the answer's only verdict is the template's own example")
        if broken and broken[-1][0] > last_failed.start:  # the answer ends with something that is not JSON
            return Verdict(None, invalid_reason=f"broken JSON: {broken[-1][1]}")
        data = last_failed.data if isinstance(last_failed.data, dict) else None
        return Verdict(None, data=data, invalid_reason=_schema_problems(model, last_failed.data)[1])
    data = chosen.data
    if chosen.conflicts:
        return Verdict(None, data=data, invalid_reason="; ".join(dict.fromkeys(chosen.conflicts)))
    repaired = chosen.repaired or whole is None
    raw_score = checked.get(score_field, data.get(score_field))
    if isinstance(raw_score, bool) or not isinstance(raw_score, (int, float)) or not math.isfinite(raw_score):
        return Verdict(None, data=data, invalid_reason=f"field {score_field!r} is not a number: {raw_score!r}")
    score = float(raw_score)
    if score_range is not None and not (score_range[0] <= score <= score_range[1]):
        return Verdict(None, data=data, invalid_reason=f"score {score} outside {score_range}")
    if score_range is None and levels is not None and score not in levels:
        return Verdict(None, data=data, invalid_reason=f"score {raw_score} is not a level in {levels}")
    other = _other_scale(text, chosen.start, data, levels, score_range, (score_field, reason_field))
    if other is not None:
        return Verdict(None, data=data, invalid_reason=f"score {raw_score} is stated on another scale ({other!r})")
    reason = checked.get(reason_field) if reason_field else None
    return Verdict(score, reason if isinstance(reason, str) else None, data, None, repaired)


PROSE_BEFORE = 200  # characters of prose before the verdict looked at for the scale it names


def _other_scale(text: str, start: int, data: dict, levels: list[int] | None, score_range: list[float] | None,
                 own_fields: tuple) -> str | None:
    """A scale other than the step's named by the verdict's other fields (`"scale": "1-5"`,
    `"max": 10`) or by the prose just before it ("On a 1-5 scale: {...}"); else None."""
    if levels:
        scale = tuple(levels)
    elif score_range is not None and all(float(x).is_integer() for x in score_range):
        scale = tuple(range(int(score_range[0]), int(score_range[1]) + 1))
    else:
        return None
    fields = " ; ".join(f"{str(k).replace('_', ' ')} {v}" for k, v in data.items()
                        if k not in own_fields and isinstance(v, (str, int, float)) and not isinstance(v, bool))
    return named_other_scale(fields, scale) or named_other_scale(text[max(0, start - PROSE_BEFORE):start], scale)
