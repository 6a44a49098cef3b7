"""Queries: a TSV of `id<TAB>text`, one per line."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from .textfile import iter_lines


def read_queries(path: str | Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        qid, sep, text = line.partition("\t")
        if not sep:
            raise InputError(path, lineno, "'query_id<TAB>text'", line)
        qid = qid.strip()
        if not qid:
            raise InputError(path, lineno, "a non-empty query id", line)
        if not text.strip():
            raise InputError(path, lineno, f"non-blank text for query {qid}", line)
        if qid in queries and queries[qid] != text:
            raise InputError(path, lineno, f"one text per query id ({qid} appeared before with other text)", line)
        queries[qid] = text
    if not queries:
        raise InputError(path, None, "at least one query", "an empty file")
    return queries
