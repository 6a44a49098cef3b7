"""Majority (plurality) vote, as in JudgeBlender's MV."""

from __future__ import annotations

from collections import Counter

from .tie_rules import Decision, TieBreaker
from .votes import Vote


def majority_vote(votes: dict[str, Vote], tie: TieBreaker) -> Decision:
    """The label most judges gave; if several labels share the highest count, the tie rule picks.

    Plurality, not strict majority: with votes 0, 1, 1, 3 the answer is 1.
    """
    counts = Counter(v.label for v in votes.values())
    top = max(counts.values())
    return tie.decide(sorted(lab for lab, n in counts.items() if n == top))
