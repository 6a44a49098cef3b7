"""Running an aggregator over a ballot table, or over one pair's votes, and what came out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .probability import DEFAULT_THRESHOLDS, check_thresholds
from .registry import Context, Method, get_method
from .ties import NO_VOTES, TIE_RULES, Decision, TieBreaker
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
        t = self.table
        judged = sum(d.label is not None for d in self.decisions)
        lines = [f"judges: {len(t.judges)} ({', '.join(t.judges)})", f"method: {self.method.name}: {self.method.rule}"]
        lines.append(f"pairs: {t.n_pairs}")
        lines.append(f"pairs judged: {judged}")
        unjudged = self.unjudged()
        lines.append(f"pairs with no valid vote: {unjudged.get(NO_VOTES, 0)} (left unjudged)")
        for reason, n in sorted(unjudged.items()):
            if reason != NO_VOTES:
                lines.append(f"pairs with {reason}: {n} (left unjudged)")
        abst = t.abstentions()
        lines.append("abstentions: " + ", ".join(
            f"{j} {abst[j]}" + (f" ({t.invalid[j]} invalid)" if t.invalid.get(j) else "") for j in t.judges))
        if self.method.uses_probs:
            no_dist = int(t.voted.sum()) if t.probs is None else int((t.voted & np.isnan(t.probs).any(axis=2)).sum())
            lines.append(f"votes without a distribution (taken as certain of their label): {no_dist}")
        if self.method.uses_tie:
            ties = self.ties()
            lines.append(f"ties: {len(ties)}, broken by {self.tie}: {TIE_RULES[self.tie]}")
            for tied, picks in self.tie_picks().items():
                shown = ", ".join(f"{lab} x{n}" for lab, n in sorted(picks.items()))
                lines.append(f"  tied {{{', '.join(map(str, tied))}}}: {sum(picks.values())} -> {shown}")
        return lines


class Blender:
    """One blend run: a method and its settings, with one tie breaker (one seeded generator)."""

    def __init__(self, method: str = "mv", *, tie: str = "avg", seed: int | None = 0,
                 weights: Mapping[str, float] | None = None, thresholds: Sequence[float] = DEFAULT_THRESHOLDS):
        self.method = get_method(method)
        self.tie_rule = tie
        self.tiebreaker = TieBreaker(tie, seed)
        if self.method.needs_weights and weights is None:
            raise ValueError(f"method {method} needs a weight for every judge")
        if weights is not None and not self.method.needs_weights:
            raise ValueError(f"method {method} does not use weights; use 'weighted'")
        self.weights = dict(weights or {})
        self.thresholds = check_thresholds(thresholds)
        if tuple(self.thresholds) != DEFAULT_THRESHOLDS and not self.method.uses_thresholds:
            raise ValueError(f"method {method} does not use thresholds; use 'prob-expected'")

    def _context(self, judges: Sequence[str]) -> Context:
        weights = check_weights(self.weights, judges) if self.method.needs_weights else {}
        return Context(self.tiebreaker, weights, self.thresholds)

    def vote(self, votes: Mapping[str, Vote | int | None]) -> Decision:
        """Blend one pair: judge id -> Vote, label or None (abstained). Per-pair methods only.

        For `weighted`, the weights must name exactly the judges in `votes`.
        """
        if self.method.pair_rule is None:
            raise ValueError(f"{self.method.name} is fitted across pairs; blend a whole BallotTable instead")
        context = self._context(list(votes))
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
            decisions = []
            for i in range(table.n_pairs):
                valid = table.votes(i)
                decisions.append(self.method.pair_rule(valid, context) if valid else Decision(None, reason=NO_VOTES))
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
