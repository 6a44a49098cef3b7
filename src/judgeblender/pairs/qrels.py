"""TREC qrels: `query_id iteration doc_id label`, whitespace separated."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from .. import arguments
from ..errors import InputError
from ..fileio import atomic_write_text
from . import irds
from .label_rules import one_label_per_pair
from .textfile import check_id, clean_lines, iter_lines, report_repair

Qrels = dict[str, dict[str, int]]
# TREC's graded relevance scale, the one every measure, blend and table of judgeblender works on.
# Each reader of labels says which scale it checks: SCALE where the labels are used as labels,
# PAIRS_ONLY where only the pairs are kept (pairs to judge, pairs already judged), so that a file
# of another collection's labels (-2, 4) can still name them. tests/test_seams_scale.py fails on
# a call that says neither.
SCALE: tuple[int, ...] = (0, 1, 2, 3)
PAIRS_ONLY = None
# An integer label as trec_eval reads it: ASCII digits with an optional sign. int() alone would
# also take "1_0" (10), "３" and "١".
_INT = re.compile(r"[+-]?[0-9]+")


def _qrels_rows(path: str | Path) -> Iterator[tuple[int, str, str, str]]:
    """(line, qid, docid, label text) of every non-blank line; a line without 4 columns is an error."""
    lines = clean_lines(path)
    if lines is not None:  # no control characters anywhere: the ids need no check of their own
        for lineno, line in enumerate(lines, start=1):
            cols = line.split()
            if len(cols) == 4:
                yield lineno, cols[0], cols[2], cols[3]
            elif cols:
                raise InputError(path, lineno, "4 columns 'query_id iteration doc_id label'", line.rstrip("\r"))
        return
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) != 4:
            raise InputError(path, lineno, "4 columns 'query_id iteration doc_id label'", line)
        yield lineno, check_id(path, lineno, cols[0], "query id"), check_id(path, lineno, cols[2], "doc id"), cols[3]


def read_qrels(path: str | Path, allowed: Iterable[int] | None = None) -> Qrels:
    """Read qrels into {qid: {docid: label}}.

    Columns are split on any run of spaces and tabs, as trec_eval reads them. A repeated pair
    is kept once (reported) or, with a different label, an error (`one_label_per_pair`).
    `irds:ID` reads an ir_datasets id's qrels. A label outside `allowed` is an error naming file
    and line; without `allowed` every integer label is read, as trec_eval does, which is what a
    user reading another collection's labels (-2, 4) by hand needs. Inside judgeblender every
    call says its scale (SCALE or PAIRS_ONLY), which tests/test_seams_scale.py checks.
    """
    allowed = arguments.scale("allowed", allowed)  # an empty one would refuse every label
    if irds.is_irds(path):
        return irds.read_qrels(path, allowed=allowed)
    allowed_set = set(allowed) if allowed is not None else None

    def rows() -> Iterator[tuple[int, str, str, int, str]]:
        for lineno, qid, docid, raw in _qrels_rows(path):
            if not _INT.fullmatch(raw):
                raise InputError(path, lineno, "an integer label in column 4", raw)
            label = int(raw)
            if allowed_set is not None and label not in allowed_set:
                raise InputError(path, lineno, f"a label in {sorted(allowed_set)}", raw)
            yield lineno, qid, docid, label, raw

    pairs, duplicates = one_label_per_pair(rows(), lambda line, expected, got: InputError(path, line, expected, got))
    qrels: Qrels = {}
    for (qid, docid), label in pairs.items():
        qrels.setdefault(qid, {})[docid] = label  # type: ignore[assignment]
    report_repair(path, "repeated identical qrels lines kept once", duplicates)
    return qrels


def read_qrels_abstaining(path: str | Path, *, allowed: Iterable[int]) -> tuple[dict[tuple[str, str], int | None], int]:
    """Like read_qrels, but an unreadable label (e.g. "1.") or one outside `allowed` is kept as
    None: the judge abstained on that pair. Returns the pairs and how many labels were unreadable."""
    allowed_set = set(allowed)

    def rows() -> Iterator[tuple[int, str, str, int | None, str]]:
        for lineno, qid, docid, raw in _qrels_rows(path):
            label = int(raw) if _INT.fullmatch(raw) else None  # "²".isdigit() is True, and int("²") raises
            yield lineno, qid, docid, label if label in allowed_set else None, raw

    out, duplicates = one_label_per_pair(rows(), lambda line, expected, got: InputError(path, line, expected, got))
    report_repair(path, "repeated identical qrels lines kept once", duplicates)
    return out, sum(label is None for label in out.values())


def qrels_size(qrels: Mapping[str, Mapping[str, int]]) -> int:
    return sum(len(docs) for docs in qrels.values())


def format_qrels(rows: Iterable[tuple[str, str, int]]) -> str:
    return "".join(f"{qid} 0 {docid} {label}\n" for qid, docid, label in rows)


def write_qrels(path: str | Path, qrels: Mapping[str, Mapping[str, int]]) -> None:
    """Write qrels atomically, queries and documents in the order they are held."""
    atomic_write_text(path, format_qrels((q, d, l) for q, docs in qrels.items() for d, l in docs.items()))


INVALID_LABELS = ("error", "abstain")  # what a reader does with a label off its scale


def read_prediction(path: str | Path, invalid_labels: str = "error", *,
                    allowed: Iterable[int]) -> tuple[Qrels, int]:
    """A judge's qrels and how many of its labels were unreadable. With invalid_labels="error"
    a label outside `allowed` stops the read naming file and line (and the count is 0); with
    "abstain" the pair is left unlabelled and counted."""
    if arguments.one_of("invalid_labels", invalid_labels, INVALID_LABELS) == "error":
        return read_qrels(path, allowed=tuple(allowed)), 0
    pairs, bad = read_qrels_abstaining(path, allowed=allowed)
    qrels: Qrels = {}
    for (qid, docid), label in pairs.items():
        if label is not None:
            qrels.setdefault(qid, {})[docid] = label
    return qrels, bad
