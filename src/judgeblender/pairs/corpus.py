"""Passages: JSONL with {"docid","text"}, {"id","contents"} or {"doc_id","text"} per line."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..errors import InputError
from . import irds
from .passage_line import parse_line
from .textfile import clean_text, iter_lines, report_repair


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


def open_corpus(path: str | Path) -> Mapping[str, str]:
    """Passages looked up by id without holding them: an `irds:` id's docs store, or a JSONL
    file's offset index (passage_index.py); close the result when done (`close_corpus`)."""
    if irds.is_irds(path):
        return irds.read_corpus(path)
    from .passage_index import PassageIndex  # numpy, only where an index is built

    return PassageIndex(path)


def close_corpus(corpus: Mapping[str, str]) -> None:
    getattr(corpus, "close", lambda: None)()
