"""Label agreement between a gold qrels (usually human) and a predicted qrels (an LLM judge).

Only pairs labelled in both count: a judge that skipped or failed on a pair is neither
rewarded nor punished here; coverage and the caller's invalid count say how many it missed.

With `bootstrap=B`, the chance-corrected statistics get percentile intervals from a bootstrap
over the gold qrels' queries (pairs of one query are not independent, so whole queries are
drawn, as `correlate` does for tau): one 4x4 confusion matrix per query, one count-weighted sum
per replicate (a matrix product), and one vectorised kappa (kappa.py) or alpha call over the
stack of B matrices.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import arguments
from ..errors import InputError, JudgeblenderError
from ..kappa import alpha_ordinal_from_confusion, cohen_kappa, confusion_matrix, kappa_from_confusion
from .bootstrap import bootstrap_query_counts, percentile_interval
from .intervals import CONFIDENCE
from .scope import query_set
from ..pairs.qrels import Qrels, qrels_size

LEVELS = (0, 1, 2, 3)
# TREC DL convention: 2 (highly relevant) and 3 (perfectly relevant) count as relevant.
BINARY_THRESHOLD = 2
# The statistics that get bootstrap intervals: name -> statistic of a stack of 4x4 confusion matrices.
INTERVAL_STATISTICS = ("kappa", "kappa_binary", "weighted_kappa_linear", "weighted_kappa_quadratic", "alpha_ordinal")
NAN_INTERVAL = (float("nan"), float("nan"))


@dataclass
class AgreementReport:
    name: str
    n: int  # pairs labelled in both gold and prediction
    n_gold: int
    n_pred: int
    coverage: float  # n / n_gold
    invalid: int  # outputs the judge could not turn into a label, as counted by the caller
    accuracy: float
    kappa: float
    kappa_binary: float
    weighted_kappa_linear: float
    weighted_kappa_quadratic: float
    alpha_ordinal: float
    confusion: list[list[int]]  # rows = gold level 0..3, columns = predicted level 0..3
    per_level_accuracy: list[float]  # recall of each gold level: confusion[i][i] / row i
    notes: list[str] = field(default_factory=list)
    # percentile bootstrap intervals over the gold queries; (NaN, NaN) with bootstrap=0
    kappa_ci: tuple[float, float] = NAN_INTERVAL
    kappa_binary_ci: tuple[float, float] = NAN_INTERVAL
    weighted_kappa_linear_ci: tuple[float, float] = NAN_INTERVAL
    weighted_kappa_quadratic_ci: tuple[float, float] = NAN_INTERVAL
    alpha_ordinal_ci: tuple[float, float] = NAN_INTERVAL
    bootstrap: int = 0  # bootstrap replicates (0: no intervals)
    confidence: float = CONFIDENCE
    seed: int = 0
    queries: int = 0  # the gold queries, over which the bootstrap draws (evaluate/scope.py's query_set)
    dropped_queries: dict[str, str] = field(default_factory=dict)  # the prediction's other queries, and why

    def to_dict(self) -> dict:
        """Plain JSON-ready dict; NaN becomes None because JSON has no NaN."""
        return json_ready(asdict(self))


def agreement(gold: Qrels, pred: Qrels, name: str, invalid: int = 0, *, bootstrap: int = 0, seed: int = 0,
              confidence: float = CONFIDENCE) -> AgreementReport:
    """Compare `pred` with `gold` on the pairs both contain.

    Statistics that are undefined on the shared pairs (none shared, or a rater that gives
    one label only) are NaN and a note says why, instead of an exception. `bootstrap` > 0
    adds `confidence` percentile intervals over the gold queries (seeded by `seed`; the draws
    depend only on the gold queries, so each prediction's interval is the same whichever other
    predictions are compared); a replicate where a statistic is undefined is left out of it.
    """
    arguments.bounded("bootstrap", bootstrap)
    arguments.confidence(confidence)
    _check_levels(gold, "gold", "gold")
    _check_levels(pred, "prediction", name)
    q_list: list[int] = []
    g_list: list[int] = []
    p_list: list[int] = []
    # the queries that count, as every route decides them: the ones people labelled
    counted = query_set(gold, candidates=[*gold, *pred])
    queries = sorted(counted.queries)
    for qi, qid in enumerate(queries):
        pdocs = pred.get(qid)
        if not pdocs:
            continue
        for docid, g in gold[qid].items():
            p = pdocs.get(docid)
            if p is not None:
                q_list.append(qi)
                g_list.append(g)
                p_list.append(p)
    g = np.asarray(g_list, dtype=int)
    p = np.asarray(p_list, dtype=int)
    n = len(g)
    n_gold = qrels_size(gold)
    notes: list[str] = []
    nan = float("nan")
    found = {"queries": len(queries), "dropped_queries": dict(counted.dropped)}
    dropped = [counted.note()] if counted.dropped else []  # the last note: which queries did not count

    if n == 0:
        notes.append("no pair is labelled in both files; every statistic is undefined")
        notes += dropped
        return AgreementReport(
            name=name, n=0, n_gold=n_gold, n_pred=qrels_size(pred),
            coverage=0.0 if n_gold else nan, invalid=invalid, accuracy=nan, kappa=nan,
            kappa_binary=nan, weighted_kappa_linear=nan, weighted_kappa_quadratic=nan,
            alpha_ordinal=nan, confusion=[[0] * 4 for _ in LEVELS], per_level_accuracy=[nan] * 4,
            notes=notes, **found,
        )

    cm = confusion_matrix(g, p, LEVELS)
    row_totals = cm.sum(axis=1)
    per_level = [float(cm[i, i] / row_totals[i]) if row_totals[i] else nan for i in range(4)]
    missing_levels = [lvl for lvl in LEVELS if not row_totals[lvl]]
    if missing_levels:
        notes.append(f"gold has no pair at level(s) {missing_levels}: their per-level accuracy is undefined")

    for who, arr in (("gold", g), ("prediction", p)):
        if len(set(arr.tolist())) == 1:
            notes.append(f"{who} gives label {arr[0]} to every shared pair: "
                         "chance-corrected statistics may be undefined")

    gb, pb = (g >= BINARY_THRESHOLD).astype(int), (p >= BINARY_THRESHOLD).astype(int)
    report = AgreementReport(
        name=name,
        n=n,
        n_gold=n_gold,
        n_pred=qrels_size(pred),
        coverage=n / n_gold,
        invalid=invalid,
        accuracy=float(np.trace(cm) / n),
        kappa=cohen_kappa(g, p, LEVELS),
        kappa_binary=cohen_kappa(gb, pb, (0, 1)),
        weighted_kappa_linear=cohen_kappa(g, p, LEVELS, "linear"),
        weighted_kappa_quadratic=cohen_kappa(g, p, LEVELS, "quadratic"),
        alpha_ordinal=float(alpha_ordinal_from_confusion(cm)),
        confusion=cm.astype(int).tolist(),
        per_level_accuracy=per_level,
        notes=notes, **found,
    )
    undefined = [k for k in ("kappa", "kappa_binary", "weighted_kappa_linear", "weighted_kappa_quadratic",
                             "alpha_ordinal") if math.isnan(getattr(report, k))]
    if undefined:
        notes.append(f"undefined (NaN) on these pairs: {', '.join(undefined)}")
    if bootstrap:
        per_query = np.bincount(np.asarray(q_list) * 16 + g * 4 + p, minlength=len(queries) * 16)
        counts = bootstrap_query_counts(len(queries), bootstrap, seed)
        replicates = (counts @ per_query.reshape(len(queries), 16)).reshape(bootstrap, 4, 4)
        for key, values in confusion_statistics(replicates).items():
            setattr(report, key + "_ci", percentile_interval(values, confidence))
        report.bootstrap, report.confidence, report.seed = bootstrap, confidence, seed
    notes += dropped
    return report


def confusion_statistics(confusion: np.ndarray) -> dict[str, np.ndarray]:
    """INTERVAL_STATISTICS of (stacks of) 4x4 confusion matrices (rows gold 0-3, columns predicted),
    one value per matrix: each is one vectorised call over the whole stack."""
    c = np.asarray(confusion, dtype=float)
    to_binary = (np.asarray(LEVELS)[:, None] >= BINARY_THRESHOLD) == np.array([False, True])  # 4 x 2
    binary = to_binary.T.astype(float) @ c @ to_binary.astype(float)
    return {"kappa": kappa_from_confusion(c), "kappa_binary": kappa_from_confusion(binary),
            "weighted_kappa_linear": kappa_from_confusion(c, "linear"),
            "weighted_kappa_quadratic": kappa_from_confusion(c, "quadratic"),
            "alpha_ordinal": alpha_ordinal_from_confusion(c)}


def _check_levels(qrels: Qrels, role: str, source: str) -> None:
    for qid, docs in qrels.items():
        for docid, label in docs.items():
            if label not in LEVELS:
                raise InputError(
                    source, None, f"{role} labels in 0..3",
                    f"label {label} for query {qid} document {docid}",
                )


def json_ready(obj):
    """NaN -> None, recursively, tuples -> lists: json.dumps would write invalid NaN."""
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(v) for v in obj]
    return obj
