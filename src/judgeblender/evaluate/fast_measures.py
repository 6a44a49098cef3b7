"""Fast TREC measures: nDCG@k, AP, P@k and Judged@k over every (run, query) ranking at once.

Correlating leaderboards evaluates the same runs under many qrels. The measures declared in
SUPPORTED_MEASURES (as ir_measures' providers declare theirs) are computed here with numpy
over one matrix of every ranking, built once per run set and reused for every qrels, with
trec_eval's own arithmetic: the same per-query values ir_measures gives through pytrec_eval,
bit for bit. `supports(measure)` says whether a parsed measure is one of them;
evaluate/leaderboard.py sends the others to ir_measures.

Judged@k is the share of trec_eval's top k (the rows' order: pairs/runs.py, trec_eval_ranking)
that has a label: the top k the pool judged and nDCG@k scores. ir_measures' own Judged provider
(ir_measures/providers/judged_provider.py) sorts a run by score then docid ascending, in float64,
so on a run with tied scores at the cut it can count other documents than nDCG@k scores; here it
never does, and Judged@k is computed here whatever the qrels' labels (evaluate_runs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..pairs.runs import pack_ids

if TYPE_CHECKING:
    from .leaderboard import RunSet

# What this provider computes, in ir_measures syntax (k, r: integers >= 1). Parameters left
# out take ir_measures' defaults; judged_only and any dcg other than log2 are not supported.
SUPPORTED_MEASURES = ("nDCG@k", "AP", "AP(rel=r)", "P@k", "P(rel=r)@k", "Judged@k")


def _int_param(measure, name: str, default: int | None) -> int | None:
    value = measure.params.get(name, default)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def fast_kind(measure) -> str | None:
    """The measures the rank matrix computes exactly as trec_eval does (Judged: as ir_measures'
    Judged counts, on trec_eval's top k)."""
    name, params = measure.NAME, measure.params
    if params.get("judged_only", False) is not False or params.get("dcg", "log2") != "log2":
        return None
    if name == "nDCG" and set(params) <= {"cutoff", "dcg", "judged_only"} and _int_param(measure, "cutoff", None):
        return "ndcg"
    if name == "AP" and set(params) <= {"rel", "judged_only"} and _int_param(measure, "rel", 1):
        return "ap"
    if (name == "P" and set(params) <= {"cutoff", "rel", "judged_only"} and _int_param(measure, "cutoff", None)
            and _int_param(measure, "rel", 1)):
        return "p"
    if name == "Judged" and set(params) <= {"cutoff"} and _int_param(measure, "cutoff", None):
        return "judged"
    return None


def supports(measure) -> bool:
    """Whether `measure` (a parsed ir_measures measure) is one of SUPPORTED_MEASURES."""
    return fast_kind(measure) is not None


_UNJUDGED = -1


class RankMatrix:
    """Each (run, query) ranking of a RunSet as one row of document codes, in trec_eval's
    order (pairs/runs.py, trec_eval_ranking), padded to the longest ranking."""

    def __init__(self, runset: RunSet):
        n_q = len(runset.queries)
        self.n_queries = n_q
        self.qindex = {q: i for i, q in enumerate(runset.queries)}
        rows, docs = [], []
        for r, run in enumerate(runset.runs):
            cols = run.columns()
            for i, q in enumerate(cols.qids):
                qi = self.qindex.get(q)
                lo, hi = int(cols.offsets[i]), int(cols.offsets[i + 1])
                if qi is not None and hi > lo:
                    rows.append(r * n_q + qi)
                    docs.append(cols.docs[lo:hi])
        n_rows = len(runset.runs) * n_q
        self.lengths = np.zeros(n_rows, dtype=np.int64)
        self.lengths[rows] = [len(d) for d in docs]
        self.width = max(1, int(self.lengths.max()) if n_rows else 1)
        self.row_query = np.tile(np.arange(n_q), len(runset.runs))
        all_docs = np.concatenate(docs) if docs else np.array([], dtype=str)
        packed, packable = pack_ids(all_docs)
        self.packed = bool(packable.all())
        # codes number the distinct docids in sorted order (so comparing codes compares docids)
        self.vocab, codes = np.unique(packed if self.packed else all_docs, return_inverse=True)
        n_keys = n_q * len(self.vocab)
        dtype = np.int32 if n_keys < 2**31 - 1 else np.int64
        self.sentinel = n_keys  # the table slot of "no document here"
        self.keys = np.full((n_rows, self.width), self.sentinel, dtype=dtype)
        if docs:
            # the runs are in trec_eval's order already (pairs/runs.py, trec_eval_ranking)
            sizes = np.array([len(d) for d in docs])
            starts = np.cumsum(sizes) - sizes
            row_of = np.repeat(np.array(rows), sizes)
            col_of = np.arange(len(codes)) - np.repeat(starts, sizes)
            self.keys[row_of, col_of] = codes + (row_of % n_q) * len(self.vocab)
        # trec_eval's discount for rank i + 1: log2(i + 2), with C's log2 (math.log2) for equal bits
        self.discount = np.array([math.log2(i + 2) for i in range(self.width)])

    def labels(self, qrels: Mapping[str, Mapping[str, int]], depth: int | None) -> np.ndarray:
        """(rows x depth) int8 labels of the ranked documents; _UNJUDGED for unlabelled and padding."""
        table = np.full(self.sentinel + 1, _UNJUDGED, dtype=np.int8)
        n_vocab = len(self.vocab)
        judged = [(self.qindex[q], d, label) for q, docs in qrels.items() if q in self.qindex
                  for d, label in docs.items()]
        if judged and n_vocab:
            qi = np.array([j[0] for j in judged], dtype=np.int64)
            names = np.array([j[1] for j in judged], dtype=str)
            values = np.array([j[2] for j in judged], dtype=np.int8)
            can_match = np.ones(len(names), dtype=bool)
            if self.packed:
                names, can_match = pack_ids(names)  # a docid that cannot be packed matches no run docid
            pos = np.minimum(np.searchsorted(self.vocab, names), n_vocab - 1)
            hit = (self.vocab[pos] == names) & can_match
            table[qi[hit] * n_vocab + pos[hit]] = values[hit]
        keys = self.keys if depth is None or depth >= self.width else self.keys[:, :depth]
        return table[keys]


def fits_int8(qrels: Mapping[str, Mapping[str, int]]) -> bool:
    for docs in qrels.values():
        values = docs.values()
        if values and (not set(map(type, values)) <= {int} or min(values) < 0 or max(values) > 127):
            return False
    return True


def fast_values(runset: RunSet, qrels: Mapping[str, Mapping[str, int]], measures: list,
                 out: dict[str, np.ndarray]) -> None:
    """Fill `out` for measures fast_kind accepts, with trec_eval's arithmetic (see RunSet)."""
    mat = runset.matrix()
    kinds = [(m, fast_kind(m)) for m in measures]
    full = any(kind == "ap" for _, kind in kinds)
    depth = None if full else max(int(m.params["cutoff"]) for m, _ in kinds)
    labels = mat.labels(qrels, depth)
    n_q = mat.n_queries
    in_qrels = np.zeros(n_q, dtype=bool)
    for q, docs in qrels.items():
        if q in mat.qindex:
            in_qrels[mat.qindex[q]] = True
    # ir_measures yields a value only where the run ranks something and the qrels judge the query
    scored = (mat.lengths > 0) & in_qrels[mat.row_query]
    positions = np.arange(1, labels.shape[1] + 1, dtype=np.float64)
    for m, kind in kinds:
        if kind == "ndcg":
            k = int(m.params["cutoff"])
            gains = np.where(labels[:, :k] > 0, labels[:, :k], 0).astype(np.float64)
            # running sums in rank order (cumsum adds left to right, as trec_eval's loop does)
            dcg = np.cumsum(gains / mat.discount[: gains.shape[1]], axis=1)[:, -1]
            ideal = np.zeros(n_q)
            for q, docs in qrels.items():
                qi = mat.qindex.get(q)
                if qi is None:
                    continue
                total = 0.0
                for i, g in enumerate(sorted((v for v in docs.values() if v > 0), reverse=True)[:k]):
                    total += g / math.log2(i + 2)
                ideal[qi] = total
            row_ideal = ideal[mat.row_query]
            with np.errstate(invalid="ignore", divide="ignore"):
                values = np.where(row_ideal > 0, dcg / row_ideal, dcg)
        elif kind == "ap":
            rel_level = int(m.params.get("rel", 1))
            rel = labels >= rel_level
            found = np.cumsum(rel, axis=1)
            precision = np.where(rel, found / positions, 0.0)
            total = np.cumsum(precision, axis=1)[:, -1]
            num_rel = np.zeros(n_q)
            for q, docs in qrels.items():
                if q in mat.qindex:
                    num_rel[mat.qindex[q]] = sum(1 for v in docs.values() if v >= rel_level)
            row_rel = num_rel[mat.row_query]
            with np.errstate(invalid="ignore", divide="ignore"):
                values = np.where(found[:, -1] > 0, total / row_rel, 0.0)
        elif kind == "p":
            k, rel_level = int(m.params["cutoff"]), int(m.params.get("rel", 1))
            values = np.count_nonzero(labels[:, :k] >= rel_level, axis=1) / float(k)
        else:  # judged: ir_measures' Judged arithmetic, on trec_eval's top k (see the module doc)
            k = int(m.params["cutoff"])
            judged = np.count_nonzero(labels[:, :k] != _UNJUDGED, axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                values = judged / np.minimum(k, mat.lengths)
            scored_j = scored & np.array([bool(qrels.get(q)) for q in runset.queries])[mat.row_query]
            out[str(m)][:] = np.where(scored_j, values, 0.0).reshape(out[str(m)].shape)
            continue
        out[str(m)][:] = np.where(scored, values, 0.0).reshape(out[str(m)].shape)
