"""Max and min pooling: the most lenient or the strictest judge decides."""

from __future__ import annotations

from .ties import Decision
from .votes import Vote


def max_vote(votes: dict[str, Vote]) -> Decision:
    """The highest valid label: a pair is as relevant as its most lenient judge says."""
    return Decision(max(v.label for v in votes.values()))


def min_vote(votes: dict[str, Vote]) -> Decision:
    """The lowest valid label: a pair is as relevant as its strictest judge says."""
    return Decision(min(v.label for v in votes.values()))
