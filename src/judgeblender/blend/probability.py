"""Probability averaging: blend the judges' distributions over labels, not just their labels.

A judge that gave a label but no distribution counts as certain of its label (a one-hot
distribution), so on label-only input prob-argmax equals mv and prob-expected equals av.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import ArgumentError
from .tie_rules import Decision, TieBreaker, top_labels
from .votes import LABELS, N_LABELS, Vote

DEFAULT_THRESHOLDS: tuple[float, ...] = (0.5, 1.5, 2.5)


def check_thresholds(thresholds: Sequence[float]) -> tuple[float, ...]:
    """Cut points between consecutive labels: one fewer than the labels, finite, increasing."""
    values = tuple(float(t) for t in thresholds)
    if len(values) != N_LABELS - 1:
        raise ArgumentError("thresholds", f"{N_LABELS - 1} thresholds (between labels {list(LABELS)})",
                            described=f"{len(values)}: {list(values)}")
    if not all(math.isfinite(t) for t in values) or any(b <= a for a, b in zip(values, values[1:])):
        raise ArgumentError("thresholds", "finite thresholds, strictly increasing", list(values))
    return values


def cut(score: float, thresholds: Sequence[float]) -> int:
    """The label of a score: how many thresholds it reaches (a score on a threshold goes up)."""
    return LABELS[sum(score >= t for t in thresholds)]


def distribution(vote: Vote) -> np.ndarray:
    """The judge's distribution, or a one-hot one at its label when it gave none."""
    if vote.probs is not None:
        return np.asarray(vote.probs)
    onehot = np.zeros(N_LABELS)
    onehot[LABELS.index(vote.label)] = 1.0
    return onehot


def mean_distribution(votes: dict[str, Vote]) -> np.ndarray:
    return np.mean([distribution(v) for v in votes.values()], axis=0)


def prob_argmax(votes: dict[str, Vote], tie: TieBreaker) -> Decision:
    """The most probable label of the judges' averaged distribution; equal tops go to the tie rule.

    (.6 .4 0 0) and (0 .5 .5 0) average to (.3 .45 .25 0) -> 1, although the judges' own
    argmaxes are 0 and a 1/2 tie.
    """
    mean = mean_distribution(votes)
    return tie.decide(top_labels({lab: float(mean[k]) for k, lab in enumerate(LABELS)}))


def expected_score(votes: dict[str, Vote]) -> float:
    """The expected label under the averaged distribution (the mean of the judges' expectations)."""
    return float(mean_distribution(votes) @ np.asarray(LABELS, dtype=float))


def prob_expected(votes: dict[str, Vote], thresholds: Sequence[float] = DEFAULT_THRESHOLDS) -> Decision:
    """The expected label under the averaged distribution, cut at the thresholds.

    With the default cuts 0.5/1.5/2.5: (0 .5 .5 0) and (0 0 .5 .5) -> expectations 1.5 and 2.5
    -> mean 2.0 -> 2.
    """
    return Decision(cut(expected_score(votes), thresholds))
