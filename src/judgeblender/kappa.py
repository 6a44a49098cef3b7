"""Cohen's kappa, once: from label vectors or from (stacks of) confusion matrices, vectorised.

Agreement reports, blend calibration and the embedding judges' cut-point search all score
labels by kappa, and used to carry four versions of it (scikit-learn calls and a numpy one)
that disagreed on the undefined case. Here kappa is NaN wherever it is undefined: no pairs,
or chance agreement already total (both sides give one and the same label), as scikit-learn's
`cohen_kappa_score(..., replace_undefined_by=np.nan)`. Weighted kappa ("linear" or
"quadratic") weighs a disagreement by the distance between the labels' positions in
`labels`, as scikit-learn does. Krippendorff's ordinal alpha of two raters lives here too,
from the same confusion counts: agreement reports and panel selection both need it, and
selection scores thousands of candidates, so neither may call a package per table. Needs
only numpy; imports nothing of the project.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .errors import ArgumentError

WEIGHTS = (None, "linear", "quadratic")


def confusion_matrix(a: Sequence[int], b: Sequence[int], labels: Sequence[int]) -> np.ndarray:
    """counts[i, j]: pairs where `a` gives labels[i] and `b` gives labels[j]; pairs where either
    side gives a value outside `labels` are left out (as scikit-learn's confusion_matrix does)."""
    a, b = np.asarray(a), np.asarray(b)
    values = np.asarray(labels)
    order = np.argsort(values, kind="stable")
    k = len(values)
    ia = np.searchsorted(values[order], a).clip(0, k - 1)
    ib = np.searchsorted(values[order], b).clip(0, k - 1)
    keep = (values[order][ia] == a) & (values[order][ib] == b)
    cells = order[ia[keep]] * k + order[ib[keep]]
    return np.bincount(cells, minlength=k * k).reshape(k, k)


def _disagreement_weights(k: int, weights: str | None) -> np.ndarray:
    if weights not in WEIGHTS:
        raise ArgumentError("weights", f"one of {WEIGHTS}", described=f"unknown kappa weights {weights!r}")
    i, j = np.indices((k, k))
    if weights is None:
        return (i != j).astype(int)
    return np.abs(i - j) ** (1 if weights == "linear" else 2)


def kappa_from_confusion(confusion: np.ndarray, weights: str | None = None) -> np.ndarray:
    """Cohen's kappa of confusion matrices (..., k, k), one value per matrix; NaN where it is
    undefined (no pairs, or no disagreement expected by chance)."""
    confusion = np.asarray(confusion, dtype=float)
    k = confusion.shape[-1]
    flat = confusion.reshape(-1, k, k)
    rows, cols = flat.sum(axis=2), flat.sum(axis=1)
    n = cols.sum(axis=1)
    w = _disagreement_weights(k, weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        # scikit-learn's arithmetic, step for step, so reports match cohen_kappa_score exactly
        expected = cols[:, :, None] * rows[:, None, :] / n[:, None, None]
        observed_disagreement = (w * flat).reshape(len(flat), -1).sum(axis=1)
        expected_disagreement = (w * expected).reshape(len(flat), -1).sum(axis=1)
        value = 1 - observed_disagreement / expected_disagreement
    value = np.where((n > 0) & (expected_disagreement > 0), value, np.nan)
    return value.reshape(confusion.shape[:-2])


def cohen_kappa(a: Sequence[int], b: Sequence[int], labels: Sequence[int] = (0, 1, 2, 3),
                weights: str | None = None) -> float:
    """Cohen's kappa between two label vectors over `labels` (default the relevance grades 0-3);
    NaN where it is undefined."""
    return float(kappa_from_confusion(confusion_matrix(a, b, labels), weights))


def alpha_ordinal_from_confusion(confusion: np.ndarray) -> np.ndarray:
    """Krippendorff's ordinal alpha of two raters who label every unit, from (stacks of) k x k
    confusion matrices over the ordered levels, one value per matrix; NaN where undefined. The
    same arithmetic as `krippendorff.alpha(level_of_measurement="ordinal", value_domain=levels)`:
    the coincidence matrix of two complete raters is C + C^T."""
    c = np.asarray(confusion, dtype=float)
    k = c.shape[-1]
    flat = c.reshape(-1, k, k)
    coincidence = flat + flat.transpose(0, 2, 1)
    n_v = coincidence.sum(axis=2)  # (m, k): how often each value occurs
    n = n_v.sum(axis=1)
    cum = np.cumsum(n_v, axis=1)
    i, j = np.indices((k, k))
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    between = cum[:, hi] - cum[:, lo] + n_v[:, lo]  # sum of n_g for g from lo to hi
    delta = (between - (n_v[:, i] + n_v[:, j]) / 2) ** 2
    observed = (coincidence * delta).sum(axis=(1, 2))
    expected = (n_v[:, :, None] * n_v[:, None, :] * delta).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        value = 1 - (n - 1) * observed / expected
    value = np.where((n > 1) & (expected > 0), value, np.nan)
    return value.reshape(c.shape[:-2])


def fold_mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error of per-fold kappas, leaving out the undefined (NaN) folds; NaN
    where too few are left (no fold for the mean, fewer than two for the error)."""
    vals = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
    mean = float(vals.mean()) if len(vals) else float("nan")
    se = float(vals.std(ddof=1) / np.sqrt(len(vals))) if len(vals) > 1 else float("nan")
    return mean, se
