"""Turning a scorer's raw score (cosine, cross-encoder probability) into a TREC label.

`Cuts` are increasing cut points and the labels between them: a score reaching the k-th
cut point gets the (k+1)-th label. Two shapes exist:
  graded  three cut points, labels 0/1/2/3;
  binary  one cut point, labels 0/2 (TREC DL counts 2 and 3 as relevant, so a binary
          judge says "highly relevant" or "irrelevant").

`fit_cuts` learns cut points on a labelled seed set by maximising Cohen's kappa against the
gold labels: unweighted kappa over 0-3 for graded cuts, kappa of relevant (label >= 2) vs
not for binary ones. The search is exhaustive over a grid of candidate cut points (score
quantiles), so it finds the best cuts on that grid, not a local optimum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ..errors import JudgeblenderError
from ..kappa import kappa_from_confusion

# kappas closer than this are equal up to rounding (the order of a sum can move the last bits)
KAPPA_TIE = 1e-12

GRADED_LABELS = (0, 1, 2, 3)
BINARY_LABELS = (0, 2)
RELEVANT = 2  # TREC DL: labels 2 and 3 are relevant
TARGETS = ("graded", "binary")
GRID = 48  # candidate cut points: C(48, 3) = 17,296 graded trials, each a few array ops


@dataclass(frozen=True)
class Cuts:
    thresholds: tuple[float, ...]
    labels: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.labels) != len(self.thresholds) + 1:
            raise JudgeblenderError(f"{len(self.thresholds)} cut points need {len(self.thresholds) + 1} labels, "
                                    f"got {list(self.labels)}")
        if not all(math.isfinite(t) for t in self.thresholds) or any(
                b <= a for a, b in zip(self.thresholds, self.thresholds[1:])):
            raise JudgeblenderError(f"cut points must be finite and strictly increasing, got {list(self.thresholds)}")

    @classmethod
    def graded(cls, thresholds: Sequence[float]) -> "Cuts":
        if len(thresholds) != 3:
            raise JudgeblenderError(f"graded labels need 3 cut points (0|1|2|3), got {list(thresholds)}")
        return cls(tuple(float(t) for t in thresholds), GRADED_LABELS)

    @classmethod
    def binary(cls, threshold: float) -> "Cuts":
        return cls((float(threshold),), BINARY_LABELS)

    def label(self, score: float) -> int:
        """A score on a cut point goes up."""
        return self.labels[sum(score >= t for t in self.thresholds)]

    def apply(self, scores: np.ndarray) -> np.ndarray:
        return np.asarray(self.labels)[np.searchsorted(np.asarray(self.thresholds), scores, side="right")]

    def margin(self, score: float) -> float:
        """Distance to the nearest cut point: small means the label could easily flip."""
        return min(abs(score - t) for t in self.thresholds)

    def describe(self) -> str:
        """E.g. "0; >=0.5: 2"."""
        return "; ".join([str(self.labels[0])] + [f">={t:.4g}: {lab}" for t, lab in zip(self.thresholds,
                                                                                        self.labels[1:])])


def _candidates(sorted_scores: np.ndarray, grid: int) -> np.ndarray:
    """Positions in the sorted scores where a cut may fall: between distinct values, at quantiles."""
    change = np.flatnonzero(np.diff(sorted_scores) > 0) + 1  # first index of each new value
    if len(change) > grid:
        change = np.unique(change[np.linspace(0, len(change) - 1, grid).round().astype(int)])
    return change


def fit_cuts(scores: Sequence[float], gold: Sequence[int], target: str = "graded", grid: int = GRID) -> Cuts:
    """Cut points maximising Cohen's kappa of the cut scores against gold labels 0-3.

    target "graded": three cut points, kappa over labels 0-3. target "binary": one cut point,
    labels 0/2, kappa of (label >= 2). Cut points sit halfway between neighbouring scores.
    Among equally good cuts the first found (lowest) wins.
    """
    if target not in TARGETS:
        raise JudgeblenderError(f"unknown calibration target {target!r}; use one of {TARGETS}")
    s = np.asarray(scores, dtype=float)
    g = np.asarray(gold, dtype=int)
    if s.shape != g.shape or s.ndim != 1:
        raise JudgeblenderError(f"need one gold label per score, got {s.shape} scores and {g.shape} labels")
    if not np.isfinite(s).all():
        raise JudgeblenderError("cannot calibrate on non-finite scores")
    if set(np.unique(g)) - set(GRADED_LABELS):
        raise JudgeblenderError(f"gold labels must be in {list(GRADED_LABELS)}, got {sorted(set(g.tolist()))}")
    order = np.argsort(s, kind="stable")
    s, g = s[order], g[order]
    classes = GRADED_LABELS if target == "graded" else (0, 1)
    g_cls = g if target == "graded" else (g >= RELEVANT).astype(int)
    if len(np.unique(g_cls)) < 2:
        raise JudgeblenderError(f"the seed set needs at least two gold classes to calibrate on; it has "
                                f"{len(s)} pairs, all in class {int(g_cls[0]) if len(g_cls) else 'none'}")
    # prefix[i, c]: pairs of gold class c among the i lowest scores, so any cut's confusion
    # matrix is a difference of prefix rows.
    onehot = (g_cls[:, None] == np.asarray(classes)[None, :]).astype(float)
    prefix = np.vstack([np.zeros(len(classes)), np.cumsum(onehot, axis=0)])
    cand = _candidates(s, grid)
    if len(cand) < len(classes) - 1:
        raise JudgeblenderError(f"the seed scores take {len(cand) + 1} distinct value(s): too few to place "
                                f"{len(classes) - 1} cut point(s)")
    n = len(s)
    bounds = np.array([(0, *c, n) for c in combinations(cand, len(classes) - 1)])  # (trials, k+1)
    # confusion[t, predicted, gold] = gold-class counts in the segment of predicted label t
    segments = prefix[bounds[:, 1:]] - prefix[bounds[:, :-1]]  # (trials, k, k): rows = predicted
    scores_k = kappa_from_confusion(segments)
    # the first (lowest) of equally good cuts: kappas equal but for rounding count as ties
    best = int(np.flatnonzero(scores_k >= np.nanmax(scores_k) - KAPPA_TIE)[0])
    cut_at = bounds[best, 1:-1]
    points = tuple(float((s[i - 1] + s[i]) / 2) for i in cut_at)
    return Cuts.graded(points) if target == "graded" else Cuts.binary(points[0])


def cross_validated_labels(scores: Sequence[float], gold: Sequence[int], groups: Sequence[str],
                           target: str = "graded", folds: int = 5) -> tuple[np.ndarray, list[Cuts]]:
    """Out-of-fold labels: each fold's pairs are cut with points fitted on the other folds.

    Folds are by group (the query), so no query's pairs are both fitted on and labelled.
    Returns the labels (in input order) and each fold's cuts.
    """
    from sklearn.model_selection import GroupKFold

    s, g, q = np.asarray(scores, dtype=float), np.asarray(gold, dtype=int), np.asarray(groups)
    n_groups = len(np.unique(q))
    if n_groups < folds:
        raise JudgeblenderError(f"{folds}-fold cross-validation over queries needs {folds} queries, got {n_groups}")
    out = np.full(len(s), -1, dtype=int)
    fitted = []
    for train, test in GroupKFold(n_splits=folds).split(s, g, q):
        cuts = fit_cuts(s[train], g[train], target)
        out[test] = cuts.apply(s[test])
        fitted.append(cuts)
    return out, fitted
