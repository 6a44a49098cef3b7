"""The rule every reader of labels follows, whatever the shape: one label per pair.

A module of its own, below the readers that apply it (qrels.py for qrels files, irds.py for
ir_datasets qrels, convert.py for DataFrames, tuples and dicts), so that qrels.py, which hands
`irds:` ids to irds.py, is not imported back by it (run_rules.py is the same for runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

_ABSENT = object()


def one_label_per_pair(rows: Iterable[tuple[Any, str, str, int | None, Any]],
                       fail: Callable[[Any, str, Any], Exception]) -> tuple[dict[tuple[str, str], int | None], list[Any]]:
    """The rule every reader of labels shares (files, DataFrames, tuples, dicts): a pair repeated
    with the same label is kept once, and the repeats' positions are returned to be reported; a
    pair repeated with another label (an invalid None counts as one) is an error,
    `fail(position, expected, got)`, since silently picking one would change the evaluation.
    `rows` are (position, qid, docid, label, what was given)."""
    out: dict[tuple[str, str], int | None] = {}
    repeats: list[Any] = []
    for where, qid, docid, label, given in rows:
        seen = out.get((qid, docid), _ABSENT)
        if seen is _ABSENT:
            out[(qid, docid)] = label
        elif seen != label:
            raise fail(where, f"one label per pair ({qid} {docid} was labelled {seen} before)", given)
        else:
            repeats.append(where)
    return out, repeats
