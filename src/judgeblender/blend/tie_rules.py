"""Tie rules, shared by every aggregator that can tie, and the two roundings of a mean.

Rounding is done on integer sums so that a mean of exactly x.5 is never a float accident.

`random` draws once per pair from a seed of its own, made of the blend's seed and the pair's
ids (sha256, `hashing`): a pair's label then depends on nothing but its votes and those ids, so
it is the same whether the pair is blended alone or among others, in one request or many, in
any window of a streamed run. (It once drew from one generator per blend run, so a tied pair's
label depended on how many ties came before it in the batch: a served panel gave 6 of 12 tied
pairs another label when each pair was asked alone.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from ..errors import ArgumentError
from ..hashing import sha256_text

TIE_RULES: dict[str, str] = {
    "random": "one of the tied labels, uniformly at random (seeded per pair by the seed and the pair's ids)",
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
    """Applies one tie rule. For `random` with a seed, each pair draws from a seed of its own
    (`at(pair)`, see the module's docstring); with no seed (None) there is nothing to reproduce,
    and one generator seeded by the system serves the whole run."""

    def __init__(self, rule: str = "avg", seed: int | None = 0, pair: tuple[str, str] | None = None):
        if rule not in TIE_RULES:
            raise ArgumentError("tie", f"one of {', '.join(TIE_RULES)}", described=f"unknown tie rule {rule!r}")
        self.rule = rule
        self.seed = seed
        self.pair = pair
        self.rng = np.random.default_rng() if seed is None else None

    @property
    def per_pair(self) -> bool:
        """Whether its pick depends on the pair (`at` makes a breaker of its own for each)."""
        return self.rule == "random" and self.seed is not None

    def at(self, pair: tuple[str, str]) -> "TieBreaker":
        """This rule for one pair: where a random pick is seeded per pair, a breaker of its own."""
        if not self.per_pair:
            return self
        return TieBreaker(self.rule, self.seed, (str(pair[0]), str(pair[1])))

    def _draw(self, n: int) -> int:
        """A position in 0..n-1: from the pair's own seed, or the run's unseeded generator. A
        breaker made without a pair (one vote blended on its own) draws as the pair ("", "")."""
        if self.rng is not None:
            return int(self.rng.integers(n))
        qid, docid = self.pair or ("", "")
        # the qid's length makes the text one pair's alone ("q1"+"0d" is not "q10"+"d"); a
        # format, not JSON, as this runs for every tie (3 us of 8 went to json.dumps)
        digest = sha256_text(f"tie:{int(self.seed)}:{len(qid)}:{qid}{docid}")
        return int(digest[:16], 16) % n  # 64 bits: the bias of the modulo is below 1e-18

    def __call__(self, tied: Sequence[int]) -> int:
        labels = sorted(int(x) for x in tied)
        if self.rule == "random":
            return labels[self._draw(len(labels))]
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
