"""The JudgeBlender paper's remaining agreement tables: binary relevance at a chosen threshold
(confusion matrix, per-level binary accuracy: Table 4) and Krippendorff's alpha at a chosen
level of measurement.

Binarisation: a label >= threshold is relevant (default 2, as TREC DL's binary measures).
Per-level binary accuracy: for each gold level 0..3, the share of its pairs whose predicted
label falls on the same side of the threshold as the gold label (how often a judge gets a
gold "1" right as not relevant, a gold "2" right as relevant, ...).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError
from ..kappa import cohen_kappa
from ..pairs.qrels import Qrels

LEVELS = (0, 1, 2, 3)
ALPHA_LEVELS = ("nominal", "ordinal", "interval", "ratio")


def shared(gold: Qrels, pred: Qrels) -> tuple[np.ndarray, np.ndarray]:
    """Gold and predicted labels of the pairs both label, in gold's order."""
    g, p = [], []
    for qid, docs in gold.items():
        pdocs = pred.get(qid) or {}
        for docid, label in docs.items():
            if docid in pdocs:
                g.append(label)
                p.append(pdocs[docid])
    return np.asarray(g, dtype=int), np.asarray(p, dtype=int)


@dataclass(frozen=True)
class BinaryReport:
    threshold: int
    confusion: list[list[int]]  # rows gold (not relevant, relevant), columns predicted
    accuracy: float
    precision: float
    recall: float
    kappa: float
    per_level_accuracy: list[float]  # gold level 0..3: share on the gold label's side of the threshold
    per_level_pairs: list[int]

    def to_dict(self) -> dict:
        clean = lambda x: None if isinstance(x, float) and math.isnan(x) else x  # noqa: E731
        return {"threshold": self.threshold, "confusion": self.confusion, "accuracy": clean(self.accuracy),
                "precision": clean(self.precision), "recall": clean(self.recall), "kappa": clean(self.kappa),
                "per_level_accuracy": [clean(x) for x in self.per_level_accuracy],
                "per_level_pairs": self.per_level_pairs}


def binary_report(g: np.ndarray, p: np.ndarray, threshold: int = 2) -> BinaryReport:
    if threshold not in (1, 2, 3):
        raise ArgumentError("threshold", "1, 2 or 3 (the binarisation threshold: relevant is a label >= it)",
                            threshold)
    gb, pb = (g >= threshold).astype(int), (p >= threshold).astype(int)
    cm = np.zeros((2, 2), dtype=int)
    np.add.at(cm, (gb, pb), 1)
    n = len(g)
    nan = float("nan")
    tp, fp, fn = cm[1, 1], cm[0, 1], cm[1, 0]
    per_level, sizes = [], []
    for level in LEVELS:
        rows = g == level
        sizes.append(int(rows.sum()))
        per_level.append(float((gb[rows] == pb[rows]).mean()) if rows.any() else nan)
    return BinaryReport(threshold, cm.tolist(), float(np.trace(cm) / n) if n else nan,
                        float(tp / (tp + fp)) if tp + fp else nan, float(tp / (tp + fn)) if tp + fn else nan,
                        cohen_kappa(gb, pb), per_level, sizes)


def alpha(g: np.ndarray, p: np.ndarray, level: str = "ordinal") -> float:
    """Krippendorff's alpha of the two raters (gold, prediction) at `level` of measurement on 0..3."""
    import krippendorff

    if level not in ALPHA_LEVELS:
        raise ArgumentError("level", f"a level of measurement, one of {', '.join(ALPHA_LEVELS)}",
                            described=f"unknown level {level!r}")
    if len(g) == 0:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return float(krippendorff.alpha(reliability_data=np.vstack([g, p]).astype(float),
                                            level_of_measurement=level, value_domain=list(LEVELS)))
        except (ValueError, ZeroDivisionError):
            return float("nan")
