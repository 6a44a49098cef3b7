"""Running an aggregator over a ballot table, or over one pair's votes, and what came out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError
from .probability import DEFAULT_THRESHOLDS, check_thresholds
from .registry import Context, Method, get_method
from .tie_rules import NO_VOTES, TIE_RULES, Decision, TieBreaker
from .votes import BallotTable, Vote, as_vote
from .weighted import check_weights


@dataclass(frozen=True)
class BlendResult:
    """One decision per pair of the table, in the table's order."""

    method: Method
    tie: str
    table: BallotTable
    decisions: tuple[Decision, ...]

    @property
    def labels(self) -> list[int | None]:
        return [d.label for d in self.decisions]

    def by_pair(self) -> dict:
        """pair -> label (None where unjudged), in the table's order: the project's one currency."""
        return dict(zip(self.table.pairs, self.labels))

    def qrels(self) -> dict[str, dict[str, int]]:
        """The judged pairs as {qid: {docid: label}}; unjudged pairs are left out."""
        out: dict[str, dict[str, int]] = {}
        for (qid, docid), d in zip(self.table.pairs, self.decisions):
            if d.label is not None:
                out.setdefault(qid, {})[docid] = d.label
        return out

    def unjudged(self) -> Counter:
        """Why pairs got no label: reason -> count (e.g. 'no valid vote')."""
        return Counter(d.reason for d in self.decisions if d.label is None)

    def ties(self) -> list[Decision]:
        return [d for d in self.decisions if d.tied]

    def tie_picks(self) -> dict[tuple[int, ...], Counter]:
        """For each set of tied labels, how often the tie rule picked each label."""
        out: dict[tuple[int, ...], Counter] = {}
        for d in self.ties():
            out.setdefault(d.tied, Counter())[d.label] += 1
        return dict(sorted(out.items()))

    def summary_lines(self) -> list[str]:
        """The plain-text report the CLI prints: sizes, abstentions, unjudged pairs, ties."""
        return BlendTally.of(self).lines()


@dataclass
class BlendTally:
    """What `BlendResult.summary_lines` reports, as counts that add up: a blend streamed in
    windows (panels/run_panel.py `stream_panel`) reports the sum of its windows."""

    method: Method
    tie: str
    judges: tuple[str, ...]
    pairs: int = 0
    judged: int = 0
    unjudged: Counter = field(default_factory=Counter)
    abstentions: Counter = field(default_factory=Counter)
    invalid: Counter = field(default_factory=Counter)
    no_distribution: int = 0
    tie_picks: dict[tuple[int, ...], Counter] = field(default_factory=dict)

    @classmethod
    def of(cls, result: BlendResult) -> "BlendTally":
        tally = cls(result.method, result.tie, tuple(result.table.judges))
        tally.add(result)
        return tally

    def add(self, result: BlendResult) -> None:
        t = result.table
        self.pairs += t.n_pairs
        self.judged += sum(d.label is not None for d in result.decisions)
        self.unjudged.update(result.unjudged())
        self.abstentions.update(t.abstentions())
        self.invalid.update({j: n for j, n in t.invalid.items() if n})
        if self.method.uses_probs:
            self.no_distribution += (int(t.voted.sum()) if t.probs is None
                                     else int((t.voted & np.isnan(t.probs).any(axis=2)).sum()))
        for tied, picks in result.tie_picks().items():
            self.tie_picks.setdefault(tied, Counter()).update(picks)

    def lines(self) -> list[str]:
        lines = [f"judges: {len(self.judges)} ({', '.join(self.judges)})",
                 f"method: {self.method.name}: {self.method.rule}"]
        lines.append(f"pairs: {self.pairs}")
        lines.append(f"pairs judged: {self.judged}")
        lines.append(f"pairs with no valid vote: {self.unjudged.get(NO_VOTES, 0)} (left unjudged)")
        for reason, n in sorted(self.unjudged.items()):
            if reason != NO_VOTES:
                lines.append(f"pairs with {reason}: {n} (left unjudged)")
        lines.append("abstentions: " + ", ".join(
            f"{j} {self.abstentions[j]}" + (f" ({self.invalid[j]} invalid)" if self.invalid.get(j) else "")
            for j in self.judges))
        if self.method.uses_probs:
            lines.append(f"votes without a distribution (taken as certain of their label): {self.no_distribution}")
        if self.method.uses_tie:
            ties = sum(sum(p.values()) for p in self.tie_picks.values())
            lines.append(f"ties: {ties}, broken by {self.tie}: {TIE_RULES[self.tie]}")
            for tied, picks in sorted(self.tie_picks.items()):
                shown = ", ".join(f"{lab} x{n}" for lab, n in sorted(picks.items()))
                lines.append(f"  tied {{{', '.join(map(str, tied))}}}: {sum(picks.values())} -> {shown}")
        return lines


class Blender:
    """One blend run: a method and its settings, with one tie rule (a random one seeded per pair)."""

    def __init__(self, method: str = "mv", *, tie: str = "avg", seed: int | None = 0,
                 weights: Mapping[str, float] | None = None, thresholds: Sequence[float] = DEFAULT_THRESHOLDS):
        self.method = get_method(method)
        self.tie_rule = tie
        self.tiebreaker = TieBreaker(tie, seed)
        if self.method.needs_weights and weights is None:
            raise ArgumentError("weights", f"a weight for every judge (method {method} needs them)", None)
        if weights is not None and not self.method.needs_weights:
            raise ArgumentError("weights", "no weights", weights, hint=f"method {method} does not use weights; use "
                                                                      "'weighted'")
        self.weights = dict(weights or {})
        self.thresholds = check_thresholds(thresholds)
        if tuple(self.thresholds) != DEFAULT_THRESHOLDS and not self.method.uses_thresholds:
            raise ArgumentError("thresholds", "the default thresholds", list(self.thresholds),
                                hint=f"method {method} does not use thresholds; use 'prob-expected'")

    def _context(self, judges: Sequence[str], pair: tuple[str, str] | None = None) -> Context:
        weights = check_weights(self.weights, judges) if self.method.needs_weights else {}
        tie = self.tiebreaker.at(pair) if pair is not None else self.tiebreaker
        return Context(tie, weights, self.thresholds)

    def vote(self, votes: Mapping[str, Vote | int | None], pair: tuple[str, str] | None = None) -> Decision:
        """Blend one pair: judge id -> Vote, label or None (abstained). Per-pair methods only.

        For `weighted`, the weights must name exactly the judges in `votes`. `pair` (qid, docid)
        seeds a random tie's pick, as `blend` does for each pair of a table; without it, the pick
        is that of a pair with empty ids.
        """
        if self.method.pair_rule is None:
            raise ArgumentError("method", "a per-pair method here (Blender.vote)",
                                described=f"{self.method.name}, which is fitted across pairs: blend a whole "
                                          "BallotTable instead")
        context = self._context(list(votes), pair)
        valid = {j: v for j, v in ((j, as_vote(v)) for j, v in votes.items()) if v.label is not None}
        if not valid:
            return Decision(None, reason=NO_VOTES)
        return self.method.pair_rule(valid, context)

    def blend(self, table: BallotTable) -> BlendResult:
        """Blend every pair of the table."""
        if self.method.table_rule is not None:
            decisions = self.method.table_rule(table, self.tiebreaker)
        else:
            context = self._context(table.judges)
            per_pair = self.tiebreaker.per_pair
            decisions = []
            for i in range(table.n_pairs):
                valid = table.votes(i)
                if not valid:
                    decisions.append(Decision(None, reason=NO_VOTES))
                    continue
                if per_pair:  # the pair's own random pick
                    context = Context(self.tiebreaker.at(table.pairs[i]), context.weights, context.thresholds)
                decisions.append(self.method.pair_rule(valid, context))
        return BlendResult(self.method, self.tie_rule, table, tuple(decisions))


def blend(table: BallotTable, method: str = "mv", **settings) -> BlendResult:
    """Blend a table in one call: `blend(table, "mv", tie="random", seed=0)`."""
    return Blender(method, **settings).blend(table)


def fitted_blender(method: str | None, tie: str, weights=None, thresholds=None, seed: int = 0) -> Blender:
    """The Blender of a calibrated choice: learned weights make a weighted vote, learned cut
    points an expected-label blend, anything else the plain rule (mv when none is named)."""
    if method == "weighted":
        return Blender("weighted", tie=tie, seed=seed, weights=weights)
    if thresholds is not None:
        return Blender("prob-expected", thresholds=thresholds)
    return Blender(method or "mv", tie=tie, seed=seed)
