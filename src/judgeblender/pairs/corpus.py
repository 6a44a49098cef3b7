"""Passages: JSONL with {"docid","text"}, {"id","contents"} or {"doc_id","text"} per line."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ..errors import InputError
from . import irds
from .textfile import check_id, clean_text, iter_lines, report_repair
from .texts import SURROGATE

ID_KEYS = ("docid", "doc_id", "id", "_id", "pid")
TEXT_KEYS = ("text", "contents", "passage", "body")


def _pick(obj: dict, keys: tuple[str, ...]):
    for key in keys:
        if key in obj:
            return key, obj[key]
    return None, None


def read_corpus(path: str | Path, wanted: set[str] | None = None) -> Mapping[str, str]:
    """Read passages; with `wanted`, keep only those ids (a large corpus stays small in memory).

    A title field, when present, is prepended to the text as the usual "title. text". A docid
    seen twice with the same text is kept once (reported); with another text it is an error,
    since either choice would judge a passage the user may not mean. Only kept passages are
    compared, so a huge corpus is not held in memory to check ids nobody asked for.

    `irds:ID` looks passages up by id in an ir_datasets docs store (see irds): with `wanted`
    only those are read; without, the result is a lazy mapping.
    """
    if irds.is_irds(path):
        return irds.read_corpus(path, wanted)
    corpus: dict[str, str] = {}
    first_line: dict[str, int] = {}
    duplicates: list[int] = []
    cleaned: list[int] = []
    any_line = False
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        any_line = True
        docid, text = parse_line(path, lineno, line)
        if wanted is not None and docid not in wanted:
            continue
        if not text.strip():
            raise InputError(path, lineno, f"non-blank text for passage {docid}", line[:80])
        text, changed = clean_text(text)
        if changed:
            cleaned.append(lineno)
        if docid in corpus:
            if corpus[docid] != text:
                raise InputError(path, lineno, f"one text per doc id ({docid} appeared at line "
                                 f"{first_line[docid]} with other text)", line[:80])
            duplicates.append(lineno)
            continue
        corpus[docid] = text
        first_line[docid] = lineno
    if not any_line:
        raise InputError(path, None, "at least one passage", "an empty file")
    report_repair(path, "repeated identical passages kept once", duplicates)
    report_repair(path, "control characters in passage text replaced by spaces", cleaned)
    return corpus


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
        if SURROGATE.search(value):  # from a JSON escape such as "\ud800"
            raise InputError(path, lineno, "Unicode text (a JSON \\u escape gives a lone surrogate)", line[:80])
    docid = check_id(path, lineno, str(docid), "doc id")
    title = obj.get("title")
    if isinstance(title, str) and title.strip():
        text = f"{title.strip()}. {text}"
    return docid, text


def open_corpus(path: str | Path) -> Mapping[str, str]:
    """Passages looked up by id without holding them: an `irds:` id's docs store, or a JSONL
    file's offset index (passage_index.py); close the result when done (`close_corpus`)."""
    if irds.is_irds(path):
        return irds.read_corpus(path)
    from .passage_index import PassageIndex  # numpy, only where an index is built

    return PassageIndex(path)


def close_corpus(corpus: Mapping[str, str]) -> None:
    getattr(corpus, "close", lambda: None)()
