"""Tie rules, shared by every aggregator that can tie, and the two roundings of a mean.

Rounding is done on integer sums so that a mean of exactly x.5 is never a float accident.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from ..errors import ArgumentError

TIE_RULES: dict[str, str] = {
    "random": "one of the tied labels, uniformly at random (one seeded generator per blend run)",
    "max": "the highest tied label",
    "min": "the lowest tied label",
    "avg": "the mean of the tied labels, rounded half up (1.5 -> 2, 0.5 -> 1)",
    "avg-even": "the mean of the tied labels, rounded half to even like Python's round() (0.5 -> 0, 2.5 -> 2)",
}


def round_half_up(total: int, count: int) -> int:
    """round(total / count) with halves going up, for non-negative integer totals."""
    return (2 * total + count) // (2 * count)


def round_half_even(total: int, count: int) -> int:
    """round(total / count) with halves going to the even neighbour, as Python's round() does."""
    return round(Fraction(total, count))


@dataclass(frozen=True)
class Decision:
    """An aggregator's verdict on one pair.

    label is None when nobody could vote (reason says why). tied lists the labels that tied
    when a tie rule picked the label, and is empty otherwise.
    """

    label: int | None
    tied: tuple[int, ...] = ()
    reason: str | None = None


NO_VOTES = "no valid vote"


class TieBreaker:
    """Applies one tie rule; for `random` it owns the run's single seeded generator."""

    def __init__(self, rule: str = "avg", seed: int | None = 0):
        if rule not in TIE_RULES:
            raise ArgumentError("tie", f"one of {', '.join(TIE_RULES)}", described=f"unknown tie rule {rule!r}")
        self.rule = rule
        # Created once, so successive ties draw successive numbers (the authors' notebook
        # re-seeded on every call and so always picked the same position).
        self.rng = np.random.default_rng(seed)

    def __call__(self, tied: Sequence[int]) -> int:
        labels = sorted(int(x) for x in tied)
        if self.rule == "random":
            return labels[int(self.rng.integers(len(labels)))]
        if self.rule == "max":
            return labels[-1]
        if self.rule == "min":
            return labels[0]
        if self.rule == "avg":
            return round_half_up(sum(labels), len(labels))
        return round_half_even(sum(labels), len(labels))

    def decide(self, tied: Sequence[int]) -> Decision:
        """The sole top label, or the tie rule's pick among several."""
        if len(tied) == 1:
            return Decision(int(tied[0]))
        return Decision(self(tied), tuple(sorted(int(x) for x in tied)))


def top_labels(scores: dict[int, float]) -> list[int]:
    """Labels whose score equals the highest, with a relative tolerance for float sums."""
    best = max(scores.values())
    return sorted(lab for lab, s in scores.items() if math.isclose(s, best, rel_tol=1e-9, abs_tol=1e-12))
