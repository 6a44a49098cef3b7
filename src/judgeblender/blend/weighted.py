"""Weighted majority vote: each judge's vote counts its weight."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ..errors import ArgumentError
from .tie_rules import Decision, TieBreaker, top_labels
from .votes import Vote

NO_WEIGHT = "only zero-weight votes"


def check_weights(weights: Mapping[str, float], judges: Sequence[str]) -> dict[str, float]:
    """Weights must name exactly the jury's judges, be finite, non-negative, and not all zero."""
    unknown = sorted(set(weights) - set(judges))
    missing = [j for j in judges if j not in weights]
    if unknown:
        raise ArgumentError("weights", f"a weight for each judge of the jury ({', '.join(judges)})",
                            described=f"weights of judges not in the jury: {', '.join(unknown)}")
    if missing:
        raise ArgumentError("weights", f"a weight for each judge of the jury ({', '.join(judges)})",
                            described=f"no weight given for judges: {', '.join(missing)}")
    out = {}
    for judge in judges:
        w = float(weights[judge])
        if not math.isfinite(w) or w < 0:
            raise ArgumentError(f"weights[{judge!r}]", "a finite number >= 0", weights[judge])
        out[judge] = w
    if not any(out.values()):
        raise ArgumentError("weights", "at least one weight above zero", described="all weights are zero: nobody would vote")
    return out


def weighted_vote(votes: dict[str, Vote], tie: TieBreaker, weights: Mapping[str, float]) -> Decision:
    """The label whose voters' weights sum highest; equal sums go to the tie rule.

    Weights a=3, b=1, c=1 and votes a:0, b:2, c:2 -> 0 has 3, 2 has 2 -> 0. A pair whose
    only voters weigh 0 stays unjudged.
    """
    scores: dict[int, float] = {}
    for judge, vote in votes.items():
        if weights[judge] > 0:
            scores[vote.label] = scores.get(vote.label, 0.0) + weights[judge]
    if not scores:
        return Decision(None, reason=NO_WEIGHT)
    return tie.decide(top_labels(scores))
