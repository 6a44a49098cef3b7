"""The rules every shape of run follows, whatever reads it: a score as trec_eval's atof reads
one, and each document ranked at most once per query.

A module of its own, below the readers that apply them (runs.py for run files, DataFrames and
dicts; irds.py for ir_datasets scoreddocs; convert.py), so that runs.py, which hands `irds:`
ids to irds.py, is not imported back by it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

# A decimal score as trec_eval's atof reads it; float() alone would also take "1_0" (10.0) and "１".
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def read_score(value: Any) -> float:
    """A run's score as every shape of run reads it: a decimal as trec_eval's atof reads one (in
    text, `_DECIMAL`: not "nan", "inf", "1_0" or "１"), or a number that is not a bool, and finite.
    Raises ValueError with what was expected ("a number score", "a finite score"): a NaN or
    infinite score has no place in a ranking, and no shape may let one through that a run file
    refuses."""
    if isinstance(value, str):
        if not _DECIMAL.fullmatch(value):
            raise ValueError("a number score")
        score = float(value)
    elif isinstance(value, (bool, np.bool_, bytes)):
        raise ValueError("a number score")
    else:
        try:
            score = float(value)
        except (TypeError, ValueError, OverflowError):
            raise ValueError("a number score") from None
    if not math.isfinite(score):
        raise ValueError("a finite score")
    return score


def each_document_once(rows: Iterable[tuple[Any, str, str, float, Any]], fail: Callable[[Any, str, Any], Exception],
                       unit: str = "line") -> dict[str, list[tuple[str, float]]]:
    """The run files' rule, which every shape of run follows (files, DataFrames, dicts, ScoredDoc
    tuples, PyTerrier results, ir_datasets scoreddocs): a document is ranked at most once per
    query. A repeat is an error, `fail(position, expected, given)`, naming where the document came
    first: keeping the first or the last score (row order, a dict's overwrite) would pick a rank
    the run never stated. `rows` are (position, qid, docid, score, what was given); returns
    {qid: [(docid, score)]} in the order given (Run puts them in trec_eval's order)."""
    first: dict[tuple[str, str], Any] = {}
    ranking: dict[str, list[tuple[str, float]]] = {}
    for where, qid, docid, score, given in rows:
        if (qid, docid) in first:
            raise fail(where, f"each document once per query ({docid} is ranked for query {qid} at {unit} "
                              f"{first[qid, docid]} already)", given)
        first[qid, docid] = where
        ranking.setdefault(qid, []).append((docid, score))
    return ranking
