"""Leaderboard correlation: do LLM labels rank a set of runs the way human labels do?

Every run is scored per query with ir_measures under the gold qrels and under each
predicted qrels; a run's leaderboard score is its mean over the gold qrels' queries.
The two leaderboards are compared with Kendall's tau-b, Spearman's rho and tau_AP, each
with a bootstrap confidence interval over queries.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import ir_measures
import numpy as np

from ..errors import JudgeblenderError
from ..pairs.qrels import Qrels
from ..pairs.runs import Run, pack_ids
from .agreement import json_ready

DEFAULT_MEASURES = ("nDCG@10", "AP(rel=2)")
JUDGED_MEASURE = "Judged@10"


# ---------------------------------------------------------------------------------------
# Per-query evaluation
# ---------------------------------------------------------------------------------------

def parse_measures(names: Sequence) -> list:
    """Parse measure strings with ir_measures (measure objects pass through), dropping
    repeats, keeping order."""
    parsed = []
    for name in names:
        if not isinstance(name, str):
            measure = name
        else:
            try:
                measure = ir_measures.parse_measure(name)
            except Exception as exc:  # ir_measures raises several types for bad syntax
                raise JudgeblenderError(
                    f"cannot parse measure {name!r} ({exc}); use ir_measures syntax such as nDCG@10 or AP(rel=2)"
                ) from None
        if measure not in parsed:
            parsed.append(measure)
    return parsed


def _cutoff(measure) -> int | None:
    """The depth a measure reads; None for the whole ranking. A judged_only measure drops
    unjudged documents before taking its top k, so it needs the whole ranking too."""
    cutoff = measure.params.get("cutoff")
    if measure.params.get("judged_only"):
        return None
    return cutoff if isinstance(cutoff, int) else None


class RunSet:
    """Runs restricted to a fixed list of queries, for evaluating many qrels against them.

    The common measures (nDCG@k, AP and AP(rel=r), P@k and P(rel=r)@k, Judged@k) are
    computed here with numpy over a matrix of every (run, query) ranking, built once and
    reused for every qrels, with trec_eval's own arithmetic: the same per-query values
    ir_measures gives through pytrec_eval (and its Judged provider), bit for bit, but
    without handing 1.6 million ranked documents to the evaluator once per qrels file.
    Other measures go through ir_measures. A measure with a cutoff k only looks at the top k
    documents, so for those the runs are cut to depth k, keeping every document tied in
    score with the k-th one so that the evaluator's own tie-breaking still sees the same
    top k; cut runs are built once and reused for every qrels.
    """

    def __init__(self, runs: Sequence[Run], queries: Sequence[str]):
        self.runs = list(runs)
        self.names = [r.name for r in self.runs]
        self.queries = list(queries)
        self._by_depth: dict[int | None, list[dict[str, dict[str, float]]]] = {}
        self._matrix: _RankMatrix | None = None
        # (runs x queries): whether the run ranks anything for the query
        ranked = [set(r.queries()) for r in self.runs]
        self.retrieved = np.array([[q in rq for q in self.queries] for rq in ranked], dtype=bool).reshape(
            len(self.runs), len(self.queries))

    def scored(self, depth: int | None) -> list[dict[str, dict[str, float]]]:
        if depth not in self._by_depth:
            self._by_depth[depth] = [self._cut(run, depth) for run in self.runs]
        return self._by_depth[depth]

    def matrix(self) -> _RankMatrix:
        if self._matrix is None:
            self._matrix = _RankMatrix(self)
        return self._matrix

    def _cut(self, run: Run, depth: int | None) -> dict[str, dict[str, float]]:
        out = {}
        for qid in self.queries:
            docs = run.ranking.get(qid)
            if not docs:
                continue
            if depth is not None and len(docs) > depth:
                end = depth
                last = docs[depth - 1][1]
                while end < len(docs) and docs[end][1] == last:
                    end += 1
                docs = docs[:end]
            out[qid] = dict(docs)
        return out


def _int_param(measure, name: str, default: int | None) -> int | None:
    value = measure.params.get(name, default)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _fast_kind(measure) -> str | None:
    """The measures the rank matrix computes exactly as trec_eval (or ir_measures' Judged) does."""
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


_UNJUDGED = -1


class _RankMatrix:
    """Each (run, query) ranking of a RunSet as one row of document codes, in trec_eval's
    order (score descending, ties by docid descending), padded to the longest ranking."""

    def __init__(self, runset: RunSet):
        n_q = len(runset.queries)
        self.n_queries = n_q
        self.qindex = {q: i for i, q in enumerate(runset.queries)}
        rows, docs, scores = [], [], []
        for r, run in enumerate(runset.runs):
            cols = run.columns()
            for i, q in enumerate(cols.qids):
                qi = self.qindex.get(q)
                lo, hi = int(cols.offsets[i]), int(cols.offsets[i + 1])
                if qi is not None and hi > lo:
                    rows.append(r * n_q + qi)
                    docs.append(cols.docs[lo:hi])
                    scores.append(cols.scores[lo:hi])
        n_rows = len(runset.runs) * n_q
        self.lengths = np.zeros(n_rows, dtype=np.int64)
        self.lengths[rows] = [len(d) for d in docs]
        self.width = max(1, int(self.lengths.max()) if n_rows else 1)
        self.row_query = np.tile(np.arange(n_q), len(runset.runs))
        self._docs, self._scores, self._rows = docs, scores, rows
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
            sizes = np.array([len(d) for d in docs])
            starts = np.cumsum(sizes) - sizes
            # trec_eval ranks by the score as a C float (float32): scores that differ only
            # beyond float32 precision tie there, and the tie goes to the larger docid.
            all_scores = np.concatenate(scores)
            s32 = all_scores.astype(np.float32)
            new_tie = np.flatnonzero((s32[1:] == s32[:-1]) & (all_scores[1:] != all_scores[:-1]))
            for j in np.unique(np.searchsorted(starts, new_tie, side="right") - 1).tolist():
                lo, hi = starts[j], starts[j] + sizes[j]
                if hi - lo < 2 or not np.any((s32[lo + 1:hi] == s32[lo:hi - 1]) & (
                        all_scores[lo + 1:hi] != all_scores[lo:hi - 1])):
                    continue  # the pair straddled two rows
                order = np.lexsort((-codes[lo:hi], -s32[lo:hi]))
                codes[lo:hi] = codes[lo:hi][order]
                docs[j], scores[j] = docs[j][order], scores[j][order]
            row_of = np.repeat(np.array(rows), sizes)
            col_of = np.arange(len(codes)) - np.repeat(starts, sizes)
            self.keys[row_of, col_of] = codes + (row_of % n_q) * len(self.vocab)
        # trec_eval's discount for rank i + 1: log2(i + 2), with C's log2 (math.log2) for equal bits
        self.discount = np.array([math.log2(i + 2) for i in range(self.width)])
        self._ties_at: dict[int, list[int]] = {}
        self._row_index = {row: i for i, row in enumerate(rows)}

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

    def ties_at(self, k: int) -> list[int]:
        """Rows whose k-th and (k+1)-th documents tie in score: where the order of ties matters at k."""
        if k not in self._ties_at:
            # float32 ties too: the matrix's order may differ from ir_measures' there
            self._ties_at[k] = [row for row, s in zip(self._rows, self._scores)
                                if len(s) > k and np.float32(s[k - 1]) == np.float32(s[k])]
        return self._ties_at[k]

    def row_docs(self, row: int, k: int) -> list[tuple[str, float]]:
        """The row's first k documents and every one tied (as float32) with the k-th: any order
        of scores (float64, float32) puts the same documents above that tie."""
        i = self._row_index[row]
        s32 = self._scores[i].astype(np.float32)
        end = k
        while end < len(s32) and s32[end] == s32[k - 1]:
            end += 1
        return list(zip(self._docs[i][:end].tolist(), self._scores[i][:end].tolist()))


def _fits_int8(qrels: Mapping[str, Mapping[str, int]]) -> bool:
    for docs in qrels.values():
        values = docs.values()
        if values and (not set(map(type, values)) <= {int} or min(values) < 0 or max(values) > 127):
            return False
    return True


def _fast_values(runset: RunSet, qrels: Mapping[str, Mapping[str, int]], measures: list,
                 out: dict[str, np.ndarray]) -> None:
    """Fill `out` for measures _fast_kind accepts, with trec_eval's arithmetic (see RunSet)."""
    mat = runset.matrix()
    kinds = [(m, _fast_kind(m)) for m in measures]
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
        else:  # judged: ir_measures' own provider, which breaks score ties by docid ascending
            k = int(m.params["cutoff"])
            judged = np.count_nonzero(labels[:, :k] != _UNJUDGED, axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                values = judged / np.minimum(k, mat.lengths)
            for row in mat.ties_at(k):
                qid = runset.queries[row % n_q]
                top = sorted(mat.row_docs(row, k), key=lambda e: (-e[1], e[0]))[:k]
                values[row] = sum(d in qrels.get(qid, {}) for d, _ in top) / k
            scored_j = scored & np.array([bool(qrels.get(q)) for q in runset.queries])[mat.row_query]
            out[str(m)][:] = np.where(scored_j, values, 0.0).reshape(out[str(m)].shape)
            continue
        out[str(m)][:] = np.where(scored, values, 0.0).reshape(out[str(m)].shape)


def evaluate_runs(runset: RunSet, qrels: Qrels, measures: Sequence) -> dict[str, np.ndarray]:
    """Per-query scores: {measure name: array (runs x queries)}.

    `measures` are strings such as "nDCG@10" or parsed ir_measures measures. Only the run
    set's queries are scored. Documents missing from the qrels count as not relevant. A
    (run, query) cell ir_measures yields nothing for (the run retrieved nothing for it, or
    the qrels have no label for it) scores 0, as `trec_eval -c` would.
    """
    measures = parse_measures(measures)
    qrels = {q: qrels[q] for q in runset.queries if q in qrels}
    qindex = {q: i for i, q in enumerate(runset.queries)}
    shape = (len(runset.runs), len(runset.queries))
    out = {str(m): np.zeros(shape) for m in measures}
    if not qrels:
        return out
    fast = [m for m in measures if _fast_kind(m)] if _fits_int8(qrels) else []
    if fast:
        _fast_values(runset, qrels, fast, out)
    measures = [m for m in measures if not any(m is f for f in fast)]
    if not measures:
        return out
    # One evaluator per depth group: the qrels are converted once per group, not per run.
    groups: dict[int | None, list] = {}
    for m in measures:
        groups.setdefault(_cutoff(m), []).append(m)
    if any(k is not None for k in groups):
        deepest = max(k for k in groups if k is not None)
        cut_group = [m for k, ms in groups.items() if k is not None for m in ms]
        groups = {k: ms for k, ms in groups.items() if k is None}
        groups[deepest] = cut_group
    # Results carry the very measure objects passed in; looking them up by id avoids
    # ir_measures' repr-based hashing, which costs more than the evaluation at depth 10.
    by_id = {id(m): out[str(m)] for m in measures}
    for depth, group in groups.items():
        evaluator = ir_measures.evaluator(group, qrels)
        for r, run in enumerate(runset.scored(depth)):
            for metric in evaluator.iter_calc(run):
                matrix = by_id.get(id(metric.measure))
                if matrix is None:
                    matrix = out[str(metric.measure)]
                matrix[r, qindex[metric.query_id]] = metric.value
    return out


# ---------------------------------------------------------------------------------------
# Rank correlations
# ---------------------------------------------------------------------------------------

# `correlate` computes its point estimates and bootstrap samples with the vectorised
# _pairwise_rows and _spearman_rows (tested equal to these two); these call scipy itself.
# scipy.stats is imported on use: it costs about a second, half of a whole `correlate` run.

def kendall_tau(gold_scores: Sequence[float], pred_scores: Sequence[float]) -> float:
    """Kendall's tau-b (ties in either leaderboard reduce the denominator), via scipy."""
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.kendalltau(gold_scores, pred_scores, variant="b").statistic)


def spearman_rho(gold_scores: Sequence[float], pred_scores: Sequence[float]) -> float:
    """Spearman's rho (Pearson correlation of average ranks), via scipy."""
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.spearmanr(gold_scores, pred_scores).statistic)


def tau_ap(reference: Sequence[float], estimate: Sequence[float]) -> float:
    """AP rank correlation of Yilmaz, Aslam and Robertson (SIGIR 2008).

    Walk down the ranking by `estimate` (best first). For the item at position i (i = 2..N),
    p(i) = C(i) / (i - 1), where C(i) counts the items above it that `reference` also
    places above it. Then tau_AP = 2 / (N - 1) * sum_i p(i) - 1.

    Unlike Kendall's tau it is asymmetric: a swap near the top of the estimated ranking
    costs more than one near the bottom. Here `reference` is the human leaderboard and
    `estimate` the LLM one. Ties, which the paper leaves open: a pair tied in exactly one
    of the two leaderboards counts half, a pair tied in both counts fully; tied items keep
    their input order when positions are assigned.
    """
    ref = np.asarray(reference, dtype=float)[None, :]
    est = np.asarray(estimate, dtype=float)[None, :]
    return float(_pairwise_rows(ref, est)[1][0])


def tau_ap_symmetric(a: Sequence[float], b: Sequence[float]) -> float:
    """Mean of tau_AP in both directions, for when neither leaderboard is the reference."""
    return (tau_ap(a, b) + tau_ap(b, a)) / 2


def _pairwise_rows(ref: np.ndarray, est: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kendall's tau-b and tau_AP for each row of two (samples x items) arrays at once.

    Both come from one set of pairwise comparisons taken in the estimate's order, so for
    every pair (above, below) the estimate has est[above] >= est[below].
    """
    n_rows, n = est.shape
    if n < 2:
        return np.full(n_rows, np.nan), np.full(n_rows, np.nan)
    order = np.argsort(-est, axis=1, kind="stable")
    e = np.take_along_axis(est, order, axis=1)
    r = np.take_along_axis(ref, order, axis=1)
    num = np.zeros(n_rows, dtype=np.int64)  # concordant - discordant
    e_untied = np.zeros(n_rows, dtype=np.int64)
    r_untied = np.zeros(n_rows, dtype=np.int64)
    correct = np.empty((n_rows, n - 1))  # C(i) for positions 2..N
    # Rows without ties in either leaderboard (the usual bootstrap sample): every pair is
    # untied, and C(i) counts the items above i that the reference also ranks higher.
    r_sorted = np.sort(r, axis=1)
    plain = ~(np.any(e[:, 1:] == e[:, :-1], axis=1) | np.any(r_sorted[:, 1:] == r_sorted[:, :-1], axis=1))
    if plain.any():
        rp = r[plain]
        above = np.triu(np.ones((n, n), dtype=bool), 1)  # [j, i]: position j above position i
        agree = np.count_nonzero((rp[:, :, None] > rp[:, None, :]) & above, axis=1)  # (rows, n)
        pairs = n * (n - 1) // 2
        total = agree.sum(axis=1)
        num[plain] = 2 * total - pairs
        e_untied[plain] = pairs
        r_untied[plain] = pairs
        correct[plain] = agree[:, 1:]
    tied = np.flatnonzero(~plain)
    if tied.size:
        e, r = e[tied], r[tied]
        # Pairs grouped by the lower item (position 1, then 2, ...), one position at a time:
        # the item at position i against the i items above it.
        for i in range(1, n):
            e_tie = e[:, :i] == e[:, i, None]
            r_gt = r[:, :i] > r[:, i, None]
            r_lt = r[:, :i] < r[:, i, None]
            r_tie = ~(r_gt | r_lt)
            e_strict = ~e_tie
            agree_i = np.count_nonzero(e_strict & r_gt, axis=1)
            num[tied] += agree_i - np.count_nonzero(e_strict & r_lt, axis=1)
            e_untied[tied] += np.count_nonzero(e_strict, axis=1)
            r_untied[tied] += i - np.count_nonzero(r_tie, axis=1)
            # tau_AP: C(i) sums, over the items above i, 1 for an agreeing pair, 0.5 for a pair
            # tied in one leaderboard only, 1 for a pair tied in both.
            correct[tied, i - 1] = agree_i + np.count_nonzero(e_tie & r_tie, axis=1) + 0.5 * np.count_nonzero(
                e_tie ^ r_tie, axis=1)

    # tau-b = (concordant - discordant) / sqrt(pairs untied in est * pairs untied in ref),
    # the same as scipy's variant "b".
    den = np.sqrt(e_untied * r_untied.astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau_b = np.where(den > 0, num / den, np.nan)
    tau_ap_values = 2.0 / (n - 1) * (correct / np.arange(1, n)).sum(axis=1) - 1.0
    return tau_b, tau_ap_values


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n along each row of a 2-D array, ties sharing their average (scipy's
    rankdata "average"). Leaderboards are short: counting the smaller and the equal values of
    each item is quick and exact; long rows go to scipy."""
    x = np.asarray(x, dtype=float)
    if x.shape[1] > 256:
        from scipy import stats

        return stats.rankdata(x, axis=1)
    n = x.shape[1]
    out = np.empty(x.shape)
    step = max(1, 4_000_000 // max(1, n * n))  # rows per chunk: a few MB of comparisons at a time
    for lo in range(0, x.shape[0], step):
        part = x[lo:lo + step]
        below = np.count_nonzero(part[:, None, :] < part[:, :, None], axis=2)
        equal = np.count_nonzero(part[:, None, :] == part[:, :, None], axis=2)
        out[lo:lo + step] = below + (equal + 1) / 2
    return out


def _centred_ranks(x: np.ndarray) -> np.ndarray:
    return average_ranks(x) - (x.shape[1] + 1) / 2


def _spearman_rows(x: np.ndarray, y: np.ndarray, rx: np.ndarray | None = None) -> np.ndarray:
    """Spearman's rho for each row: Pearson correlation of average ranks (rx: x's, if known)."""
    rx = _centred_ranks(x) if rx is None else rx
    ry = _centred_ranks(y)
    den = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rx * ry).sum(axis=1) / den, np.nan)


# ---------------------------------------------------------------------------------------
# Bootstrap over queries
# ---------------------------------------------------------------------------------------

def bootstrap_query_counts(n_queries: int, samples: int, seed: int) -> np.ndarray:
    """(samples x queries) counts: how often each query is drawn, with replacement.

    Drawn once per `correlate` call and shared by every prediction and measure, so a
    file's interval does not depend on which other files are on the command line.
    """
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_queries, size=(samples, n_queries))
    counts = np.zeros((samples, n_queries))
    np.add.at(counts, (np.arange(samples)[:, None], draws), 1.0)
    return counts


def bootstrap_intervals(gold: np.ndarray, pred: np.ndarray, counts: np.ndarray,
                        confidence: float = 0.95) -> dict[str, tuple[float, float]]:
    """Percentile intervals of tau, rho and tau_AP when queries are resampled.

    `gold` and `pred` are (runs x queries) per-query scores. Each bootstrap sample's
    leaderboard is the count-weighted mean over queries, i.e. one matrix product.
    """
    return _intervals(_BootstrapGold(gold, counts), pred, confidence)


class _BootstrapGold:
    """The gold side of the bootstrap for one measure, computed once for every prediction."""

    def __init__(self, gold: np.ndarray, counts: np.ndarray):
        self.counts = counts
        self.n_queries = gold.shape[1]
        self.means = counts @ gold.T / self.n_queries  # (samples x runs)
        self.ranks = _centred_ranks(self.means)


def _intervals(gold: _BootstrapGold, pred: np.ndarray, confidence: float) -> dict[str, tuple[float, float]]:
    g = gold.means
    p = gold.counts @ pred.T / gold.n_queries
    tau_b, tau_ap_values = _pairwise_rows(g, p)
    values = {"kendall_tau": tau_b, "spearman_rho": _spearman_rows(g, p, gold.ranks), "tau_ap": tau_ap_values}
    lo_q, hi_q = 50 * (1 - confidence), 50 * (1 + confidence)
    out = {}
    for key, vals in values.items():
        if np.all(np.isnan(vals)):
            out[key] = (math.nan, math.nan)
        else:
            out[key] = (float(np.nanpercentile(vals, lo_q)), float(np.nanpercentile(vals, hi_q)))
    return out


# ---------------------------------------------------------------------------------------
# The whole comparison
# ---------------------------------------------------------------------------------------

@dataclass
class CorrelationReport:
    name: str  # the prediction qrels
    measure: str
    n_runs: int
    n_queries: int  # the gold qrels' queries: the only ones evaluated
    kendall_tau: float
    spearman_rho: float
    tau_ap: float  # reference = gold leaderboard, walked down the prediction's leaderboard
    kendall_tau_ci: tuple[float, float]
    spearman_rho_ci: tuple[float, float]
    tau_ap_ci: tuple[float, float]
    bootstrap: int
    confidence: float
    unjudged_at_10: float  # share of top-10 documents the prediction has no label for
    runs: list[str]
    gold_scores: list[float]  # mean over queries, one per run, same order as `runs`
    pred_scores: list[float]
    notes: list[str] = field(default_factory=list)

    def to_dict(self, per_run: bool = False) -> dict:
        d = {
            "name": self.name, "measure": self.measure, "n_runs": self.n_runs,
            "n_queries": self.n_queries, "kendall_tau": self.kendall_tau,
            "spearman_rho": self.spearman_rho, "tau_ap": self.tau_ap,
            "kendall_tau_ci": list(self.kendall_tau_ci), "spearman_rho_ci": list(self.spearman_rho_ci),
            "tau_ap_ci": list(self.tau_ap_ci), "bootstrap": self.bootstrap,
            "confidence": self.confidence, "unjudged_at_10": self.unjudged_at_10, "notes": self.notes,
        }
        if per_run:
            d["runs"] = [{"run": r, "gold": g, "pred": p}
                         for r, g, p in zip(self.runs, self.gold_scores, self.pred_scores)]
        return json_ready(d)


def correlate(gold: Qrels, predictions: Mapping[str, Qrels], runs: Sequence[Run],
              measures: Sequence[str] = DEFAULT_MEASURES, bootstrap: int = 1000, seed: int = 0,
              confidence: float = 0.95) -> list[CorrelationReport]:
    """Compare the leaderboard of `runs` under each prediction with the one under `gold`.

    One report per (prediction, measure), predictions outermost. Only the gold qrels'
    queries are evaluated; `bootstrap=0` skips the intervals (they are then NaN).
    """
    if not runs:
        raise JudgeblenderError("correlate needs at least one run")
    if bootstrap < 0:
        raise JudgeblenderError(f"--bootstrap must be 0 or more, got {bootstrap}")
    if not 0 < confidence < 1:
        raise JudgeblenderError(f"confidence must be between 0 and 1, got {confidence}")
    parsed = parse_measures(measures)
    judged = parse_measures([JUDGED_MEASURE])[0]
    queries = sorted(gold)
    if not queries:
        raise JudgeblenderError("the gold qrels contain no query")
    runset = RunSet(runs, queries)
    names = [str(m) for m in parsed]
    gold_pq = evaluate_runs(runset, gold, parsed)
    counts = bootstrap_query_counts(len(queries), bootstrap, seed) if bootstrap else None

    common_notes = []
    missing_runs = [name for name, row in zip(runset.names, runset.retrieved) if not row.any()]
    if missing_runs:
        common_notes.append(f"{len(missing_runs)} run(s) retrieve nothing for the gold queries and score 0")
    if len(runs) < 3:
        common_notes.append("fewer than 3 runs: rank correlations say little")

    # The bootstrap's matrix products are tiny: BLAS threads only wait for each other (and on a
    # busy machine, for the CPU). One thread gives the same numbers, several times faster.
    with _one_blas_thread():
        return _reports(gold, predictions, runs, runset, parsed, judged, names, queries, gold_pq, counts,
                        common_notes, bootstrap, confidence)


def _one_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - installed with scikit-learn
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _reports(gold, predictions, runs, runset, parsed, judged, names, queries, gold_pq, counts, common_notes,
             bootstrap, confidence) -> list[CorrelationReport]:
    boot_gold = {name: _BootstrapGold(gold_pq[name], counts) for name in names} if counts is not None else {}
    reports = []
    for pred_name, pred in predictions.items():
        with_judged = parsed + ([judged] if judged not in parsed else [])
        pred_pq = evaluate_runs(runset, pred, with_judged)
        # over the (run, query) cells where the run ranks something: an empty ranking has no top 10
        judged_share = pred_pq[str(judged)][runset.retrieved]
        unjudged = float(1.0 - judged_share.mean()) if judged_share.size else math.nan
        notes = list(common_notes)
        absent = [q for q in queries if not pred.get(q)]
        if absent:
            notes.append(f"{len(absent)} of {len(queries)} gold queries have no label in the prediction; "
                         "every run scores 0 on them there")
        for name in names:
            g_pq, p_pq = gold_pq[name], pred_pq[name]
            g_scores, p_scores = g_pq.mean(axis=1), p_pq.mean(axis=1)
            m_notes = list(notes)
            if np.ptp(g_scores) == 0 or np.ptp(p_scores) == 0:
                m_notes.append("one leaderboard gives every run the same score: correlations are undefined")
            if counts is not None:
                ci = _intervals(boot_gold[name], p_pq, confidence)
            else:
                ci = {k: (math.nan, math.nan) for k in ("kendall_tau", "spearman_rho", "tau_ap")}
            tau_b, tau_ap_value = _pairwise_rows(g_scores[None, :], p_scores[None, :])
            reports.append(CorrelationReport(
                name=pred_name, measure=name, n_runs=len(runs), n_queries=len(queries),
                kendall_tau=float(tau_b[0]),
                spearman_rho=float(_spearman_rows(g_scores[None, :], p_scores[None, :])[0]),
                tau_ap=float(tau_ap_value[0]),
                kendall_tau_ci=ci["kendall_tau"], spearman_rho_ci=ci["spearman_rho"],
                tau_ap_ci=ci["tau_ap"], bootstrap=bootstrap, confidence=confidence,
                unjudged_at_10=unjudged, runs=runset.names,
                gold_scores=g_scores.tolist(), pred_scores=p_scores.tolist(), notes=m_notes,
            ))
    return reports
