"""Label agreement between a gold qrels (usually human) and a predicted qrels (an LLM judge).

Only pairs labelled in both count: a judge that skipped or failed on a pair is neither
rewarded nor punished here; coverage and the caller's invalid count say how many it missed.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import InputError
from ..kappa import cohen_kappa
from ..pairs.qrels import Qrels, qrels_size

LEVELS = (0, 1, 2, 3)
# TREC DL convention: 2 (highly relevant) and 3 (perfectly relevant) count as relevant.
BINARY_THRESHOLD = 2


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

    def to_dict(self) -> dict:
        """Plain JSON-ready dict; NaN becomes None because JSON has no NaN."""
        return json_ready(asdict(self))


def agreement(gold: Qrels, pred: Qrels, name: str, invalid: int = 0) -> AgreementReport:
    """Compare `pred` with `gold` on the pairs both contain.

    Statistics that are undefined on the shared pairs (none shared, or a rater that gives
    one label only) are NaN and a note says why, instead of an exception.
    """
    _check_levels(gold, "gold", "gold")
    _check_levels(pred, "prediction", name)
    g_list: list[int] = []
    p_list: list[int] = []
    for qid, docs in gold.items():
        pdocs = pred.get(qid)
        if not pdocs:
            continue
        for docid, g in docs.items():
            p = pdocs.get(docid)
            if p is not None:
                g_list.append(g)
                p_list.append(p)
    g = np.asarray(g_list, dtype=int)
    p = np.asarray(p_list, dtype=int)
    n = len(g)
    n_gold = qrels_size(gold)
    notes: list[str] = []
    nan = float("nan")

    if n == 0:
        notes.append("no pair is labelled in both files; every statistic is undefined")
        return AgreementReport(
            name=name, n=0, n_gold=n_gold, n_pred=qrels_size(pred),
            coverage=0.0 if n_gold else nan, invalid=invalid, accuracy=nan, kappa=nan,
            kappa_binary=nan, weighted_kappa_linear=nan, weighted_kappa_quadratic=nan,
            alpha_ordinal=nan, confusion=[[0] * 4 for _ in LEVELS], per_level_accuracy=[nan] * 4,
            notes=notes,
        )

    # Imported here, not at module level: scikit-learn takes seconds to import and every
    # CLI command loads this module, most of them without computing agreement.
    from sklearn.metrics import confusion_matrix

    cm = confusion_matrix(g, p, labels=list(LEVELS))
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
        alpha_ordinal=_alpha_ordinal(g, p),
        confusion=cm.astype(int).tolist(),
        per_level_accuracy=per_level,
        notes=notes,
    )
    undefined = [k for k in ("kappa", "kappa_binary", "weighted_kappa_linear", "weighted_kappa_quadratic",
                             "alpha_ordinal") if math.isnan(getattr(report, k))]
    if undefined:
        notes.append(f"undefined (NaN) on these pairs: {', '.join(undefined)}")
    return report


def _alpha_ordinal(a: np.ndarray, b: np.ndarray) -> float:
    import krippendorff

    # value_domain fixes the ordinal scale to 0..3 even when a level never occurs.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = krippendorff.alpha(
                reliability_data=np.vstack([a, b]).astype(float),
                level_of_measurement="ordinal",
                value_domain=list(LEVELS),
            )
        except (ValueError, ZeroDivisionError):
            return float("nan")
    return float(value)


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
