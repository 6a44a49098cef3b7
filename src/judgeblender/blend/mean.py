"""Average voting, as in JudgeBlender's AV: the mean of the labels, rounded to a label."""

from __future__ import annotations

from .tie_rules import Decision, round_half_even, round_half_up
from .votes import Vote


def average_vote(votes: dict[str, Vote]) -> Decision:
    """Mean of the valid labels rounded half up: votes 1, 2 -> 1.5 -> 2; 0, 1, 1 -> 0.67 -> 1."""
    labels = [v.label for v in votes.values()]
    return Decision(round_half_up(sum(labels), len(labels)))


def average_vote_even(votes: dict[str, Vote]) -> Decision:
    """Mean of the valid labels rounded half to even (Python's round(), as the authors' notebook):
    votes 1, 2 -> 1.5 -> 2; 0, 1 -> 0.5 -> 0; 2, 3 -> 2.5 -> 2."""
    labels = [v.label for v in votes.values()]
    return Decision(round_half_even(sum(labels), len(labels)))
