"""Queries: a TSV of `id<TAB>text`, one per line."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from . import irds
from .textfile import check_id, clean_text, iter_lines, report_repair


def read_queries(path: str | Path) -> dict[str, str]:
    """{qid: text}. A repeated identical line is kept once; control characters in a text become
    spaces; both repairs are reported (see textfile). `irds:ID` reads an ir_datasets id's queries."""
    if irds.is_irds(path):
        return irds.read_queries(path)
    queries: dict[str, str] = {}
    first_line: dict[str, int] = {}
    duplicates: list[int] = []
    cleaned: list[int] = []
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        qid, sep, text = line.partition("\t")
        if not sep:
            raise InputError(path, lineno, "'query_id<TAB>text'", line)
        qid = check_id(path, lineno, qid.strip(" "), "query id")  # strip(): "\x85" too, which check_id refuses
        if not text.strip():
            raise InputError(path, lineno, f"non-blank text for query {qid}", line)
        if "\r" in text:  # iter_lines removed the line end: a CR left is an old Mac line break
            raise InputError(path, lineno, "one query per line, ending in LF or CR LF (found a lone CR: "
                             "two lines would be read as one query)", line)
        text, changed = clean_text(text)
        if changed:
            cleaned.append(lineno)
        if qid in queries:
            if queries[qid] != text:
                raise InputError(path, lineno, f"one text per query id ({qid} appeared at line "
                                 f"{first_line[qid]} with other text)", line)
            duplicates.append(lineno)
            continue
        queries[qid] = text
        first_line[qid] = lineno
    if not queries:
        raise InputError(path, None, "at least one query", "an empty file")
    report_repair(path, "repeated identical query lines kept once", duplicates)
    report_repair(path, "control characters in query text replaced by spaces", cleaned)
    return queries
