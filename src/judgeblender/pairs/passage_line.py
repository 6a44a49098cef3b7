"""One line of a passages JSONL file, read: the rule every corpus reader shares.

A module of its own, below both readers (corpus.py reads a file into memory and opens one for
lookups, passage_index.py indexes one by offset), so that neither imports the other back.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InputError
from .textfile import check_id
from .texts import SURROGATE

ID_KEYS = ("docid", "doc_id", "id", "_id", "pid")
TEXT_KEYS = ("text", "contents", "passage", "body")


def _pick(obj: dict, keys: tuple[str, ...]):
    for key in keys:
        if key in obj:
            return key, obj[key]
    return None, None


def parse_line(path: str | Path, lineno: int, line: str) -> tuple[str, str]:
    """One passage line: (docid, text with the title prepended), or an InputError naming the line.

    Blank text is left to the caller, which refuses it only for a passage someone asked for."""
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
    if isinstance(docid, bool) or not isinstance(docid, (str, int)):
        raise InputError(path, lineno, "a string or integer id", json.dumps(docid)[:80])
    if text is None or not isinstance(text, str):
        raise InputError(path, lineno, "a text field (" + "/".join(TEXT_KEYS) + ") holding a string", line[:80])
    for value in (str(docid), text):
        # from a JSON escape such as "\ud800"; an ASCII text (a flag Python keeps: no scan) holds none
        if not value.isascii() and SURROGATE.search(value):
            raise InputError(path, lineno, "Unicode text (a JSON \\u escape gives a lone surrogate)", line[:80])
    docid = check_id(path, lineno, str(docid), "doc id")
    title = obj.get("title")
    if isinstance(title, str) and title.strip():
        text = f"{title.strip()}. {text}"
    return docid, text
