"""Median vote: robust to one outlying judge, unlike the mean."""

from __future__ import annotations

from .tie_rules import Decision, TieBreaker
from .votes import Vote


def median_vote(votes: dict[str, Vote], tie: TieBreaker) -> Decision:
    """The middle label of the sorted valid votes.

    With an even number of votes the two middle labels are a tie when they differ, settled
    by the tie rule: `min` gives the lower median, `max` the upper one, `avg` the usual
    median (their mean) rounded half up. Votes 0, 1, 3, 3 -> middles 1 and 3 -> min 1, max 3, avg 2.
    """
    labels = sorted(v.label for v in votes.values())
    n = len(labels)
    if n % 2:
        return Decision(labels[n // 2])
    low, high = labels[n // 2 - 1], labels[n // 2]
    return tie.decide(sorted({low, high}))
