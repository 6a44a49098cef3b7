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
from scipy import stats

from ..errors import JudgeblenderError
from ..pairs.qrels import Qrels
from ..pairs.runs import Run
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
    cutoff = measure.params.get("cutoff")
    return cutoff if isinstance(cutoff, int) else None


class RunSet:
    """Runs restricted to a fixed list of queries, in the dict shape ir_measures reads.

    A measure with a cutoff k only looks at the top k documents, so it is evaluated on runs
    cut to depth k: on DL19's 1,000-deep runs that is the difference between milliseconds and
    seconds per qrels. The cut keeps every document tied in score with the k-th one, so the
    evaluator's own tie-breaking still sees the same top k. Cut runs are built once and
    reused for every qrels.
    """

    def __init__(self, runs: Sequence[Run], queries: Sequence[str]):
        self.runs = list(runs)
        self.names = [r.name for r in self.runs]
        self.queries = list(queries)
        self._by_depth: dict[int | None, list[dict[str, dict[str, float]]]] = {}
        # (runs x queries): whether the run ranks anything for the query
        self.retrieved = np.array([[bool(r.ranking.get(q)) for q in self.queries] for r in self.runs])

    def scored(self, depth: int | None) -> list[dict[str, dict[str, float]]]:
        if depth not in self._by_depth:
            self._by_depth[depth] = [self._cut(run, depth) for run in self.runs]
        return self._by_depth[depth]

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

def kendall_tau(gold_scores: Sequence[float], pred_scores: Sequence[float]) -> float:
    """Kendall's tau-b (ties in either leaderboard reduce the denominator), via scipy."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.kendalltau(gold_scores, pred_scores, variant="b").statistic)


def spearman_rho(gold_scores: Sequence[float], pred_scores: Sequence[float]) -> float:
    """Spearman's rho (Pearson correlation of average ranks), via scipy."""
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
    # Pairs grouped by the lower item (position 1, then 2, ...): C(i) is then a segment sum.
    below, above = np.tril_indices(n, k=-1)
    e_tie = e[:, above] == e[:, below]
    r_gt = r[:, above] > r[:, below]
    r_lt = r[:, above] < r[:, below]
    r_tie = ~(r_gt | r_lt)

    # tau-b = (concordant - discordant) / sqrt(pairs untied in est * pairs untied in ref),
    # the same as scipy's variant "b".
    e_strict = ~e_tie
    num = np.count_nonzero(e_strict & r_gt, axis=1) - np.count_nonzero(e_strict & r_lt, axis=1)
    den = np.sqrt(np.count_nonzero(e_strict, axis=1) * np.count_nonzero(~r_tie, axis=1).astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau_b = np.where(den > 0, num / den, np.nan)

    # tau_AP: C(i) sums, over the items above i, 1 for an agreeing pair, 0.5 for a pair
    # tied in one leaderboard only, 1 for a pair tied in both.
    weight = (e_strict & r_gt) + (e_tie & r_tie) + 0.5 * (e_tie ^ r_tie)
    starts = np.arange(n - 1) * np.arange(1, n) // 2  # first pair of each lower item
    correct = np.add.reduceat(weight, starts, axis=1)  # C(i) for positions 2..N
    tau_ap_values = 2.0 / (n - 1) * (correct / np.arange(1, n)).sum(axis=1) - 1.0
    return tau_b, tau_ap_values


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho for each row: Pearson correlation of average ranks."""
    rx = stats.rankdata(x, axis=1) - (x.shape[1] + 1) / 2
    ry = stats.rankdata(y, axis=1) - (y.shape[1] + 1) / 2
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
    n_queries = gold.shape[1]
    g = counts @ gold.T / n_queries  # (samples x runs)
    p = counts @ pred.T / n_queries
    tau_b, tau_ap_values = _pairwise_rows(g, p)
    values = {"kendall_tau": tau_b, "spearman_rho": _spearman_rows(g, p), "tau_ap": tau_ap_values}
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
    missing_runs = [r.name for r in runs if not any(q in r.ranking for q in queries)]
    if missing_runs:
        common_notes.append(f"{len(missing_runs)} run(s) retrieve nothing for the gold queries and score 0")
    if len(runs) < 3:
        common_notes.append("fewer than 3 runs: rank correlations say little")

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
                ci = bootstrap_intervals(g_pq, p_pq, counts, confidence)
            else:
                ci = {k: (math.nan, math.nan) for k in ("kendall_tau", "spearman_rho", "tau_ap")}
            reports.append(CorrelationReport(
                name=pred_name, measure=name, n_runs=len(runs), n_queries=len(queries),
                kendall_tau=kendall_tau(g_scores, p_scores),
                spearman_rho=spearman_rho(g_scores, p_scores),
                tau_ap=tau_ap(g_scores, p_scores),
                kendall_tau_ci=ci["kendall_tau"], spearman_rho_ci=ci["spearman_rho"],
                tau_ap_ci=ci["tau_ap"], bootstrap=bootstrap, confidence=confidence,
                unjudged_at_10=unjudged, runs=runset.names,
                gold_scores=g_scores.tolist(), pred_scores=p_scores.tolist(), notes=m_notes,
            ))
    return reports
