"""An LLM tie-breaker: a named (usually stronger, dearer) judge decides only where the panel cannot.

The panel blends first, as usual. A pair is sent to the tie-breaker when
  * the panel's aggregator tied (its Decision lists tied labels: a tie rule would pick), or
  * the members disagree by at least `spread` levels: spread = highest minus lowest valid
    member label (0..3), so spread 2 means e.g. one member says 0 and another 2.
    spread 4 (> any possible spread) consults on ties only; or, the other measure (exactly
    one is used at a time), where
  * the blend's margin is at most `margin` (0..1): for probability-aware methods the pooled
    probability (mean of the voters' distributions; a vote without one counts as certain of
    its label) of the top label minus that of the runner-up; for the other methods the
    votes of the top label minus the runner-up's, divided by the number of voters
    (unweighted). margin 0 consults on ties (and exact probability ties) only.
Pairs no member voted on stay unjudged: the tie-breaker settles disagreements, it does not
replace the panel.

On a consulted pair the tie-breaker's label is final. Where its answer is invalid (no
label for that pair in its file, an unreadable label, or an invalid output when judging)
the panel's own decision stands, which on a tie is the panel's tie rule, and the outcome
`invalid` records that. An invalid answer never becomes a label.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .blender import BlendResult
from .votes import ABSTAIN, N_LABELS, BallotTable, Pair

DEFAULT_SPREAD = 2

KEPT = "panel"  # not consulted
DECIDED = "tiebreaker"  # consulted, its valid label is final
INVALID = "invalid"  # consulted, its answer invalid: the panel's own decision (tie rule) stands


def spreads(table: BallotTable) -> np.ndarray:
    """Highest minus lowest valid label per pair (-1 where nobody voted)."""
    voted = table.voted
    hi = np.where(voted, table.labels, -1).max(axis=1)
    lo = np.where(voted, table.labels, 99).min(axis=1)
    return np.where(voted.any(axis=1), hi - lo, -1)


def margins(result: BlendResult) -> np.ndarray:
    """The blend's margin per pair (see the module docstring); NaN where nobody voted."""
    table = result.table
    voted = table.voted
    onehot = np.zeros((*table.labels.shape, N_LABELS))
    rows, cols = np.nonzero(voted)
    onehot[rows, cols, table.labels[rows, cols]] = 1.0
    if result.method.uses_probs and table.probs is not None:
        given = voted & ~np.isnan(table.probs).any(axis=2)
        onehot = np.where(given[..., None], np.nan_to_num(table.probs), onehot)
    n = voted.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = onehot.sum(axis=1) / n[:, None]
    top2 = np.sort(pooled, axis=1)[:, -2:]
    return np.where(n > 0, top2[:, 1] - top2[:, 0], np.nan)


def to_consult(result: BlendResult, spread: int | None = DEFAULT_SPREAD, margin: float | None = None) -> list[Pair]:
    """The pairs the tie-breaker is asked about (see the module docstring), in table order:
    by `margin` when it is given, else by `spread`."""
    if margin is not None:
        wide = margins(result) <= margin + 1e-12
    else:
        wide = spreads(result.table) >= (DEFAULT_SPREAD if spread is None else spread)
    return [p for p, d, w in zip(result.table.pairs, result.decisions, wide)
            if d.label is not None and (bool(d.tied) or bool(w))]


@dataclass(frozen=True)
class TiebreakResult:
    """The panel's blend with the tie-breaker's final say on the consulted pairs."""

    panel: BlendResult
    tiebreaker: str
    spread: int | None  # the measure used: spread, or margin (the other is None)
    labels: tuple[int | None, ...]
    outcomes: tuple[str, ...]  # KEPT, DECIDED or INVALID per pair
    changed: int  # decided pairs where the tie-breaker's label differs from the panel's
    margin: float | None = None

    def measure(self) -> dict[str, float]:
        """The disagreement measure and its threshold, as recorded in outputs."""
        return {"margin": self.margin} if self.margin is not None else {"spread": self.spread}

    def rule(self) -> str:
        return (f"blend margin <= {self.margin:g}" if self.margin is not None
                else f"member spread >= {self.spread}")

    def counts(self) -> Counter:
        return Counter(self.outcomes)

    def qrels(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (q, d), label in zip(self.panel.table.pairs, self.labels):
            if label is not None:
                out.setdefault(q, {})[d] = label
        return out

    def summary_lines(self) -> list[str]:
        c = self.counts()
        asked = c[DECIDED] + c[INVALID]
        ties = sum(1 for d, o in zip(self.panel.decisions, self.outcomes) if o != KEPT and d.tied)
        return [f"tie-breaker {self.tiebreaker}: consulted on {asked} pairs (panel ties or {self.rule()}; "
                f"{ties} of them ties)",
                f"  decided by the tie-breaker: {c[DECIDED]} ({self.changed} changed the panel's label)",
                f"  tie-breaker answer invalid, panel's own decision (tie rule {self.panel.tie}) kept: {c[INVALID]}"]


def apply_tiebreaker(result: BlendResult, answers: Mapping[Pair, int | None], name: str = "tiebreaker",
                     spread: int | None = DEFAULT_SPREAD, margin: float | None = None) -> TiebreakResult:
    """Overrule the panel on the consulted pairs with `answers` (pair -> label, None or absent:
    invalid); consulted by `margin` when given (then `spread` is not used), else by `spread`."""
    if margin is not None:
        spread = None
    elif spread is None:
        spread = DEFAULT_SPREAD
    asked = set(to_consult(result, spread, margin))
    labels, outcomes, changed = [], [], 0
    for pair, d in zip(result.table.pairs, result.decisions):
        if pair not in asked:
            labels.append(d.label)
            outcomes.append(KEPT)
            continue
        answer = answers.get(pair)
        if answer is None or answer == ABSTAIN:
            labels.append(d.label)
            outcomes.append(INVALID)
        else:
            labels.append(int(answer))
            outcomes.append(DECIDED)
            changed += int(answer) != d.label
    return TiebreakResult(result, name, spread, tuple(labels), tuple(outcomes), changed, margin)
