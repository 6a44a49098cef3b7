"""The one Cohen's kappa (judgeblender/kappa.py) against scikit-learn's cohen_kappa_score,
unweighted and weighted, and NaN exactly where kappa is undefined."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from judgeblender.kappa import cohen_kappa, confusion_matrix, kappa_from_confusion


def sklearn_kappa(a, b, labels, weights):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cohen_kappa_score(a, b, labels=labels, weights=weights, replace_undefined_by=np.nan)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
@pytest.mark.parametrize("seed", range(20))
def test_matches_scikit_learn_on_random_labels(seed, weights):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    a = rng.integers(0, 4, n)
    # correlated with a, so kappa spans negative to high values
    b = np.where(rng.random(n) < rng.random(), a, rng.integers(0, 4, n))
    assert cohen_kappa(a, b, weights=weights) == pytest.approx(sklearn_kappa(a, b, [0, 1, 2, 3], weights), abs=1e-12)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_labels_order_and_binary_labels_match_scikit_learn(weights):
    a, b = [0, 2, 2, 0, 2, 0, 0], [0, 2, 0, 0, 2, 2, 0]
    assert cohen_kappa(a, b, labels=[0, 2], weights=weights) == pytest.approx(sklearn_kappa(a, b, [0, 2], weights))
    a, b = [3, 1, 0, 2, 2, 1], [3, 0, 0, 2, 1, 1]
    assert cohen_kappa(a, b, labels=[3, 0, 1, 2], weights=weights) == pytest.approx(
        sklearn_kappa(a, b, [3, 0, 1, 2], weights))


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_nan_where_undefined(weights):
    assert math.isnan(cohen_kappa([2, 2, 2], [2, 2, 2], weights=weights))  # one label on both sides
    assert math.isnan(cohen_kappa([], [], weights=weights))
    assert math.isnan(sklearn_kappa([2, 2, 2], [2, 2, 2], [0, 1, 2, 3], weights))
    # one side constant, the other not: defined (0), not NaN
    assert cohen_kappa([2, 2, 2], [2, 1, 2], weights=weights) == pytest.approx(0.0)


def test_known_values():
    assert cohen_kappa([0, 1, 2, 3], [0, 1, 2, 3]) == 1.0
    assert cohen_kappa([0, 0, 3, 3], [3, 3, 0, 0]) == pytest.approx(-1.0)


def test_confusion_matrix_leaves_out_values_outside_labels():
    cm = confusion_matrix([0, 1, 2, -1, 3], [0, 2, 2, 1, 9], [0, 1, 2, 3])
    assert cm.tolist() == [[1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0], [0, 0, 0, 0]]


def test_stacked_confusion_matrices_give_one_kappa_each():
    a = np.array([[5, 1], [2, 4]])
    b = np.array([[3, 0], [0, 0]])  # only one label used: undefined
    values = kappa_from_confusion(np.stack([a, b]))
    assert values[0] == pytest.approx(cohen_kappa([0] * 6 + [1] * 6, [0] * 5 + [1] + [0] * 2 + [1] * 4, labels=[0, 1]))
    assert math.isnan(values[1])


def test_unknown_weights_are_refused():
    with pytest.raises(ValueError, match="unknown kappa weights"):
        cohen_kappa([0, 1], [1, 0], weights="cubic")
