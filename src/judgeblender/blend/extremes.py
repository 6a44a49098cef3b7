"""The extremes, methods max and min: the most lenient or the strictest judge decides.

(A module of its own name: "pool" in judgeblender means only the pairs that runs ask to have
judged, pairs/pool.py.)"""

from __future__ import annotations

from .tie_rules import Decision
from .votes import Vote


def max_vote(votes: dict[str, Vote]) -> Decision:
    """The highest valid label: a pair is as relevant as its most lenient judge says."""
    return Decision(max(v.label for v in votes.values()))


def min_vote(votes: dict[str, Vote]) -> Decision:
    """The lowest valid label: a pair is as relevant as its strictest judge says."""
    return Decision(min(v.label for v in votes.values()))
