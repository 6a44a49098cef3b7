"""Leaderboard correlation: do LLM labels rank a set of runs the way human labels do?

Every run is scored per query under the gold qrels and under each predicted qrels (the
measures fast_measures.py supports with numpy, the rest with ir_measures); a run's
leaderboard score is its mean over the gold qrels' queries. The two leaderboards are
compared with Kendall's tau-b, Spearman's rho and tau_AP (rank_correlation.py), each with a
bootstrap confidence interval over queries (bootstrap.py). This module holds the per-query
evaluation and the report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import ir_measures
import numpy as np

from .. import arguments
from ..errors import JudgeblenderError
from ..pairs.qrels import Qrels
from ..pairs.runs import Run, tied
from .agreement import json_ready
from .bootstrap import BootstrapGold, bootstrap_query_counts
from .fast_measures import RankMatrix, fast_kind, fast_values, fits_int8, supports
from .intervals import CONFIDENCE
from .rank_correlation import pairwise_rows, spearman_rows
from .scope import query_set

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
    computed by fast_measures.py with numpy over a matrix of every (run, query) ranking, built once and
    reused for every qrels, with trec_eval's own arithmetic: the same per-query values
    ir_measures gives through pytrec_eval, bit for bit, but without handing 1.6 million
    ranked documents to the evaluator once per qrels file; Judged@k counts trec_eval's top k
    (not ir_measures' Judged provider's: see fast_measures.py). Other measures go through
    ir_measures. A measure with a cutoff k only looks at the top k documents, so for those
    the runs are cut to depth k, keeping every document tied (pairs/runs.py, tied) with the
    k-th one so that the evaluator's own tie-breaking still sees the same top k; cut runs are
    built once and reused for every qrels.
    """

    def __init__(self, runs: Sequence[Run], queries: Sequence[str]):
        self.runs = list(runs)
        self.names = [r.name for r in self.runs]
        self.queries = list(queries)
        self._by_depth: dict[int | None, list[dict[str, dict[str, float]]]] = {}
        self._matrix: RankMatrix | None = None
        # (runs x queries): whether the run ranks anything for the query
        ranked = [set(r.queries()) for r in self.runs]
        self.retrieved = np.array([[q in rq for q in self.queries] for rq in ranked], dtype=bool).reshape(
            len(self.runs), len(self.queries))

    def scored(self, depth: int | None) -> list[dict[str, dict[str, float]]]:
        if depth not in self._by_depth:
            self._by_depth[depth] = [self._cut(run, depth) for run in self.runs]
        return self._by_depth[depth]

    def matrix(self) -> RankMatrix:
        if self._matrix is None:
            self._matrix = RankMatrix(self)
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
                while end < len(docs) and tied(docs[end][1], last):
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
    fast = [m for m in measures if supports(m)] if fits_int8(qrels) else []
    if fast:
        fast_values(runset, qrels, fast, out)
    judged = [m for m in measures if fast_kind(m) == "judged" and not any(m is f for f in fast)]
    if judged:  # whatever the labels: Judged@k counts trec_eval's top k (fast_measures.py), never ir_measures'
        fast_values(runset, {q: dict.fromkeys(docs, 0) for q, docs in qrels.items()}, judged, out)
        fast += judged
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


def fully_judged_queries(runs: Sequence[Run], qrels: Qrels, depth: int = 10) -> list[str]:
    """The qrels' queries whose every document in every run's top `depth` has a label: the
    only ones where a leaderboard under these labels scores no unlabelled document as
    irrelevant. A run that ranks nothing for a query does not disqualify it."""
    return [q for q, docs in qrels.items() if docs and all(d in docs for run in runs for d in run.top(q, depth))]


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
    dropped_queries: dict[str, str] = field(default_factory=dict)  # gold or prediction queries left out, and why

    def to_dict(self, per_run: bool = False) -> dict:
        d = {
            "name": self.name, "measure": self.measure, "n_runs": self.n_runs,
            "n_queries": self.n_queries, "kendall_tau": self.kendall_tau,
            "spearman_rho": self.spearman_rho, "tau_ap": self.tau_ap,
            "kendall_tau_ci": list(self.kendall_tau_ci), "spearman_rho_ci": list(self.spearman_rho_ci),
            "tau_ap_ci": list(self.tau_ap_ci), "bootstrap": self.bootstrap,
            "confidence": self.confidence, "unjudged_at_10": self.unjudged_at_10, "notes": self.notes,
            "dropped_queries": self.dropped_queries,
        }
        if per_run:
            d["runs"] = [{"run": r, "gold": g, "pred": p}
                         for r, g, p in zip(self.runs, self.gold_scores, self.pred_scores)]
        return json_ready(d)


def correlate(gold: Qrels, predictions: Mapping[str, Qrels], runs: Sequence[Run],
              measures: Sequence[str] = DEFAULT_MEASURES, bootstrap: int = 1000, seed: int = 0,
              confidence: float = CONFIDENCE, min_judged: float | None = None) -> list[CorrelationReport]:
    """Compare the leaderboard of `runs` under each prediction with the one under `gold`.

    One report per (prediction, measure), predictions outermost. Only the gold qrels'
    queries are evaluated; `bootstrap=0` skips the intervals (they are then NaN). With
    `min_judged`, only those whose gold labels judge at least that share of the runs' top 10
    (evaluate/scope.py's query_set, as the report decides): a leaderboard under gold labels that
    leave most of a query's top 10 unlabelled scores holes, not runs. Every report lists the
    queries left out and why (dropped_queries, and a note).
    """
    runs = list(runs)  # an iterator of runs is read once
    if not runs:
        raise JudgeblenderError("correlate needs at least one run")
    arguments.bounded("bootstrap", bootstrap)
    arguments.confidence(confidence)
    parsed = parse_measures(measures)
    judged = parse_measures([JUDGED_MEASURE])[0]
    if not any(gold.values()):
        raise JudgeblenderError("the gold qrels contain no query")
    counted = query_set(gold, candidates=[*gold, *(q for p in predictions.values() for q in p)], runs=runs,
                        depth=10, min_judged=min_judged)
    queries = sorted(counted.queries)
    if not queries:
        raise JudgeblenderError(f"no gold query counts: {counted.note()}; a lower min_judged keeps them, with the "
                                "holes scored as not relevant")
    gold = {q: gold[q] for q in queries}
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
    if counted.dropped:
        common_notes.append(counted.note())

    # The bootstrap's matrix products are tiny: BLAS threads only wait for each other (and on a
    # busy machine, for the CPU). One thread gives the same numbers, several times faster.
    with _one_blas_thread():
        reports = _reports(gold, predictions, runs, runset, parsed, judged, names, queries, gold_pq, counts,
                           common_notes, bootstrap, confidence)
    for report in reports:
        report.dropped_queries = dict(counted.dropped)
    return reports


def _one_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - installed with scikit-learn
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _reports(gold, predictions, runs, runset, parsed, judged, names, queries, gold_pq, counts, common_notes,
             bootstrap, confidence) -> list[CorrelationReport]:
    boot_gold = {name: BootstrapGold(gold_pq[name], counts) for name in names} if counts is not None else {}
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
            ci = boot_gold[name].intervals(p_pq, confidence) if counts is not None else None
            reports.append(compare_scores(pred_name, name, runset.names, g_scores, p_scores, len(queries), m_notes,
                                          ci=ci, bootstrap=bootstrap, confidence=confidence, unjudged_at_10=unjudged))
    return reports


def compare_scores(name: str, measure: str, runs: Sequence[str], gold_scores: Sequence[float],
                   pred_scores: Sequence[float], n_queries: int, notes: Sequence[str] = (), *,
                   ci: Mapping[str, tuple[float, float]] | None = None, bootstrap: int = 0,
                   confidence: float = CONFIDENCE, unjudged_at_10: float = math.nan) -> CorrelationReport:
    """The report comparing two leaderboards given as one score per run (tau, rho, tau_AP);
    `ci` the bootstrap intervals when there are any (else NaN). For leaderboards that come
    from elsewhere too, such as a human leaderboard estimated by PPI++."""
    g, p = np.asarray(gold_scores, dtype=float), np.asarray(pred_scores, dtype=float)
    tau_b, tau_ap_value = pairwise_rows(g[None, :], p[None, :])
    ci = ci or {k: (math.nan, math.nan) for k in ("kendall_tau", "spearman_rho", "tau_ap")}
    return CorrelationReport(
        name=name, measure=measure, n_runs=len(runs), n_queries=n_queries, kendall_tau=float(tau_b[0]),
        spearman_rho=float(spearman_rows(g[None, :], p[None, :])[0]), tau_ap=float(tau_ap_value[0]),
        kendall_tau_ci=ci["kendall_tau"], spearman_rho_ci=ci["spearman_rho"], tau_ap_ci=ci["tau_ap"],
        bootstrap=bootstrap, confidence=confidence, unjudged_at_10=unjudged_at_10, runs=list(runs),
        gold_scores=g.tolist(), pred_scores=p.tolist(), notes=list(notes))
