"""Passages: JSONL with {"docid","text"}, {"id","contents"} or {"doc_id","text"} per line."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InputError
from .textfile import iter_lines

ID_KEYS = ("docid", "doc_id", "id", "_id", "pid")
TEXT_KEYS = ("text", "contents", "passage", "body")


def _pick(obj: dict, keys: tuple[str, ...]):
    for key in keys:
        if key in obj:
            return key, obj[key]
    return None, None


def read_corpus(path: str | Path, wanted: set[str] | None = None) -> dict[str, str]:
    """Read passages; with `wanted`, keep only those ids (a large corpus stays small in memory).

    A title field, when present, is prepended to the text as the usual "title. text".
    """
    corpus: dict[str, str] = {}
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(path, lineno, "one JSON object per line", f"{exc.msg} at column {exc.colno}") from None
        if not isinstance(obj, dict):
            raise InputError(path, lineno, "a JSON object", type(obj).__name__)
        _, docid = _pick(obj, ID_KEYS)
        _, text = _pick(obj, TEXT_KEYS)
        if docid is None:
            raise InputError(path, lineno, "an id field (" + "/".join(ID_KEYS) + ")", line[:80])
        if text is None or not isinstance(text, str):
            raise InputError(path, lineno, "a text field (" + "/".join(TEXT_KEYS) + ") holding a string", line[:80])
        docid = str(docid)
        if wanted is not None and docid not in wanted:
            continue
        title = obj.get("title")
        if isinstance(title, str) and title.strip():
            text = f"{title.strip()}. {text}"
        corpus[docid] = text
    return corpus
