"""Names of the aggregators, as used on the command line, and what each one needs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..errors import ArgumentError
from . import crowd, extremes, majority, mean, median, probability, weighted
from .probability import DEFAULT_THRESHOLDS
from .tie_rules import Decision, TieBreaker
from .votes import BallotTable, Vote


@dataclass(frozen=True)
class Context:
    """What a per-pair rule may use besides the votes: the run's tie breaker, weights, cut points."""

    tie: TieBreaker
    weights: Mapping[str, float] = field(default_factory=dict)
    thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS


PairRule = Callable[[dict[str, Vote], Context], Decision]
TableRule = Callable[[BallotTable, TieBreaker], list[Decision]]


@dataclass(frozen=True)
class Method:
    """One aggregator. Exactly one of pair_rule (sees one pair's valid votes) and table_rule
    (sees the whole table, for models fitted across pairs) is set."""

    name: str
    rule: str
    pair_rule: PairRule | None = None
    table_rule: TableRule | None = None
    uses_tie: bool = False
    needs_weights: bool = False
    uses_probs: bool = False
    uses_thresholds: bool = False
    extra: str | None = None


_METHODS = [
    Method("mv", "the label most judges gave (plurality); ties go to the tie rule",
           lambda v, c: majority.majority_vote(v, c.tie), uses_tie=True),
    Method("av", "mean of the labels, rounded half up (1.5 -> 2)",
           lambda v, c: mean.average_vote(v)),
    Method("av-even", "mean of the labels, rounded half to even like Python's round() (0.5 -> 0, 2.5 -> 2)",
           lambda v, c: mean.average_vote_even(v)),
    Method("median", "middle label; with an even count two different middles go to the tie rule",
           lambda v, c: median.median_vote(v, c.tie), uses_tie=True),
    Method("max", "highest label (most lenient judge)", lambda v, c: extremes.max_vote(v)),
    Method("min", "lowest label (strictest judge)", lambda v, c: extremes.min_vote(v)),
    Method("weighted", "label with the largest sum of its voters' weights; ties go to the tie rule",
           lambda v, c: weighted.weighted_vote(v, c.tie, c.weights), uses_tie=True, needs_weights=True),
    Method("prob-argmax", "argmax of the judges' averaged label distributions; ties go to the tie rule",
           lambda v, c: probability.prob_argmax(v, c.tie), uses_tie=True, uses_probs=True),
    Method("prob-expected", "expected label of the averaged distributions, cut at thresholds (default 0.5/1.5/2.5)",
           lambda v, c: probability.prob_expected(v, c.thresholds), uses_probs=True, uses_thresholds=True),
    Method("dawid-skene", "Dawid-Skene EM (per-judge confusion matrices) via crowd-kit; most probable label",
           table_rule=crowd.dawid_skene, uses_tie=True, extra="crowd"),
    Method("glad", "GLAD EM (judge ability x pair difficulty) via crowd-kit; most probable label",
           table_rule=crowd.glad, uses_tie=True, extra="crowd"),
]

METHODS: dict[str, Method] = {m.name: m for m in _METHODS}


def get_method(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise ArgumentError("method", f"one of {', '.join(METHODS)}", described=f"unknown blend method {name!r}") from None
